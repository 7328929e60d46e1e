// SPDX-License-Identifier: GPL-2.0
/*
 * On a filesystem with O_DIRECT, pin_file_read moves the aligned superset of
 * any byte range with O_DIRECT, the wanted bytes landing at file_off % 4096
 * whatever the queue depth and request size; an unaligned destination falls
 * back to buffered reads and says why.
 *   io-direct DIR
 */
#include "io-test.h"

#define SIZE	((5u << 20) + 1234u)

int main(int argc, char **argv)
{
	static const uint64_t ranges[][2] = {
		{ 0, SIZE }, { 4097, (3u << 20) + 5 }, { SIZE - 10, 10 },
		{ 4096, 4096 }, { 1, 1 }, { 12345, 0 },
	};
	static const unsigned qds[] = { 1, 4, 32 };
	static const uint32_t reqs[] = { 4096, 64 << 10, 1 << 20 };
	const char *dir = test_dir(argc, argv);
	char path[4096];
	uint8_t *data, *buf;
	size_t r, q, s;

	if (!dir_has_odirect(dir))
		SKIP("%s refuses O_DIRECT", dir);
	snprintf(path, sizeof(path), "%s/io-direct-%d.bin", dir, (int)getpid());
	data = malloc(SIZE);
	fill(data, SIZE, 7);
	write_file(path, data, SIZE);
	if (posix_memalign((void **)&buf, 4096, SIZE + 8192))
		FAIL("posix_memalign");
	for (r = 0; r < sizeof(ranges) / sizeof(ranges[0]); r++)
	for (q = 0; q < sizeof(qds) / sizeof(qds[0]); q++)
	for (s = 0; s < sizeof(reqs) / sizeof(reqs[0]); s++) {
		char why[512];
		struct pin_io_opts o = { .size = sizeof(struct pin_io_opts), .why = why, .why_len = sizeof(why),
					 .queue_depth = qds[q], .request_size = reqs[s] };
		struct pin_io_stats st = PIN_INIT(struct pin_io_stats);
		uint64_t off = ranges[r][0], len = ranges[r][1];
		int ret;

		memset(buf, 0xee, SIZE + 8192);
		ret = pin_file_read(buf, SIZE + 8192, path, off, len, &o, &st);
		CHECK(ret == (int)(off % 4096), "read %llu+%llu qd %u req %u: %d: %s",
		      (unsigned long long)off, (unsigned long long)len, qds[q],
		      reqs[s], ret, why);
		CHECK(!memcmp(buf + ret, data + off, len), "bytes differ %llu+%llu",
		      (unsigned long long)off, (unsigned long long)len);
		CHECK(st.direct == 1, "not O_DIRECT: %s", st.fallback_reason);
		CHECK(st.bytes >= len, "stats.bytes %llu < %llu",
		      (unsigned long long)st.bytes, (unsigned long long)len);
		CHECK_EQ(st.queue_depth, qds[q]);
		CHECK_EQ(st.request_size, reqs[s]);
		if (len)
			CHECK(st.requests >= (pin_file_span(off, len) - 4096) / reqs[s],
			      "%llu requests", (unsigned long long)st.requests);
	}
	/* An unaligned destination: buffered, said so, same bytes. */
	{
		struct pin_io_stats st = PIN_INIT(struct pin_io_stats);
		int ret = pin_file_read(buf + 1, SIZE + 8000, path, 100, 5000, NULL, &st);

		CHECK_EQ(ret, 100);
		CHECK(!memcmp(buf + 1 + 100, data + 100, 5000), "unaligned dst bytes");
		CHECK_EQ(st.direct, 0);
		CHECK(strstr(st.fallback_reason, "not 4096-aligned") != NULL,
		      "reason \"%s\"", st.fallback_reason);
	}
	unlink(path);
	free(data);
	free(buf);
	return 0;
}
