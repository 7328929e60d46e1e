// SPDX-License-Identifier: MIT
/*
 * safetensors: a strict header reader, loading files or sharded checkpoints
 * into pinned regions through the I/O engine, and an atomic O_DIRECT writer
 * whose data section starts on a 4096-byte boundary.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "io_internal.h"
#include "fill.h"
#include "safetensors_internal.h"

static const struct {
	const char *name;
	unsigned bits;
} dtypes[PIN_DT_COUNT] = {
	[PIN_DT_BOOL] = { "BOOL", 8 },
	[PIN_DT_U8] = { "U8", 8 },
	[PIN_DT_I8] = { "I8", 8 },
	[PIN_DT_F8_E5M2] = { "F8_E5M2", 8 },
	[PIN_DT_F8_E4M3] = { "F8_E4M3", 8 },
	[PIN_DT_F8_E8M0] = { "F8_E8M0", 8 },
	[PIN_DT_I16] = { "I16", 16 },
	[PIN_DT_U16] = { "U16", 16 },
	[PIN_DT_F16] = { "F16", 16 },
	[PIN_DT_BF16] = { "BF16", 16 },
	[PIN_DT_I32] = { "I32", 32 },
	[PIN_DT_U32] = { "U32", 32 },
	[PIN_DT_F32] = { "F32", 32 },
	[PIN_DT_F64] = { "F64", 64 },
	[PIN_DT_I64] = { "I64", 64 },
	[PIN_DT_U64] = { "U64", 64 },
	[PIN_DT_C64] = { "C64", 64 },
	[PIN_DT_F4] = { "F4", 4 },
	[PIN_DT_F6_E2M3] = { "F6_E2M3", 6 },
	[PIN_DT_F6_E3M2] = { "F6_E3M2", 6 },
};

const char *pin_dtype_name(int dtype)
{
	if (dtype <= PIN_DT_INVALID || dtype >= PIN_DT_COUNT)
		return NULL;
	return dtypes[dtype].name;
}

int pin_dtype_from_name(const char *name)
{
	int i;

	for (i = 1; name && i < PIN_DT_COUNT; i++)
		if (!strcmp(dtypes[i].name, name))
			return i;
	return PIN_DT_INVALID;
}

unsigned pin_dtype_bits(int dtype)
{
	if (dtype <= PIN_DT_INVALID || dtype >= PIN_DT_COUNT)
		return 0;
	return dtypes[dtype].bits;
}

struct st_tensor {
	struct pin_st_tensor pub;	/* name, shape point into owned memory */
	uint64_t begin, end;		/* data_offsets */
};

struct st_file {
	char *path;
	struct pin_region *region;	/* NULL for parsed-only files */
	uint64_t data_start;		/* 8 + header length */
	uint64_t data_len;
};

/* Progress across every file of a load: done = base + this file's done. */
struct st_progress {
	const struct pin_io_opts *user;
	uint64_t base;
	uint64_t total;
};

static void st_progress_cb(void *arg, uint64_t done, uint64_t total)
{
	struct st_progress *p = arg;

	(void)total;
	if (p->base + done <= p->total)
		p->user->progress(p->user->progress_arg, p->base + done,
				  p->total);
}

struct pin_st {
	struct st_tensor *t;
	size_t n, cap;
	size_t *by_name;		/* indexes of t sorted by name */
	char **meta_k, **meta_v;
	size_t nmeta;
	struct st_file *files;
	size_t nfiles;
	struct pin_io_stats stats;
	struct pin_st_phases phases;	/* of the last load */
	struct pin_st_step *steps;	/* of the last load */
	size_t nsteps;
	char err[PIN_ERR_LEN];
};

struct pin_st *pin_st_new(void)
{
	return calloc(1, sizeof(struct pin_st));
}

static void st_clear(struct pin_st *ck)
{
	size_t i;

	for (i = 0; i < ck->n; i++) {
		free((char *)ck->t[i].pub.name);
		free((uint64_t *)ck->t[i].pub.shape);
	}
	free(ck->t);
	free(ck->by_name);
	for (i = 0; i < ck->nmeta; i++) {
		free(ck->meta_k[i]);
		free(ck->meta_v[i]);
	}
	free(ck->meta_k);
	free(ck->meta_v);
	for (i = 0; i < ck->nfiles; i++) {
		free(ck->files[i].path);
		if (ck->files[i].region)
			pin_region_free(ck->files[i].region);
	}
	free(ck->files);
	ck->t = NULL;
	ck->n = ck->cap = 0;
	ck->by_name = NULL;
	ck->meta_k = ck->meta_v = NULL;
	ck->nmeta = 0;
	ck->files = NULL;
	ck->nfiles = 0;
}

void pin_st_free(struct pin_st *ck)
{
	if (!ck)
		return;
	st_clear(ck);
	free(ck->steps);
	free(ck);
}

const char *pin_st_error(const struct pin_st *ck)
{
	return ck->err;
}

