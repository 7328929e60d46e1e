// SPDX-License-Identifier: MIT
/*
 * Reading safetensors headers strictly: the 8-byte length and its limits,
 * the JSON (safetensors_json.c), each tensor entry's schema, tensors that
 * tile the data section exactly, and the name index; from a buffer in
 * memory or from the start of a file. Every refusal names the file, the
 * tensor and the rule, since a bad checkpoint is found here or nowhere.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"
#include "io/io_internal.h"
#include "safetensors_internal.h"
#include "safetensors_ck.h"

/*
 * Bytes of a tensor of dtype and shape: the element count times the bits
 * per element, which must be a whole number of bytes. -EOVERFLOW, or
 * -EDOM for a partial byte.
 */
int pin__st_tensor_bytes(int dtype, const uint64_t *shape, unsigned ndim,
			 uint64_t *out)
{
	uint64_t count = 1, bits;
	unsigned i, b = pin_dtype_bits(dtype);

	for (i = 0; i < ndim; i++) {
		if (shape[i] && count > UINT64_MAX / shape[i])
			return -EOVERFLOW;
		count *= shape[i];
	}
	if (count > UINT64_MAX / b)
		return -EOVERFLOW;
	bits = count * b;
	if (bits % 8)
		return -EDOM;
	*out = bits / 8;
	return 0;
}

static void fmt_shape(char *buf, size_t len, const uint64_t *shape,
		      unsigned ndim)
{
	size_t n = 0;
	unsigned i;

	n += snprintf(buf, len, "[");
	for (i = 0; i < ndim && n < len; i++)
		n += snprintf(buf + n, len - n, "%s%llu", i ? ", " : "",
			      (unsigned long long)shape[i]);
	if (n < len)
		snprintf(buf + n, len - n, "]");
}

/* The three keys of a tensor entry, each of its JSON type; *dtype known. */
static int check_entry(struct pin_st *ck, const char *file, const char *name,
		       const struct pin__jval *v, const struct pin__jval **dt,
		       const struct pin__jval **sh,
		       const struct pin__jval **off, int *dtype)
{
	size_t i;

	if (v->type != PIN_J_OBJ)
		return pin__st_fail(ck, -EINVAL, "%s: tensor \"%s\": entry is not a JSON object",
				    file, name);
	*dt = *sh = *off = NULL;
	for (i = 0; i < v->n; i++) {
		if (!strcmp(v->keys[i], "dtype"))
			*dt = v->items[i];
		else if (!strcmp(v->keys[i], "shape"))
			*sh = v->items[i];
		else if (!strcmp(v->keys[i], "data_offsets"))
			*off = v->items[i];
		else
			return pin__st_fail(ck, -EINVAL, "%s: tensor \"%s\": unknown key \"%s\" (only dtype, shape, data_offsets)",
					    file, name, v->keys[i]);
	}
	if (!*dt || !*sh || !*off)
		return pin__st_fail(ck, -EINVAL, "%s: tensor \"%s\": missing \"%s\"",
				    file, name,
				    !*dt ? "dtype" : !*sh ? "shape" : "data_offsets");
	if ((*dt)->type != PIN_J_STR)
		return pin__st_fail(ck, -EINVAL, "%s: tensor \"%s\": dtype is not a string",
				    file, name);
	*dtype = pin_dtype_from_name((*dt)->s);
	if (!*dtype)
		return pin__st_fail(ck, -EINVAL, "%s: tensor \"%s\": unknown dtype \"%s\"",
				    file, name, (*dt)->s);
	return 0;
}

