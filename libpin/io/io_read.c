// SPDX-License-Identifier: MIT
/*
 * Reads from a file into memory through the engine: the aligned superset
 * of the wanted range straight into the destination, short reads resumed,
 * the end of the file told from a short read, and paced reads that follow
 * a preparer (fill.c) step by step. Redone buffered where O_DIRECT is
 * refused.
 */
#include <errno.h>
#include <stdint.h>
#include <sys/stat.h>

#include "internal.h"
#include "io_internal.h"
#include "io_engine.h"

/*
 * How far a paced read may go: poll what is prepared (waiting for more
 * only when nothing is in flight, so completions are never held back) and
 * register the steps newly ready. 0 or -errno from the preparer.
 */
static int pace_advance(struct engine *e, struct pin__pace *pace, char *dst,
			uint64_t span, uint64_t at, uint64_t *ready,
			struct pin__io_stats *st)
{
	uint64_t before = *ready, k;
	int block = !e->inflight && at < span && at >= *ready;
	int ret = pace->ready(pace, at + 1, block, ready);

	if (ret < 0)
		return ret;
	if (*ready > span)
		*ready = span;
	for (k = before / pace->step; k * pace->step < *ready; k++) {
		uint64_t b = k * pace->step, len = span - b;

		if (b + pace->step > *ready && *ready < span)
			break;		/* step k not complete yet */
		if (len > pace->step)
			len = pace->step;
		pin__engine_register_step(e, (size_t)k, dst + b, len, st);
	}
	return 0;
}

int pin__io_check_size(const struct pin__file *f, struct pin__io_stats *st)
{
	struct stat sb;

	if (fstat(f->fd, &sb) < 0)
		return pin__io_fail(st->error, sizeof(st->error), -errno,
				    "%s: fstat", f->path);
	if ((uint64_t)sb.st_size != f->size)
		return pin__io_fail(st->error, sizeof(st->error), -ESTALE,
				    "%s: file changed size during the transfer (%llu -> %llu bytes)",
				    f->path, (unsigned long long)f->size,
				    (unsigned long long)sb.st_size);
	return 0;
}

/* Timestamps of a paced read: a request rel bytes into dst went out... */
static void pace_sent(struct pin__pace *pace, uint64_t rel)
{
	struct pin__step_times *t;

	if (!pace)
		return;
	t = &pace->times[rel / pace->step];
	if (!t->read_begin_ns)
		t->read_begin_ns = pin__now_ns();
}

/* ...and a request of it is complete. */
static void pace_done(struct pin__pace *pace, uint64_t rel)
{
	struct pin__step_times *t;

	if (!pace)
		return;
	t = &pace->times[rel / pace->step];
	if (t->reads_left && !--t->reads_left)
		t->read_end_ns = pin__now_ns();
}

/* Free slots take the next reads, up to end and to the ready bytes. */
static void submit_reads(struct engine *e, struct pin__file *f, char *dst,
			 uint64_t aoff, uint64_t *next, uint64_t end,
			 uint64_t ready, uint64_t chunk,
			 const struct pin_io_opts *o, struct pin__pace *pace)
{
	unsigned i;

	for (i = 0; i < e->nslots && *next < end && *next - aoff < ready; i++) {
		struct slot *s = &e->slots[i];

		if (s->busy)
			continue;
		s->off = *next;
		s->len = end - *next < o->request_size ?
			 end - *next : o->request_size;
		s->buf = dst + (*next - aoff);
		s->fixed = pin__io_fixed_index(e, *next - aoff, chunk);
		pace_sent(pace, *next - aoff);
		*next += s->len;
		pin__engine_submit(e, f, i, 0);
	}
}

/*
 * Slot idx's read completed with res: counted, its rest resubmitted when
 * short, or the read failed (an error, or the file ended before need_end).
 */
static int read_completed(struct engine *e, struct pin__file *f,
			  unsigned idx, int res, uint64_t aoff,
			  uint64_t need_end, struct pin__io_stats *st,
			  struct pin__pace *pace)
{
	struct slot *s = &e->slots[idx];
	uint64_t at = s->off + (uint64_t)(res > 0 ? res : 0);
	int ret;

