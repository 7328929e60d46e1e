// SPDX-License-Identifier: GPL-2.0
/*
 * pin_st_save from plain memory: every dtype, odd shapes, a scalar,
 * zero-size tensors, metadata with characters JSON must escape, and no
 * metadata at all; the file parses back to the same tensors. Invalid
 * requests (shape/nbytes mismatch, unknown dtype, duplicate or reserved
 * names, duplicate metadata keys) fail with -EINVAL and write nothing.
 *   st-save-memory DIR
 */
#include "io-test.h"

#define NT	(PIN_DT_COUNT - 1 + 3)

int main(int argc, char **argv)
{
	static uint64_t shapes[NT][3];
	static char names[NT][32];
	struct pin_st_tensor t[NT];
	const char *mk[] = { "quote\"back\\slash", "ctl\x01", "utf8 \xc3\xa9" };
	const char *mv[] = { "v\n1", "", "\xe2\x82\xac" };
	char path[4096];
	struct pin_st *ck = pin_st_create();
	struct stat sb;
	size_t i, n = 0, len;
	uint8_t *file;
	int dt, pass;

	snprintf(path, sizeof(path), "%s/st-mem-%d.safetensors", test_dir(argc, argv),
		 (int)getpid());
	memset(t, 0, sizeof(t));
	t[0].size = sizeof(t[0]);
	for (dt = 1; dt < PIN_DT_COUNT; dt++, n++) {
		unsigned bits = pin_dtype_bits(dt);

		snprintf(names[n], sizeof(names[n]), "t_%s", pin_dtype_name(dt));
		shapes[n][0] = 3;
		shapes[n][1] = 8 / (bits % 8 ? 2 : 1) + 1 - (bits % 8 ? 1 : 0);	/* 3x5 or 3x4 */
		t[n].name = names[n];
		t[n].dtype = dt;
		t[n].ndim = 2;
		t[n].shape = shapes[n];
		t[n].nbytes = 3 * shapes[n][1] * bits / 8;
	}
	snprintf(names[n], 32, "scalar");
	t[n] = (struct pin_st_tensor){ .size = sizeof(struct pin_st_tensor), .name = names[n], .dtype = PIN_DT_F64, .nbytes = 8 };
	n++;
	snprintf(names[n], 32, "zero");
	shapes[n][0] = 0;
	t[n] = (struct pin_st_tensor){ .size = sizeof(struct pin_st_tensor), .name = names[n], .dtype = PIN_DT_U16, .ndim = 1,
				       .shape = shapes[n], .nbytes = 0 };
	n++;
	snprintf(names[n], 32, "zero2");
	shapes[n][0] = 7;
	shapes[n][1] = 0;
	shapes[n][2] = 9;
	t[n] = (struct pin_st_tensor){ .size = sizeof(struct pin_st_tensor), .name = names[n], .dtype = PIN_DT_C64, .ndim = 3,
				       .shape = shapes[n], .nbytes = 0 };
	n++;
	for (i = 0; i < n; i++) {
		if (!t[i].nbytes)
			continue;
		t[i].data = malloc(t[i].nbytes);
		for (len = 0; len < t[i].nbytes; len++)
			((uint8_t *)t[i].data)[len] = pattern(t[i].name, t[i].dtype, len);
	}
	for (pass = 0; pass < 2; pass++) {
		size_t nm = pass ? 0 : 3;

		CHECK(pin_st_save(ck, path, t, n, mk, mv, nm, NULL) == 0, "save: %s",
		      pin_st_error(ck));
		file = read_all(path, &len);
		{
			struct pin_st *rd = pin_st_create();
			const char *k, *v;

			CHECK(pin_st_parse_buffer(rd, file, len, path) == 0, "%s",
			      pin_st_error(rd));
			CHECK_EQ(pin_st_count(rd), n);
			CHECK_EQ(pin_st_metadata_count(rd), nm);
			for (i = 0; i < nm; i++) {
				pin_st_metadata(rd, i, &k, &v);
				CHECK(!strcmp(k, mk[i]) && !strcmp(v, mv[i]),
				      "metadata %zu: %s=%s", i, k, v);
			}
			for (i = 0; i < n; i++) {
				struct pin_st_tensor g = PIN_INIT(struct pin_st_tensor);
				unsigned d;

				pin_st_tensor(rd, i, &g);
				/* Saved in the order given. */
				CHECK(!strcmp(g.name, t[i].name), "order: %s at %zu",
				      g.name, i);
				CHECK_EQ(g.dtype, t[i].dtype);
				CHECK_EQ(g.ndim, t[i].ndim);
				for (d = 0; d < g.ndim; d++)
					CHECK_EQ(g.shape[d], t[i].shape[d]);
				CHECK_EQ(g.nbytes, t[i].nbytes);
				CHECK(pattern_diff(g.name, g.dtype, g.data, g.nbytes) < 0,
				      "%s bytes", g.name);
				if (i == 0)
					CHECK_EQ(g.file_offset % 4096, 0);
			}
			pin_st_close(rd);
		}
		free(file);
	}

	/* Invalid requests leave the file as it was. */
	CHECK_EQ(stat(path, &sb), 0);
	{
		struct pin_st_tensor bad = t[0];
		const char *dk[] = { "a", "a" };

		bad.nbytes++;
		CHECK_EQ(pin_st_save(ck, path, &bad, 1, NULL, NULL, 0, NULL), -EINVAL);
		CHECK(strstr(pin_st_error(ck), "does not match"), "%s", pin_st_error(ck));
		bad = t[0];
		bad.dtype = 99;
		CHECK_EQ(pin_st_save(ck, path, &bad, 1, NULL, NULL, 0, NULL), -EINVAL);
		CHECK(strstr(pin_st_error(ck), "unknown dtype"), "%s", pin_st_error(ck));
		bad = t[0];
		bad.name = "__metadata__";
		CHECK_EQ(pin_st_save(ck, path, &bad, 1, NULL, NULL, 0, NULL), -EINVAL);
		bad.name = "\xff";
		CHECK_EQ(pin_st_save(ck, path, &bad, 1, NULL, NULL, 0, NULL), -EINVAL);
		CHECK(strstr(pin_st_error(ck), "UTF-8"), "%s", pin_st_error(ck));
		struct pin_st_tensor two[2] = { t[0], t[0] };

		CHECK_EQ(pin_st_save(ck, path, two, 2, NULL, NULL, 0, NULL), -EINVAL);
		CHECK(strstr(pin_st_error(ck), "given twice"), "%s", pin_st_error(ck));
		CHECK_EQ(pin_st_save(ck, path, t, 1, dk, dk, 2, NULL), -EINVAL);
		CHECK(strstr(pin_st_error(ck), "metadata key \"a\" given twice"), "%s",
		      pin_st_error(ck));
		struct stat sb2;

		CHECK_EQ(stat(path, &sb2), 0);
		CHECK(sb2.st_ino == sb.st_ino && sb2.st_size == sb.st_size,
		      "a failed save replaced the file");
	}
	unlink(path);
	for (i = 0; i < n; i++)
		free(t[i].data);
	pin_st_close(ck);
	return 0;
}
