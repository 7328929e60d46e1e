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

#include "internal.h"
#include "io/io_internal.h"
#include "io/fill.h"
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

/* One file's load as it goes through the stages below. */
struct file_load {
	struct pin_st *ck;
	struct pin_dev *dev;
	unsigned fi;
	struct st_file *sf;
	struct pin__file f;
	struct pin__io_stats st;
	struct pin_region *r;
	uint64_t astart;	/* aligned file offset the region starts at */
	uint64_t head;		/* data_start - astart */
	uint64_t span;		/* aligned bytes read into the region */
};

static int alloc_region(struct file_load *fl, unsigned flags)
{
	return pin__alloc_to_fill(fl->dev, fl->span ? fl->span : PIN_IO_ALIGN,
				  flags, fl->ck->node, &fl->r);
}

static int alloc_failed(struct file_load *fl, int ret)
{
	return pin__st_fail(fl->ck, ret, "%s: allocating a %llu-byte region: %s",
			    fl->sf->path, (unsigned long long)fl->span,
			    pin_dev_error(fl->dev));
}

/* Stage 1, prepare memory: a region for the data section, not yet pinned. */
static int prepare_region(struct file_load *fl)
{
	struct pin_st *ck = fl->ck;
	uint64_t tp = pin__now_ns();
	int ret = 0, i;

	/* fallocate of a memfd may be interrupted (EINTR): try again. */
	for (i = 0; i < 5; i++) {
		ret = alloc_region(fl, ck->node_flags);
		if (ret != -EINTR)
			break;
	}
	if (ret == -ENOMEM) {
		ret = alloc_region(fl, ck->node_flags | PIN_REGION_FALLBACK);
		if (!ret)
			pin__io_note_fallback(&fl->st, "region below 2 MiB chunks");
	}
	if (ret)
		return alloc_failed(fl, ret);
	ck->phases.alloc_ns += pin__now_ns() - tp;
	return 0;
}

/*
 * Stage 2, read: the data section into the region, pinned (and each step
 * registered for io_uring) as the reads go (fill.c).
 */
static int read_data(struct file_load *fl, const struct pin_io_opts *po,
		     struct st_progress *prog)
{
	struct pin_st *ck = fl->ck;
	struct st_file *sf = fl->sf;
	uint64_t end = sf->data_start + sf->data_len;
	struct pin__fill_report rep;
	int ret, lazy = fl->r->lazy;

	ret = pin__fill_from_file(fl->r, &fl->f, fl->astart, fl->span, end, po,
				  &fl->st, &rep);
	if (ret == -ENOMEM && lazy) {
		/*
		 * A lazy device region needs free 2 MiB pages as the reads go;
		 * where they ran out, once more into a region allocated whole,
		 * which may fall back to smaller chunks.
		 */
		free(rep.times);
		memset(&rep, 0, sizeof(rep));
		pin_region_close(fl->r);
		fl->r = NULL;
		ret = alloc_region(fl, ck->node_flags | PIN_REGION_FALLBACK);
		if (ret)
			return alloc_failed(fl, ret);
		pin__io_note_fallback(&fl->st, "no 2 MiB pages left while loading: region allocated whole");
		ret = pin__fill_from_file(fl->r, &fl->f, fl->astart, fl->span,
					  end, po, &fl->st, &rep);
	}
	ck->phases.pin_ns += rep.pin_ns;
	keep_steps(ck, fl->fi, &rep, fl->span);
	prog->base += fl->span;
	fl->st.direct = fl->f.direct;
	if (ret)
		return pin__st_fail(ck, ret, "%s", fl->st.error[0] ? fl->st.error :
				    pin_region_error(fl->r));
	ck->phases.transfer_ns += fl->st.io_ns;
	return 0;
}

/* Stage 3, seal: the region read-only for good (left OPEN with
 * PIN_ST_LOAD_OPEN); *map where it now is. */
static int seal_region(struct file_load *fl, void **map)
{
	struct pin_st *ck = fl->ck;
	uint64_t tp = pin__now_ns();
	int ret;

	ret = (ck->load_flags & PIN_ST_LOAD_OPEN) ? 0 : pin_region_seal(fl->r);
	if (ret)
		return pin__st_fail(ck, ret, "%s: sealing its region: %s",
				    fl->sf->path, pin_region_error(fl->r));
	ret = pin_region_map(fl->r, map);	/* sealing may remap it */
	if (ret)
		return pin__st_fail(ck, ret, "%s: mapping its sealed region: %s",
				    fl->sf->path, pin_region_error(fl->r));
	ck->phases.seal_ns += pin__now_ns() - tp;
	return 0;
}

/* Stage 4, register: the file's tensors (from first on) point into it. */
static void register_tensors(struct file_load *fl, size_t first, void *map)
{
	struct pin_st *ck = fl->ck;
	size_t i;

	for (i = first; i < ck->n; i++) {
		struct st_tensor *t = &ck->t[i];

		t->pub.region = fl->r;
		t->pub.region_offset = fl->head + t->place;
		t->pub.data = (char *)map + t->pub.region_offset;
	}
	fl->sf->region = fl->r;
	fl->r = NULL;
}

/*
 * Load file index fi: its header, then prepare memory -> read -> seal ->
 * register the tensors.
 */
