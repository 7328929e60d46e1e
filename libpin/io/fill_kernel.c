// SPDX-License-Identifier: MIT
/*
 * Filling a lazy device region with the module's FILL (ABI 5): the kernel
 * allocates each step's 2 MiB chunks and reads the file into them before
 * any mapping sees them.
 *
 * The io_uring path (fill.c) POPULATEs a step, which zeroes its chunks,
 * and then reads into it through the owner mapping, which takes each
 * 4 KiB page into the kernel once (the fixed buffers' registration, or
 * the O_DIRECT read's GUP). FILL reads into whole chunks through the
 * kernel's own page array: no page walk at all, and no zeroing of what
 * the read overwrites unless the kernel zeroes every allocation
 * (init_on_alloc=1). A few threads (the caller and helpers, as many as
 * the options' bytes in flight make steps) take steps in turn, so that
 * one step's allocation runs while others' reads are on the device; each
 * FILL of a step is itself one large read, which the block layer splits
 * into requests that are in flight together.
 *
 * An older module (ENOTTY) or a file FILL cannot read (EINVAL) leaves
 * the region to fill.c's path, which redoes every step: POPULATE keeps
 * the chunks a FILL made, and the reads overwrite them.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>

#include <uapi/pinmem.h>

#include "internal.h"
#include "io_internal.h"
#include "fill.h"

#define KFILL_THREADS_MAX	8

struct kfill {
	struct pin_region *r;
	const char *map;		/* the owner mapping */
	const struct pin__file *f;
	uint64_t aoff, span, need_end, step;
	size_t nsteps;
	struct pin__step_times *times;
	atomic_size_t next;		/* next step to claim */
	atomic_int err;			/* first failure, -errno */
	atomic_uint_fast64_t bytes;	/* read so far */
	atomic_size_t filled;		/* steps done */
	atomic_uint_fast64_t short_at;	/* file offset a step's read ended
					 * short before need_end, or 0 */
};

/* The common step, in whole chunks. */
static uint64_t kfill_step(uint64_t span)
{
	uint64_t step = pin__fill_step_bytes(span);

	return (step + PINMEM_CHUNK_SIZE - 1) & ~(PINMEM_CHUNK_SIZE - 1);
}

/*
 * Map the step's chunks in the owner mapping: a fault maps all of its
 * chunk, so one read a chunk, while the other thread's read is on the
 * device. Left to the first use, the mapping would cost the loader a
 * whole-region prefault at pin_region_map instead.
 */
static void touch_chunks(const char *p, uint64_t len)
{
	uint64_t c;

	for (c = 0; c < len; c += PINMEM_CHUNK_SIZE)
		(void)*(const volatile char *)(p + c);
}

static int kfill_step_run(struct kfill *kf, size_t k)
{
	struct pin__step_times *t = &kf->times[k];
	uint64_t off = k * kf->step, len = kf->span - off;
	struct pinmem_fill fl;
	int ret;

	if (len > kf->step)
		len = kf->step;
	memset(&fl, 0, sizeof(fl));
	fl.fd = kf->f->fd;
	fl.file_offset = kf->aoff + off;
	fl.offset = off;
	fl.length = len;
	t->pin_begin_ns = t->read_begin_ns = pin__now_ns();
	ret = pin__ioctl(kf->r->fd, PINMEM_IOC_FILL, &fl);
	if (!ret)
		touch_chunks(kf->map + off, len);
	t->pin_end_ns = t->read_end_ns = pin__now_ns();
	if (ret)
		return ret;
	atomic_fetch_add(&kf->bytes, fl.bytes);
	atomic_fetch_add(&kf->filled, 1);
	if (fl.bytes < len && kf->aoff + off + fl.bytes < kf->need_end)
		atomic_store(&kf->short_at, kf->aoff + off + fl.bytes);
	return 0;
}

/* Claim and fill steps until none is left or one failed. */
static void kfill_claim(struct kfill *kf, const struct pin_io_opts *o)
{
	size_t k;
	int ret;

	while (!atomic_load(&kf->err)) {
		k = atomic_fetch_add(&kf->next, 1);
		if (k >= kf->nsteps)
			return;
		ret = kfill_step_run(kf, k);
		if (ret) {
			int none = 0;

			atomic_compare_exchange_strong(&kf->err, &none, ret);
			return;
		}
		if (o && o->progress)
			o->progress(o->progress_arg, atomic_load(&kf->bytes),
				    kf->span);
	}
}

