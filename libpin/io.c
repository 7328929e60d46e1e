// SPDX-License-Identifier: MIT
/*
 * Checkpoint I/O: io_uring reads and writes between files and memory.
 *
 * Reads move the PIN_IO_ALIGN-aligned superset of the wanted range straight
 * into the destination (no bounce), queue_depth requests of request_size
 * bytes in flight. Writes gather their sources into aligned bounce buffers
 * (sources may sit anywhere) and write those. O_DIRECT is used where the
 * filesystem allows it; where it refuses (open or the first transfer fails
 * with EINVAL, or statx says it cannot), the transfer is redone buffered and
 * the reason recorded. Registered buffers are tried and dropped, with the
 * reason recorded, where the kernel refuses them (6.1 refuses file-backed
 * non-shmem mappings such as pinmem's with EOPNOTSUPP).
 */
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "io_internal.h"

/* Debian 12's headers may lack these (statx(2), Linux 6.1). */
#ifndef STATX_DIOALIGN
#define STATX_DIOALIGN		0x2000U
#endif
#define STATX_OFF_MASK		0	/* u32 stx_mask */
#define STATX_OFF_DIO_MEM	152	/* u32 stx_dio_mem_align */
#define STATX_OFF_DIO_OFFSET	156	/* u32 stx_dio_offset_align */

#define ALIGN_DOWN(x)	((x) & ~(uint64_t)(PIN_IO_ALIGN - 1))
#define ALIGN_UP(x)	ALIGN_DOWN((x) + PIN_IO_ALIGN - 1)

/* A registered buffer may span at most 1 GiB (io_uring's limit). */
#define FIXED_MAX	(1ULL << 30)

/*
 * ...and fewer than 65536 pages. io_import_fixed() tells the block layer how
 * many bvecs are left to the end of the registered buffer, bio->bi_vcnt
 * keeps that in 16 bits, and where it wraps to 1 Linux 6.1 and 6.12 skip
 * the bio's split and overrun the driver's scatterlist: kernel memory
 * corruption (Documentation/kernel-bug-fixed-vcnt.md). With fewer than
 * 65536 pages per buffer the count never wraps, whatever the page size, the
 * kernel's bvec per page or per folio, the request or the file layout. One
 * page is kept spare for a buffer that does not start on a page boundary.
 */
#define FIXED_MAX_BVECS	65535ULL

uint64_t pin__now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

int pin__io_fail(char *buf, size_t len, int err, const char *fmt, ...)
{
	char ebuf[128];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, len, fmt, ap);
	va_end(ap);
	if (n < 0)
		n = 0;
	if (err && (size_t)n < len)
		snprintf(buf + n, len - n, ": %s",
			 pin__strerror(err, ebuf, sizeof(ebuf)));
	return err;
}

