// SPDX-License-Identifier: GPL-2.0
/*
 * I/O errors name the file, the offset and the cause: a missing file, a
 * range past the end of the file, a buffer too small, bad options.
 *   io-errors DIR
 */
#include "io-test.h"

int main(int argc, char **argv)
{
	const char *dir = test_dir(argc, argv);
	struct pin_io_stats st = PIN_INIT(struct pin_io_stats);
	char why[512];
	struct pin_io_opts wo = { .size = sizeof(struct pin_io_opts), .why = why, .why_len = sizeof(why) };
	char path[4096], missing[4096];
	uint8_t data[10000], *buf;
	int ret;

	snprintf(path, sizeof(path), "%s/io-err-%d.bin", dir, (int)getpid());
	snprintf(missing, sizeof(missing), "%s/no-such-file-%d", dir, (int)getpid());
	fill(data, sizeof(data), 1);
	write_file(path, data, sizeof(data));
	if (posix_memalign((void **)&buf, 4096, 1 << 20))
		FAIL("posix_memalign");

	ret = pin_file_read(buf, 1 << 20, missing, 0, 10, &wo, &st);
	CHECK_EQ(ret, -ENOENT);
	CHECK(strstr(why, missing) && strstr(why, "No such file"),
	      "error \"%s\"", why);

	/* Wanted bytes past the end of the file. */
	ret = pin_file_read(buf, 1 << 20, path, 5000, 20000, &wo, &st);
	CHECK_EQ(ret, -EIO);
	CHECK(strstr(why, path) && strstr(why, "end of file at offset 10000") &&
	      strstr(why, "25000"), "error \"%s\"", why);
	printf("# %s\n", why);

	ret = pin_file_read(buf, 4096, path, 100, 5000, &wo, &st);
	CHECK_EQ(ret, -EINVAL);
	CHECK(strstr(why, "needs 8192"), "error \"%s\"", why);

	{
		struct pin_io_opts o = { .size = sizeof(struct pin_io_opts), .queue_depth = 1000, .why = why, .why_len = sizeof(why) };

		CHECK_EQ(pin_file_read(buf, 1 << 20, path, 0, 10, &o, &st), -EINVAL);
		CHECK(strstr(why, "queue depth 1000"), "error \"%s\"", why);
		o.queue_depth = 0;
		o.request_size = 1000;
		CHECK_EQ(pin_file_read(buf, 1 << 20, path, 0, 10, &o, &st), -EINVAL);
		CHECK(strstr(why, "request size 1000"), "error \"%s\"", why);
		o.request_size = 0;
		o.flags = 1u << 7;
		CHECK_EQ(pin_file_read(buf, 1 << 20, path, 0, 10, &o, &st), -EINVAL);
		CHECK(strstr(why, "unknown I/O flags"), "error \"%s\"", why);
	}
	CHECK_EQ(pin_file_write(data, 10, path, 100, &wo, &st), -EINVAL);
	CHECK(strstr(why, path) && strstr(why, "offset 100"),
	      "error \"%s\"", why);
	CHECK_EQ(pin_file_read(buf, 1 << 20, dir, 0, 10, &wo, &st), -EISDIR);
	CHECK(strstr(why, "Is a directory") && !strstr(why, "regular"), "error \"%s\"", why);
	CHECK_EQ(pin_file_read(buf, 1 << 20, "/dev/null", 0, 10, &wo, &st), -EINVAL);
	CHECK(strstr(why, "not a regular file"), "error \"%s\"", why);
	unlink(path);
	free(buf);
	return 0;
}