/* shape: at most 4096 unsigned 64-bit dimensions; off: [begin, end]. */
static int check_shape_offsets(struct pin_st *ck, const char *file,
			       const char *name, const struct pin__jval *sh,
			       const struct pin__jval *off)
{
	size_t i;

	if (sh->type != PIN_J_ARR)
		return pin__st_fail(ck, -EINVAL, "%s: tensor \"%s\": shape is not an array",
				    file, name);
	if (sh->n > 4096)
		return pin__st_fail(ck, -EINVAL, "%s: tensor \"%s\": shape has %zu dimensions (at most 4096)",
				    file, name, sh->n);
	for (i = 0; i < sh->n; i++)
		if (sh->items[i]->type != PIN_J_NUM || !sh->items[i]->is_u64)
			return pin__st_fail(ck, -EINVAL, "%s: tensor \"%s\": shape[%zu] is not an unsigned 64-bit integer",
					    file, name, i);
	if (off->type != PIN_J_ARR || off->n != 2 ||
	    off->items[0]->type != PIN_J_NUM || !off->items[0]->is_u64 ||
	    off->items[1]->type != PIN_J_NUM || !off->items[1]->is_u64)
		return pin__st_fail(ck, -EINVAL, "%s: tensor \"%s\": data_offsets is not [begin, end] of unsigned 64-bit integers",
				    file, name);
	if (off->items[0]->u64 > off->items[1]->u64)
		return pin__st_fail(ck, -EINVAL, "%s: tensor \"%s\": data_offsets begin %llu after end %llu",
				    file, name,
				    (unsigned long long)off->items[0]->u64,
				    (unsigned long long)off->items[1]->u64);
	return 0;
}

/* The bytes dtype and shape need are the bytes data_offsets hold. */
static int check_size(struct pin_st *ck, const char *file, const char *name,
		      const struct pin__jval *dt, int dtype,
		      const uint64_t *shape, unsigned ndim,
		      const struct pin__jval *off, uint64_t *nbytes)
{
	uint64_t begin = off->items[0]->u64, end = off->items[1]->u64;
	char sbuf[256];
	int ret;

	ret = pin__st_tensor_bytes(dtype, shape, ndim, nbytes);
	fmt_shape(sbuf, sizeof(sbuf), shape, ndim);
	if (ret == -EOVERFLOW)
		return pin__st_fail(ck, -EINVAL, "%s: tensor \"%s\": shape %s of %s overflows 64 bits",
				    file, name, sbuf, dt->s);
	if (ret == -EDOM)
		return pin__st_fail(ck, -EINVAL, "%s: tensor \"%s\": shape %s of %s is not a whole number of bytes",
				    file, name, sbuf, dt->s);
	if (*nbytes != end - begin)
		return pin__st_fail(ck, -EINVAL, "%s: tensor \"%s\": shape %s of %s needs %llu bytes, data_offsets [%llu, %llu] hold %llu",
				    file, name, sbuf, dt->s,
				    (unsigned long long)*nbytes,
				    (unsigned long long)begin,
				    (unsigned long long)end,
				    (unsigned long long)(end - begin));
	return 0;
}

/* A new tensor at the end of ck->t, its name copied; NULL on ENOMEM. */
static struct st_tensor *append_tensor(struct pin_st *ck, const char *name)
{
	struct st_tensor *t;

	if (ck->n == ck->cap) {
		size_t nc = ck->cap ? ck->cap * 2 : 16;
		struct st_tensor *nt = realloc(ck->t, nc * sizeof(*nt));

		if (!nt)
			return NULL;
		ck->t = nt;
		ck->cap = nc;
	}
	t = &ck->t[ck->n];
	memset(t, 0, sizeof(*t));
	t->pub.name = strdup(name);
	return t->pub.name ? t : NULL;
}

/* One tensor entry of a header: check its schema, append it. */
static int add_tensor(struct pin_st *ck, const char *file, const char *name,
		      const struct pin__jval *v, unsigned file_index)
{
	const struct pin__jval *dt = NULL, *sh = NULL, *off = NULL;
	struct st_tensor *t;
	uint64_t *shape, nbytes;
	size_t i;
	int dtype, ret;

	ret = check_entry(ck, file, name, v, &dt, &sh, &off, &dtype);
	if (!ret)
		ret = check_shape_offsets(ck, file, name, sh, off);
	if (ret)
		return ret;
	shape = malloc(sh->n * sizeof(uint64_t) + 1);
	if (!shape)
		return -ENOMEM;
	for (i = 0; i < sh->n; i++)
		shape[i] = sh->items[i]->u64;
	ret = check_size(ck, file, name, dt, dtype, shape, (unsigned)sh->n,
			 off, &nbytes);
	t = ret ? NULL : append_tensor(ck, name);
	if (!t) {
		free(shape);
		return ret ? ret : -ENOMEM;
	}
	t->pub.dtype = dtype;
	t->pub.ndim = (unsigned)sh->n;
	t->pub.shape = shape;
	t->pub.nbytes = nbytes;
	t->pub.file_index = file_index;
	t->begin = off->items[0]->u64;
	t->end = off->items[1]->u64;
	t->seq = ck->n;
	ck->n++;
	return 0;
}

