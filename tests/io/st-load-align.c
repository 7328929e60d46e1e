// SPDX-License-Identifier: GPL-2.0
/*
 * PIN_ST_LOAD_ALIGN puts every tensor at a multiple of PIN_ST_ALIGN of its
 * region, with the bytes the file has, the padding between tensors zero
 * and the header (PIN_ST_LOAD_WHOLE_FILE) as the file has it; what it
 * moved is in pin_st_phases. pin_st_load sizes the region for the padding;
 * pin_st_load_into refuses a region with room for the file but not for
 * the padding (-ENOSPC).
 *   st-load-align FIXTURE-DIR SCRATCH-DIR
 */
#include "io-test.h"

#define NSMALL	100

/* Each tensor of ck: placed on PIN_ST_ALIGN, the bytes of ref's. */
static void placed(struct pin_st *ck, struct pin_st *ref, const char *what)
{
	size_t i;

	CHECK_EQ(pin_st_count(ck), pin_st_count(ref));
	for (i = 0; i < pin_st_count(ck); i++) {
		struct pin_st_tensor t = PIN_INIT(struct pin_st_tensor);
		struct pin_st_tensor u = PIN_INIT(struct pin_st_tensor);

		CHECK(pin_st_tensor(ck, i, &t) == 0, "tensor %zu", i);
		CHECK(pin_st_find(ref, t.name, &u) == 0, "%s lost", t.name);
		CHECK(t.region_offset % PIN_ST_ALIGN == 0 &&
		      (uintptr_t)t.data % PIN_ST_ALIGN == 0,
		      "%s: %s at region offset %llu", what, t.name,
		      (unsigned long long)t.region_offset);
		CHECK_EQ(t.nbytes, u.nbytes);
		CHECK(!t.nbytes || !memcmp(t.data, u.data, t.nbytes),
		      "%s: %s: bytes differ", what, t.name);
	}
}

/* pin_st_load: every dtype, odd sizes; the file's own layout is not. */
static void load(struct pin_dev *dev, const char *path)
{
	struct pin_st_load_opts lo = {
		.size = sizeof(lo), .flags = PIN_ST_LOAD_ALIGN,
	};
	struct pin_st_phases ph = PIN_INIT(struct pin_st_phases);
	struct pin_st *ref = pin_st_create(), *ck = pin_st_create();
	struct pin_st_tensor t = PIN_INIT(struct pin_st_tensor);
	uint64_t off = 0;
	size_t i;

	CHECK(pin_st_load(ref, dev, path, NULL) == 0, "%s", pin_st_error(ref));
	for (i = 0; i < pin_st_count(ref); i++) {
		pin_st_tensor(ref, i, &t);
		off |= t.nbytes ? t.region_offset % PIN_ST_ALIGN : 0;
	}
	CHECK(off, "%s: every tensor already aligned: nothing to test", path);
	CHECK(pin_st_load(ck, dev, path, &lo) == 0, "%s", pin_st_error(ck));
	placed(ck, ref, "pin_st_load");
	CHECK(pin_st_phases(ck, &ph) == 0, "phases");
	CHECK(ph.align_bytes > 0 && ph.align_ns > 0, "moved %llu bytes in %llu ns",
	      (unsigned long long)ph.align_bytes,
	      (unsigned long long)ph.align_ns);
	pin_st_close(ck);
	pin_st_close(ref);
}

/* NSMALL one-byte tensors: each its own 64 bytes once placed. */
static void write_small(const char *path)
{
	struct pin_st_tensor t[NSMALL];
	static const uint64_t one = 1;
	unsigned char v[NSMALL];
	char names[NSMALL][8];
	struct pin_st *ck = pin_st_create();
	int i;

	for (i = 0; i < NSMALL; i++) {
		t[i] = PIN_INIT(struct pin_st_tensor);
		snprintf(names[i], sizeof(names[i]), "t%03d", i);
		v[i] = (unsigned char)(i + 1);
		t[i].name = names[i];
		t[i].dtype = PIN_DT_U8;
		t[i].ndim = 1;
		t[i].shape = &one;
		t[i].nbytes = 1;
		t[i].data = &v[i];
	}
	CHECK(pin_st_save(ck, path, t, NSMALL, NULL, NULL, 0, NULL) == 0,
	      "%s", pin_st_error(ck));
	pin_st_close(ck);
}