static void note_fallback(struct pin_io_stats *st, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Append a reason to st->fallback_reason ("; " between reasons). */
static void note_fallback(struct pin_io_stats *st, const char *fmt, ...)
{
	size_t n = strlen(st->fallback_reason);
	va_list ap;

	if (n && n + 2 < sizeof(st->fallback_reason)) {
		memcpy(st->fallback_reason + n, "; ", 3);
		n += 2;
	}
	va_start(ap, fmt);
	vsnprintf(st->fallback_reason + n, sizeof(st->fallback_reason) - n,
		  fmt, ap);
	va_end(ap);
}

uint64_t pin_io_span(uint64_t file_off, uint64_t len)
{
	if (len > UINT64_MAX - file_off - PIN_IO_ALIGN)
		return 0;
	return ALIGN_UP(file_off + len) - ALIGN_DOWN(file_off);
}

int pin__io_opts(const struct pin_io_opts *opts, struct pin_io_opts *out,
		 struct pin_io_stats *st)
{
	memset(out, 0, sizeof(*out));
	if (opts)
		*out = *opts;
	if (!out->queue_depth)
		out->queue_depth = PIN_IO_DEFAULT_QUEUE_DEPTH;
	if (!out->request_size)
		out->request_size = PIN_IO_DEFAULT_REQUEST_SIZE;
	if (out->queue_depth > PIN_IO_MAX_QUEUE_DEPTH)
		return pin__io_fail(st->error, sizeof(st->error), -EINVAL,
				    "queue depth %u over %u", out->queue_depth,
				    PIN_IO_MAX_QUEUE_DEPTH);
	if (out->request_size % PIN_IO_ALIGN ||
	    out->request_size > PIN_IO_MAX_REQUEST_SIZE)
		return pin__io_fail(st->error, sizeof(st->error), -EINVAL,
				    "request size %u not a multiple of %u up to %u",
				    out->request_size, PIN_IO_ALIGN,
				    PIN_IO_MAX_REQUEST_SIZE);
	if (out->flags & ~(PIN_IO_BUFFERED | PIN_IO_NO_FIXED | PIN_IO_PIN_FIRST))
		return pin__io_fail(st->error, sizeof(st->error), -EINVAL,
				    "unknown I/O flags 0x%x", out->flags);
	st->queue_depth = out->queue_depth;
	st->request_size = out->request_size;
	return 0;
}

/*
 * O_DIRECT alignment the filesystem reports for fd. 0 and the alignments
 * (1 when statx does not know: we then rely on PIN_IO_ALIGN, 4096, which is
 * at least the logical block size of every device we meet), or -ENOTSUP
 * when it reports that the file has no direct I/O.
 */
static int dio_align(int fd, uint32_t *mem, uint32_t *off)
{
	unsigned char sx[256] __attribute__((aligned(8)));
	uint32_t mask;

	*mem = 1;
	*off = 1;
	memset(sx, 0, sizeof(sx));
	if (syscall(SYS_statx, fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, sx) < 0)
		return 0;
	memcpy(&mask, sx + STATX_OFF_MASK, 4);
	if (!(mask & STATX_DIOALIGN))
		return 0;
	memcpy(mem, sx + STATX_OFF_DIO_MEM, 4);
	memcpy(off, sx + STATX_OFF_DIO_OFFSET, 4);
	if (!*mem || !*off)
		return -ENOTSUP;
	return 0;
}

static int open_file(struct pin__file *f, const char *path, int wflags,
		     const struct pin_io_opts *o, struct pin_io_stats *st)
{
	int base = (wflags ? wflags : O_RDONLY) | O_CLOEXEC;
	uint32_t mem, off;
	struct stat sb;
	int fd = -1;

	f->fd = -1;
	f->direct = 0;
	f->path = path;
	if (o->flags & PIN_IO_BUFFERED) {
		note_fallback(st, "buffered I/O asked for");
	} else {
		fd = open(path, base | O_DIRECT, 0644);
		if (fd < 0 && errno == EINVAL) {
			note_fallback(st, "%s: open with O_DIRECT refused (EINVAL)",
				      path);
		} else if (fd < 0) {
			return pin__io_fail(st->error, sizeof(st->error), -errno,
					    "%s: open", path);
		} else if (dio_align(fd, &mem, &off) < 0) {
			note_fallback(st, "%s: statx reports no direct I/O", path);
			close(fd);
			fd = -1;
		} else if (mem > PIN_IO_ALIGN || off > PIN_IO_ALIGN ||
			   PIN_IO_ALIGN % mem || PIN_IO_ALIGN % off) {
			note_fallback(st, "%s: direct I/O alignment %u/%u does not divide %u",
				      path, mem, off, PIN_IO_ALIGN);
			close(fd);
			fd = -1;
		} else {
			f->direct = 1;
		}
	}
	if (fd < 0) {
		fd = open(path, base, 0644);
		if (fd < 0)
			return pin__io_fail(st->error, sizeof(st->error), -errno,
					    "%s: open", path);
	}
	if (fstat(fd, &sb) < 0) {
		int err = -errno;

		close(fd);
		return pin__io_fail(st->error, sizeof(st->error), err,
				    "%s: fstat", path);
	}
	if (!S_ISREG(sb.st_mode)) {
		close(fd);
		return pin__io_fail(st->error, sizeof(st->error), -EINVAL,
				    "%s: not a regular file", path);
	}
	f->fd = fd;
	f->size = (uint64_t)sb.st_size;
	return 0;
}

int pin__io_open_read(struct pin__file *f, const char *path,
		      const struct pin_io_opts *o, struct pin_io_stats *st)
{
	return open_file(f, path, 0, o, st);
}

int pin__io_open_write_new(struct pin__file *f, const char *path,
			   const struct pin_io_opts *o, struct pin_io_stats *st)
{
	return open_file(f, path, O_WRONLY | O_CREAT | O_TRUNC, o, st);
}

void pin__io_close(struct pin__file *f)
{
	if (f->fd >= 0)
		close(f->fd);
	f->fd = -1;
}

/* Reopen f without O_DIRECT after the kernel refused a direct transfer. */
static int reopen_buffered(struct pin__file *f, int wflags,
			   struct pin_io_stats *st)
{
	int fd = open(f->path, (wflags ? wflags : O_RDONLY) | O_CLOEXEC, 0644);

	if (fd < 0)
		return pin__io_fail(st->error, sizeof(st->error), -errno,
				    "%s: reopen without O_DIRECT", f->path);
	close(f->fd);
	f->fd = fd;
	f->direct = 0;
	return 0;
}

/* One request slot. */
struct slot {
	uint64_t off;		/* file offset of what is left to move */
	uint64_t len;		/* bytes left */
	char *buf;		/* where they go / come from */
	int fixed;		/* registered buffer index, or -1 */
	int busy;
	unsigned again;		/* EAGAIN/EINTR answers in a row */
};

struct engine {
	struct io_uring ring;
	struct slot *slots;
	unsigned nslots;
	int fixed;		/* buffers registered */
	unsigned inflight;
	unsigned char *reg;	/* paced: step i registered (sparse table) */
	size_t nreg;
};

static int engine_init(struct engine *e, const struct pin_io_opts *o,
		       struct pin_io_stats *st, const char *path)
{
	int ret;

	memset(e, 0, sizeof(*e));
	e->nslots = o->queue_depth;
	e->slots = calloc(e->nslots, sizeof(*e->slots));
	if (!e->slots)
		return pin__io_fail(st->error, sizeof(st->error), -ENOMEM,
				    "%s: request slots", path);
	ret = io_uring_queue_init(e->nslots, &e->ring, 0);
	if (ret < 0) {
		free(e->slots);
		return pin__io_fail(st->error, sizeof(st->error), ret,
				    "%s: io_uring_queue_init(%u)", path,
				    e->nslots);
	}
	return 0;
}

static void engine_exit(struct engine *e)
{
	if (e->fixed || e->reg)
		io_uring_unregister_buffers(&e->ring);
	io_uring_queue_exit(&e->ring);
	free(e->reg);
	free(e->slots);
}

/* Bytes one registered buffer may span: see FIXED_MAX_BVECS. */
uint64_t pin__io_fixed_span_max(void)
{
	long page = sysconf(_SC_PAGESIZE);
	uint64_t max = (FIXED_MAX_BVECS - 1) * (uint64_t)(page > 0 ? page : 4096);

	return max < FIXED_MAX ? max : FIXED_MAX;
}

/* The span of each registered buffer of a read: whole requests only. */
static uint64_t fixed_chunk(unsigned request_size)
{
	return pin__io_fixed_span_max() / request_size * request_size;
}

/*
 * Register [base, base + len) as fixed buffers of `chunk` bytes each
 * (the last one shorter). Records why not on failure; never fails the I/O.
 */
static void engine_register(struct engine *e, char *base, uint64_t len,
			    uint64_t chunk, const struct pin_io_opts *o,
			    struct pin_io_stats *st)
{
	struct iovec *iov;
	size_t n, i;
	int ret;

	if (o->flags & PIN_IO_NO_FIXED) {
		note_fallback(st, "fixed buffers not asked for");
		return;
	}
	if (!chunk || chunk > pin__io_fixed_span_max()) {
		note_fallback(st, "fixed buffers: %llu bytes per buffer over %llu",
			      (unsigned long long)chunk,
			      (unsigned long long)pin__io_fixed_span_max());
		return;
	}
	n = (len + chunk - 1) / chunk;
	if (!n || n > 16384) {
		note_fallback(st, "fixed buffers: %zu buffers needed", n);
		return;
	}
	iov = calloc(n, sizeof(*iov));
	if (!iov) {
		note_fallback(st, "fixed buffers: no memory for iovecs");
		return;
	}
	for (i = 0; i < n; i++) {
		iov[i].iov_base = base + i * chunk;
		iov[i].iov_len = (i + 1 < n) ? chunk : len - i * chunk;
	}
	ret = io_uring_register_buffers(&e->ring, iov, n);
	free(iov);
	if (ret < 0) {
		char ebuf[64];

		note_fallback(st, "fixed buffers refused by the kernel (%s)",
			      pin__strerror(ret, ebuf, sizeof(ebuf)));
		return;
	}
	e->fixed = 1;
}

/*
 * A paced read registers its steps one by one as they are prepared: an
 * empty (sparse) table of one slot per step first. Records why not on
 * failure; never fails the I/O.
 */
static void engine_register_sparse(struct engine *e, uint64_t span,
				   uint64_t step, const struct pin_io_opts *o,
				   struct pin_io_stats *st)
{
	size_t n = step ? (span + step - 1) / step : 0;
	char ebuf[64];
	int ret;

	if (o->flags & PIN_IO_NO_FIXED) {
		note_fallback(st, "fixed buffers not asked for");
		return;
	}
	if (!step || step > pin__io_fixed_span_max() || !n || n > 16384) {
		note_fallback(st, "fixed buffers: %zu steps of %llu bytes", n,
			      (unsigned long long)step);
		return;
	}
	e->reg = calloc(n, 1);
	if (!e->reg) {
		note_fallback(st, "fixed buffers: no memory for the table");
		return;
	}
	ret = io_uring_register_buffers_sparse(&e->ring, (unsigned)n);
	if (ret < 0) {
		free(e->reg);
		e->reg = NULL;
		note_fallback(st, "fixed buffers: sparse table refused by the kernel (%s)",
			      pin__strerror(ret, ebuf, sizeof(ebuf)));
		return;
	}
	e->nreg = n;
	e->fixed = 1;
}

/* Register step i of a paced read, [base, base + len), in its slot. */
static void engine_register_step(struct engine *e, size_t i, char *base,
				 uint64_t len, struct pin_io_stats *st)
{
	struct iovec iov = { .iov_base = base, .iov_len = len };
	char ebuf[64];
	int ret;

	if (!e->fixed || i >= e->nreg || e->reg[i])
		return;
	ret = io_uring_register_buffers_update_tag(&e->ring, (unsigned)i, &iov,
						   NULL, 1);
	if (ret < 0) {
		/* The steps registered so far stay in use. */
		e->fixed = 0;
		note_fallback(st, "fixed buffers refused by the kernel (%s)",
			      pin__strerror(ret, ebuf, sizeof(ebuf)));
		return;
	}
	e->reg[i] = 1;
}

/*
 * How far a paced read may go: poll what is prepared (waiting for more
 * only when nothing is in flight, so completions are never held back) and
 * register the steps newly ready. 0 or -errno from the preparer.
 */
static int pace_advance(struct engine *e, struct pin__pace *pace, char *dst,
			uint64_t span, uint64_t at, uint64_t *ready,
			struct pin_io_stats *st)
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
		engine_register_step(e, (size_t)k, dst + b, len, st);
	}
	return 0;
}