static int cmp_offsets(const void *a, const void *b)
{
	const struct st_tensor *x = a, *y = b;

	if (x->begin != y->begin)
		return x->begin < y->begin ? -1 : 1;
	if (x->end != y->end)
		return x->end < y->end ? -1 : 1;
	/* Empty tensors at one offset keep the header's order, as the
	 * Python reader's stable sort does. */
	if (x->seq != y->seq)
		return x->seq < y->seq ? -1 : 1;
	return 0;
}

/* The header's entries: each tensor appended, __metadata__ kept. */
static int add_entries(struct pin_st *ck, const char *file,
		       const struct pin__jval *root, unsigned file_index)
{
	size_t i, j;
	int ret;

	for (i = 0; i < root->n; i++) {
		const char *k = root->keys[i];
		const struct pin__jval *v = root->items[i];

		if (strcmp(k, "__metadata__")) {
			ret = add_tensor(ck, file, k, v, file_index);
			if (ret)
				return ret;
			continue;
		}
		/* null: no metadata (MLX writes it; safetensors reads it so). */
		if (v->type == PIN_J_NULL)
			continue;
		if (v->type != PIN_J_OBJ)
			return pin__st_fail(ck, -EINVAL, "%s: __metadata__ is not an object",
					    file);
		for (j = 0; j < v->n; j++) {
			if (v->items[j]->type != PIN_J_STR)
				return pin__st_fail(ck, -EINVAL, "%s: __metadata__ value of \"%s\" is not a string",
						    file, v->keys[j]);
			/* Sharded: the first file's metadata stands. */
			if (file_index == 0) {
				ret = pin__st_add_meta(ck, v->keys[j], v->items[j]->s);
				if (ret)
					return ret;
			}
		}
	}
	return 0;
}

/*
 * The tensors from first on must tile the data section (data_len bytes
 * after a header of n): no overlap, no hole. Sets their file offsets.
 */
static int check_tiling(struct pin_st *ck, const char *file, size_t first,
			uint64_t n, uint64_t data_len)
{
	uint64_t at = 0;
	size_t i;

	if (ck->n > first)
		qsort(ck->t + first, ck->n - first, sizeof(*ck->t),
		      cmp_offsets);
	for (i = first; i < ck->n; i++) {
		struct st_tensor *t = &ck->t[i];

		if (t->begin > at)
			return pin__st_fail(ck, -EINVAL, "%s: tensor \"%s\": hole in the data section: bytes [%llu, %llu] belong to no tensor",
					    file, t->pub.name,
					    (unsigned long long)at,
					    (unsigned long long)t->begin);
		if (t->begin < at)
			return pin__st_fail(ck, -EINVAL, "%s: tensor \"%s\": data_offsets [%llu, %llu] overlap the tensor before (which ends at %llu)",
					    file, t->pub.name,
					    (unsigned long long)t->begin,
					    (unsigned long long)t->end,
					    (unsigned long long)at);
		if (t->end > data_len)
			return pin__st_fail(ck, -EINVAL, "%s: tensor \"%s\": data_offsets end %llu past the end of the data section (%llu bytes; file truncated?)",
					    file, t->pub.name,
					    (unsigned long long)t->end,
					    (unsigned long long)data_len);
		at = t->end;
		t->pub.file_offset = 8 + n + t->begin;
	}
	if (at != data_len)
		return pin__st_fail(ck, -EINVAL, "%s: data section has %llu bytes but the tensors cover %llu (bytes past the last tensor)",
				    file, (unsigned long long)data_len,
				    (unsigned long long)at);
	return 0;
}

/*
 * Check and add the header of one file. hdr is its N bytes; data_len is
 * what the file holds after them.
 */
