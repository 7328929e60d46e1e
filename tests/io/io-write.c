// SPDX-License-Identifier: GPL-2.0
/*
 * pin_file_write takes any source alignment and length: O_DIRECT from bounce
 * buffers, the last partial block padded and the file cut back to size when
 * it grows the file, bytes after the range kept when it does not; a file
 * written in parts with PIN_IO_NO_SYNC (synced by the caller) holds every
 * part; an unknown flag is refused.
 *   io-write DIR
 */
#include "io-test.h"

int main(int argc, char **argv)
{
	static const uint64_t lens[] = { 1, 4095, 4096, 4097, (1u << 20) + 3, 3u << 20 };
	char why[512];
	struct pin_io_opts o = { .size = sizeof(struct pin_io_opts), .why = why, .why_len = sizeof(why),
				 .queue_depth = 4, .request_size = 64 << 10 };
	const char *dir = test_dir(argc, argv);
	int direct = dir_has_odirect(dir);
	struct pin_io_stats st = PIN_INIT(struct pin_io_stats);
	char path[4096];
	uint8_t *src, *got;
	size_t i, n;

	snprintf(path, sizeof(path), "%s/io-write-%d.bin", dir, (int)getpid());
	src = malloc((3u << 20) + 8192);
	fill(src, (3u << 20) + 8192, 9);
	for (i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		unlink(path);
		/* +1: the source is not aligned. */
		CHECK(pin_file_write(src + 1, lens[i], path, 0, &o, &st) == 0,
		      "write %llu: %s", (unsigned long long)lens[i], why);
		CHECK_EQ(st.direct, direct);
		got = read_all(path, &n);
		CHECK_EQ(n, lens[i]);
		CHECK(!memcmp(got, src + 1, n), "bytes differ, length %zu", n);
		free(got);
	}
	/* Rewrite the first 5000 bytes of the 3 MiB file: the rest stays. */
	CHECK(pin_file_write(src + 7, 5000, path, 0, &o, &st) == 0, "%s", why);
	got = read_all(path, &n);
	CHECK_EQ(n, 3u << 20);
	CHECK(!memcmp(got, src + 7, 5000), "rewritten bytes differ");
	CHECK(!memcmp(got + 5000, src + 1 + 5000, n - 5000), "later bytes clobbered");
	free(got);
	/* Past the end at an aligned offset: the file grows. */
	CHECK(pin_file_write(src, 10, path, 4u << 20, &o, &st) == 0, "%s", why);
	got = read_all(path, &n);
	CHECK_EQ(n, (4u << 20) + 10);
	CHECK(!memcmp(got + (4u << 20), src, 10), "appended bytes differ");
	free(got);
	/* Two parts, no sync each (the caller syncs once): both there. */
	unlink(path);
	o.flags = PIN_IO_NO_SYNC;
	CHECK(pin_file_write(src, 1u << 20, path, 0, &o, &st) == 0, "%s", why);
	CHECK(pin_file_write(src + 3, 5000, path, 1u << 20, &o, &st) == 0, "%s", why);
	got = read_all(path, &n);
	CHECK_EQ(n, (1u << 20) + 5000);
	CHECK(!memcmp(got, src, 1u << 20) && !memcmp(got + (1u << 20), src + 3, 5000),
	      "parts written without sync differ");
	free(got);
	o.flags = PIN_IO_NO_SYNC << 1;
	CHECK_EQ(pin_file_write(src, 10, path, 0, &o, &st), -EINVAL);
	o.flags = 0;
	printf("# direct=%d fixed=%d %s\n", st.direct, st.fixed_buffers,
	       st.fallback_reason);
	unlink(path);
	free(src);
	return 0;
}
