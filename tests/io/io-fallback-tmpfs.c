// SPDX-License-Identifier: GPL-2.0
/*
 * Where the filesystem refuses O_DIRECT (tmpfs before Linux 6.6), reads and
 * writes fall back to buffered I/O, report direct = 0 and say why; a
 * safetensors load and save there work the same way.
 *   io-fallback-tmpfs [DIR]   (default /dev/shm)
 */
#include "io-test.h"

#define SIZE	(100000u)

int main(int argc, char **argv)
{
	const char *dir = argc > 1 ? argv[1] : "/dev/shm";
	struct pin_io_stats st = PIN_INIT(struct pin_io_stats);
	char path[4096], why[512];
	struct pin_io_opts o = {
		.size = sizeof(struct pin_io_opts), .why = why, .why_len = sizeof(why),
	};
	uint8_t *data, *buf;
	int ret;

	if (dir_has_odirect(dir))
		SKIP("%s accepts O_DIRECT on this kernel (tmpfs does from 6.6)", dir);
	snprintf(path, sizeof(path), "%s/io-fb-%d.bin", dir, (int)getpid());
	data = malloc(SIZE);
	fill(data, SIZE, 11);
	write_file(path, data, SIZE);
	if (posix_memalign((void **)&buf, 4096, SIZE + 8192))
		FAIL("posix_memalign");
	ret = pin_file_read(buf, SIZE + 8192, path, 3, SIZE - 3, &o, &st);
	CHECK(ret == 3, "ret %d: %s", ret, why);
	CHECK(!memcmp(buf + 3, data + 3, SIZE - 3), "bytes differ");
	CHECK_EQ(st.direct, 0);
	CHECK(strstr(st.fallback_reason, "O_DIRECT refused") != NULL,
	      "reason \"%s\"", st.fallback_reason);
	CHECK(strstr(st.fallback_reason, path) != NULL, "reason names no file: %s",
	      st.fallback_reason);
	printf("# read: %s\n", st.fallback_reason);

	ret = pin_file_write(data, SIZE, path, 0, &o, &st);
	CHECK(ret == 0, "write: %s", why);
	CHECK_EQ(st.direct, 0);
	CHECK(strstr(st.fallback_reason, "O_DIRECT refused") != NULL,
	      "reason \"%s\"", st.fallback_reason);
	printf("# write: %s\n", st.fallback_reason);

	/* safetensors: save then load on the same filesystem. */
	{
		uint64_t shape[1] = { SIZE };
		struct pin_st_tensor t = {
			.size = sizeof(struct pin_st_tensor),
			.name = "t", .dtype = PIN_DT_U8, .ndim = 1, .shape = shape,
			.nbytes = SIZE, .data = data,
		};
		struct pin_st *ck = pin_st_create();
		struct pin_st_tensor got = PIN_INIT(struct pin_st_tensor);
		struct pin_dev *dev;

		CHECK(pin_st_save(ck, path, &t, 1, NULL, NULL, 0, NULL) == 0,
		      "save: %s", pin_st_error(ck));
		pin_st_stats(ck, &st);
		CHECK_EQ(st.direct, 0);
		pin_st_close(ck);
		CHECK_EQ(pin_dev_open(&dev, PIN_BACKEND_AUTO, NULL), 0);
		ck = pin_st_create();
		CHECK(pin_st_load(ck, dev, path, NULL) == 0, "load: %s", pin_st_error(ck));
		pin_st_stats(ck, &st);
		CHECK_EQ(st.direct, 0);
		CHECK(strstr(st.fallback_reason, "O_DIRECT refused") != NULL,
		      "reason \"%s\"", st.fallback_reason);
		CHECK_EQ(pin_st_find(ck, "t", &got), 0);
		CHECK(!memcmp(got.data, data, SIZE), "loaded bytes differ");
		pin_st_close(ck);
		pin_dev_close(dev);
	}
	unlink(path);
	free(data);
	free(buf);
	return 0;
}
