// SPDX-License-Identifier: GPL-2.0
/*
 * pin_region_read_file / pin_region_write_file move bytes between files and a region of
 * the backend in use (PIN_BACKEND): the wanted bytes land at region_off +
 * file_off % 4096; misaligned region offsets and ranges past the region
 * fail with -EINVAL, described by pin_region_error. Registered buffers:
 * used where the kernel takes the mapping, else the stats say it refused;
 * on the device backend Linux 6.1 refuses (EOPNOTSUPP for a non-shmem
 * file mapping) and 6.12 accepts.
 *   io-region DIR
 */
#include <sys/utsname.h>

#include "io-test.h"

#define SIZE	((3u << 20) + 777u)

int main(int argc, char **argv)
{
	const struct pin_region_opts fallback = {
		.size = sizeof(fallback), .flags = PIN_REGION_FALLBACK,
	};
	const char *dir = test_dir(argc, argv);
	struct pin_io_opts o = { .size = sizeof(struct pin_io_opts), .queue_depth = 4, .request_size = 256 << 10 };
	struct pin_io_stats st = PIN_INIT(struct pin_io_stats);
	struct pin_region *r;
	struct pin_dev *dev;
	struct utsname u;
	char path[4096], back[4096];
	uint8_t *data, *got;
	void *map;
	size_t n;
	int ret;

	snprintf(path, sizeof(path), "%s/io-region-%d.bin", dir, (int)getpid());
	snprintf(back, sizeof(back), "%s/io-region-back-%d.bin", dir, (int)getpid());
	data = malloc(SIZE);
	fill(data, SIZE, 21);
	write_file(path, data, SIZE);
	CHECK_EQ(pin_dev_open(&dev, PIN_BACKEND_AUTO, NULL), 0);
	ret = pin_region_create(dev, 8u << 20, NULL, &r);
	if (ret == -ENOMEM)
		ret = pin_region_create(dev, 8u << 20, &fallback, &r);
	CHECK(ret == 0, "alloc: %s", pin_dev_error(dev));
	CHECK_EQ(pin_region_map(r, &map), 0);

	ret = pin_region_read_file(r, 1 << 20, path, 5000, SIZE - 5000, &o, &st);
	CHECK(ret == 5000 % 4096, "read: %d %s", ret, pin_region_error(r));
	CHECK(!memcmp((uint8_t *)map + (1 << 20) + ret, data + 5000, SIZE - 5000),
	      "bytes in the region differ");
	uname(&u);
	printf("# %s backend, kernel %s: direct=%d fixed_buffers=%d %s\n",
	       pin_backend_name(pin_dev_backend(dev)), u.release, st.direct,
	       st.fixed_buffers, st.fallback_reason);
	if (!st.fixed_buffers)
		CHECK(strstr(st.fallback_reason, "fixed buffers"),
		      "no fixed buffers and no reason: \"%s\"", st.fallback_reason);
	if (pin_dev_backend(dev) == PIN_BACKEND_DEVICE && !strncmp(u.release, "6.1.", 4))
		CHECK(!st.fixed_buffers &&
		      strstr(st.fallback_reason, "refused by the kernel (Operation not supported)"),
		      "6.1 device mapping: fixed=%d \"%s\"", st.fixed_buffers,
		      st.fallback_reason);
	if (pin_dev_backend(dev) == PIN_BACKEND_DEVICE && !strncmp(u.release, "6.12.", 5))
		CHECK(st.fixed_buffers, "6.12 device mapping: no fixed buffers: \"%s\"",
		      st.fallback_reason);
	/* PIN_IO_NO_FIXED is honoured. */
	o.flags = PIN_IO_NO_FIXED;
	ret = pin_region_read_file(r, 0, path, 0, 4096, &o, &st);
	CHECK_EQ(ret, 0);
	CHECK_EQ(st.fixed_buffers, 0);
	CHECK(strstr(st.fallback_reason, "not asked for"), "%s", st.fallback_reason);

	/* Back out from the region, then compare. */
	ret = pin_region_write_file(r, (1 << 20) + 5000 % 4096, back, 0, SIZE - 5000, &o, &st);
	CHECK(ret == 0, "write: %s", pin_region_error(r));
	got = read_all(back, &n);
	CHECK_EQ(n, SIZE - 5000);
	CHECK(!memcmp(got, data + 5000, n), "written bytes differ");
	free(got);

	CHECK_EQ(pin_region_read_file(r, 100, path, 0, 10, NULL, &st), -EINVAL);
	CHECK(strstr(pin_region_error(r), "not 4096-aligned"), "%s", pin_region_error(r));
	CHECK_EQ(pin_region_read_file(r, 7u << 20, path, 0, SIZE, NULL, &st), -EINVAL);
	CHECK_EQ(pin_region_write_file(r, 7u << 20, back, 0, 2u << 20, NULL, &st), -EINVAL);
	CHECK(strstr(pin_region_error(r), "past its"), "%s", pin_region_error(r));
	unlink(path);
	unlink(back);
	CHECK_EQ(pin_region_close(r), 0);
	pin_dev_close(dev);
	free(data);
	return 0;
}
