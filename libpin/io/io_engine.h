/* SPDX-License-Identifier: MIT */
/*
 * What the parts of the I/O engine (io*.c) share and nothing else uses:
 * the request engine (io_engine.c) and its registered buffers
 * (io_fixed.c), its stand-in where io_uring is unavailable (io_plain.c),
 * opening and reopening files (io_open.c), the record of
 * fallbacks, and PIN_IO_ALIGN arithmetic. Not installed.
 */
#ifndef LIBPIN_IO_ENGINE_H
#define LIBPIN_IO_ENGINE_H

#include <liburing.h>
#include <stdint.h>

#include "io_internal.h"

#define ALIGN_DOWN(x)	((x) & ~(uint64_t)(PIN_IO_ALIGN - 1))
#define ALIGN_UP(x)	ALIGN_DOWN((x) + PIN_IO_ALIGN - 1)

/* One request slot. */
struct slot {
	uint64_t off;		/* file offset of what is left to move */
	uint64_t len;		/* bytes left */
	char *buf;		/* where they go / come from */
	int fixed;		/* registered buffer index, or -1 */
	int busy;
	unsigned again;		/* EAGAIN/EINTR answers in a row */
	int res;		/* plain: the answer, while queued */
};

struct engine {
	struct io_uring ring;
	struct slot *slots;
	unsigned nslots;
	int fixed;		/* buffers registered */
	unsigned inflight;
	unsigned char *reg;	/* paced: step i registered (sparse table) */
	size_t nreg;
	int plain;		/* no io_uring: io_plain.c does the requests */
	unsigned *fifo;		/* plain: slots answered, oldest first */
	unsigned head, queued;
};

#define REFUSED	1	/* a direct transfer was refused: redo buffered */

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

/*
 * Open path for reading (wflags 0) or with wflags, O_DIRECT unless asked
 * not to or refused (then buffered, with the reason recorded).
 */
int pin__io_open(struct pin__file *f, const char *path, int wflags,
		 const struct pin_io_opts *o, struct pin__io_stats *st);
/* Reopen f without O_DIRECT after the kernel refused a direct transfer. */
int pin__io_reopen_buffered(struct pin__file *f, int wflags,
			    struct pin__io_stats *st);

/* The engine (io_engine.c). */
int pin__engine_init(struct engine *e, const struct pin_io_opts *o,
		     struct pin__io_stats *st, const char *path);
void pin__engine_exit(struct engine *e);
void pin__engine_submit(struct engine *e, struct pin__file *f,
			unsigned idx, int write);
/* Collect what is still in flight after a failure. */
void pin__engine_drain(struct engine *e, struct pin__io_stats *st,
		       const char *path);
/*
 * The next completion: 0 with idx and res for the caller to handle,
 * RETRIED, REFUSED, or a negative errno with the error set.
 */
int pin__engine_next(struct engine *e, struct pin__file *f,
		     struct pin__io_stats *st, int write, uint64_t done,
		     unsigned *idx, int *res);

/*
 * Without io_uring (io_plain.c): whether io_uring_queue_init's err means
 * io_uring is unavailable here; make e plain (noted once in st); do a
 * request at once; its answer (-EAGAIN: none queued).
 */
int pin__plain_wanted(int err);
int pin__plain_init(struct engine *e, int err, struct pin__io_stats *st);
void pin__plain_submit(struct engine *e, struct pin__file *f, unsigned idx,
		       int write);
int pin__plain_wait(struct engine *e, unsigned *idx, int *res);

/* Registered buffers (io_fixed.c); none of these fails the I/O. */
uint64_t pin__io_fixed_chunk(unsigned request_size);
void pin__engine_register(struct engine *e, char *base, uint64_t len,
			  uint64_t chunk, const struct pin_io_opts *o,
			  struct pin__io_stats *st);
void pin__engine_register_sparse(struct engine *e, uint64_t span,
				 uint64_t step, const struct pin_io_opts *o,
				 struct pin__io_stats *st);
void pin__engine_register_step(struct engine *e, size_t i, char *base,
			       uint64_t len, struct pin__io_stats *st);
int pin__io_fixed_index(struct engine *e, uint64_t rel, uint64_t chunk);

#endif /* LIBPIN_IO_ENGINE_H */
