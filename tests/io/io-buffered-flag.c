// SPDX-License-Identifier: GPL-2.0
/*
 * PIN_IO_BUFFERED forces the buffered path: the same layout and bytes,
 * direct = 0, and the reason says it was asked for.
 *   io-buffered-flag DIR
 */
#include "io-test.h"

#define SIZE	(300000u)

int main(int argc, char **argv)
{
	char why[512];
	struct pin_io_opts o = { .size = sizeof(struct pin_io_opts), .why = why, .why_len = sizeof(why),
				 .flags = PIN_IO_BUFFERED, .request_size = 8192 };
	struct pin_io_stats st = PIN_INIT(struct pin_io_stats);
	char path[4096];
	uint8_t *data, *buf;
	int ret;

	snprintf(path, sizeof(path), "%s/io-buf-%d.bin", test_dir(argc, argv),
		 (int)getpid());
	data = malloc(SIZE);
	fill(data, SIZE, 3);
	write_file(path, data, SIZE);
	if (posix_memalign((void **)&buf, 4096, SIZE + 8192))
		FAIL("posix_memalign");
	ret = pin_file_read(buf, SIZE + 8192, path, 5000, SIZE - 5000, &o, &st);
	CHECK(ret == 5000 % 4096, "ret %d: %s", ret, why);
	CHECK(!memcmp(buf + ret, data + 5000, SIZE - 5000), "bytes differ");
	CHECK_EQ(st.direct, 0);
	CHECK(!strcmp(st.fallback_reason, "buffered I/O asked for") ||
	      strstr(st.fallback_reason, "buffered I/O asked for") == st.fallback_reason,
	      "reason \"%s\"", st.fallback_reason);
	CHECK(st.requests >= (SIZE - 4096) / 8192, "%llu requests",
	      (unsigned long long)st.requests);
	unlink(path);
	free(data);
	free(buf);
	return 0;
}
