/* SPDX-License-Identifier: MIT */
/*
 * The checkpoint object (struct pin_st) and the helpers that the parts of
 * libpin's safetensors support (safetensors*.c) share. Not installed.
 */
#ifndef LIBPIN_SAFETENSORS_CK_H
#define LIBPIN_SAFETENSORS_CK_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "pin.h"
#include "internal.h"
#include "io/io_internal.h"

struct st_tensor {
	struct pin_st_tensor pub;	/* name, shape point into owned memory */
	uint64_t begin, end;		/* data_offsets */
	uint64_t place;			/* where a load puts it (from the
					 * data start): begin, or aligned */
	size_t seq;			/* its place in the header */
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

struct pin_st {
	struct st_tensor *t;
	size_t n, cap;
	size_t *by_name;		/* indexes of t sorted by name */
	char **meta_k, **meta_v;
	size_t nmeta;
	struct st_file *files;
	size_t nfiles;
	struct pin__io_stats stats;
	struct pin_st_phases phases;	/* of the last load */
	struct pin_st_step *steps;	/* of the last load */
	size_t nsteps;
	int node;			/* of the load under way: its regions' */
	unsigned node_flags;		/* NUMA node (-1: any), PIN_REGION_ANY_NODE */
	unsigned load_flags;		/* of the load under way: PIN_ST_LOAD_* */
	char err[PIN_ERR_LEN];
};

/* Format the error text of ck; returns err. */
int pin__st_fail(struct pin_st *ck, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Free what ck holds (tensors, metadata, files, regions); ck stays. */
void pin__st_clear(struct pin_st *ck);
int pin__st_add_meta(struct pin_st *ck, const char *k, const char *v);
int pin__st_add_file(struct pin_st *ck, const char *path);

/* Headers (safetensors_header.c). */
int pin__st_tensor_bytes(int dtype, const uint64_t *shape, unsigned ndim,
			 uint64_t *out);
int pin__st_read_header(struct pin_st *ck, struct pin__file *f, unsigned fi);
/* The image buf[len] of file fi parsed in place (pin_st_parse_buffer's
 * way, one file of several). */
int pin__st_parse_image(struct pin_st *ck, unsigned fi, const void *buf,
			uint64_t len);
int pin__st_build_index(struct pin_st *ck);

/* Placing the tensors of a load (safetensors_align.c). */
uint64_t pin__st_plan(struct pin_st *ck, size_t first, uint64_t base,
		      uint64_t data_len);
int pin__st_place(struct pin_st *ck, struct pin_region *r, size_t first,
		  uint64_t base, char *map);
/* pin__st_parse_image of an image whose tensors were placed on 64 bytes. */
int pin__st_parse_placed(struct pin_st *ck, unsigned fi, const void *buf,
			 uint64_t len, uint64_t cap);

/* Loads (safetensors_load.c, safetensors_index.c; safetensors_open.c
 * picks one). */
/* A load's options checked: node -1 or a node, flags PIN_REGION_ANY_NODE. */
int pin__st_load_opts(struct pin_st *ck, const struct pin_st_load_opts *opts,
		      struct pin_st_load_opts *lo, int *node, unsigned *flags);
int pin__st_load_file(struct pin_st *ck, struct pin_dev *dev, unsigned fi,
		      const struct pin_io_opts *o, struct st_progress *prog);
int pin__st_load_index(struct pin_st *ck, struct pin_dev *dev,
		       const char *path, const struct pin_io_opts *o,
		       struct st_progress *prog);
/* The index at path: its shards (ck->files) each given to take_shard,
 * then the weight map checked and the index's metadata added. */
int pin__st_index(struct pin_st *ck, const char *path,
		  int (*take_shard)(struct pin_st *ck, unsigned fi, void *arg),
		  void *arg);

/* Whether path names a sharded checkpoint's index, not one file. */
static inline int pin__st_is_index(const char *path)
{
	size_t a = strlen(path), b = strlen(".index.json");

	return a >= b && !strcmp(path + a - b, ".index.json");
}

#endif /* LIBPIN_SAFETENSORS_CK_H */
