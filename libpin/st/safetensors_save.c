// SPDX-License-Identifier: MIT
/*
 * Writing a safetensors file: the tensors and metadata checked, a header
 * padded so that the data section starts on a PIN_IO_ALIGN boundary, the
 * data written through the I/O engine (O_DIRECT where it can) to a
 * temporary file that is renamed into place and its directory synced.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "io/io_internal.h"
#include "safetensors_internal.h"
#include "safetensors_ck.h"

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
		return pin__st_fail(ck, -EINVAL, "%s: %s is NULL", path, what);
	if (!pin__utf8_valid(s, strlen(s)))
		return pin__st_fail(ck, -EINVAL, "%s: %s \"%s\" is not valid UTF-8",
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

/* Metadata keys and values are valid names; no key given twice. */
static int check_meta(struct pin_st *ck, const char *path,
		      const char *const *mk, const char *const *mv,
		      size_t nmeta, const char **names)
{
	const char *dup;
	size_t i;
	int oom;

	for (i = 0; i < nmeta; i++)
		if (check_name(ck, path, "metadata key", mk[i]) ||
		    check_name(ck, path, "metadata value", mv[i]))
			return -EINVAL;
	for (i = 0; i < nmeta; i++)
		names[i] = mk[i];
	dup = duplicate(names, nmeta, &oom);
	if (dup)
		return pin__st_fail(ck, -EINVAL, "%s: metadata key \"%s\" given twice",
				    path, dup);
	return 0;
}

/* t's name, dtype and nbytes (which must match its shape) are valid. */
static int check_tensor(struct pin_st *ck, const char *path,
			const struct pin_st_tensor *t)
{
	uint64_t nbytes;

	if (check_name(ck, path, "tensor name", t->name))
		return -EINVAL;
	if (!strcmp(t->name, "__metadata__"))
		return pin__st_fail(ck, -EINVAL, "%s: a tensor may not be named __metadata__",
				    path);
	if (!pin_dtype_name(t->dtype))
		return pin__st_fail(ck, -EINVAL, "%s: tensor \"%s\": unknown dtype %d",
				    path, t->name, t->dtype);
	if ((t->ndim && !t->shape) ||
	    pin__st_tensor_bytes(t->dtype, t->shape, t->ndim, &nbytes) ||
	    nbytes != t->nbytes)
		return pin__st_fail(ck, -EINVAL, "%s: tensor \"%s\": nbytes %llu does not match its shape and dtype %s",
				    path, t->name, (unsigned long long)t->nbytes,
				    pin_dtype_name(t->dtype));
	return 0;
}

/* Where t's bytes are written from: its data, or its range of a region. */
static int tensor_source(struct pin_st *ck, const char *path,
			 const struct pin_st_tensor *t, struct pin__seg *seg)
{
	uint64_t size;
	void *map;
	int ret;

	seg->len = t->nbytes;
	if (t->data || !t->nbytes) {
		seg->p = t->data;
		return 0;
	}
	if (!t->region)
		return pin__st_fail(ck, -EINVAL, "%s: tensor \"%s\": neither data nor region",
				    path, t->name);
	size = pin_region_size(t->region);
	if (t->region_offset > size || t->nbytes > size - t->region_offset)
		return pin__st_fail(ck, -EINVAL, "%s: tensor \"%s\": region range %llu+%llu past its end",
				    path, t->name,
				    (unsigned long long)t->region_offset,
				    (unsigned long long)t->nbytes);
	ret = pin_region_map(t->region, &map);
	if (ret)
		return pin__st_fail(ck, ret, "%s: tensor \"%s\": %s", path,
				    t->name, pin_region_error(t->region));
	seg->p = (char *)map + t->region_offset;
	return 0;
}

/* The header's JSON, padded to PIN_IO_ALIGN, after 8 bytes of its length. */
static void put_header(struct strbuf *b, const struct pin_st_tensor *t,
		       size_t n, const char *const *mk,
		       const char *const *mv, size_t nmeta)
{
	uint64_t at = 0, hlen;
	unsigned d;
	size_t i;

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
	if (b->oom)
		return;
	hlen = b->len - 8;
	for (d = 0; d < 8; d++)
		b->s[d] = (char)(hlen >> (8 * d));
}

