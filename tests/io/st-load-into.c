// SPDX-License-Identifier: GPL-2.0
/*
 * pin_st_load_into fills a region the caller already has, at the offset it
 * chooses, with the same bytes pin_st_load gives; it leaves the region's
 * state and the bytes outside the load alone and refuses what it cannot
 * do (unaligned offset, too small, sealed, an index, a used checkpoint)
 * in words. On the device backend it fills a donated, then reopened
 * region. pin_st_take_region hands a loaded region to the caller.
 * PIN_ST_LOAD_WHOLE_FILE makes the region a copy of the file from byte 0,
 * here for a header longer than a page (without the flag the region would
 * start at the page holding the data's first byte).
 *   st-load-into FIXTURE-DIR SCRATCH-DIR
 */
#include "io-test.h"

#include <sys/mman.h>

static void same_bytes(struct pin_st *a, struct pin_st *b)
{
	size_t i;

	CHECK_EQ(pin_st_count(a), pin_st_count(b));
	for (i = 0; i < pin_st_count(a); i++) {
		struct pin_st_tensor x = PIN_INIT(struct pin_st_tensor);
		struct pin_st_tensor y = PIN_INIT(struct pin_st_tensor);

		pin_st_tensor(a, i, &x);
		CHECK(pin_st_find(b, x.name, &y) == 0, "%s lost", x.name);
		CHECK_EQ(x.nbytes, y.nbytes);
		CHECK(!x.nbytes || !memcmp(x.data, y.data, x.nbytes),
		      "%s: bytes differ", x.name);
	}
}

/* fallocate of a memfd may be interrupted (EINTR), as the loader knows. */
static int alloc_retry(struct pin_dev *dev, uint64_t size,
		       struct pin_region **rp)
{
	int i, ret = -EINTR;

	for (i = 0; i < 5 && ret == -EINTR; i++)
		ret = pin_region_create(dev, size, NULL, rp);
	return ret;
}

static void fill_at(struct pin_dev *dev, const char *path,
		    struct pin_st *ref)
{
	struct pin_region *r;
	struct pin_region_info ri = PIN_INIT(struct pin_region_info);
	struct pin_st *ck = pin_st_create();
	struct pin_st_tensor t = PIN_INIT(struct pin_st_tensor);
	unsigned char *own;
	uint64_t off = 3 * 4096, i;
	int ret;

	CHECK(alloc_retry(dev, 8 << 20, &r) == 0, "%s", pin_dev_error(dev));
	CHECK(pin_region_map(r, (void **)&own) == 0, "%s", pin_region_error(r));
	memset(own, 0xa5, 8 << 20);
	ret = pin_st_load_into(ck, r, off, path, NULL);
	CHECK(ret == 0, "load_into: %s", pin_st_error(ck));
	same_bytes(ref, ck);
	CHECK(pin_st_region(ck, 0) == NULL, "the checkpoint claims the region");
	pin_st_tensor(ck, 0, &t);
	CHECK(t.region == r && t.region_offset >= off &&
	      t.data == own + t.region_offset, "tensor 0 at +%llu",
	      (unsigned long long)t.region_offset);
	for (i = 0; i < off; i++)
		CHECK(own[i] == 0xa5, "byte %llu before the load changed",
		      (unsigned long long)i);
	CHECK(pin_region_info(r, &ri) == 0 && ri.state == PIN_STATE_OPEN,
	      "state %d after the load", ri.state);
	/* Used checkpoint, offsets, room, an index, a sealed region. */
	CHECK_EQ(pin_st_load_into(ck, r, off, path, NULL), -EBUSY);
	pin_st_close(ck);
	ck = pin_st_create();
	CHECK_EQ(pin_st_load_into(ck, r, 100, path, NULL), -EINVAL);
	CHECK(strstr(pin_st_error(ck), "not a multiple of 4096"), "%s",
	      pin_st_error(ck));
	CHECK_EQ(pin_st_load_into(ck, r, 8 << 20, path, NULL),
		 -ENOSPC);
	CHECK(strstr(pin_st_error(ck), "do not fit in region"), "%s",
	      pin_st_error(ck));
	CHECK_EQ(pin_st_count(ck), 0);
	CHECK_EQ(pin_st_load_into(ck, r, 0, "x.safetensors.index.json", NULL),
		 -EINVAL);
	{
		struct pin_region_opts ro = PIN_INIT(struct pin_region_opts);
		struct pin_st_load_opts lo = { .size = sizeof(lo), .region = &ro };

		/* The region is the caller's: no options to make one with. */
		CHECK_EQ(pin_st_load_into(ck, r, 0, path, &lo), -EINVAL);
		CHECK(strstr(pin_st_error(ck), "no region options"), "%s",
		      pin_st_error(ck));
		lo.region = NULL;
		lo.size = 4;
		CHECK_EQ(pin_st_load_into(ck, r, 0, path, &lo), -EINVAL);
		CHECK_EQ(pin_st_count(ck), 0);
	}
	CHECK(pin_region_seal(r) == 0, "%s", pin_region_error(r));
	CHECK_EQ(pin_st_load_into(ck, r, 0, path, NULL), -EPERM);
	CHECK(strstr(pin_st_error(ck), "is sealed"), "%s", pin_st_error(ck));
	if (pin_dev_backend(dev) == PIN_BACKEND_DEVICE) {
		/* The seed's case: donated, reopened, refilled. */
		memset(own, 0, 8 << 20);
		CHECK(pin_region_donate(r, 0) == 0, "%s", pin_region_error(r));
		CHECK(pin_region_reopen(r) == 0, "%s", pin_region_error(r));
		CHECK(pin_st_load_into(ck, r, 0, path, NULL) == 0, "%s",
		      pin_st_error(ck));
		same_bytes(ref, ck);
	}
	pin_st_close(ck);
	CHECK(pin_region_close(r) == 0, "free");
}

