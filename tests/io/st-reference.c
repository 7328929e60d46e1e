// SPDX-License-Identifier: GPL-2.0
/*
 * Files written by the safetensors library itself (its samples; data
 * sections start unaligned) load with their documented values:
 * range(-3, 3) in each type, little-endian, __metadata__ {"test": "a"}.
 *   st-reference [DIR]   (default $PINMEM_FIXTURES)
 */
#include "io-test.h"

struct ref {
	const char *code;	/* tensor and file name */
	int dtype;
	unsigned size;
};

static const struct ref refs[] = {
	{ "B", PIN_DT_U8, 1 }, { "H", PIN_DT_U16, 2 }, { "I", PIN_DT_U32, 4 },
	{ "b", PIN_DT_I8, 1 }, { "h", PIN_DT_I16, 2 }, { "i", PIN_DT_I32, 4 },
	{ "e", PIN_DT_F16, 2 }, { "f", PIN_DT_F32, 4 }, { "d", PIN_DT_F64, 8 },
};

/* The expected little-endian bytes of range(-3, 3) in r's type. */
static void expected(const struct ref *r, uint8_t *out)
{
	static const uint16_t half[6] = {
		0xc200, 0xc000, 0xbc00, 0x0000, 0x3c00, 0x4000,
	};
	int k;
	unsigned b;

	for (k = 0; k < 6; k++) {
		int64_t v = k - 3;
		uint64_t bits;

		if (r->dtype == PIN_DT_F16) {
			bits = half[k];
		} else if (r->dtype == PIN_DT_F32) {
			float f = (float)v;
			uint32_t u;

			memcpy(&u, &f, 4);
			bits = u;
		} else if (r->dtype == PIN_DT_F64) {
			double d = (double)v;

			memcpy(&bits, &d, 8);
		} else {
			bits = (uint64_t)v;	/* two's complement, truncated */
		}
		for (b = 0; b < r->size; b++)
			out[k * r->size + b] = (uint8_t)(bits >> (8 * b));
	}
}

static void check_tensor(struct pin_st *ck, const struct ref *r,
			 const char *file)
{
	struct pin_st_tensor t = PIN_INIT(struct pin_st_tensor);
	uint8_t want[48];

	CHECK(pin_st_find(ck, r->code, &t) == 0, "%s: no tensor %s", file,
	      r->code);
	CHECK(t.dtype == r->dtype, "%s: %s is %s", file, r->code,
	      pin_dtype_name(t.dtype));
	CHECK_EQ(t.ndim, 1);
	CHECK_EQ(t.shape[0], 6);
	CHECK_EQ(t.nbytes, 6 * r->size);
	expected(r, want);
	CHECK(!memcmp(t.data, want, t.nbytes), "%s: %s values differ", file,
	      r->code);
}

static void check_meta(struct pin_st *ck, const char *file)
{
	const char *k, *v;

	CHECK_EQ(pin_st_metadata_count(ck), 1);
	pin_st_metadata(ck, 0, &k, &v);
	CHECK(!strcmp(k, "test") && !strcmp(v, "a"), "%s: %s=%s", file, k, v);
}

int main(int argc, char **argv)
{
	const char *dir = getenv("PINMEM_FIXTURES");
	char path[4096];
	struct pin_dev *dev;
	struct stat sb;
	size_t i, loaded = 0;
	int ret;

	if (argc > 1 && (!dir || !*dir))
		dir = argv[1];
	if (!dir || stat(dir, &sb) < 0)
		SKIP("reference fixtures absent (%s)", dir ? dir : "no directory given");
	ret = pin_dev_open(&dev, PIN_BACKEND_AUTO, NULL);
	CHECK(ret == 0, "pin_dev_open: %s", strerror(-ret));
	for (i = 0; i < sizeof(refs) / sizeof(refs[0]); i++) {
		struct pin_st *ck = pin_st_create();
		struct pin_io_stats st = PIN_INIT(struct pin_io_stats);

		snprintf(path, sizeof(path), "%s/%s.safetensors", dir, refs[i].code);
		ret = pin_st_load(ck, dev, path, NULL);
		CHECK(ret == 0, "%s: %s", path, pin_st_error(ck));
		CHECK_EQ(pin_st_count(ck), 1);
		check_tensor(ck, &refs[i], path);
		check_meta(ck, path);
		pin_st_stats(ck, &st);
		printf("# %s: %s\n", path, st.direct ? "O_DIRECT" : st.fallback_reason);
		pin_st_close(ck);
		loaded++;
	}
	struct pin_st *ck = pin_st_create();

	snprintf(path, sizeof(path), "%s/overall.safetensors", dir);
	ret = pin_st_load(ck, dev, path, NULL);
	CHECK(ret == 0, "%s: %s", path, pin_st_error(ck));
	CHECK_EQ(pin_st_count(ck), 9);
	for (i = 0; i < sizeof(refs) / sizeof(refs[0]); i++)
		check_tensor(ck, &refs[i], path);
	check_meta(ck, path);
	pin_st_close(ck);
	pin_dev_close(dev);
	printf("# %zu + 1 reference files loaded\n", loaded);
	return 0;
}