/* Validate the tensors and build the padded header block. */
static int build_header(struct pin_st *ck, const char *path,
			const struct pin_st_tensor *t, size_t n,
			const char *const *mk, const char *const *mv,
			size_t nmeta, struct strbuf *b, struct pin__seg *segs)
{
	const char **names = NULL;
	const char *dup;
	size_t i;
	int oom, ret;

	names = malloc((n + nmeta + 1) * sizeof(char *));
	if (!names)
		return pin__st_fail(ck, -ENOMEM, "%s: out of memory", path);
	ret = check_meta(ck, path, mk, mv, nmeta, names);
	for (i = 0; i < n && !ret; i++) {
		ret = check_tensor(ck, path, &t[i]);
		if (!ret)
			ret = tensor_source(ck, path, &t[i], &segs[i + 1]);
		names[i] = t[i].name;
	}
	if (ret)
		goto out;
	dup = duplicate(names, n, &oom);
	if (dup || oom) {
		ret = oom ? -ENOMEM : -EINVAL;
		pin__st_fail(ck, ret, "%s: %s%s%s", path,
			     oom ? "out of memory" : "tensor \"",
			     oom ? "" : dup, oom ? "" : "\" given twice");
		goto out;
	}
	put_header(b, t, n, mk, mv, nmeta);
	if (b->oom) {
		ret = pin__st_fail(ck, -ENOMEM, "%s: out of memory", path);
		goto out;
	}
	segs[0].p = b->s;
	segs[0].len = b->len;
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

static int save(struct pin_st *ck, const char *path,
		const struct pin_st_tensor *tensors, size_t n,
		const char *const *meta_keys, const char *const *meta_values,
		size_t nmeta, const struct pin_io_opts *opts)
{
	struct strbuf b = { 0 };
	struct pin__seg *segs;
	struct pin__io_stats *st = &ck->stats;
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
		return pin__st_fail(ck, ret, "%s", st->error);
	o.flags &= ~PIN_IO_NO_SYNC;	/* the rename commits synced data only */
	if (!path || (n && !tensors) || (nmeta && (!meta_keys || !meta_values)))
		return pin__st_fail(ck, -EINVAL, "pin_st_save: NULL argument");
	segs = calloc(n + 1, sizeof(*segs));
	if (!segs)
		return pin__st_fail(ck, -ENOMEM, "%s: out of memory", path);
	ret = build_header(ck, path, tensors, n, meta_keys, meta_values, nmeta,
			   &b, segs);
	if (ret)
		goto out;
	copy = strdup(path);
	if (!copy) {
		ret = pin__st_fail(ck, -ENOMEM, "%s: out of memory", path);
		goto out;
	}
	clock_gettime(CLOCK_REALTIME, &ts);
	base = basename(copy);
	ret = snprintf(tmp, sizeof(tmp), "%.*s.%s.tmp-%d-%ld",
		       (int)(base - copy), path, base, (int)getpid(),
		       (long)ts.tv_nsec);
	free(copy);
	if (ret < 0 || (size_t)ret >= sizeof(tmp)) {
		ret = pin__st_fail(ck, -ENAMETOOLONG, "%s: path too long", path);
		goto out;
	}
	st->direct = 1;
	ret = pin__io_open_write_new(&f, tmp, &o, st);
	if (ret) {
		pin__st_fail(ck, ret, "%s", st->error);
		goto out;
	}
	ret = pin__io_write_fd(&f, segs, n + 1, 0, &o, st);
	st->direct = f.direct;
	pin__io_close(&f);
	if (ret) {
		pin__st_fail(ck, ret, "%s", st->error);
		unlink(tmp);
		goto out;
	}
	if (rename(tmp, path) < 0) {
		ret = pin__st_fail(ck, -errno, "%s: rename from %s: %s", path, tmp,
				   strerror(errno));
		unlink(tmp);
		goto out;
	}
	ret = fsync_dir(path);
	if (ret)
		pin__st_fail(ck, ret, "%s: fsync of its directory: %s", path,
			     strerror(-ret));
	st->ns = pin__now_ns() - t0;
out:
	free(b.s);
	free(segs);
	return ret;
}

int pin_st_save(struct pin_st *ck, const char *path,
		const struct pin_st_tensor *tensors, size_t n,
		const char *const *meta_keys, const char *const *meta_values,
		size_t nmeta, const struct pin_io_opts *opts)
{
	struct pin_st_tensor *copy = NULL;
	int ret;

	/* The caller's tensors may be of another libpin's size. */
	if (tensors) {
		ret = pin__array_in(tensors, n, sizeof(*copy),
				    PIN__ST_TENSOR_SIZE, (void **)&copy);
		if (ret)
			return pin__st_fail(ck, ret, "%s: tensors: %s",
					    path ? path : "pin_st_save",
					    ret == -ENOMEM ? "out of memory" :
					    ret == -E2BIG ? "fields this libpin does not know are set" :
					    "element 0's size is below libpin 1.0's (PIN_INIT sets it)");
	}
	ret = save(ck, path, copy, n, meta_keys, meta_values, nmeta, opts);
	free(copy);
	return ret;
}