static void take(struct pin_dev *dev, const char *path, struct pin_st *ref)
{
	struct pin_st *ck = pin_st_create();
	struct pin_st_tensor t = PIN_INIT(struct pin_st_tensor);
	struct pin_st_tensor u = PIN_INIT(struct pin_st_tensor);
	struct pin_region *r;
	struct pin_region_info ri = PIN_INIT(struct pin_region_info);
	unsigned char *map;

	CHECK(pin_st_load(ck, dev, path, NULL) == 0, "%s", pin_st_error(ck));
	r = pin_st_take_region(ck, 0);
	CHECK(r != NULL, "no region to take");
	CHECK(pin_st_take_region(ck, 0) == NULL, "taken twice");
	CHECK(pin_st_take_region(ck, 1) == NULL, "file 1 of 1");
	pin_st_tensor(ck, 0, &t);
	CHECK(pin_st_find(ref, t.name, &u) == 0, "%s", t.name);
	pin_st_close(ck);		/* the region is ours now */
	CHECK(pin_region_info(r, &ri) == 0 && ri.state == PIN_STATE_SEALED,
	      "state %d", ri.state);
	CHECK(pin_region_map(r, (void **)&map) == 0, "%s", pin_region_error(r));
	CHECK(!u.nbytes || !memcmp(map + t.region_offset, u.data, u.nbytes),
	      "%s: bytes differ in the taken region", t.name);
	CHECK(pin_region_close(r) == 0, "free");
}

/* A file whose data starts past its first page: one 4 KiB tensor. */
static void write_long_header(const char *path)
{
	char hdr[6000];
	unsigned char data[4096];
	uint64_t n;
	int fd, len, i;

	len = snprintf(hdr, sizeof(hdr),
		       "{\"__metadata__\":{\"pad\":\"%05000d\"},\"t\":{\"dtype\":\"U8\",\"shape\":[4096],\"data_offsets\":[0,4096]}}",
		       0);
	CHECK(len > 0 && len < (int)sizeof(hdr), "header of %d", len);
	for (i = 0; i < 4096; i++)
		data[i] = (unsigned char)(i * 7 + 1);
	n = (uint64_t)len;
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	CHECK(fd >= 0, "%s: %s", path, strerror(errno));
	CHECK(write(fd, &n, 8) == 8 && write(fd, hdr, n) == (ssize_t)n &&
	      write(fd, data, 4096) == 4096, "write %s", path);
	close(fd);
}