static int parse_header(struct pin_st *ck, const char *file,
			const char *hdr, uint64_t n, uint64_t data_len,
			unsigned file_index)
{
	struct pin__jarena a = { 0 };
	struct pin__jval *root;
	char jerr[256];
	size_t first = ck->n;
	int ret;

	if (!n || hdr[0] != '{')
		return pin__st_fail(ck, -EINVAL, "%s: header does not start with '{'",
				    file);
	if (!pin__utf8_valid(hdr, n))
		return pin__st_fail(ck, -EINVAL, "%s: header is not valid UTF-8",
				    file);
	ret = pin__json_parse(&a, hdr, n, " ", &root, jerr, sizeof(jerr));
	if (ret == -EINVAL)
		pin__st_fail(ck, ret, "%s: header: %s", file, jerr);
	if (!ret)
		ret = add_entries(ck, file, root, file_index);
	if (!ret)
		ret = check_tiling(ck, file, first, n, data_len);
	pin__json_free(&a);
	if (ret == -ENOMEM)
		pin__st_fail(ck, ret, "%s: out of memory parsing the header", file);
	return ret;
}

static int cmp_name_idx(const void *a, const void *b, void *arg)
{
	const struct pin_st *ck = arg;

	return strcmp(ck->t[*(const size_t *)a].pub.name,
		      ck->t[*(const size_t *)b].pub.name);
}

/* Sort the name index; two tensors of one name (across shards) fail. */
int pin__st_build_index(struct pin_st *ck)
{
	size_t i;

	free(ck->by_name);
	ck->by_name = malloc((ck->n + 1) * sizeof(size_t));
	if (!ck->by_name)
		return pin__st_fail(ck, -ENOMEM, "out of memory");
	for (i = 0; i < ck->n; i++)
		ck->by_name[i] = i;
	if (ck->n)
		qsort_r(ck->by_name, ck->n, sizeof(size_t), cmp_name_idx, ck);
	for (i = 1; i < ck->n; i++) {
		const struct st_tensor *x = &ck->t[ck->by_name[i - 1]];
		const struct st_tensor *y = &ck->t[ck->by_name[i]];

		if (!strcmp(x->pub.name, y->pub.name))
			return pin__st_fail(ck, -EINVAL, "tensor \"%s\" appears in both %s and %s",
					    x->pub.name,
					    ck->files[x->pub.file_index].path,
					    ck->files[y->pub.file_index].path);
	}
	return 0;
}

static uint64_t le64(const unsigned char *b)
{
	uint64_t v = 0;
	int i;

	for (i = 7; i >= 0; i--)
		v = (v << 8) | b[i];
	return v;
}

/* The header length rule, given the file size. */
static int check_len(struct pin_st *ck, const char *file, uint64_t size,
		     uint64_t n)
{
	if (n > PIN_ST_MAX_HEADER)
		return pin__st_fail(ck, -EINVAL, "%s: header length %llu over the limit of %llu (not a safetensors file?)",
				    file, (unsigned long long)n, PIN_ST_MAX_HEADER);
	if (n > size - 8)
		return pin__st_fail(ck, -EINVAL, "%s: header length %llu runs past the end of the %llu-byte file (truncated?)",
				    file, (unsigned long long)n,
				    (unsigned long long)size);
	return 0;
}

/*
 * Parse the file image buf[len] of file fi (already in ck->files): its
 * tensors join ck, their data pointing into buf. The caller builds the
 * name index once every file is in.
 */
int pin__st_parse_image(struct pin_st *ck, unsigned fi, const void *buf,
			uint64_t len)
{
	const char *name = ck->files[fi].path;
	const unsigned char *b = buf;
	size_t i, first = ck->n;
	uint64_t n;
	int ret;

	if (len < 8)
		return pin__st_fail(ck, -EINVAL, "%s: %llu bytes, shorter than the 8-byte header length",
				    name, (unsigned long long)len);
	n = le64(b);
	ret = check_len(ck, name, len, n);
	if (!ret)
		ret = parse_header(ck, name, (const char *)b + 8, n,
				   len - 8 - n, fi);
	if (ret)
		return ret;
	ck->files[fi].data_start = 8 + n;
	ck->files[fi].data_len = len - 8 - n;
	for (i = first; i < ck->n; i++)
		ck->t[i].pub.data = (void *)(b + ck->t[i].pub.file_offset);
	return 0;
}

