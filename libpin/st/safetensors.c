// SPDX-License-Identifier: MIT
/*
 * safetensors: a strict header reader, loading files or sharded checkpoints
 * into pinned regions through the I/O engine, and an atomic O_DIRECT writer
 * whose data section starts on a 4096-byte boundary.
 *
 * This file: the checkpoint object (struct pin_st): the dtypes, its life,
 * its error text, and what callers ask of a parsed or loaded one. The
 * parts: safetensors_header.c reads and checks headers, safetensors_load.c
 * loads files into regions, safetensors_index.c sharded checkpoints,
 * safetensors_save.c writes, safetensors_json.c is the JSON reader.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "safetensors_ck.h"

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
	[PIN_DT_F8_E4M3FNUZ] = { "F8_E4M3FNUZ", 8 },
	[PIN_DT_F8_E5M2FNUZ] = { "F8_E5M2FNUZ", 8 },
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

struct pin_st *pin_st_create(void)
{
	struct pin_st *ck = calloc(1, sizeof(struct pin_st));

	if (ck)
		ck->node = -1;
	return ck;
}

void pin__st_clear(struct pin_st *ck)
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
			pin_region_close(ck->files[i].region);
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

void pin_st_close(struct pin_st *ck)
{
	if (!ck)
		return;
	pin__st_clear(ck);
	free(ck->steps);
	free(ck);
}

const char *pin_st_error(const struct pin_st *ck)
{
	return ck->err;
}


int pin__st_fail(struct pin_st *ck, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(ck->err, sizeof(ck->err), fmt, ap);
	va_end(ap);
	return err;
}

int pin__st_add_meta(struct pin_st *ck, const char *k, const char *v)
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

int pin__st_add_file(struct pin_st *ck, const char *path)
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

int pin_st_timeline(const struct pin_st *ck, struct pin_st_step *steps,
		    size_t cap)
{
	size_t i, stride;

	if (!ck || pin__array_stride(steps, cap, PIN__ST_STEP_SIZE, &stride))
		return -EINVAL;
	if (cap > ck->nsteps)
		cap = ck->nsteps;
	for (i = 0; i < cap; i++)
		pin__array_put(steps, stride, i, &ck->steps[i],
			       sizeof(ck->steps[i]));
	return (int)ck->nsteps;
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
	if (pin__out_check(out, PIN__ST_TENSOR_SIZE))
		return -EINVAL;
	if (i >= ck->n)
		return -ERANGE;
	pin__out_put(out, &ck->t[i].pub, sizeof(ck->t[i].pub));
	return 0;
}

int pin_st_find(const struct pin_st *ck, const char *name,
		struct pin_st_tensor *out)
{
	size_t lo = 0, hi = ck->n;

	if (pin__out_check(out, PIN__ST_TENSOR_SIZE))
		return -EINVAL;
	if (!ck->by_name)
		return -ENOENT;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct st_tensor *t = &ck->t[ck->by_name[mid]];
		int c = strcmp(name, t->pub.name);

		if (!c) {
			pin__out_put(out, &t->pub, sizeof(t->pub));
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
	if (!ck || pin__out_check(stats, PIN__IO_STATS_SIZE))
		return -EINVAL;
	pin__io_stats_put(stats, &ck->stats);
	return 0;
}

int pin_st_phases(const struct pin_st *ck, struct pin_st_phases *phases)
{
	if (!ck || pin__out_check(phases, PIN__ST_PHASES_SIZE))
		return -EINVAL;
	pin__out_put(phases, &ck->phases, sizeof(ck->phases));
	return 0;
}