	if (res < 0) {
		pin__io_fail(st->error, sizeof(st->error), res,
			     "%s: read of %llu bytes at offset %llu",
			     f->path, (unsigned long long)s->len,
			     (unsigned long long)s->off);
		pin__engine_drain(e, st, f->path);
		return res;
	}
	st->bytes += (uint64_t)res;
	if ((uint64_t)res == s->len || at >= need_end) {
		/* Whole, or ran into EOF past the range. */
		st->requests++;
		pace_done(pace, s->off - aoff);
	} else if (res == 0 || (f->direct && at % PIN_IO_ALIGN)) {
		/* Nothing more, or a direct read that stopped mid-block:
		 * the end of the file. */
		pin__engine_drain(e, st, f->path);
		ret = pin__io_check_size(f, st);
		if (ret < 0)
			return ret;
		return pin__io_fail(st->error, sizeof(st->error), -EIO,
				    "%s: end of file at offset %llu, expected data up to %llu",
				    f->path, (unsigned long long)at,
				    (unsigned long long)need_end);
	} else {
		/* Short: move on from the last aligned byte. */
		uint64_t stop = s->off + s->len;
		uint64_t from = f->direct ? ALIGN_DOWN(at) : at;

		st->short_ios++;
		s->buf += from - s->off;
		s->len = stop - from;
		s->off = from;
		pin__engine_submit(e, f, idx, 0);
	}
	return 0;
}

/*
 * Read span bytes at aoff into dst through the engine; with pace, only
 * as far as its steps are prepared.
 */
static int read_pass(struct engine *e, struct pin__file *f, char *dst,
		     uint64_t aoff, uint64_t span, uint64_t need_end,
		     const struct pin_io_opts *o, struct pin__io_stats *st,
		     struct pin__pace *pace)
{
	uint64_t next = aoff, end = aoff + span, done = 0, chunk, ready = span;
	unsigned idx;
	int res, ret;

	if (pace) {
		chunk = pace->step;
		ready = 0;
		pin__engine_register_sparse(e, span, chunk, o, st);
	} else {
		chunk = pin__io_fixed_chunk(o->request_size);
		pin__engine_register(e, dst, ALIGN_UP(span), chunk, o, st);
	}
	for (;;) {
		if (pace) {
			ret = pace_advance(e, pace, dst, span, next - aoff,
					   &ready, st);
			if (ret < 0) {
				pin__io_fail(st->error, sizeof(st->error), ret,
					     "%s: preparing memory for the read",
					     f->path);
				pin__engine_drain(e, st, f->path);
				return ret;
			}
		}
		submit_reads(e, f, dst, aoff, &next, end, ready, chunk, o, pace);
		if (!e->inflight && next < end)
			continue;	/* waits for the next prepared step */
		if (!e->inflight)
			break;
		ret = pin__engine_next(e, f, st, 0, done, &idx, &res);
		if (ret < 0 || ret == REFUSED)
			return ret;
		if (ret == RETRIED)
			continue;
		ret = read_completed(e, f, idx, res, aoff, need_end, st, pace);
		if (ret < 0)
			return ret;
		done += (uint64_t)res;
		if (o->progress)
			o->progress(o->progress_arg, done, span);
	}
	return pin__io_check_size(f, st);
}

int pin__io_read_fd(struct pin__file *f, void *dst, uint64_t aoff,
		    uint64_t span, uint64_t need_end,
		    const struct pin_io_opts *o, struct pin__io_stats *st)
{
	return pin__io_read_paced(f, dst, aoff, span, need_end, o, st, NULL);
}

int pin__io_read_paced(struct pin__file *f, void *dst, uint64_t aoff,
		       uint64_t span, uint64_t need_end,
		       const struct pin_io_opts *o, struct pin__io_stats *st,
		       struct pin__pace *pace)
{
	struct engine e;
	uint64_t t0;
	int ret;

	if (!span)
		return pin__io_check_size(f, st);
	if (f->direct && (uintptr_t)dst % PIN_IO_ALIGN) {
		pin__io_note_fallback(st, "%s: destination not %u-aligned", f->path,
				      PIN_IO_ALIGN);
		ret = pin__io_reopen_buffered(f, 0, st);
		if (ret < 0)
			return ret;
	}
	t0 = pin__now_ns();
	ret = pin__engine_init(&e, o, st, f->path);
	if (ret < 0)
		return ret;
	st->fixed_buffers = 0;
	ret = read_pass(&e, f, dst, aoff, span, need_end, o, st, pace);
	st->fixed_buffers = e.fixed;
	pin__engine_exit(&e);
	if (ret == REFUSED) {
		ret = pin__io_reopen_buffered(f, 0, st);
		if (ret < 0)
			return ret;
		ret = pin__engine_init(&e, o, st, f->path);
		if (ret < 0)
			return ret;
		ret = read_pass(&e, f, dst, aoff, span, need_end, o, st, pace);
		st->fixed_buffers = e.fixed;
		pin__engine_exit(&e);
	}
	st->io_ns += pin__now_ns() - t0;
	return ret == REFUSED ? -EIO : ret;
}