int pin_st_parse_buffer(struct pin_st *ck, const void *buf, uint64_t len,
			const char *name)
{
	int ret;

	if (ck->n || ck->nfiles)
		return pin__st_fail(ck, -EBUSY, "checkpoint is not empty");
	ret = pin__st_add_file(ck, name);
	if (!ret)
		ret = pin__st_parse_image(ck, 0, buf, len);
	if (!ret)
		ret = pin__st_build_index(ck);
	if (ret)
		pin__st_clear(ck);
	return ret;
}

/*
 * Read and check the header of file index fi (already in ck->files),
 * through fd (O_DIRECT or not: aligned reads into an aligned buffer).
 */
int pin__st_read_header(struct pin_st *ck, struct pin__file *f, unsigned fi)
{
	const char *file = f->path;
	unsigned char *buf = NULL;
	uint64_t n, want, got = 0;
	ssize_t r;
	int ret;

	if (f->size < 8)
		return pin__st_fail(ck, -EINVAL, "%s: %llu bytes, shorter than the 8-byte header length",
				    file, (unsigned long long)f->size);
	if (posix_memalign((void **)&buf, PIN_IO_ALIGN, PIN_IO_ALIGN))
		return pin__st_fail(ck, -ENOMEM, "%s: out of memory", file);
	do {
		r = pread(f->fd, buf, PIN_IO_ALIGN, 0);
	} while (r < 0 && errno == EINTR);
	if (r < 8) {
		ret = r < 0 ? -errno : -ESTALE;
		pin__st_fail(ck, ret, "%s: reading the header length at offset 0: %s",
			     file, r < 0 ? strerror(errno) : "file shrank");
		goto out;
	}
	n = le64(buf);
	ret = check_len(ck, file, f->size, n);
	if (ret)
		goto out;
	want = (8 + n + PIN_IO_ALIGN - 1) & ~(uint64_t)(PIN_IO_ALIGN - 1);
	free(buf);
	buf = NULL;
	if (posix_memalign((void **)&buf, PIN_IO_ALIGN, want)) {
		ret = pin__st_fail(ck, -ENOMEM, "%s: out of memory for a %llu-byte header",
				   file, (unsigned long long)n);
		goto out;
	}
	while (got < 8 + n) {
		r = pread(f->fd, buf + got, want - got, (off_t)got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			ret = r < 0 ? -errno : -ESTALE;
			pin__st_fail(ck, ret, "%s: reading the header at offset %llu: %s",
				     file, (unsigned long long)got,
				     r < 0 ? strerror(errno) : "end of file (file shrank)");
			goto out;
		}
		if (got + (uint64_t)r >= 8 + n)
			break;
		got += (uint64_t)r;
		if (f->direct)	/* a short direct read: go on from a block */
			got &= ~(uint64_t)(PIN_IO_ALIGN - 1);
	}
	ret = parse_header(ck, file, (const char *)buf + 8, n,
			   f->size - 8 - n, fi);
	if (!ret) {
		ck->files[fi].data_start = 8 + n;
		ck->files[fi].data_len = f->size - 8 - n;
	}
out:
	free(buf);
	return ret;
}

int pin_st_parse_file(struct pin_st *ck, const char *path)
{
	struct pin_io_opts o = { .size = sizeof(struct pin_io_opts), .flags = PIN_IO_BUFFERED };
	struct pin__io_stats st;
	struct pin__file f;
	int ret;

	if (ck->n || ck->nfiles)
		return pin__st_fail(ck, -EBUSY, "checkpoint is not empty");
	memset(&st, 0, sizeof(st));
	ret = pin__io_open_read(&f, path, &o, &st);
	if (ret)
		return pin__st_fail(ck, ret, "%s", st.error);
	ret = pin__st_add_file(ck, path);
	if (!ret)
		ret = pin__st_read_header(ck, &f, 0);
	if (!ret)
		ret = pin__st_build_index(ck);
	pin__io_close(&f);
	if (ret)
		pin__st_clear(ck);
	return ret;
}
