// SPDX-License-Identifier: GPL-2.0
/*
 * Every fixture written by the independent writer (stgen.py) loads with the
 * dtype, shape and bytes it was written with, whether its data section
 * starts aligned or not, sharded ones through their index; each region is
 * sealed and every tensor lies inside its region.
 *   st-load-fixtures FIXTURE-DIR
 */
#include "io-test.h"

static int parse_shape(char *s, uint64_t *shape)
{
	int n = 0;
	char *tok, *save;

	if (!strcmp(s, "-"))
		return 0;
	for (tok = strtok_r(s, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
		shape[n++] = strtoull(tok, NULL, 10);
	return n;
}

/* Check every manifest line whose file is in ck (by base name). */
static size_t check_manifest(struct pin_st *ck, const char *dir, int sharded)
{
	char path[4096], line[1024];
	size_t seen = 0;
	FILE *m;

	snprintf(path, sizeof(path), "%s/manifest.txt", dir);
	m = fopen(path, "r");
	if (!m)
		FAIL("%s: %s", path, strerror(errno));
	while (fgets(line, sizeof(line), m)) {
		char file[1024], dt[1024], shp[1024], name[1024];
		struct pin_st_tensor t = PIN_INIT(struct pin_st_tensor);
		uint64_t shape[16];
		int nd, i;
		char *sp, *last;

		line[strcspn(line, "\n")] = 0;
		/* file name dtype shape: the name may hold spaces. */
		sp = strchr(line, ' ');
		last = strrchr(line, ' ');
		*sp = 0;
		*last = 0;
		snprintf(file, sizeof(file), "%s", line);
		snprintf(shp, sizeof(shp), "%s", last + 1);
		sp++;
		last = strrchr(sp, ' ');
		*last = 0;
		snprintf(dt, sizeof(dt), "%s", last + 1);
		snprintf(name, sizeof(name), "%s", sp);
		if (sharded != !strncmp(file, "model-", 6))
			continue;
		if (!sharded) {
			const char *p = pin_st_file_path(ck, 0);

			if (strcmp(strrchr(p, '/') + 1, file))
				continue;
		}
		if (pin_st_find(ck, name, &t))
			FAIL("%s: tensor \"%s\" missing", file, name);
		nd = parse_shape(shp, shape);
		CHECK(t.dtype == pin_dtype_from_name(dt), "%s: dtype %s, expected %s",
		      name, pin_dtype_name(t.dtype), dt);
		CHECK_EQ(t.ndim, nd);
		for (i = 0; i < nd; i++)
			CHECK_EQ(t.shape[i], shape[i]);
		CHECK(pattern_diff(name, t.dtype, t.data, t.nbytes) < 0,
		      "%s: bytes differ at %lld", name,
		      pattern_diff(name, t.dtype, t.data, t.nbytes));
		CHECK(t.region != NULL, "%s has no region", name);
		CHECK(t.region_offset + t.nbytes <= pin_region_size(t.region),
		      "%s outside its region", name);
		seen++;
	}
	fclose(m);
	return seen;
}

static void check_sealed(struct pin_st *ck)
{
	size_t f;

	for (f = 0; f < pin_st_file_count(ck); f++) {
		struct pin_region_info ri = PIN_INIT(struct pin_region_info);

		CHECK_EQ(pin_region_info(pin_st_region(ck, f), &ri), 0);
		CHECK(ri.state == PIN_STATE_SEALED, "%s: region state %s",
		      pin_st_file_path(ck, f), pin_state_name(ri.state));
	}
}

int main(int argc, char **argv)
{
	static const char *const files[] = {
		"alldtypes.safetensors", "empty-meta.safetensors",
		"no-tensors.safetensors", "unaligned.safetensors",
		"big.safetensors",
	};
	static const size_t counts[] = { 24, 2, 0, 2, 3 };
	struct pin_io_opts o = { .size = sizeof(struct pin_io_opts), .queue_depth = 3, .request_size = 64 << 10 };
	struct pin_st_load_opts lo = { .size = sizeof(lo), .io = &o };
	const char *dir = argc > 1 ? argv[1] : NULL;
	char path[4096];
	struct pin_dev *dev;
	const char *k, *v;
	size_t i;
	int ret;

	if (!dir)
		FAIL("usage: st-load-fixtures DIR");
	ret = pin_dev_open(&dev, PIN_BACKEND_AUTO, NULL);
	CHECK(ret == 0, "pin_dev_open: %s", strerror(-ret));
	for (i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		struct pin_st *ck = pin_st_create();

		snprintf(path, sizeof(path), "%s/%s", dir, files[i]);
		ret = pin_st_load(ck, dev, path, &lo);
		CHECK(ret == 0, "load %s: %s", path, pin_st_error(ck));
		CHECK_EQ(pin_st_count(ck), counts[i]);
		CHECK_EQ(check_manifest(ck, dir, 0), counts[i]);
		check_sealed(ck);
		if (i == 0) {
			CHECK_EQ(pin_st_metadata_count(ck), 2);
			CHECK_EQ(pin_st_metadata(ck, 0, &k, &v), 0);
			CHECK(!strcmp(k, "format") && !strcmp(v, "pt"), "%s=%s", k, v);
			CHECK_EQ(pin_st_metadata(ck, 1, &k, &v), 0);
			CHECK(!strcmp(k, "note") && !strcmp(v, "\xc3\xa9 \"q\" \\ end"),
			      "%s=%s", k, v);
			CHECK_EQ(pin_st_metadata(ck, 2, &k, &v), -ERANGE);
		}
		if (i == 1)
			CHECK_EQ(pin_st_metadata_count(ck), 0);
		pin_st_close(ck);
	}

	/* The sharded checkpoint, through its index. */
	struct pin_st *ck = pin_st_create();

	snprintf(path, sizeof(path), "%s/model.safetensors.index.json", dir);
	ret = pin_st_load(ck, dev, path, NULL);
	CHECK(ret == 0, "load %s: %s", path, pin_st_error(ck));
	CHECK_EQ(pin_st_file_count(ck), 3);
	CHECK_EQ(pin_st_count(ck), 5);
	CHECK_EQ(check_manifest(ck, dir, 1), 5);
	check_sealed(ck);
	/* The first shard's __metadata__, then the index's metadata. */
	CHECK_EQ(pin_st_metadata_count(ck), 2);
	pin_st_metadata(ck, 1, &k, &v);
	CHECK(!strcmp(k, "total_size") && !strcmp(v, "13182"), "%s=%s", k, v);
	CHECK_EQ(pin_st_load(ck, dev, path, NULL), -EBUSY);
	pin_st_close(ck);
	pin_dev_close(dev);
	return 0;
}