static int all_zero(const unsigned char *p, size_t n)
{
	return !n || (!p[0] && !memcmp(p, p + 1, n - 1));
}

/* Whole file into a caller's region: header kept, padding zero, room. */
static void into(struct pin_dev *dev, const char *path)
{
	struct pin_st_load_opts lo = {
		.size = sizeof(lo),
		.flags = PIN_ST_LOAD_WHOLE_FILE | PIN_ST_LOAD_ALIGN,
	};
	struct pin_st *ref = pin_st_create(), *ck = pin_st_create();
	struct pin_st_tensor t = PIN_INIT(struct pin_st_tensor);
	unsigned char *map, head[8];
	uint64_t span, start, i;
	struct pin_region *r;
	struct stat sb;
	int fd;

	CHECK(stat(path, &sb) == 0 && pin_st_parse_file(ref, path) == 0,
	      "%s", pin_st_error(ref));
	pin_st_close(ref);
	ref = pin_st_create();
	CHECK(pin_st_load(ref, dev, path, NULL) == 0, "%s", pin_st_error(ref));
	CHECK(pin_region_create(dev, 1 << 20, NULL, &r) == 0, "region");
	CHECK(pin_region_map(r, (void **)&map) == 0, "map");
	memset(map, 0xa5, 1 << 20);
	CHECK(pin_st_load_into(ck, r, 4096, path, &lo) == 0, "%s",
	      pin_st_error(ck));
	placed(ck, ref, "pin_st_load_into");
	fd = open(path, O_RDONLY | O_CLOEXEC);
	CHECK(fd >= 0 && read(fd, head, 8) == 8, "read %s", path);
	close(fd);
	memcpy(&start, head, 8);
	start += 8;
	CHECK(!memcmp(map + 4096, head, 8), "the header is not the file's");
	for (i = 0; i < NSMALL; i++) {
		pin_st_tensor(ck, i, &t);
		CHECK_EQ(t.region_offset, 4096 + start + i * PIN_ST_ALIGN);
		CHECK(map[t.region_offset] == i + 1 && (i == NSMALL - 1 ||
		      all_zero(map + t.region_offset + 1, PIN_ST_ALIGN - 1)),
		      "t%03llu or the padding after it", (unsigned long long)i);
	}
	pin_st_close(ck);
	CHECK(pin_region_close(r) == 0, "free");
	/* Room for the file, not for the padding. */
	span = ((uint64_t)sb.st_size + 4095) / 4096 * 4096;
	CHECK(start + NSMALL * PIN_ST_ALIGN > span, "file of %llu bytes",
	      (unsigned long long)sb.st_size);
	CHECK(pin_region_create(dev, span, NULL, &r) == 0, "region");
	ck = pin_st_create();
	lo.flags = PIN_ST_LOAD_WHOLE_FILE;
	CHECK(pin_st_load_into(ck, r, 0, path, &lo) == 0, "%s",
	      pin_st_error(ck));
	pin_st_close(ck);
	ck = pin_st_create();
	lo.flags |= PIN_ST_LOAD_ALIGN;
	CHECK_EQ(pin_st_load_into(ck, r, 0, path, &lo), -ENOSPC);
	CHECK(strstr(pin_st_error(ck), "do not fit"), "%s", pin_st_error(ck));
	pin_st_close(ck);
	CHECK(pin_region_close(r) == 0, "free");
	pin_st_close(ref);
}

int main(int argc, char **argv)
{
	struct pin_dev *dev;
	char path[4096];

	if (argc != 3)
		FAIL("usage: st-load-align FIXTURE-DIR SCRATCH-DIR");
	CHECK(pin_dev_open(&dev, PIN_BACKEND_AUTO, NULL) == 0, "pin_dev_open");
	snprintf(path, sizeof(path), "%s/alldtypes.safetensors", argv[1]);
	load(dev, path);
	snprintf(path, sizeof(path), "%s/model.safetensors.index.json", argv[1]);
	load(dev, path);
	snprintf(path, sizeof(path), "%s/small.safetensors", argv[2]);
	write_small(path);
	into(dev, path);
	unlink(path);
	printf("st-load-align: every tensor on %d bytes, padding zero, room checked (%s)\n",
	       PIN_ST_ALIGN, pin_backend_name(pin_dev_backend(dev)));
	pin_dev_close(dev);
	return 0;
}
