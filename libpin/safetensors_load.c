// SPDX-License-Identifier: MIT
/*
 * Loading a safetensors file: each file into a region of its own, pinned
 * step by step while it is read (fill.c) and sealed, or file 0 into a
 * region the caller holds; the stats, phases and step timeline of the
 * load kept for the caller.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "internal.h"
#include "io_internal.h"
#include "fill.h"
#include "safetensors_ck.h"

static void st_progress_cb(void *arg, uint64_t done, uint64_t total)
{
	struct st_progress *p = arg;

	(void)total;
	if (p->base + done <= p->total)
		p->user->progress(p->user->progress_arg, p->base + done,
				  p->total);
}

static void stats_add(struct pin__io_stats *sum, const struct pin__io_stats *s,
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
			s->flags = rep->kernel_fill ? PIN_ST_STEP_KERNEL_FILL : 0;
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

/* Load file index fi: header, region, data section, seal. */
int pin__st_load_file(struct pin_st *ck, struct pin_dev *dev, unsigned fi,
		      const struct pin_io_opts *o, struct st_progress *prog)
{
	struct pin_io_opts po = *o;
	struct st_file *sf = &ck->files[fi];
	struct pin__io_stats st;
	struct pin_region *r = NULL;
	uint64_t t0 = pin__now_ns(), tp, head, span, astart;
	size_t first = ck->n, i;
	struct pin__fill_report rep;
	struct pin__file f;
	void *map;
	int ret, lazy;

	memset(&st, 0, sizeof(st));
	st.direct = 1;
	st.queue_depth = o->queue_depth;
	st.request_size = o->request_size;
	ret = pin__io_open_read(&f, sf->path, o, &st);
	if (ret)
		return pin__st_fail(ck, ret, "%s", st.error);
	ret = pin__st_read_header(ck, &f, fi);
	if (ret)
		goto out;
	astart = sf->data_start & ~(uint64_t)(PIN_IO_ALIGN - 1);
	head = sf->data_start - astart;
	span = pin_file_span(sf->data_start, sf->data_len);
	tp = pin__now_ns();
	/* fallocate of a memfd may be interrupted (EINTR): try again. */
	for (i = 0; i < 5; i++) {
		ret = pin__alloc_to_fill(dev, span ? span : PIN_IO_ALIGN,
					 ck->node_flags, ck->node, &r);
		if (ret != -EINTR)
			break;
	}
	if (ret == -ENOMEM) {
		ret = pin__alloc_to_fill(dev, span ? span : PIN_IO_ALIGN,
					 ck->node_flags | PIN_REGION_FALLBACK,
					 ck->node, &r);
		if (!ret)
			pin__io_note_fallback(&st, "region below 2 MiB chunks");
	}
	if (ret) {
		pin__st_fail(ck, ret, "%s: allocating a %llu-byte region: %s",
			     sf->path, (unsigned long long)span, pin_dev_error(dev));
		goto out;
	}
	ck->phases.alloc_ns += pin__now_ns() - tp;
	if (o->progress) {
		po.progress = st_progress_cb;
		po.progress_arg = prog;
	}
	lazy = r->lazy;
	ret = pin__fill_from_file(r, &f, astart, span,
				  sf->data_start + sf->data_len, &po, &st,
				  &rep);
	if (ret == -ENOMEM && lazy) {
		/*
		 * A lazy device region needs free 2 MiB pages as the reads go;
		 * where they ran out, once more into a region allocated whole,
		 * which may fall back to smaller chunks.
		 */
		free(rep.times);
		memset(&rep, 0, sizeof(rep));
		pin_region_close(r);
		r = NULL;
		ret = pin__alloc_to_fill(dev, span ? span : PIN_IO_ALIGN,
					 ck->node_flags | PIN_REGION_FALLBACK,
					 ck->node, &r);
		if (ret) {
			pin__st_fail(ck, ret, "%s: allocating a %llu-byte region: %s",
				     sf->path, (unsigned long long)span,
				     pin_dev_error(dev));
			goto out;
		}
		pin__io_note_fallback(&st, "no 2 MiB pages left while loading: region allocated whole");
		ret = pin__fill_from_file(r, &f, astart, span,
					  sf->data_start + sf->data_len, &po,
					  &st, &rep);
	}
	ck->phases.pin_ns += rep.pin_ns;
	keep_steps(ck, fi, &rep, span);
	prog->base += span;
	st.direct = f.direct;
	if (ret) {
		pin__st_fail(ck, ret, "%s", st.error[0] ? st.error :
			     pin_region_error(r));
		goto out;
	}
	ck->phases.transfer_ns += st.io_ns;
	tp = pin__now_ns();
	ret = pin_region_seal(r);
	if (ret) {
		pin__st_fail(ck, ret, "%s: sealing its region: %s", sf->path,
			     pin_region_error(r));
		goto out;
	}
	ret = pin_region_map(r, &map);	/* sealing may remap it */
	if (ret) {
		pin__st_fail(ck, ret, "%s: mapping its sealed region: %s", sf->path,
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
		pin_region_close(r);
	pin__io_close(&f);
	return ret;
}

static int ends_with(const char *s, const char *suffix)
{
	size_t a = strlen(s), b = strlen(suffix);

	return a >= b && !strcmp(s + a - b, suffix);
}

/*
 * The caller's load options into lo, and where its regions go: node -1
 * (the caller's mempolicy) or a node, flags PIN_REGION_ANY_NODE or 0.
 */
static int load_opts(struct pin_st *ck, const struct pin_st_load_opts *opts,
		     struct pin_st_load_opts *lo, int *node, unsigned *flags)
{
	struct pin_region_opts ro;
	int ret;

	ret = pin__opts_in(lo, sizeof(*lo), opts, PIN__ST_LOAD_OPTS_SIZE);
	if (!ret)
		ret = pin__opts_in(&ro, sizeof(ro), lo->region,
				   PIN__REGION_OPTS_SIZE);
	if (ret)
		return pin__st_fail(ck, ret, "load options: %s",
				    ret == -E2BIG ? "fields this libpin does not know are set" :
				    "size below libpin 1.0's (PIN_INIT sets it)");
	if (lo->flags || (ro.flags & ~(PIN_REGION_NODE | PIN_REGION_ANY_NODE)) ||
	    ro.flags == PIN_REGION_ANY_NODE ||
	    ((ro.flags & PIN_REGION_NODE) && ro.node < 0))
		return pin__st_fail(ck, -EINVAL,
				    "load: flags 0x%x, region flags 0x%x, node %d",
				    lo->flags, ro.flags, (int)ro.node);
	*node = (ro.flags & PIN_REGION_NODE) ? ro.node : -1;
	*flags = ro.flags & PIN_REGION_ANY_NODE;
	return 0;
}

int pin_st_load(struct pin_st *ck, struct pin_dev *dev, const char *path,
		const struct pin_st_load_opts *opts)
{
	struct st_progress prog = { 0 };
	struct pin_st_load_opts lo;
	struct pin_io_opts o;
	unsigned flags;
	struct stat sb;
	int ret, node;

	if (ck->n || ck->nfiles)
		return pin__st_fail(ck, -EBUSY, "checkpoint is not empty");
	ret = load_opts(ck, opts, &lo, &node, &flags);
	if (ret)
		return ret;
	ck->node = node;
	ck->node_flags = flags;
	ck->err[0] = 0;		/* no earlier failure's text after a success */
	memset(&ck->stats, 0, sizeof(ck->stats));
	memset(&ck->phases, 0, sizeof(ck->phases));
	ck->nsteps = 0;
	ret = pin__io_opts(lo.io, &o, &ck->stats);
	if (ret)
		return pin__st_fail(ck, ret, "%s", ck->stats.error);
	prog.user = &o;
	if (ends_with(path, ".index.json")) {
		ret = pin__st_load_index(ck, dev, path, &o, &prog);
	} else {
		if (stat(path, &sb) == 0)
			prog.total = (uint64_t)sb.st_size + PIN_IO_ALIGN;
		ret = pin__st_add_file(ck, path);
		if (!ret)
			ret = pin__st_load_file(ck, dev, 0, &o, &prog);
		if (!ret)
			ret = pin__st_build_index(ck);
		else if (ret == -ENOMEM && !ck->err[0])
			pin__st_fail(ck, ret, "out of memory");
	}
	if (ret)
		pin__st_clear(ck);
	else if (o.progress)
		o.progress(o.progress_arg, prog.base, prog.base);
	return ret;
}

/* Why r cannot take a load at region_off, or 0. */
static int check_fill_target(struct pin_st *ck, struct pin_region *r,
			     uint64_t region_off, uint64_t span,
			     const char *path)
{
	struct pin_region_info ri = PIN_INIT(struct pin_region_info);
	int ret = pin_region_info(r, &ri);

	if (ret)
		return pin__st_fail(ck, ret, "%s: region info: %s", path,
				    pin_region_error(r));
	if (ri.state == PIN_STATE_SEALED)
		return pin__st_fail(ck, -EPERM, "%s: region %llu is sealed: its owner writes only while it is open or donated (reopen it first)",
				    path, (unsigned long long)ri.id);
	if (region_off > ri.region_size || span > ri.region_size - region_off)
		return pin__st_fail(ck, -ENOSPC, "%s: %llu bytes (the data section's aligned superset) do not fit in region %llu (%llu bytes) at offset %llu",
				    path, (unsigned long long)span,
				    (unsigned long long)ri.id,
				    (unsigned long long)ri.region_size,
				    (unsigned long long)region_off);
	return 0;
}

/* Read file 0's data section into r at region_off (see pin_st.h). */
static int fill_region(struct pin_st *ck, struct pin_region *r,
		       uint64_t region_off, const struct pin_io_opts *o)
{
	struct st_file *sf = &ck->files[0];
	struct pin__io_stats st;
	uint64_t t0 = pin__now_ns(), head, span;
	struct pin__file f;
	size_t i;
	char *map;
	int ret;

	memset(&st, 0, sizeof(st));
	ret = pin__io_open_read(&f, sf->path, o, &st);
	if (ret)
		return pin__st_fail(ck, ret, "%s", st.error);
	ret = pin__st_read_header(ck, &f, 0);
	if (ret)
		goto out;
	head = sf->data_start & (PIN_IO_ALIGN - 1);
	span = pin_file_span(sf->data_start, sf->data_len);
	ret = check_fill_target(ck, r, region_off, span, sf->path);
	if (ret)
		goto out;
	ret = pin_region_map(r, (void **)&map);
	if (ret) {
		pin__st_fail(ck, ret, "%s: mapping the region: %s", sf->path,
			     pin_region_error(r));
		goto out;
	}
	ret = pin__io_read_fd(&f, map + region_off,
			      sf->data_start - head, span,
			      sf->data_start + sf->data_len, o, &st);
	st.direct = f.direct;
	if (ret) {
		pin__st_fail(ck, ret, "%s", st.error);
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
		     const struct pin_st_load_opts *opts)
{
	struct pin_st_load_opts lo;
	struct pin_io_opts o;
	unsigned flags;
	int ret, node;

	if (ck->n || ck->nfiles)
		return pin__st_fail(ck, -EBUSY, "checkpoint is not empty");
	ck->err[0] = 0;
	ret = load_opts(ck, opts, &lo, &node, &flags);
	if (ret)
		return ret;
	if (lo.region)
		return pin__st_fail(ck, -EINVAL,
				    "%s: load into a region the caller has: no region options",
				    path);
	memset(&ck->stats, 0, sizeof(ck->stats));
	if (!r || region_off % PIN_IO_ALIGN)
		return pin__st_fail(ck, -EINVAL, "%s: region offset %llu is not a multiple of %u",
				    path, (unsigned long long)region_off,
				    PIN_IO_ALIGN);
	if (ends_with(path, ".index.json"))
		return pin__st_fail(ck, -EINVAL, "%s: a sharded checkpoint: load each shard at an offset of its own",
				    path);
	ret = pin__io_opts(lo.io, &o, &ck->stats);
	if (ret)
		return pin__st_fail(ck, ret, "%s", ck->stats.error);
	ret = pin__st_add_file(ck, path);
	if (!ret)
		ret = fill_region(ck, r, region_off, &o);
	if (!ret)
		ret = pin__st_build_index(ck);
	if (ret == -ENOMEM && !ck->err[0])
		pin__st_fail(ck, ret, "out of memory");
	if (ret)
		pin__st_clear(ck);
	return ret;
}
