/* SPDX-License-Identifier: MIT */
/*
 * libpin's I/O engine (io*.c), shared with safetensors.c and fill.c. Not
 * installed.
 */
#ifndef LIBPIN_IO_INTERNAL_H
#define LIBPIN_IO_INTERNAL_H

#include <stdarg.h>
#include <stdint.h>
#include <stddef.h>

#include "pin.h"

/* One piece of a gathered write: len bytes at p. */
struct pin__seg {
	const void *p;
	uint64_t len;
};

/* An open file and how it is being accessed. */
struct pin__file {
	int fd;
	int direct;		/* opened with O_DIRECT */
	uint64_t size;		/* st_size at open */
	const char *path;	/* for messages; not owned */
};

/* Format "fmt: strerror(err)" into buf (len bytes); returns err. */
int pin__io_fail(char *buf, size_t len, int err, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* Resolve opts (NULL: defaults) into *out; -EINVAL on bad values. */
int pin__io_opts(const struct pin_io_opts *opts, struct pin_io_opts *out,
		 struct pin__io_stats *st);

/*
 * Open path for reading, O_DIRECT unless asked not to or refused (then
 * buffered, with the reason in st->fallback_reason).
 */
int pin__io_open_read(struct pin__file *f, const char *path,
		      const struct pin_io_opts *o, struct pin__io_stats *st);
/* Create (or truncate) path for writing, O_DIRECT where allowed. */
int pin__io_open_write_new(struct pin__file *f, const char *path,
			   const struct pin_io_opts *o, struct pin__io_stats *st);
void pin__io_close(struct pin__file *f);

/*
 * Read file bytes [aoff, aoff + span) (aoff aligned) into dst; bytes up to
 * need_end must exist (else -EIO), later ones may be past EOF. Falls back to
 * buffered (reopening f) if an O_DIRECT read is refused. Checks that the
 * file did not change size. Adds to st's counters.
 */
int pin__io_read_fd(struct pin__file *f, void *dst, uint64_t aoff,
		    uint64_t span, uint64_t need_end,
		    const struct pin_io_opts *o, struct pin__io_stats *st);

/*
 * Write the segments back to back at file_off (aligned) of an fd opened for
 * writing (direct says whether with O_DIRECT), through aligned bounce
 * buffers; the last block is zero-padded on the O_DIRECT path and the file
 * then truncated to file_off + total when it was extended (extend set).
 */
int pin__io_write_fd(struct pin__file *f, const struct pin__seg *segs,
		     size_t nseg, uint64_t file_off,
		     const struct pin_io_opts *o, struct pin__io_stats *st);

/*
 * A read into memory that another thread prepares (pins) ahead of it, one
 * step at a time (fill.c). The read moves only into prepared steps,
 * registers each step as a fixed buffer of its own once it is prepared,
 * and records when each step's first read went out and its last came back.
 */
struct pin__step_times {
	uint64_t pin_begin_ns, pin_end_ns;
	uint64_t read_begin_ns, read_end_ns;
	unsigned reads_left;	/* requests of the step not yet complete */
};

struct pin__pace {
	uint64_t step;		/* bytes; a multiple of the request size */
	struct pin__step_times *times;	/* one per step */
	/*
	 * Bytes prepared from the start of the destination, in *ready; with
	 * block set, wait until there are at least want. 0 or -errno.
	 */
	int (*ready)(struct pin__pace *p, uint64_t want, int block,
		     uint64_t *ready);
};

/* pin__io_read_fd into memory prepared as pace says (not NULL). */
int pin__io_read_paced(struct pin__file *f, void *dst, uint64_t aoff,
		       uint64_t span, uint64_t need_end,
		       const struct pin_io_opts *o, struct pin__io_stats *st,
		       struct pin__pace *pace);

/* -ESTALE (with st->error) if f's size is no longer the one it opened with. */
int pin__io_check_size(const struct pin__file *f, struct pin__io_stats *st);

/* Append a reason to st->fallback_reason ("; " between reasons). */
void pin__io_note_fallback(struct pin__io_stats *st, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* The largest fixed buffer a read may register (Documentation/kernel-bug-fixed-vcnt.md). */
uint64_t pin__io_fixed_span_max(void);

uint64_t pin__now_ns(void);

#endif /* LIBPIN_IO_INTERNAL_H */