int pin__st_load_file(struct pin_st *ck, struct pin_dev *dev, unsigned fi,
		      const struct pin_io_opts *o, struct st_progress *prog)
{
	struct file_load fl = { .ck = ck, .dev = dev, .fi = fi,
				.sf = &ck->files[fi] };
	struct pin_io_opts po = *o;
	uint64_t t0 = pin__now_ns();
	size_t first = ck->n;
	void *map;
	int ret;

	fl.st.direct = 1;
	fl.st.queue_depth = o->queue_depth;
	fl.st.request_size = o->request_size;
	ret = pin__io_open_read(&fl.f, fl.sf->path, o, &fl.st);
	if (ret)
		return pin__st_fail(ck, ret, "%s", fl.st.error);
	ret = pin__st_read_header(ck, &fl.f, fi);
	if (ret)
		goto out;
	/* The whole file (its header too), or the data section's aligned superset. */
	fl.astart = (ck->load_flags & PIN_ST_LOAD_WHOLE_FILE) ? 0 :
		    fl.sf->data_start & ~(uint64_t)(PIN_IO_ALIGN - 1);
	fl.head = fl.sf->data_start - fl.astart;
	/* Read (and region) up to the end of the last tensor as placed. */
	fl.span = pin_file_span(fl.astart, fl.head +
				pin__st_plan(ck, first, fl.head,
					     fl.sf->data_len));
	if (ck->load_flags & PIN_ST_LOAD_OPEN)
		po.flags |= PIN__FILL_OPEN;	/* keep the reads' mapping */
	if (o->progress) {
		po.progress = st_progress_cb;
		po.progress_arg = prog;
	}
	ret = prepare_region(&fl);
	if (!ret)
		ret = read_data(&fl, &po, prog);
	if (!ret)
		ret = pin__st_place(ck, fl.r, first, fl.head, NULL);
	if (!ret)
		ret = seal_region(&fl, &map);
	if (ret)
		goto out;
	register_tensors(&fl, first, map);
	fl.st.ns = pin__now_ns() - t0;
	stats_add(&ck->stats, &fl.st, fi == 0);
out:
	if (fl.r)
		pin_region_close(fl.r);
	pin__io_close(&fl.f);
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
		       uint64_t region_off, int whole,
		       const struct pin_io_opts *o)
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
	/* Whole file: the image from byte 0, so the head is the header. */
	head = whole ? sf->data_start : sf->data_start & (PIN_IO_ALIGN - 1);
	span = pin_file_span(sf->data_start - head, head + sf->data_len);
	ret = check_fill_target(ck, r, region_off, pin_file_span(0, head +
				pin__st_plan(ck, 0, head, sf->data_len)),
				sf->path);
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
	ret = pin__st_place(ck, r, 0, head, map + region_off);
	if (ret)
		goto out;
	for (i = 0; i < ck->n; i++) {
		ck->t[i].pub.region = r;
		ck->t[i].pub.region_offset = region_off + head + ck->t[i].place;
		ck->t[i].pub.data = map + ck->t[i].pub.region_offset;
	}
	st.ns = pin__now_ns() - t0;
	stats_add(&ck->stats, &st, 1);
out:
	pin__io_close(&f);
	return ret;
}

/*
 * The caller's load options into lo, and where its regions go: node -1
 * (the caller's mempolicy) or a node, flags PIN_REGION_ANY_NODE or 0.
 */
int pin__st_load_opts(struct pin_st *ck, const struct pin_st_load_opts *opts,
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
	if ((lo->flags & ~(PIN_ST_LOAD_WHOLE_FILE | PIN_ST_LOAD_OPEN |
			   PIN_ST_LOAD_ALIGN)) || (ro.flags & ~(PIN_REGION_NODE | PIN_REGION_ANY_NODE)) ||
	    ro.flags == PIN_REGION_ANY_NODE ||
	    ((ro.flags & PIN_REGION_NODE) && ro.node < 0))
		return pin__st_fail(ck, -EINVAL,
				    "load: flags 0x%x, region flags 0x%x, node %d",
				    lo->flags, ro.flags, (int)ro.node);
	*node = (ro.flags & PIN_REGION_NODE) ? ro.node : -1;
	*flags = ro.flags & PIN_REGION_ANY_NODE;
	return 0;
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
	ret = pin__st_load_opts(ck, opts, &lo, &node, &flags);
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
	if (pin__st_is_index(path))
		return pin__st_fail(ck, -EINVAL, "%s: a sharded checkpoint: load each shard at an offset of its own",
				    path);
	ret = pin__io_opts(lo.io, &o, &ck->stats);
	if (ret)
		return pin__st_fail(ck, ret, "%s", ck->stats.error);
	ck->load_flags = lo.flags;
	memset(&ck->phases, 0, sizeof(ck->phases));
	ret = pin__st_add_file(ck, path);
	if (!ret)
		ret = fill_region(ck, r, region_off,
				  !!(lo.flags & PIN_ST_LOAD_WHOLE_FILE), &o);
	if (!ret)
		ret = pin__st_build_index(ck);
	if (ret == -ENOMEM && !ck->err[0])
		pin__st_fail(ck, ret, "out of memory");
	if (ret)
		pin__st_clear(ck);
	return ret;
}
