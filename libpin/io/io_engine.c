// SPDX-License-Identifier: MIT
/*
 * The io_uring request engine that reads and writes share: a ring (or,
 * where io_uring is unavailable, io_plain.c's stand-in) and queue_depth
 * request slots, submitting, waiting for completions, and
 * settling the answers both treat alike (retries of EAGAIN/EINTR, O_DIRECT
 * refused) so that io_read.c and io_write.c handle only their own.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"
#include "io_internal.h"
#include "io_engine.h"

int pin__engine_init(struct engine *e, const struct pin_io_opts *o,
		     struct pin__io_stats *st, const char *path)
{
	int ret;

	memset(e, 0, sizeof(*e));
	e->nslots = o->queue_depth;
	e->slots = calloc(e->nslots, sizeof(*e->slots));
	if (!e->slots)
		return pin__io_fail(st->error, sizeof(st->error), -ENOMEM,
				    "%s: request slots", path);
	ret = io_uring_queue_init(e->nslots, &e->ring, 0);
	if (ret < 0 && pin__plain_wanted(ret))
		ret = pin__plain_init(e, ret, st);
	if (ret < 0) {
		free(e->slots);
		return pin__io_fail(st->error, sizeof(st->error), ret,
				    "%s: io_uring_queue_init(%u)", path,
				    e->nslots);
	}
	return 0;
}

void pin__engine_exit(struct engine *e)
{
	if (!e->plain && (e->fixed || e->reg))
		io_uring_unregister_buffers(&e->ring);
	if (!e->plain)
		io_uring_queue_exit(&e->ring);
	free(e->fifo);
	free(e->reg);
	free(e->slots);
}

void pin__engine_submit(struct engine *e, struct pin__file *f,
			unsigned idx, int write)
{
	struct io_uring_sqe *sqe;
	struct slot *s = &e->slots[idx];
	unsigned len = (unsigned)s->len;

	s->busy = 1;
	e->inflight++;
	if (e->plain) {
		pin__plain_submit(e, f, idx, write);
		return;
	}
	sqe = io_uring_get_sqe(&e->ring);
	/* At most nslots requests exist and the ring has nslots entries, so
	 * a full queue only means entries not yet handed to the kernel. */
	while (!sqe) {
		io_uring_submit(&e->ring);
		sqe = io_uring_get_sqe(&e->ring);
	}
	if (write && s->fixed >= 0)
		io_uring_prep_write_fixed(sqe, f->fd, s->buf, len, s->off,
					  s->fixed);
	else if (write)
		io_uring_prep_write(sqe, f->fd, s->buf, len, s->off);
	else if (s->fixed >= 0)
		io_uring_prep_read_fixed(sqe, f->fd, s->buf, len, s->off,
					 s->fixed);
	else
		io_uring_prep_read(sqe, f->fd, s->buf, len, s->off);
	io_uring_sqe_set_data64(sqe, idx);
}

/* EAGAIN/EINTR: the first RETRY_AT_ONCE retries go out at once. */
#define RETRY_AT_ONCE	64

static void retry_pause(void)
{
	struct timespec pause = { 0, 1000000L };	/* 1 ms */

	nanosleep(&pause, NULL);
}

/*
 * Wait for one completion (submitting what is queued). A wait interrupted
 * by a signal is simply waited again; a kernel short of resources for the
 * submission (EAGAIN) gets the same patience as a request (RETRY_*).
 */
static int ring_wait(struct engine *e, struct pin__io_stats *st,
		     const char *path, unsigned *idx, int *res)
{
	struct io_uring_cqe *cqe;
	unsigned again = 0;
	int ret;

	for (;;) {
		ret = io_uring_submit_and_wait(&e->ring, 1);
		if (ret == -EAGAIN && ++again > PIN_IO_MAX_RETRIES)
			return pin__io_fail(st->error, sizeof(st->error), ret,
					    "%s: io_uring_submit (%u tries)",
					    path, again);
		if (ret == -EAGAIN && again > RETRY_AT_ONCE)
			retry_pause();
		if (ret == -EINTR || ret == -EAGAIN) {
			st->retries++;
			continue;
		}
		if (ret < 0)
			return pin__io_fail(st->error, sizeof(st->error), ret,
					    "%s: io_uring_submit", path);
		ret = io_uring_peek_cqe(&e->ring, &cqe);
		if (ret == -EAGAIN)
			continue;
		if (ret < 0)
			return pin__io_fail(st->error, sizeof(st->error), ret,
					    "%s: io_uring completion", path);
		break;
	}
	*idx = (unsigned)io_uring_cqe_get_data64(cqe);
	*res = cqe->res;
	io_uring_cqe_seen(&e->ring, cqe);
	return 0;
}

/* One completion, from the ring or from the plain engine's queue. */
static int engine_wait(struct engine *e, struct pin__io_stats *st,
		       const char *path, unsigned *idx, int *res)
{
	int ret;

	if (e->plain) {
		ret = pin__plain_wait(e, idx, res);
		if (ret < 0)
			return pin__io_fail(st->error, sizeof(st->error), ret,
					    "%s: no request in flight", path);
	} else {
		ret = ring_wait(e, st, path, idx, res);
		if (ret < 0)
			return ret;
	}
	e->slots[*idx].busy = 0;
	e->inflight--;
	return 0;
}

/* Collect what is still in flight after a failure. */
void pin__engine_drain(struct engine *e, struct pin__io_stats *st,
		       const char *path)
{
	char keep[sizeof(st->error)];
	unsigned idx;
	int res;

	memcpy(keep, st->error, sizeof(keep));
	while (e->inflight)
		if (engine_wait(e, st, path, &idx, &res) < 0)
			break;
	memcpy(st->error, keep, sizeof(keep));
}

static int settle_common(struct engine *e, struct pin__file *f,
			 struct pin__io_stats *st, unsigned idx, int res,
			 int write, uint64_t done)
{
	struct slot *s = &e->slots[idx];

	if (res == -EAGAIN || res == -EINTR) {
		if (++s->again > PIN_IO_MAX_RETRIES) {
			pin__io_fail(st->error, sizeof(st->error), res,
				     "%s: %s of %llu bytes at offset %llu (%u tries)",
				     f->path, write ? "write" : "read",
				     (unsigned long long)s->len,
				     (unsigned long long)s->off,
				     PIN_IO_MAX_RETRIES + 1);
			pin__engine_drain(e, st, f->path);
			return GAVE_UP;
		}
		if (s->again > RETRY_AT_ONCE)
			retry_pause();
		st->retries++;
		pin__engine_submit(e, f, idx, write);
		return RETRIED;
	}
	s->again = 0;
	if (res == -EINVAL && f->direct && !done) {
		pin__engine_drain(e, st, f->path);
		pin__io_note_fallback(st, "%s: O_DIRECT %s refused (EINVAL)", f->path,
				      write ? "write" : "read");
		return REFUSED;
	}
	return 0;
}

/*
 * The next completion, settled as both passes settle it: 0 with idx and
 * res for the caller to handle, RETRIED (resubmitted), REFUSED (redo
 * buffered), or a negative errno with the error set.
 */
int pin__engine_next(struct engine *e, struct pin__file *f,
		     struct pin__io_stats *st, int write, uint64_t done,
		     unsigned *idx, int *res)
{
	int ret = engine_wait(e, st, f->path, idx, res);

	if (ret < 0)
		return ret;
	ret = settle_common(e, f, st, *idx, *res, write, done);
	return ret == GAVE_UP ? *res : ret;
}
