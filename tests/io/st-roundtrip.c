// SPDX-License-Identifier: GPL-2.0
/*
 * Every fixture of the independent writer, single files and the sharded
 * checkpoint, survives load -> save -> load: same names, dtypes, shapes,
 * bytes and metadata; the saved file's data section starts on a 4096-byte
 * boundary and its header is padded with spaces. The saved files are left
 * in OUT-DIR for stgen.py check (the reader libpin does not share).
 *   st-roundtrip FIXTURE-DIR OUT-DIR
 */
#include "io-test.h"

static void same(struct pin_st *a, struct pin_st *b, const char *what)
{
	size_t i, m;
	unsigned d;

	CHECK_EQ(pin_st_count(a), pin_st_count(b));
	for (i = 0; i < pin_st_count(a); i++) {
		struct pin_st_tensor x = PIN_INIT(struct pin_st_tensor);
		struct pin_st_tensor y = PIN_INIT(struct pin_st_tensor);

		pin_st_tensor(a, i, &x);
		CHECK(pin_st_find(b, x.name, &y) == 0, "%s: %s lost", what, x.name);
		CHECK_EQ(x.dtype, y.dtype);
		CHECK_EQ(x.ndim, y.ndim);
		for (d = 0; d < x.ndim; d++)
			CHECK_EQ(x.shape[d], y.shape[d]);
		CHECK_EQ(x.nbytes, y.nbytes);
		CHECK(!x.nbytes || !memcmp(x.data, y.data, x.nbytes),
		      "%s: %s bytes differ", what, x.name);
	}
	CHECK_EQ(pin_st_metadata_count(a), pin_st_metadata_count(b));
	for (m = 0; m < pin_st_metadata_count(a); m++) {
		const char *k1, *v1, *k2, *v2;

		pin_st_metadata(a, m, &k1, &v1);
		pin_st_metadata(b, m, &k2, &v2);
		CHECK(!strcmp(k1, k2) && !strcmp(v1, v2), "%s: metadata %s=%s vs %s=%s",
		      what, k1, v1, k2, v2);
	}
}

static void check_layout(const char *path)
{
	size_t n, i;
	uint8_t *b = read_all(path, &n);
	uint64_t hl = 0;

	for (i = 0; i < 8; i++)
		hl |= (uint64_t)b[i] << (8 * i);
	CHECK((8 + hl) % 4096 == 0, "%s: data section at %llu", path,
	      (unsigned long long)(8 + hl));
	CHECK(b[8] == '{', "%s: header starts with %c", path, b[8]);
	for (i = 8 + hl - 1; b[i] == ' '; i--)
		;
	CHECK(b[i] == '}', "%s: header padding is not spaces", path);
	free(b);
}

static void roundtrip(struct pin_dev *dev, const char *in, const char *out)
{
	struct pin_st *a = pin_st_create(), *b = pin_st_create();
	size_t n, m, i;
	struct pin_st_tensor *t;
	const char **k, **v;
	struct pin_io_stats st = PIN_INIT(struct pin_io_stats);

	CHECK(pin_st_load(a, dev, in, NULL) == 0, "load %s: %s", in, pin_st_error(a));
	n = pin_st_count(a);
	m = pin_st_metadata_count(a);
	t = calloc(n + 1, sizeof(*t));
	k = calloc(m + 1, sizeof(char *));
	v = calloc(m + 1, sizeof(char *));
	for (i = 0; i < n; i++) {
		t[i].size = sizeof(t[i]);
		pin_st_tensor(a, i, &t[i]);
		/* Half from regions, half from plain pointers. */
		if (i % 2)
			t[i].data = NULL;
	}
	for (i = 0; i < m; i++)
		pin_st_metadata(a, i, &k[i], &v[i]);
	CHECK(pin_st_save(b, out, t, n, k, v, m, NULL) == 0, "save %s: %s", out,
	      pin_st_error(b));
	pin_st_stats(b, &st);
	printf("# %s -> %s: %llu bytes, %s\n", in, out,
	       (unsigned long long)st.bytes,
	       st.direct ? "O_DIRECT" : st.fallback_reason);
	check_layout(out);
	CHECK(pin_st_load(b, dev, out, NULL) == 0, "reload %s: %s", out,
	      pin_st_error(b));
	same(a, b, out);
	free(t);
	free(k);
	free(v);
	pin_st_close(a);
	pin_st_close(b);
}

int main(int argc, char **argv)
{
	static const char *const files[] = {
		"alldtypes.safetensors", "empty-meta.safetensors",
		"no-tensors.safetensors", "unaligned.safetensors",
		"big.safetensors", "model.safetensors.index.json",
	};
	char in[4096], out[4096];
	struct pin_dev *dev;
	size_t i;

	if (argc < 3)
		FAIL("usage: st-roundtrip FIXTURE-DIR OUT-DIR");
	CHECK_EQ(pin_dev_open(&dev, PIN_BACKEND_AUTO, NULL), 0);
	for (i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		snprintf(in, sizeof(in), "%s/%s", argv[1], files[i]);
		snprintf(out, sizeof(out), "%s/saved-%s%s", argv[2], files[i],
			 strstr(files[i], ".json") ? ".safetensors" : "");
		roundtrip(dev, in, out);
	}
	pin_dev_close(dev);
	return 0;
}