static int st_fail(struct pin_st *ck, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int st_fail(struct pin_st *ck, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(ck->err, sizeof(ck->err), fmt, ap);
	va_end(ap);
	return err;
}

static int add_meta(struct pin_st *ck, const char *k, const char *v)
{
	char **nk = realloc(ck->meta_k, (ck->nmeta + 1) * sizeof(char *));
	char **nv;

	if (!nk)
		return -ENOMEM;
	ck->meta_k = nk;
	nv = realloc(ck->meta_v, (ck->nmeta + 1) * sizeof(char *));
	if (!nv)
		return -ENOMEM;
	ck->meta_v = nv;
	nk[ck->nmeta] = strdup(k);
	nv[ck->nmeta] = strdup(v);
	if (!nk[ck->nmeta] || !nv[ck->nmeta]) {
		free(nk[ck->nmeta]);
		free(nv[ck->nmeta]);
		return -ENOMEM;
	}
	ck->nmeta++;
	return 0;
}

static int add_file(struct pin_st *ck, const char *path)
{
	struct st_file *nf = realloc(ck->files,
				     (ck->nfiles + 1) * sizeof(*nf));

	if (!nf)
		return -ENOMEM;
	ck->files = nf;
	memset(&nf[ck->nfiles], 0, sizeof(*nf));
	nf[ck->nfiles].path = strdup(path);
	if (!nf[ck->nfiles].path)
		return -ENOMEM;
	ck->nfiles++;
	return 0;
}

/*
 * Bytes of a tensor of dtype and shape: the element count times the bits
 * per element, which must be a whole number of bytes. -EOVERFLOW, or
 * -EDOM for a partial byte.
 */
static int tensor_bytes(int dtype, const uint64_t *shape, unsigned ndim,
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

/* One tensor entry of a header: check its schema, append it. */
static int add_tensor(struct pin_st *ck, const char *file, const char *name,
		      const struct pin__jval *v, unsigned file_index)
{
	const struct pin__jval *dt = NULL, *sh = NULL, *off = NULL;
	struct st_tensor *t;
	uint64_t *shape = NULL, nbytes;
	char sbuf[256];
	size_t i;
	int dtype, ret;

	if (v->type != PIN_J_OBJ)
		return st_fail(ck, -EINVAL, "%s: tensor \"%s\": entry is not a JSON object",
			       file, name);
	for (i = 0; i < v->n; i++) {
		if (!strcmp(v->keys[i], "dtype"))
			dt = v->items[i];
		else if (!strcmp(v->keys[i], "shape"))
			sh = v->items[i];
		else if (!strcmp(v->keys[i], "data_offsets"))
			off = v->items[i];
		else
			return st_fail(ck, -EINVAL, "%s: tensor \"%s\": unknown key \"%s\" (only dtype, shape, data_offsets)",
				       file, name, v->keys[i]);
	}
	if (!dt || !sh || !off)
		return st_fail(ck, -EINVAL, "%s: tensor \"%s\": missing \"%s\"",
			       file, name,
			       !dt ? "dtype" : !sh ? "shape" : "data_offsets");
	if (dt->type != PIN_J_STR)
		return st_fail(ck, -EINVAL, "%s: tensor \"%s\": dtype is not a string",
			       file, name);
	dtype = pin_dtype_from_name(dt->s);
	if (!dtype)
		return st_fail(ck, -EINVAL, "%s: tensor \"%s\": unknown dtype \"%s\"",
			       file, name, dt->s);
	if (sh->type != PIN_J_ARR)
		return st_fail(ck, -EINVAL, "%s: tensor \"%s\": shape is not an array",
			       file, name);
	if (sh->n > 4096)
		return st_fail(ck, -EINVAL, "%s: tensor \"%s\": shape has %zu dimensions (at most 4096)",
			       file, name, sh->n);
	for (i = 0; i < sh->n; i++)
		if (sh->items[i]->type != PIN_J_NUM || !sh->items[i]->is_u64)
			return st_fail(ck, -EINVAL, "%s: tensor \"%s\": shape[%zu] is not an unsigned 64-bit integer",
				       file, name, i);
	if (off->type != PIN_J_ARR || off->n != 2 ||
	    off->items[0]->type != PIN_J_NUM || !off->items[0]->is_u64 ||
	    off->items[1]->type != PIN_J_NUM || !off->items[1]->is_u64)
		return st_fail(ck, -EINVAL, "%s: tensor \"%s\": data_offsets is not [begin, end] of unsigned 64-bit integers",
			       file, name);
	if (off->items[0]->u64 > off->items[1]->u64)
		return st_fail(ck, -EINVAL, "%s: tensor \"%s\": data_offsets begin %llu after end %llu",
			       file, name,
			       (unsigned long long)off->items[0]->u64,
			       (unsigned long long)off->items[1]->u64);
	shape = malloc(sh->n * sizeof(uint64_t) + 1);
	if (!shape)
		return -ENOMEM;
	for (i = 0; i < sh->n; i++)
		shape[i] = sh->items[i]->u64;
	ret = tensor_bytes(dtype, shape, (unsigned)sh->n, &nbytes);
	fmt_shape(sbuf, sizeof(sbuf), shape, (unsigned)sh->n);
	if (ret == -EOVERFLOW) {
		free(shape);
		return st_fail(ck, -EINVAL, "%s: tensor \"%s\": shape %s of %s overflows 64 bits",
			       file, name, sbuf, dt->s);
	}
	if (ret == -EDOM) {
		free(shape);
		return st_fail(ck, -EINVAL, "%s: tensor \"%s\": shape %s of %s is not a whole number of bytes",
			       file, name, sbuf, dt->s);
	}
	if (nbytes != off->items[1]->u64 - off->items[0]->u64) {
		free(shape);
		return st_fail(ck, -EINVAL, "%s: tensor \"%s\": shape %s of %s needs %llu bytes, data_offsets [%llu, %llu] hold %llu",
			       file, name, sbuf, dt->s,
			       (unsigned long long)nbytes,
			       (unsigned long long)off->items[0]->u64,
			       (unsigned long long)off->items[1]->u64,
			       (unsigned long long)(off->items[1]->u64 -
						    off->items[0]->u64));
	}
	if (ck->n == ck->cap) {
		size_t nc = ck->cap ? ck->cap * 2 : 16;
		struct st_tensor *nt = realloc(ck->t, nc * sizeof(*nt));

		if (!nt) {
			free(shape);
			return -ENOMEM;
		}
		ck->t = nt;
		ck->cap = nc;
	}
	t = &ck->t[ck->n];
	memset(t, 0, sizeof(*t));
	t->pub.name = strdup(name);
	if (!t->pub.name) {
		free(shape);
		return -ENOMEM;
	}
	t->pub.dtype = dtype;
	t->pub.ndim = (unsigned)sh->n;
	t->pub.shape = shape;
	t->pub.nbytes = nbytes;
	t->pub.file_index = file_index;
	t->begin = off->items[0]->u64;
	t->end = off->items[1]->u64;
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
	size_t i, first = ck->n;
	uint64_t at;
	int ret;

	if (!n || hdr[0] != '{')
		return st_fail(ck, -EINVAL, "%s: header does not start with '{'",
			       file);
	if (!pin__utf8_valid(hdr, n))
		return st_fail(ck, -EINVAL, "%s: header is not valid UTF-8",
			       file);
	ret = pin__json_parse(&a, hdr, n, " ", &root, jerr, sizeof(jerr));
	if (ret == -EINVAL) {
		st_fail(ck, ret, "%s: header: %s",
			file, jerr);
		goto out;
	}
	if (ret)
		goto out;
	for (i = 0; i < root->n; i++) {
		const char *k = root->keys[i];
		const struct pin__jval *v = root->items[i];
		size_t j;

		if (strcmp(k, "__metadata__")) {
			ret = add_tensor(ck, file, k, v, file_index);
			if (ret)
				goto out;
			continue;
		}
		if (v->type != PIN_J_OBJ) {
			ret = st_fail(ck, -EINVAL, "%s: __metadata__ is not an object",
				      file);
			goto out;
		}
		for (j = 0; j < v->n; j++) {
			if (v->items[j]->type != PIN_J_STR) {
				ret = st_fail(ck, -EINVAL, "%s: __metadata__ value of \"%s\" is not a string",
					      file, v->keys[j]);
				goto out;
			}
			/* Sharded: the first file's metadata stands. */
			if (file_index == 0) {
				ret = add_meta(ck, v->keys[j], v->items[j]->s);
				if (ret)
					goto out;
			}
		}
	}
	/* The tensors must tile the data section: no overlap, no hole. */
	if (ck->n > first)
		qsort(ck->t + first, ck->n - first, sizeof(*ck->t),
		      cmp_offsets);
	at = 0;
	for (i = first; i < ck->n; i++) {
		struct st_tensor *t = &ck->t[i];

		if (t->begin > at) {
			ret = st_fail(ck, -EINVAL, "%s: tensor \"%s\": hole in the data section: bytes [%llu, %llu] belong to no tensor",
				      file, t->pub.name,
				      (unsigned long long)at,
				      (unsigned long long)t->begin);
			goto out;
		}
		if (t->begin < at) {
			ret = st_fail(ck, -EINVAL, "%s: tensor \"%s\": data_offsets [%llu, %llu] overlap the tensor before (which ends at %llu)",
				      file, t->pub.name,
				      (unsigned long long)t->begin,
				      (unsigned long long)t->end,
				      (unsigned long long)at);
			goto out;
		}
		if (t->end > data_len) {
			ret = st_fail(ck, -EINVAL, "%s: tensor \"%s\": data_offsets end %llu past the end of the data section (%llu bytes; file truncated?)",
				      file, t->pub.name,
				      (unsigned long long)t->end,
				      (unsigned long long)data_len);
			goto out;
		}
		at = t->end;
		t->pub.file_offset = 8 + n + t->begin;
	}
	if (at != data_len) {
		ret = st_fail(ck, -EINVAL, "%s: data section has %llu bytes but the tensors cover %llu (bytes past the last tensor)",
			      file, (unsigned long long)data_len,
			      (unsigned long long)at);
		goto out;
	}
	ret = 0;
out:
	pin__json_free(&a);
	if (ret == -ENOMEM)
		st_fail(ck, ret, "%s: out of memory parsing the header", file);
	return ret;
}

static int cmp_name_idx(const void *a, const void *b, void *arg)
{
	const struct pin_st *ck = arg;

	return strcmp(ck->t[*(const size_t *)a].pub.name,
		      ck->t[*(const size_t *)b].pub.name);
}

/* Sort the name index; two tensors of one name (across shards) fail. */
static int build_index(struct pin_st *ck)
{
	size_t i;

	free(ck->by_name);
	ck->by_name = malloc((ck->n + 1) * sizeof(size_t));
	if (!ck->by_name)
		return st_fail(ck, -ENOMEM, "out of memory");
	for (i = 0; i < ck->n; i++)
		ck->by_name[i] = i;
	if (ck->n)
		qsort_r(ck->by_name, ck->n, sizeof(size_t), cmp_name_idx, ck);
	for (i = 1; i < ck->n; i++) {
		const struct st_tensor *x = &ck->t[ck->by_name[i - 1]];
		const struct st_tensor *y = &ck->t[ck->by_name[i]];

		if (!strcmp(x->pub.name, y->pub.name))
			return st_fail(ck, -EINVAL, "tensor \"%s\" appears in both %s and %s",
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
		return st_fail(ck, -EINVAL, "%s: header length %llu over the limit of %llu",
			       file, (unsigned long long)n, PIN_ST_MAX_HEADER);
	if (n > size - 8)
		return st_fail(ck, -EINVAL, "%s: header length %llu runs past the end of the %llu-byte file (truncated?)",
			       file, (unsigned long long)n,
			       (unsigned long long)size);
	return 0;
}

int pin_st_parse_buffer(struct pin_st *ck, const void *buf, uint64_t len,
			const char *name)
{
	const unsigned char *b = buf;
	uint64_t n;
	size_t i;
	int ret;

	if (ck->n || ck->nfiles)
		return st_fail(ck, -EBUSY, "checkpoint is not empty");
	if (len < 8)
		return st_fail(ck, -EINVAL, "%s: %llu bytes, shorter than the 8-byte header length",
			       name, (unsigned long long)len);
	n = le64(b);
	ret = check_len(ck, name, len, n);
	if (!ret)
		ret = add_file(ck, name);
	if (!ret)
		ret = parse_header(ck, name, (const char *)b + 8, n,
				   len - 8 - n, 0);
	if (!ret)
		ret = build_index(ck);
	if (ret) {
		st_clear(ck);
		return ret;
	}
	ck->files[0].data_start = 8 + n;
	ck->files[0].data_len = len - 8 - n;
	for (i = 0; i < ck->n; i++)
		ck->t[i].pub.data = (void *)(b + ck->t[i].pub.file_offset);
	return 0;
}

/*
 * Read and check the header of file index fi (already in ck->files),
 * through fd (O_DIRECT or not: aligned reads into an aligned buffer).
 */
static int read_header(struct pin_st *ck, struct pin__file *f, unsigned fi)
{
	const char *file = f->path;
	unsigned char *buf = NULL;
	uint64_t n, want, got = 0;
	ssize_t r;
	int ret;

	if (f->size < 8)
		return st_fail(ck, -EINVAL, "%s: %llu bytes, shorter than the 8-byte header length",
			       file, (unsigned long long)f->size);
	if (posix_memalign((void **)&buf, PIN_IO_ALIGN, PIN_IO_ALIGN))
		return st_fail(ck, -ENOMEM, "%s: out of memory", file);
	do {
		r = pread(f->fd, buf, PIN_IO_ALIGN, 0);
	} while (r < 0 && errno == EINTR);
	if (r < 8) {
		ret = r < 0 ? -errno : -ESTALE;
		st_fail(ck, ret, "%s: reading the header length at offset 0: %s",
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
		ret = st_fail(ck, -ENOMEM, "%s: out of memory for a %llu-byte header",
			      file, (unsigned long long)n);
		goto out;
	}
	while (got < 8 + n) {
		r = pread(f->fd, buf + got, want - got, (off_t)got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			ret = r < 0 ? -errno : -ESTALE;
			st_fail(ck, ret, "%s: reading the header at offset %llu: %s",
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
	struct pin_io_opts o = { .flags = PIN_IO_BUFFERED };
	struct pin_io_stats st;
	struct pin__file f;
	int ret;

	if (ck->n || ck->nfiles)
		return st_fail(ck, -EBUSY, "checkpoint is not empty");
	memset(&st, 0, sizeof(st));
	ret = pin__io_open_read(&f, path, &o, &st);
	if (ret)
		return st_fail(ck, ret, "%s", st.error);
	ret = add_file(ck, path);
	if (!ret)
		ret = read_header(ck, &f, 0);
	if (!ret)
		ret = build_index(ck);
	pin__io_close(&f);
	if (ret)
		st_clear(ck);
	return ret;
}

static void stats_add(struct pin_io_stats *sum, const struct pin_io_stats *s,
		      int first)
{
	sum->bytes += s->bytes;
	sum->ns += s->ns;
	sum->io_ns += s->io_ns;
	sum->requests += s->requests;
	sum->short_ios += s->short_ios;
	sum->retries += s->retries;
	sum->queue_depth = s->queue_depth;
	sum->request_size = s->request_size;
	sum->direct = first ? s->direct : sum->direct && s->direct;
	sum->fixed_buffers = first ? s->fixed_buffers :
			     sum->fixed_buffers && s->fixed_buffers;
	if (!sum->fallback_reason[0] && s->fallback_reason[0])
		snprintf(sum->fallback_reason, sizeof(sum->fallback_reason),
			 "%s", s->fallback_reason);
}

/* Append a fill's steps to the load's timeline; frees rep->times. */
static void keep_steps(struct pin_st *ck, unsigned fi,
		       struct pin__fill_report *rep, uint64_t span)
{
	struct pin_st_step *n;
	size_t k;

	n = rep->nsteps ? realloc(ck->steps, (ck->nsteps + rep->nsteps) *
				  sizeof(*n)) : NULL;
	if (n) {
		ck->steps = n;
		for (k = 0; k < rep->nsteps; k++) {
			struct pin_st_step *s = &n[ck->nsteps + k];
			const struct pin__step_times *t = &rep->times[k];

			memset(s, 0, sizeof(*s));
			s->file = fi;
			s->offset = k * rep->step;
			s->length = span - s->offset < rep->step ?
				    span - s->offset : rep->step;
			s->pin_begin_ns = t->pin_begin_ns;
			s->pin_end_ns = t->pin_end_ns;
			s->read_begin_ns = t->read_begin_ns;
			s->read_end_ns = t->read_end_ns;
		}
		ck->nsteps += rep->nsteps;
	}
	free(rep->times);
	rep->times = NULL;
}

int pin_st_timeline(const struct pin_st *ck, struct pin_st_step *steps,
		    size_t cap)
{
	if (!ck || (cap && !steps))
		return -EINVAL;
	if (cap > ck->nsteps)
		cap = ck->nsteps;
	if (cap)
		memcpy(steps, ck->steps, cap * sizeof(*steps));
	return (int)ck->nsteps;
}

/* Load file index fi: header, region, data section, seal. */
static int load_file(struct pin_st *ck, struct pin_dev *dev, unsigned fi,
		     const struct pin_io_opts *o, struct st_progress *prog)
{
	struct pin_io_opts po = *o;
	struct st_file *sf = &ck->files[fi];
	struct pin_io_stats st;
	struct pin_region *r = NULL;
	uint64_t t0 = pin__now_ns(), tp, head, span, astart;
	size_t first = ck->n, i;
	struct pin__fill_report rep;
	struct pin__file f;
	void *map;
	int ret;

	memset(&st, 0, sizeof(st));
	st.direct = 1;
	st.queue_depth = o->queue_depth;
	st.request_size = o->request_size;
	ret = pin__io_open_read(&f, sf->path, o, &st);
	if (ret)
		return st_fail(ck, ret, "%s", st.error);
	ret = read_header(ck, &f, fi);
	if (ret)
		goto out;
	astart = sf->data_start & ~(uint64_t)(PIN_IO_ALIGN - 1);
	head = sf->data_start - astart;
	span = pin_io_span(sf->data_start, sf->data_len);
	tp = pin__now_ns();
	/* fallocate of a memfd may be interrupted (EINTR): try again. */
	for (i = 0; i < 5; i++) {
		ret = pin__alloc_to_fill(dev, span ? span : PIN_IO_ALIGN, 0,
					 &r);
		if (ret != -EINTR)
			break;
	}
	if (ret == -ENOMEM) {
		ret = pin__alloc_to_fill(dev, span ? span : PIN_IO_ALIGN,
					 PIN_ALLOC_FALLBACK, &r);
		if (!ret)
			snprintf(st.fallback_reason + strlen(st.fallback_reason),
				 sizeof(st.fallback_reason) - strlen(st.fallback_reason),
				 "%sregion below 2 MiB chunks",
				 st.fallback_reason[0] ? "; " : "");
	}
	if (ret) {
		st_fail(ck, ret, "%s: allocating a %llu-byte region: %s",
			sf->path, (unsigned long long)span, pin_dev_error(dev));
		goto out;
	}
	ck->phases.alloc_ns += pin__now_ns() - tp;
	if (o->progress) {
		po.progress = st_progress_cb;
		po.progress_arg = prog;
	}
	ret = pin__fill_from_file(r, &f, astart, span,
				  sf->data_start + sf->data_len, &po, &st,
				  &rep);
	ck->phases.pin_ns += rep.pin_ns;
	keep_steps(ck, fi, &rep, span);
	prog->base += span;
	st.direct = f.direct;
	if (ret) {
		st_fail(ck, ret, "%s", st.error[0] ? st.error :
			pin_region_error(r));
		goto out;
	}
	ck->phases.transfer_ns += st.io_ns;
	tp = pin__now_ns();
	ret = pin_seal(r);
	if (ret) {
		st_fail(ck, ret, "%s: sealing its region: %s", sf->path,
			pin_region_error(r));
		goto out;
	}
	ret = pin_region_map(r, &map);	/* sealing may remap it */
	if (ret) {
		st_fail(ck, ret, "%s: mapping its sealed region: %s", sf->path,
			pin_region_error(r));
		goto out;
	}
	ck->phases.seal_ns += pin__now_ns() - tp;
	for (i = first; i < ck->n; i++) {
		struct st_tensor *t = &ck->t[i];

		t->pub.region = r;
		t->pub.region_offset = head + t->begin;
		t->pub.data = (char *)map + t->pub.region_offset;
	}
	sf->region = r;
	r = NULL;
	st.ns = pin__now_ns() - t0;
	stats_add(&ck->stats, &st, fi == 0);
out:
	if (r)
		pin_region_free(r);
	pin__io_close(&f);
	return ret;
}

static int ends_with(const char *s, const char *suffix)
{
	size_t a = strlen(s), b = strlen(suffix);

	return a >= b && !strcmp(s + a - b, suffix);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Read a whole small file (an index) into a NUL-terminated buffer. */
static int slurp(struct pin_st *ck, const char *path, char **out,
		 size_t *outlen)
{
	struct stat sb;
	size_t got = 0;
	char *buf;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return st_fail(ck, -errno, "%s: open: %s", path,
			       strerror(errno));
	if (fstat(fd, &sb) < 0 || sb.st_size > (off_t)PIN_ST_MAX_HEADER) {
		close(fd);
		return st_fail(ck, -EINVAL, "%s: unreadable or over %llu bytes",
			       path, PIN_ST_MAX_HEADER);
	}
	buf = malloc((size_t)sb.st_size + 1);
	if (!buf) {
		close(fd);
		return st_fail(ck, -ENOMEM, "%s: out of memory", path);
	}
	while (got < (size_t)sb.st_size) {
		ssize_t r = read(fd, buf + got, (size_t)sb.st_size - got);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			int err = r < 0 ? -errno : -EIO;

			free(buf);
			close(fd);
			return st_fail(ck, err, "%s: read at offset %zu: %s",
				       path, got,
				       r < 0 ? strerror(-err) : "file shrank");
		}
		got += (size_t)r;
	}
	close(fd);
	buf[got] = 0;
	*out = buf;
	*outlen = got;
	return 0;
}

/* Parse an index: fill ck->files (sorted) and return its weight map. */
static int load_index(struct pin_st *ck, struct pin_dev *dev,
		      const char *path, const struct pin_io_opts *o,
		      struct st_progress *prog)
{
	struct pin__jarena a = { 0 };
	const struct pin__jval *wm = NULL, *meta = NULL;
	struct pin__jval *root;
	char *text = NULL, *dir = NULL, **names = NULL, jerr[256];
	size_t len = 0, i, nn = 0;
	int ret;

	ret = slurp(ck, path, &text, &len);
	if (ret)
		return ret;
	ret = pin__json_parse(&a, text, len, " \t\r\n", &root, jerr,
			      sizeof(jerr));
	if (ret) {
		st_fail(ck, ret, "%s: %s", path,
			ret == -EINVAL ? jerr : "out of memory");
		goto out;
	}
	ret = -EINVAL;
	if (root->type != PIN_J_OBJ) {
		st_fail(ck, ret, "%s: index is not a JSON object", path);
		goto out;
	}
	for (i = 0; i < root->n; i++) {
		if (!strcmp(root->keys[i], "weight_map"))
			wm = root->items[i];
		else if (!strcmp(root->keys[i], "metadata"))
			meta = root->items[i];
	}
	if (!wm || wm->type != PIN_J_OBJ) {
		st_fail(ck, ret, "%s: index has no \"weight_map\" object", path);
		goto out;
	}
	names = malloc((wm->n + 1) * sizeof(char *));
	dir = strdup(path);
	if (!names || !dir) {
		ret = st_fail(ck, -ENOMEM, "%s: out of memory", path);
		goto out;
	}
	for (i = 0; i < wm->n; i++) {
		const char *fname = wm->items[i]->s;

		if (wm->items[i]->type != PIN_J_STR || !fname[0] ||
		    strchr(fname, '/')) {
			st_fail(ck, ret, "%s: weight_map entry \"%s\" is not a file name in the index's directory",
				path, wm->keys[i]);
			goto out;
		}
		names[nn++] = wm->items[i]->s;
	}
	qsort(names, nn, sizeof(char *), cmp_str);
	for (i = 0; i < nn; i++) {
		char full[4096];

		if (i && !strcmp(names[i], names[i - 1]))
			continue;
		snprintf(full, sizeof(full), "%s/%s", dirname(dir), names[i]);
		strcpy(dir, path);
		ret = add_file(ck, full);
		if (ret) {
			st_fail(ck, ret, "%s: out of memory", path);
			goto out;
		}
	}
	for (i = 0; i < ck->nfiles; i++) {
		struct stat sb;

		if (stat(ck->files[i].path, &sb) == 0)
			prog->total += (uint64_t)sb.st_size + PIN_IO_ALIGN;
	}
	for (i = 0; i < ck->nfiles; i++) {
		ret = load_file(ck, dev, (unsigned)i, o, prog);
		if (ret)
			goto out;
	}
	ret = build_index(ck);
	if (ret)
		goto out;
	/* Every map entry is in the file it names, and nothing else is. */
	for (i = 0; i < wm->n; i++) {
		struct pin_st_tensor t;
		const char *want = wm->items[i]->s;
		const char *have;

		if (pin_st_find(ck, wm->keys[i], &t)) {
			ret = st_fail(ck, -EINVAL, "%s: tensor \"%s\" of the weight_map is not in %s",
				      path, wm->keys[i], want);
			goto out;
		}
		have = strrchr(ck->files[t.file_index].path, '/') + 1;
		if (strcmp(have, want)) {
			ret = st_fail(ck, -EINVAL, "%s: tensor \"%s\" is in %s, the weight_map says %s",
				      path, wm->keys[i], have, want);
			goto out;
		}
	}
	if (wm->n != ck->n) {
		ret = st_fail(ck, -EINVAL, "%s: the shards hold %zu tensors, the weight_map names %zu",
			      path, ck->n, wm->n);
		goto out;
	}
	if (meta && meta->type == PIN_J_OBJ)
		for (i = 0; i < meta->n; i++) {
			const struct pin__jval *v = meta->items[i];

			if (v->type != PIN_J_STR && v->type != PIN_J_NUM)
				continue;
			ret = add_meta(ck, meta->keys[i], v->s);
			if (ret) {
				st_fail(ck, ret, "%s: out of memory", path);
				goto out;
			}
		}
	ret = 0;
out:
	free(names);
	free(dir);
	free(text);
	pin__json_free(&a);
	return ret;
}

int pin_st_load(struct pin_st *ck, struct pin_dev *dev, const char *path,
		const struct pin_io_opts *opts)
{
	struct st_progress prog = { .user = opts };
	struct pin_io_opts o;
	struct stat sb;
	int ret;

	if (ck->n || ck->nfiles)
		return st_fail(ck, -EBUSY, "checkpoint is not empty");
	ck->err[0] = 0;		/* no earlier failure's text after a success */
	memset(&ck->stats, 0, sizeof(ck->stats));
	memset(&ck->phases, 0, sizeof(ck->phases));
	ck->nsteps = 0;
	ret = pin__io_opts(opts, &o, &ck->stats);
	if (ret)
		return st_fail(ck, ret, "%s", ck->stats.error);
	if (ends_with(path, ".index.json")) {
		ret = load_index(ck, dev, path, &o, &prog);
	} else {
		if (stat(path, &sb) == 0)
			prog.total = (uint64_t)sb.st_size + PIN_IO_ALIGN;
		ret = add_file(ck, path);
		if (!ret)
			ret = load_file(ck, dev, 0, &o, &prog);
		if (!ret)
			ret = build_index(ck);
		else if (ret == -ENOMEM && !ck->err[0])
			st_fail(ck, ret, "out of memory");
	}
	if (ret)
		st_clear(ck);
	else if (o.progress)
		o.progress(o.progress_arg, prog.base, prog.base);
	return ret;
}

/* Why r cannot take a load at region_off, or 0. */
static int check_fill_target(struct pin_st *ck, struct pin_region *r,
			     uint64_t region_off, uint64_t span,
			     const char *path)
{
	struct pin_region_info ri;
	int ret = pin_region_info(r, &ri);

	if (ret)
		return st_fail(ck, ret, "%s: region info: %s", path,
			       pin_region_error(r));
	if (ri.state == PIN_STATE_SEALED)
		return st_fail(ck, -EPERM, "%s: region %llu is sealed: its owner writes only while it is open or donated (reopen it first)",
			       path, (unsigned long long)ri.id);
	if (region_off > ri.size || span > ri.size - region_off)
		return st_fail(ck, -ENOSPC, "%s: %llu bytes (the data section's aligned superset) do not fit in region %llu (%llu bytes) at offset %llu",
			       path, (unsigned long long)span,
			       (unsigned long long)ri.id,
			       (unsigned long long)ri.size,
			       (unsigned long long)region_off);
	return 0;
}

/* Read file 0's data section into r at region_off (see pin.h). */
static int fill_region(struct pin_st *ck, struct pin_region *r,
		       uint64_t region_off, const struct pin_io_opts *o)
{
	struct st_file *sf = &ck->files[0];
	struct pin_io_stats st;
	uint64_t t0 = pin__now_ns(), head, span;
	struct pin__file f;
	size_t i;
	char *map;
	int ret;

	memset(&st, 0, sizeof(st));
	ret = pin__io_open_read(&f, sf->path, o, &st);
	if (ret)
		return st_fail(ck, ret, "%s", st.error);
	ret = read_header(ck, &f, 0);
	if (ret)
		goto out;
	head = sf->data_start & (PIN_IO_ALIGN - 1);
	span = pin_io_span(sf->data_start, sf->data_len);
	ret = check_fill_target(ck, r, region_off, span, sf->path);
	if (ret)
		goto out;
	ret = pin_region_map(r, (void **)&map);
	if (ret) {
		st_fail(ck, ret, "%s: mapping the region: %s", sf->path,
			pin_region_error(r));
		goto out;
	}
	ret = pin__io_read_fd(&f, map + region_off,
			      sf->data_start - head, span,
			      sf->data_start + sf->data_len, o, &st);
	st.direct = f.direct;
	if (ret) {
		st_fail(ck, ret, "%s", st.error);
		goto out;
	}
	for (i = 0; i < ck->n; i++) {
		ck->t[i].pub.region = r;
		ck->t[i].pub.region_offset = region_off + head + ck->t[i].begin;
		ck->t[i].pub.data = map + ck->t[i].pub.region_offset;
	}
	st.ns = pin__now_ns() - t0;
	stats_add(&ck->stats, &st, 1);
out:
	pin__io_close(&f);
	return ret;
}

int pin_st_load_into(struct pin_st *ck, struct pin_region *r,
		     uint64_t region_off, const char *path,
		     const struct pin_io_opts *opts)
{
	struct pin_io_opts o;
	int ret;

	if (ck->n || ck->nfiles)
		return st_fail(ck, -EBUSY, "checkpoint is not empty");
	ck->err[0] = 0;
	memset(&ck->stats, 0, sizeof(ck->stats));
	if (!r || region_off % PIN_IO_ALIGN)
		return st_fail(ck, -EINVAL, "%s: region offset %llu is not a multiple of %u",
			       path, (unsigned long long)region_off,
			       PIN_IO_ALIGN);
	if (ends_with(path, ".index.json"))
		return st_fail(ck, -EINVAL, "%s: a sharded checkpoint: load each shard at an offset of its own",
			       path);
	ret = pin__io_opts(opts, &o, &ck->stats);
	if (ret)
		return st_fail(ck, ret, "%s", ck->stats.error);
	ret = add_file(ck, path);
	if (!ret)
		ret = fill_region(ck, r, region_off, &o);
	if (!ret)
		ret = build_index(ck);
	if (ret == -ENOMEM && !ck->err[0])
		st_fail(ck, ret, "out of memory");
	if (ret)
		st_clear(ck);
	return ret;
}

struct pin_region *pin_st_take_region(struct pin_st *ck, size_t i)
{
	struct pin_region *r;

	if (i >= ck->nfiles)
		return NULL;
	r = ck->files[i].region;
	ck->files[i].region = NULL;
	return r;
}

size_t pin_st_count(const struct pin_st *ck)
{
	return ck->n;
}

int pin_st_tensor(const struct pin_st *ck, size_t i, struct pin_st_tensor *out)
{
	if (i >= ck->n)
		return -ERANGE;
	*out = ck->t[i].pub;
	return 0;
}

int pin_st_find(const struct pin_st *ck, const char *name,
		struct pin_st_tensor *out)
{
	size_t lo = 0, hi = ck->n;

	if (!ck->by_name)
		return -ENOENT;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct st_tensor *t = &ck->t[ck->by_name[mid]];
		int c = strcmp(name, t->pub.name);

		if (!c) {
			*out = t->pub;
			return 0;
		}
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return -ENOENT;
}

size_t pin_st_metadata_count(const struct pin_st *ck)
{
	return ck->nmeta;
}

int pin_st_metadata(const struct pin_st *ck, size_t i, const char **key,
		    const char **value)
{
	if (i >= ck->nmeta)
		return -ERANGE;
	*key = ck->meta_k[i];
	*value = ck->meta_v[i];
	return 0;
}

size_t pin_st_file_count(const struct pin_st *ck)
{
	return ck->nfiles;
}

const char *pin_st_file_path(const struct pin_st *ck, size_t i)
{
	return i < ck->nfiles ? ck->files[i].path : NULL;
}

struct pin_region *pin_st_region(const struct pin_st *ck, size_t i)
{
	return i < ck->nfiles ? ck->files[i].region : NULL;
}

int pin_st_stats(const struct pin_st *ck, struct pin_io_stats *stats)
{
	*stats = ck->stats;
	return 0;
}

int pin_st_phases(const struct pin_st *ck, struct pin_st_phases *phases)
{
	*phases = ck->phases;
	return 0;
}

/* ---- writing ------------------------------------------------------------ */

struct strbuf {
	char *s;
	size_t len, cap;
	int oom;
};

static void sb_put(struct strbuf *b, const char *s, size_t n)
{
	if (b->oom)
		return;
	if (b->len + n + 1 > b->cap) {
		size_t nc = (b->cap ? b->cap * 2 : 4096);
		char *ns;

		while (nc < b->len + n + 1)
			nc *= 2;
		ns = realloc(b->s, nc);
		if (!ns) {
			b->oom = 1;
			return;
		}
		b->s = ns;
		b->cap = nc;
	}
	memcpy(b->s + b->len, s, n);
	b->len += n;
	b->s[b->len] = 0;
}

static void sb_printf(struct strbuf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void sb_printf(struct strbuf *b, const char *fmt, ...)
{
	char tmp[64];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	if (n > 0)
		sb_put(b, tmp, (size_t)n < sizeof(tmp) ? (size_t)n : sizeof(tmp) - 1);
}

/* A JSON string: quotes, backslashes and control characters escaped. */
static void sb_jstr(struct strbuf *b, const char *s)
{
	sb_put(b, "\"", 1);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\') {
			sb_put(b, "\\", 1);
			sb_put(b, s, 1);
		} else if (c < 0x20) {
			sb_printf(b, "\\u%04x", c);
		} else {
			sb_put(b, s, 1);
		}
	}
	sb_put(b, "\"", 1);
}

static int check_name(struct pin_st *ck, const char *path, const char *what,
		      const char *s)
{
	if (!s)
		return st_fail(ck, -EINVAL, "%s: %s is NULL", path, what);
	if (!pin__utf8_valid(s, strlen(s)))
		return st_fail(ck, -EINVAL, "%s: %s \"%s\" is not valid UTF-8",
			       path, what, s);
	return 0;
}

static int cmp_cstr_idx(const void *a, const void *b, void *arg)
{
	const char *const *names = arg;

	return strcmp(names[*(const size_t *)a], names[*(const size_t *)b]);
}

/* Some name appears twice in names[0..n)? Returns it, or NULL. */
static const char *duplicate(const char *const *names, size_t n, int *oom)
{
	size_t *idx = malloc((n + 1) * sizeof(size_t)), i;
	const char *dup = NULL;

	*oom = !idx;
	if (!idx)
		return NULL;
	for (i = 0; i < n; i++)
		idx[i] = i;
	if (n)
		qsort_r(idx, n, sizeof(size_t), cmp_cstr_idx, (void *)names);
	for (i = 1; i < n && !dup; i++)
		if (!strcmp(names[idx[i - 1]], names[idx[i]]))
			dup = names[idx[i]];
	free(idx);
	return dup;
}

/* Validate the tensors and build the padded header block. */
static int build_header(struct pin_st *ck, const char *path,
			const struct pin_st_tensor *t, size_t n,
			const char *const *mk, const char *const *mv,
			size_t nmeta, struct strbuf *b, struct pin__seg *segs)
{
	const char **names = NULL;
	const char *dup;
	uint64_t at = 0, nbytes, hlen;
	size_t i;
	unsigned d;
	int oom, ret;
	char num[8];

	names = malloc((n + nmeta + 1) * sizeof(char *));
	if (!names)
		return st_fail(ck, -ENOMEM, "%s: out of memory", path);
	ret = -EINVAL;
	for (i = 0; i < nmeta; i++)
		if (check_name(ck, path, "metadata key", mk[i]) ||
		    check_name(ck, path, "metadata value", mv[i]))
			goto out;
	for (i = 0; i < nmeta; i++)
		names[i] = mk[i];
	dup = duplicate(names, nmeta, &oom);
	if (dup) {
		st_fail(ck, ret, "%s: metadata key \"%s\" given twice", path, dup);
		goto out;
	}
	for (i = 0; i < n; i++) {
		if (check_name(ck, path, "tensor name", t[i].name))
			goto out;
		if (!strcmp(t[i].name, "__metadata__")) {
			st_fail(ck, ret, "%s: a tensor may not be named __metadata__",
				path);
			goto out;
		}
		if (!pin_dtype_name(t[i].dtype)) {
			st_fail(ck, ret, "%s: tensor \"%s\": unknown dtype %d",
				path, t[i].name, t[i].dtype);
			goto out;
		}
		if ((t[i].ndim && !t[i].shape) ||
		    tensor_bytes(t[i].dtype, t[i].shape, t[i].ndim, &nbytes) ||
		    nbytes != t[i].nbytes) {
			st_fail(ck, ret, "%s: tensor \"%s\": nbytes %llu does not match its shape and dtype %s",
				path, t[i].name,
				(unsigned long long)t[i].nbytes,
				pin_dtype_name(t[i].dtype));
			goto out;
		}
		names[i] = t[i].name;
		segs[i + 1].len = nbytes;
		if (t[i].data || !nbytes) {
			segs[i + 1].p = t[i].data;
		} else if (t[i].region) {
			void *map;

			if (t[i].region_offset > pin_region_size(t[i].region) ||
			    nbytes > pin_region_size(t[i].region) -
				     t[i].region_offset) {
				st_fail(ck, ret, "%s: tensor \"%s\": region range %llu+%llu past its end",
					path, t[i].name,
					(unsigned long long)t[i].region_offset,
					(unsigned long long)nbytes);
				goto out;
			}
			ret = pin_region_map(t[i].region, &map);
			if (ret) {
				st_fail(ck, ret, "%s: tensor \"%s\": %s", path,
					t[i].name,
					pin_region_error(t[i].region));
				goto out;
			}
			ret = -EINVAL;
			segs[i + 1].p = (char *)map + t[i].region_offset;
		} else {
			st_fail(ck, ret, "%s: tensor \"%s\": neither data nor region",
				path, t[i].name);
			goto out;
		}
	}
	dup = duplicate(names, n, &oom);
	if (dup || oom) {
		st_fail(ck, oom ? -ENOMEM : ret, "%s: %s%s%s", path,
			oom ? "out of memory" : "tensor \"",
			oom ? "" : dup, oom ? "" : "\" given twice");
		ret = oom ? -ENOMEM : ret;
		goto out;
	}
	sb_put(b, "\0\0\0\0\0\0\0\0{", 9);
	if (nmeta) {
		sb_put(b, "\"__metadata__\":{", 16);
		for (i = 0; i < nmeta; i++) {
			if (i)
				sb_put(b, ",", 1);
			sb_jstr(b, mk[i]);
			sb_put(b, ":", 1);
			sb_jstr(b, mv[i]);
		}
		sb_put(b, "}", 1);
	}
	for (i = 0; i < n; i++) {
		if (i || nmeta)
			sb_put(b, ",", 1);
		sb_jstr(b, t[i].name);
		sb_printf(b, ":{\"dtype\":\"%s\",\"shape\":[",
			  pin_dtype_name(t[i].dtype));
		for (d = 0; d < t[i].ndim; d++)
			sb_printf(b, "%s%llu", d ? "," : "",
				  (unsigned long long)t[i].shape[d]);
		sb_printf(b, "],\"data_offsets\":[%llu,",
			  (unsigned long long)at);
		at += t[i].nbytes;
		sb_printf(b, "%llu]}", (unsigned long long)at);
	}
	sb_put(b, "}", 1);
	while (b->len % PIN_IO_ALIGN && !b->oom)
		sb_put(b, " ", 1);
	if (b->oom) {
		ret = st_fail(ck, -ENOMEM, "%s: out of memory", path);
		goto out;
	}
	hlen = b->len - 8;
	for (d = 0; d < 8; d++)
		num[d] = (char)(hlen >> (8 * d));
	memcpy(b->s, num, 8);
	segs[0].p = b->s;
	segs[0].len = b->len;
	ret = 0;
out:
	free(names);
	return ret;
}

static int fsync_dir(const char *path)
{
	char *copy = strdup(path);
	int fd, ret = 0;

	if (!copy)
		return -ENOMEM;
	fd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	free(copy);
	if (fd < 0)
		return -errno;
	if (fsync(fd) < 0)
		ret = -errno;
	close(fd);
	return ret;
}

int pin_st_save(struct pin_st *ck, const char *path,
		const struct pin_st_tensor *tensors, size_t n,
		const char *const *meta_keys, const char *const *meta_values,
		size_t nmeta, const struct pin_io_opts *opts)
{
	struct strbuf b = { 0 };
	struct pin__seg *segs;
	struct pin_io_stats *st = &ck->stats;
	struct pin_io_opts o;
	struct pin__file f = { .fd = -1 };
	uint64_t t0 = pin__now_ns();
	char tmp[4096], *copy, *base;
	struct timespec ts;
	int ret;

	memset(st, 0, sizeof(*st));
	memset(&ck->phases, 0, sizeof(ck->phases));
	ck->nsteps = 0;
	ck->err[0] = 0;
	ret = pin__io_opts(opts, &o, st);
	if (ret)
		return st_fail(ck, ret, "%s", st->error);
	if (!path || (n && !tensors) || (nmeta && (!meta_keys || !meta_values)))
		return st_fail(ck, -EINVAL, "pin_st_save: NULL argument");
	segs = calloc(n + 1, sizeof(*segs));
	if (!segs)
		return st_fail(ck, -ENOMEM, "%s: out of memory", path);
	ret = build_header(ck, path, tensors, n, meta_keys, meta_values, nmeta,
			   &b, segs);
	if (ret)
		goto out;
	copy = strdup(path);
	if (!copy) {
		ret = st_fail(ck, -ENOMEM, "%s: out of memory", path);
		goto out;
	}
	clock_gettime(CLOCK_REALTIME, &ts);
	base = basename(copy);
	ret = snprintf(tmp, sizeof(tmp), "%.*s.%s.tmp-%d-%ld",
		       (int)(base - copy), path, base, (int)getpid(),
		       (long)ts.tv_nsec);
	free(copy);
	if (ret < 0 || (size_t)ret >= sizeof(tmp)) {
		ret = st_fail(ck, -ENAMETOOLONG, "%s: path too long", path);
		goto out;
	}
	st->direct = 1;
	ret = pin__io_open_write_new(&f, tmp, &o, st);
	if (ret) {
		st_fail(ck, ret, "%s", st->error);
		goto out;
	}
	ret = pin__io_write_fd(&f, segs, n + 1, 0, &o, st);
	st->direct = f.direct;
	pin__io_close(&f);
	if (ret) {
		st_fail(ck, ret, "%s", st->error);
		unlink(tmp);
		goto out;
	}
	if (rename(tmp, path) < 0) {
		ret = st_fail(ck, -errno, "%s: rename from %s: %s", path, tmp,
			      strerror(errno));
		unlink(tmp);
		goto out;
	}
	ret = fsync_dir(path);
	if (ret)
		st_fail(ck, ret, "%s: fsync of its directory: %s", path,
			strerror(-ret));
	st->ns = pin__now_ns() - t0;
out:
	free(b.s);
	free(segs);
	return ret;
}