static void engine_submit(struct engine *e, struct pin__file *f,
			  unsigned idx, int write)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&e->ring);
	struct slot *s = &e->slots[idx];
	unsigned len = (unsigned)s->len;

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
	s->busy = 1;
	e->inflight++;
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
static int engine_wait(struct engine *e, struct pin_io_stats *st,
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
	e->slots[*idx].busy = 0;
	e->inflight--;
	return 0;
}

/* Collect what is still in flight after a failure. */
static void engine_drain(struct engine *e, struct pin_io_stats *st,
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

#define REFUSED	1	/* a direct transfer was refused: redo buffered */

static int size_changed(struct pin__file *f, struct pin_io_stats *st)
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

/*
 * The completions both passes treat alike: EAGAIN and EINTR are
 * resubmitted (RETRIED), at first at once, then after a pause; a request
 * answered so PIN_IO_MAX_RETRIES times in a row fails the call (GAVE_UP,
 * error set): a file that keeps refusing is not a transient condition.
 * EINVAL from O_DIRECT before any byte moved ends the pass so that it is
 * redone buffered (REFUSED). 0: the caller's to handle.
 */
#define RETRIED	2
#define GAVE_UP	3

static int settle_common(struct engine *e, struct pin__file *f,
			 struct pin_io_stats *st, unsigned idx, int res,
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
			engine_drain(e, st, f->path);
			return GAVE_UP;
		}
		if (s->again > RETRY_AT_ONCE)
			retry_pause();
		st->retries++;
		engine_submit(e, f, idx, write);
		return RETRIED;
	}
	s->again = 0;
	if (res == -EINVAL && f->direct && !done) {
		engine_drain(e, st, f->path);
		note_fallback(st, "%s: O_DIRECT %s refused (EINVAL)", f->path,
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
static int engine_next(struct engine *e, struct pin__file *f,
		       struct pin_io_stats *st, int write, uint64_t done,
		       unsigned *idx, int *res)
{
	int ret = engine_wait(e, st, f->path, idx, res);

	if (ret < 0)
		return ret;
	ret = settle_common(e, f, st, *idx, *res, write, done);
	return ret == GAVE_UP ? *res : ret;
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

/* The fixed buffer index of dst + rel, or -1. */
static int fixed_index(struct engine *e, uint64_t rel, uint64_t chunk)
{
	uint64_t i = rel / chunk;

	if (!e->fixed && !e->reg)
		return -1;
	if (e->reg)
		return i < e->nreg && e->reg[i] ? (int)i : -1;
	return (int)i;
}

static int read_pass(struct engine *e, struct pin__file *f, char *dst,
		     uint64_t aoff, uint64_t span, uint64_t need_end,
		     const struct pin_io_opts *o, struct pin_io_stats *st,
		     struct pin__pace *pace)
{
	uint64_t next = aoff, end = aoff + span, done = 0, chunk, ready = span;
	unsigned i, idx;
	int res, ret;

	if (pace) {
		chunk = pace->step;
		ready = 0;
		engine_register_sparse(e, span, chunk, o, st);
	} else {
		chunk = fixed_chunk(o->request_size);
		engine_register(e, dst, ALIGN_UP(span), chunk, o, st);
	}
	for (;;) {
		if (pace) {
			ret = pace_advance(e, pace, dst, span, next - aoff,
					   &ready, st);
			if (ret < 0) {
				pin__io_fail(st->error, sizeof(st->error), ret,
					     "%s: preparing memory for the read",
					     f->path);
				engine_drain(e, st, f->path);
				return ret;
			}
		}
		for (i = 0; i < e->nslots && next < end &&
			    next - aoff < ready; i++) {
			struct slot *s = &e->slots[i];

			if (s->busy)
				continue;
			s->off = next;
			s->len = end - next < o->request_size ?
				 end - next : o->request_size;
			s->buf = dst + (next - aoff);
			s->fixed = fixed_index(e, next - aoff, chunk);
			pace_sent(pace, next - aoff);
			next += s->len;
			engine_submit(e, f, i, 0);
		}
		if (!e->inflight && next < end)
			continue;	/* waits for the next prepared step */
		if (!e->inflight)
			break;
		ret = engine_next(e, f, st, 0, done, &idx, &res);
		if (ret < 0 || ret == REFUSED)
			return ret;
		if (ret == RETRIED)
			continue;
		struct slot *s = &e->slots[idx];

		if (res < 0) {
			pin__io_fail(st->error, sizeof(st->error), res,
				     "%s: read of %llu bytes at offset %llu",
				     f->path, (unsigned long long)s->len,
				     (unsigned long long)s->off);
			engine_drain(e, st, f->path);
			return res;
		}
		st->bytes += (uint64_t)res;
		done += (uint64_t)res;
		if ((uint64_t)res == s->len) {
			st->requests++;
			pace_done(pace, s->off - aoff);
		} else if (s->off + (uint64_t)res >= need_end) {
			st->requests++;		/* ran into EOF past the range */
			pace_done(pace, s->off - aoff);
		} else if (res == 0 ||
			   (f->direct && (s->off + (uint64_t)res) % PIN_IO_ALIGN)) {
			/* Nothing more, or a direct read that stopped
			 * mid-block: the end of the file. */
			uint64_t at = s->off + (uint64_t)res;

			engine_drain(e, st, f->path);
			ret = size_changed(f, st);
			if (ret < 0)
				return ret;
			return pin__io_fail(st->error, sizeof(st->error), -EIO,
					    "%s: end of file at offset %llu, expected data up to %llu",
					    f->path, (unsigned long long)at,
					    (unsigned long long)need_end);
		} else {
			/* Short: move on from the last aligned byte. */
			uint64_t stop = s->off + s->len;
			uint64_t from = s->off + (uint64_t)res;

			if (f->direct)
				from = ALIGN_DOWN(from);
			st->short_ios++;
			s->buf += from - s->off;
			s->len = stop - from;
			s->off = from;
			engine_submit(e, f, idx, 0);
		}
		if (o->progress)
			o->progress(o->progress_arg, done, span);
	}
	return size_changed(f, st);
}

int pin__io_read_fd(struct pin__file *f, void *dst, uint64_t aoff,
		    uint64_t span, uint64_t need_end,
		    const struct pin_io_opts *o, struct pin_io_stats *st)
{
	return pin__io_read_paced(f, dst, aoff, span, need_end, o, st, NULL);
}

int pin__io_read_paced(struct pin__file *f, void *dst, uint64_t aoff,
		       uint64_t span, uint64_t need_end,
		       const struct pin_io_opts *o, struct pin_io_stats *st,
		       struct pin__pace *pace)
{
	struct engine e;
	uint64_t t0;
	int ret;

	if (!span)
		return size_changed(f, st);
	if (f->direct && (uintptr_t)dst % PIN_IO_ALIGN) {
		note_fallback(st, "%s: destination not %u-aligned", f->path,
			      PIN_IO_ALIGN);
		ret = reopen_buffered(f, 0, st);
		if (ret < 0)
			return ret;
	}
	t0 = pin__now_ns();
	ret = engine_init(&e, o, st, f->path);
	if (ret < 0)
		return ret;
	st->fixed_buffers = 0;
	ret = read_pass(&e, f, dst, aoff, span, need_end, o, st, pace);
	st->fixed_buffers = e.fixed;
	engine_exit(&e);
	if (ret == REFUSED) {
		ret = reopen_buffered(f, 0, st);
		if (ret < 0)
			return ret;
		ret = engine_init(&e, o, st, f->path);
		if (ret < 0)
			return ret;
		ret = read_pass(&e, f, dst, aoff, span, need_end, o, st, pace);
		st->fixed_buffers = e.fixed;
		engine_exit(&e);
	}
	st->io_ns += pin__now_ns() - t0;
	return ret == REFUSED ? -EIO : ret;
}

/* Cursor over the segments of a gathered write. */
struct gather {
	const struct pin__seg *segs;
	size_t nseg;
	size_t i;
	uint64_t at;		/* offset into segs[i] */
};

static uint64_t gather_copy(struct gather *g, char *dst, uint64_t want)
{
	uint64_t got = 0;

	while (got < want && g->i < g->nseg) {
		uint64_t left = g->segs[g->i].len - g->at;
		uint64_t n = want - got < left ? want - got : left;

		if (n)
			memcpy(dst + got, (const char *)g->segs[g->i].p + g->at,
			       n);
		got += n;
		g->at += n;
		if (g->at == g->segs[g->i].len) {
			g->i++;
			g->at = 0;
		}
	}
	return got;
}

/*
 * Where the source of the next bytes is itself aligned (a tensor at an
 * aligned place of a region, say), write straight from it: take up to n
 * bytes, a multiple of PIN_IO_ALIGN, from the current segment.
 */
static int zero_copy(struct gather *g, uint64_t n, struct slot *s)
{
	const struct pin__seg *sg;
	const char *src;
	uint64_t left;

	if (g->i >= g->nseg)
		return 0;
	sg = &g->segs[g->i];
	left = sg->len - g->at;
	src = (const char *)sg->p + g->at;
	if (left < PIN_IO_ALIGN || (uintptr_t)src % PIN_IO_ALIGN)
		return 0;
	if (n > left)
		n = left;
	n = ALIGN_DOWN(n);
	s->buf = (char *)src;
	s->len = n;
	s->fixed = -1;
	g->at += n;
	if (g->at == sg->len) {
		g->i++;
		g->at = 0;
	}
	return 1;
}

static int write_pass(struct engine *e, struct pin__file *f, char *bounce,
		      const struct pin__seg *segs, size_t nseg,
		      uint64_t file_off, uint64_t total, uint64_t wlen,
		      const struct pin_io_opts *o, struct pin_io_stats *st)
{
	struct gather g = { .segs = segs, .nseg = nseg };
	uint64_t next = file_off, end = file_off + wlen, done = 0;
	unsigned i, idx;
	int res, ret;

	engine_register(e, bounce, (uint64_t)e->nslots * o->request_size,
			o->request_size, o, st);
	for (;;) {
		for (i = 0; i < e->nslots && next < end; i++) {
			struct slot *s = &e->slots[i];
			uint64_t n, got;

			if (s->busy)
				continue;
			n = end - next < o->request_size ?
			    end - next : o->request_size;
			if (f->direct && zero_copy(&g, n, s)) {
				s->off = next;
				next += s->len;
				engine_submit(e, f, i, 1);
				continue;
			}
			s->buf = bounce + (uint64_t)i * o->request_size;
			got = gather_copy(&g, s->buf, n);
			if (f->direct && got % PIN_IO_ALIGN) {
				/* The file's last block: pad it. */
				memset(s->buf + got, 0, ALIGN_UP(got) - got);
				got = ALIGN_UP(got);
			}
			s->off = next;
			s->len = got;
			s->fixed = e->fixed ? (int)i : -1;
			next += n;
			engine_submit(e, f, i, 1);
		}
		if (!e->inflight)
			break;
		ret = engine_next(e, f, st, 1, done, &idx, &res);
		if (ret < 0 || ret == REFUSED)
			return ret;
		if (ret == RETRIED)
			continue;
		struct slot *s = &e->slots[idx];

		if (res <= 0 || (f->direct && (uint64_t)res < s->len &&
				 res % PIN_IO_ALIGN)) {
			if (res >= 0)
				res = -EIO;
			pin__io_fail(st->error, sizeof(st->error), res,
				     "%s: write of %llu bytes at offset %llu",
				     f->path, (unsigned long long)s->len,
				     (unsigned long long)s->off);
			engine_drain(e, st, f->path);
			return res;
		}
		st->bytes += (uint64_t)res;
		done += (uint64_t)res;
		if ((uint64_t)res < s->len) {
			st->short_ios++;
			s->buf += res;
			s->off += (uint64_t)res;
			s->len -= (uint64_t)res;
			engine_submit(e, f, idx, 1);
			continue;
		}
		st->requests++;
		if (o->progress)
			o->progress(o->progress_arg,
				    done < total ? done : total, total);
	}
	(void)total;
	return 0;
}

int pin__io_write_fd(struct pin__file *f, const struct pin__seg *segs,
		     size_t nseg, uint64_t file_off,
		     const struct pin_io_opts *o, struct pin_io_stats *st)
{
	uint64_t total = 0, wlen, tail = 0, t0;
	struct engine e;
	char *bounce = NULL;
	size_t i;
	int ret;

	for (i = 0; i < nseg; i++)
		total += segs[i].len;
	if (file_off % PIN_IO_ALIGN)
		return pin__io_fail(st->error, sizeof(st->error), -EINVAL,
				    "%s: write offset %llu not %u-aligned",
				    f->path, (unsigned long long)file_off,
				    PIN_IO_ALIGN);
	ret = posix_memalign((void **)&bounce, PIN_IO_ALIGN,
			     (size_t)o->queue_depth * o->request_size);
	if (ret)
		return pin__io_fail(st->error, sizeof(st->error), -ret,
				    "%s: %u bounce buffers of %u bytes",
				    f->path, o->queue_depth, o->request_size);
	t0 = pin__now_ns();
	/*
	 * Reserve the blocks first: direct writes that extend a file are
	 * serialised by the filesystem (ext4, xfs take the inode lock
	 * exclusively), writes into allocated space run in parallel.
	 */
	if (f->direct && file_off + total > f->size &&
	    fallocate(f->fd, 0, (off_t)file_off,
		      (off_t)ALIGN_UP(total)) < 0 &&
	    errno != EOPNOTSUPP && errno != ENOSYS) {
		ret = pin__io_fail(st->error, sizeof(st->error), -errno,
				   "%s: fallocate %llu bytes at offset %llu",
				   f->path, (unsigned long long)ALIGN_UP(total),
				   (unsigned long long)file_off);
		goto out;
	}
again:
	wlen = total;
	tail = 0;
	/* Padding the last block would clobber later bytes of the file. */
	if (f->direct && total % PIN_IO_ALIGN && f->size > file_off + total) {
		tail = total % PIN_IO_ALIGN;
		wlen = total - tail;
	}
	ret = engine_init(&e, o, st, f->path);
	if (ret < 0)
		goto out;
	ret = write_pass(&e, f, bounce, segs, nseg, file_off, total, wlen, o,
			 st);
	st->fixed_buffers = e.fixed;
	engine_exit(&e);
	if (ret == REFUSED) {
		ret = reopen_buffered(f, O_WRONLY, st);
		if (ret < 0)
			goto out;
		goto again;
	}
	if (ret < 0)
		goto out;
	if (tail) {
		struct gather g = { .segs = segs, .nseg = nseg };
		char skip[4096];
		uint64_t left = wlen;

		while (left) {
			uint64_t n = left < sizeof(skip) ? left : sizeof(skip);

			gather_copy(&g, skip, n);
			left -= n;
		}
		gather_copy(&g, bounce, tail);
		/* An unaligned write needs a descriptor without O_DIRECT. */
		int bfd = open(f->path, O_WRONLY | O_CLOEXEC);
		ssize_t w = bfd < 0 ? -1 :
			    pwrite(bfd, bounce, tail, (off_t)(file_off + wlen));
		int err = w < 0 ? -errno : -EIO;

		if (bfd >= 0)
			close(bfd);
		if (w != (ssize_t)tail) {
			ret = pin__io_fail(st->error, sizeof(st->error), err,
					   "%s: write of the last %llu bytes at offset %llu",
					   f->path, (unsigned long long)tail,
					   (unsigned long long)(file_off + wlen));
			goto out;
		}
		st->bytes += tail;
		note_fallback(st, "%s: last %llu bytes written buffered (a partial block inside the file)",
			      f->path, (unsigned long long)tail);
	} else if (f->direct && total % PIN_IO_ALIGN &&
		   file_off + total >= f->size &&
		   ftruncate(f->fd, (off_t)(file_off + total)) < 0) {
		ret = pin__io_fail(st->error, sizeof(st->error), -errno,
				   "%s: truncate to %llu after the padded last block",
				   f->path,
				   (unsigned long long)(file_off + total));
		goto out;
	}
	if (fsync(f->fd) < 0) {
		ret = pin__io_fail(st->error, sizeof(st->error), -errno,
				   "%s: fsync", f->path);
		goto out;
	}
	if (file_off + total > f->size)
		f->size = file_off + total;
	st->io_ns += pin__now_ns() - t0;
	ret = 0;
out:
	free(bounce);
	return ret;
}

static void stats_begin(struct pin_io_stats *st)
{
	memset(st, 0, sizeof(*st));
	st->direct = 1;
}

int pin_io_read(void *buf, uint64_t buf_len, const char *path,
		uint64_t file_off, uint64_t len, const struct pin_io_opts *opts,
		struct pin_io_stats *stats)
{
	struct pin_io_stats local = { 0 };
	struct pin_io_stats *st = stats ? stats : &local;
	uint64_t t0 = pin__now_ns(), span, aoff;
	struct pin_io_opts o;
	struct pin__file f;
	int ret;

	stats_begin(st);
	if (!buf || !path)
		return pin__io_fail(st->error, sizeof(st->error), -EINVAL,
				    "pin_io_read: NULL buffer or path");
	span = pin_io_span(file_off, len);
	if (!span && len)
		return pin__io_fail(st->error, sizeof(st->error), -EINVAL,
				    "%s: range %llu+%llu overflows", path,
				    (unsigned long long)file_off,
				    (unsigned long long)len);
	if (buf_len < span)
		return pin__io_fail(st->error, sizeof(st->error), -EINVAL,
				    "%s: buffer of %llu bytes, the read needs %llu",
				    path, (unsigned long long)buf_len,
				    (unsigned long long)span);
	ret = pin__io_opts(opts, &o, st);
	if (ret < 0)
		return ret;
	ret = pin__io_open_read(&f, path, &o, st);
	if (ret < 0)
		return ret;
	aoff = ALIGN_DOWN(file_off);
	ret = pin__io_read_fd(&f, buf, aoff, len ? span : 0, file_off + len,
			      &o, st);
	st->direct = f.direct;
	pin__io_close(&f);
	st->ns = pin__now_ns() - t0;
	return ret < 0 ? ret : (int)(file_off - aoff);
}

int pin_io_write(const void *buf, uint64_t len, const char *path,
		 uint64_t file_off, const struct pin_io_opts *opts,
		 struct pin_io_stats *stats)
{
	struct pin_io_stats local = { 0 };
	struct pin_io_stats *st = stats ? stats : &local;
	struct pin__seg seg = { .p = buf, .len = len };
	uint64_t t0 = pin__now_ns();
	struct pin_io_opts o;
	struct pin__file f;
	int ret;

	stats_begin(st);
	if ((!buf && len) || !path)
		return pin__io_fail(st->error, sizeof(st->error), -EINVAL,
				    "pin_io_write: NULL buffer or path");
	if (len > UINT64_MAX - file_off)
		return pin__io_fail(st->error, sizeof(st->error), -EINVAL,
				    "%s: range overflows", path);
	ret = pin__io_opts(opts, &o, st);
	if (ret < 0)
		return ret;
	ret = open_file(&f, path, O_WRONLY | O_CREAT, &o, st);
	if (ret < 0)
		return ret;
	ret = pin__io_write_fd(&f, &seg, 1, file_off, &o, st);
	st->direct = f.direct;
	pin__io_close(&f);
	st->ns = pin__now_ns() - t0;
	return ret;
}

static int region_range(struct pin_region *r, uint64_t off, uint64_t len,
			char **addr, struct pin_io_stats *st)
{
	void *map;
	int ret;

	if (off % PIN_IO_ALIGN || off > r->size || len > r->size - off) {
		pin__io_fail(st->error, sizeof(st->error), 0,
			     "region range %llu+%llu not %u-aligned or past its %llu bytes",
			     (unsigned long long)off, (unsigned long long)len,
			     PIN_IO_ALIGN, (unsigned long long)r->size);
		return pin__fail(r->err, -EINVAL, "%s", st->error);
	}
	ret = pin_region_map(r, &map);
	if (ret < 0) {
		pin__io_fail(st->error, sizeof(st->error), 0, "%s",
			     pin_region_error(r));
		return ret;
	}
	*addr = (char *)map + off;
	return 0;
}

int pin_read_file(struct pin_region *r, uint64_t region_off, const char *path,
		  uint64_t file_off, uint64_t len,
		  const struct pin_io_opts *opts, struct pin_io_stats *stats)
{
	struct pin_io_stats local = { 0 };
	struct pin_io_stats *st = stats ? stats : &local;
	uint64_t span = pin_io_span(file_off, len);
	struct pin__refs_hold hold;
	char *addr;
	int ret;

	stats_begin(st);
	ret = region_range(r, region_off, span, &addr, st);
	if (ret < 0)
		return ret;
	/* The read's fixed buffers are the owner's: declared (refs.c). */
	pin__refs_hold(&hold, r, addr, span, PIN_EXPECT_PER_CHUNK);
	ret = pin_io_read(addr, r->size - region_off, path, file_off, len,
			  opts, st);
	pin__refs_release(&hold);
	if (ret < 0)
		pin__fail(r->err, 0, "%s", st->error);
	return ret;
}

int pin_write_file(struct pin_region *r, uint64_t region_off, const char *path,
		   uint64_t file_off, uint64_t len,
		   const struct pin_io_opts *opts, struct pin_io_stats *stats)
{
	struct pin_io_stats local = { 0 };
	struct pin_io_stats *st = stats ? stats : &local;
	char *addr;
	int ret;

	stats_begin(st);
	if (region_off > r->size || len > r->size - region_off)
		return pin__fail(r->err, -EINVAL,
				 "region range %llu+%llu past its %llu bytes",
				 (unsigned long long)region_off,
				 (unsigned long long)len,
				 (unsigned long long)r->size);
	ret = region_range(r, region_off & ~(uint64_t)(PIN_IO_ALIGN - 1), 0,
			   &addr, st);
	if (ret < 0)
		return ret;
	addr += region_off % PIN_IO_ALIGN;
	ret = pin_io_write(addr, len, path, file_off, opts, st);
	if (ret < 0)
		pin__fail(r->err, 0, "%s", st->error);
	return ret;
}
