// SPDX-License-Identifier: MIT
/*
 * The engine without io_uring. Where the kernel refuses io_uring_setup (a
 * container runtime's default seccomp profile answers ENOSYS or EPERM,
 * kernel.io_uring_disabled EPERM, an LSM EACCES), each request is carried
 * out on submission with pread or pwrite (on the same descriptor, so
 * O_DIRECT where it was opened so) and its answer queued as its
 * completion: the passes above (io_read.c, io_write.c) run unchanged, one
 * request at a time. The engine says so once in the fallback reason.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"
#include "io_internal.h"
#include "io_engine.h"

int pin__plain_wanted(int err)
{
	return err == -ENOSYS || err == -EPERM || err == -EACCES;
}

#define PLAIN_NOTE	"io_uring unavailable"

int pin__plain_init(struct engine *e, int err, struct pin__io_stats *st)
{
	char ebuf[64];

	e->fifo = calloc(e->nslots, sizeof(*e->fifo));
	if (!e->fifo)
		return -ENOMEM;
	e->plain = 1;
	if (!strstr(st->fallback_reason, PLAIN_NOTE))
		pin__io_note_fallback(st, PLAIN_NOTE " (%s): plain reads and writes, one at a time",
				      pin__strerror(err, ebuf, sizeof(ebuf)));
	return 0;
}

/* Move slot idx's bytes now; the answer waits in the queue. */
void pin__plain_submit(struct engine *e, struct pin__file *f, unsigned idx,
		       int write)
{
	struct slot *s = &e->slots[idx];
	ssize_t n;

	if (write)
		n = pwrite(f->fd, s->buf, (size_t)s->len, (off_t)s->off);
	else
		n = pread(f->fd, s->buf, (size_t)s->len, (off_t)s->off);
	s->res = n < 0 ? -errno : (int)n;
	e->fifo[(e->head + e->queued) % e->nslots] = idx;
	e->queued++;
}

/* The oldest queued answer; -EAGAIN when none is queued. */
int pin__plain_wait(struct engine *e, unsigned *idx, int *res)
{
	if (!e->queued)
		return -EAGAIN;
	*idx = e->fifo[e->head];
	*res = e->slots[*idx].res;
	e->head = (e->head + 1) % e->nslots;
	e->queued--;
	return 0;
}