static void whole_file(struct pin_dev *dev, const char *path)
{
	struct pin_st_load_opts lo = {
		.size = sizeof(lo), .flags = PIN_ST_LOAD_WHOLE_FILE,
	};
	struct pin_st_tensor t = PIN_INIT(struct pin_st_tensor);
	struct pin_st *ck = pin_st_create();
	unsigned char *map, *file;
	struct pin_region *r;
	struct stat sb;
	int fd;

	CHECK(stat(path, &sb) == 0, "%s", path);
	file = malloc((size_t)sb.st_size);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	CHECK(file && fd >= 0 &&
	      read(fd, file, (size_t)sb.st_size) == sb.st_size, "read %s", path);
	close(fd);
	CHECK(pin_st_load(ck, dev, path, &lo) == 0, "%s", pin_st_error(ck));
	CHECK(pin_st_find(ck, "t", &t) == 0, "tensor t");
	CHECK_EQ(t.region_offset, sb.st_size - 4096);
	r = pin_st_take_region(ck, 0);
	CHECK(r && pin_region_map(r, (void **)&map) == 0, "taken region");
	CHECK(pin_region_size(r) >= (uint64_t)sb.st_size, "region of %llu",
	      (unsigned long long)pin_region_size(r));
	CHECK(!memcmp(map, file, (size_t)sb.st_size),
	      "the region is not the file from its first byte");
	CHECK(t.data == map + t.region_offset, "tensor data at %p", t.data);
	pin_st_close(ck);
	CHECK(pin_region_close(r) == 0, "free");
	/* Into a caller's region: the image at the offset; too small: refused. */
	ck = pin_st_create();
	CHECK(pin_region_create(dev, 1 << 20, NULL, &r) == 0, "region");
	CHECK(pin_st_load_into(ck, r, 4096, path, &lo) == 0, "%s",
	      pin_st_error(ck));
	CHECK(pin_region_map(r, (void **)&map) == 0, "map");
	CHECK(!memcmp(map + 4096, file, (size_t)sb.st_size),
	      "load_into: the region is not the file from its first byte");
	CHECK(pin_st_find(ck, "t", &t) == 0, "tensor t");
	CHECK_EQ(t.region_offset, 4096 + sb.st_size - 4096);
	pin_st_close(ck);
	ck = pin_st_create();
	CHECK_EQ(pin_st_load_into(ck, r, (1 << 20) - 4096, path, &lo), -ENOSPC);
	CHECK_EQ(pin_st_count(ck), 0);
	lo.flags = PIN_ST_LOAD_ALIGN << 1;	/* no such flag */
	CHECK_EQ(pin_st_load_into(ck, r, 0, path, &lo), -EINVAL);
	CHECK(strstr(pin_st_error(ck), "flags 0x8"), "%s", pin_st_error(ck));
	CHECK_EQ(pin_st_load(ck, dev, path, &lo), -EINVAL);
	CHECK_EQ(pin_st_count(ck), 0);
	pin_st_close(ck);
	CHECK(pin_region_close(r) == 0, "free");
	free(file);
}

/* PIN_ST_LOAD_OPEN: the region is left open (writable views), else sealed. */
static void left_open(struct pin_dev *dev, const char *path)
{
	struct pin_st_load_opts lo = {
		.size = sizeof(lo), .flags = PIN_ST_LOAD_OPEN,
	};
	struct pin_region_info ri = PIN_INIT(struct pin_region_info);
	struct pin_st_tensor t = PIN_INIT(struct pin_st_tensor);
	struct pin_st *ck = pin_st_create();
	struct pin_region *r;
	struct pin_view *v;
	int pass;

	for (pass = 0; pass < 2; pass++) {
		lo.flags = pass ? 0 : PIN_ST_LOAD_OPEN;
		CHECK(pin_st_load(ck, dev, path, &lo) == 0, "%s",
		      pin_st_error(ck));
		CHECK(pin_st_find(ck, "t", &t) == 0, "tensor t");
		CHECK_EQ(((const unsigned char *)t.data)[0], 1);
		r = pin_st_take_region(ck, 0);
		CHECK(r && pin_region_info(r, &ri) == 0, "taken region");
		CHECK_EQ(ri.state, pass ? PIN_STATE_SEALED : PIN_STATE_OPEN);
		CHECK_EQ(pin_view_create(r, 0, pin_region_size(r),
					 PIN_VIEW_WRITE, &v), pass ? -EPERM : 0);
		pin_view_close(v);
		pin_st_close(ck);
		CHECK(pin_region_close(r) == 0, "free");
		ck = pin_st_create();
	}
	pin_st_close(ck);
}

int main(int argc, char **argv)
{
	struct pin_dev *dev;
	struct pin_st *ref = pin_st_create();
	char path[4096];

	if (argc != 3)
		FAIL("usage: st-load-into FIXTURE-DIR SCRATCH-DIR");
	snprintf(path, sizeof(path), "%s/unaligned.safetensors", argv[1]);
	CHECK(pin_dev_open(&dev, PIN_BACKEND_AUTO, NULL) == 0, "pin_dev_open");
	CHECK(pin_st_load(ref, dev, path, NULL) == 0, "%s", pin_st_error(ref));
	fill_at(dev, path, ref);
	snprintf(path, sizeof(path), "%s/alldtypes.safetensors", argv[1]);
	pin_st_close(ref);
	ref = pin_st_create();
	CHECK(pin_st_load(ref, dev, path, NULL) == 0, "%s", pin_st_error(ref));
	fill_at(dev, path, ref);
	take(dev, path, ref);
	snprintf(path, sizeof(path), "%s/long-header.safetensors", argv[2]);
	write_long_header(path);
	whole_file(dev, path);
	left_open(dev, path);
	unlink(path);
	printf("st-load-into: filled at an offset, refusals named, region taken, whole file, left open (%s)\n",
	       pin_backend_name(pin_dev_backend(dev)));
	pin_st_close(ref);
	pin_dev_close(dev);
	return 0;
}