/*
 * As many FILLs in flight as the options ask bytes in flight of io_uring
 * (queue depth x request size: 64 MiB by default, four steps of 16 MiB),
 * at least two, so that one step's allocation runs under another's read.
 */
static unsigned kfill_threads(const struct kfill *kf,
			      const struct pin_io_opts *o)
{
	uint64_t want = (uint64_t)o->queue_depth * o->request_size / kf->step;

	if (want < 2)
		want = 2;
	if (want > KFILL_THREADS_MAX)
		want = KFILL_THREADS_MAX;
	return want < kf->nsteps ? (unsigned)want : (unsigned)kf->nsteps;
}

static void *kfill_helper(void *arg)
{
	kfill_claim(arg, NULL);
	return NULL;
}

static int kfill_init(struct kfill *kf, struct pin_region *r,
		      const struct pin__file *f, uint64_t aoff, uint64_t span,
		      uint64_t need_end)
{
	memset(kf, 0, sizeof(*kf));
	kf->r = r;
	kf->f = f;
	kf->aoff = aoff;
	kf->span = span;
	kf->need_end = need_end;
	kf->step = kfill_step(span);
	kf->nsteps = (size_t)((span + kf->step - 1) / kf->step);
	kf->times = calloc(kf->nsteps ? kf->nsteps : 1, sizeof(*kf->times));
	if (!kf->times)
		return pin__fail(r->err, -ENOMEM, "fill: step table");
	atomic_init(&kf->next, 0);
	atomic_init(&kf->err, 0);
	atomic_init(&kf->bytes, 0);
	atomic_init(&kf->filled, 0);
	atomic_init(&kf->short_at, 0);
	return 0;
}

/* The steps' result: 0, -EOPNOTSUPP (use fill.c's path) or -errno. */
static int kfill_result(struct kfill *kf, struct pin__io_stats *st)
{
	int err = atomic_load(&kf->err);
	uint64_t at = atomic_load(&kf->short_at);

	if (err == -ENOTTY || err == -EINVAL) {
		pin__io_note_fallback(st, "%s: the module cannot FILL from it (%s): read through a mapping",
				      kf->f->path, err == -ENOTTY ?
				      "module ABI < 5" : "EINVAL");
		return -EOPNOTSUPP;
	}
	if (err)
		return pin__io_fail(st->error, sizeof(st->error), err,
				    "%s: FILL of region %" PRIu64,
				    kf->f->path, kf->r->id);
	if (at)
		return pin__io_fail(st->error, sizeof(st->error), -EIO,
				    "%s: end of file at offset %llu, expected data up to %llu",
				    kf->f->path, (unsigned long long)at,
				    (unsigned long long)kf->need_end);
	return pin__io_check_size(kf->f, st);
}

int pin__fill_kernel(struct pin_region *r, struct pin__file *f,
		     uint64_t aoff, uint64_t span, uint64_t need_end,
		     const struct pin_io_opts *o, struct pin__io_stats *st,
		     struct pin__fill_report *rep)
{
	pthread_t helpers[KFILL_THREADS_MAX];
	unsigned threads = 0, nr;
	struct kfill kf;
	void *map;
	uint64_t t0, wall;
	int ret;

	ret = kfill_init(&kf, r, f, aoff, span, need_end);
	if (ret)
		return ret;
	/* Nothing is populated yet: the mmap maps no page. */
	ret = pin_region_map(r, &map);
	if (ret) {
		free(kf.times);
		return ret;
	}
	kf.map = map;
	t0 = pin__now_ns();
	for (nr = kfill_threads(&kf, o); nr > 1 + threads; )
		if (pthread_create(&helpers[threads++], NULL, kfill_helper,
				   &kf)) {
			threads--;
			break;
		}
	kfill_claim(&kf, o);
	while (threads)
		pthread_join(helpers[--threads], NULL);
	ret = kfill_result(&kf, st);
	if (ret == -EOPNOTSUPP) {
		free(kf.times);
		return ret;	/* fill.c's path counts its own reads */
	}
	wall = pin__now_ns() - t0;
	st->io_ns += wall;
	st->bytes += atomic_load(&kf.bytes);
	st->requests += atomic_load(&kf.filled);
	st->fixed_buffers = 0;
	if (ret) {
		free(kf.times);
		return ret;
	}
	rep->pin_ns = wall;	/* each step pinned inside its read */
	rep->step = kf.step;
	rep->nsteps = kf.nsteps;
	rep->times = kf.times;
	rep->kernel_fill = 1;
	return 0;
}
