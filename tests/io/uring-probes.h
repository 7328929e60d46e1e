/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Kprobe events that show how io_uring stored a registered (fixed) buffer,
 * for fixed-coalesce.c: start them (6.12 only; why not, in words, where
 * they cannot be), clear the trace before a case, read what the case's
 * registration and READ_FIXED made the kernel see, take them down.
 */
#ifndef URING_PROBES_H
#define URING_PROBES_H

#include <stdbool.h>

struct tracer {
	char dir[256];		/* tracefs root */
	char group[64];		/* kprobe event group, per pid */
	char inst[384];		/* private instance */
	bool events;		/* events created */
	bool instance;		/* instance created */
	bool has_reg;		/* the reg probe too (6.12) */
	int nr_off;		/* offsetof(struct io_mapped_ubuf, nr_bvecs) */
	char why[512];		/* why tracing is unavailable */
};

/* What the probes saw for one registration (and its read). */
struct seen {
	bool reg;		/* a reg line */
	long ret;
	unsigned long long imu, nr_bvecs, folio_shift, len, acct_pages;
	unsigned long long bv0_len, bv0_off, bv1_len;
	bool imp;		/* an imp line */
	unsigned long long imp_imu, imp_nr_bvecs, imp_folio_shift;
	unsigned long long imp_bv0_len, imp_bv1_len;
};

/*
 * Creates the events and a private instance filtered to this process, for
 * kernel release; on failure t->why says why (take down what was made with
 * tracer_stop()). An exit without tracer_stop() removes them too.
 */
int tracer_start(struct tracer *t, const char *release);
/* Removes the instance and the events; forgets t for the exit path. */
void tracer_stop(struct tracer *t);
/* Empties the instance's trace, before the next case. */
void tracer_clear(struct tracer *t);
/* Parse this case's events out of the instance's trace. */
void tracer_read(struct tracer *t, struct seen *s);

/* The whole of a (small, virtual) file, NUL-terminated; NULL on error. */
char *read_text(const char *path);

#endif /* URING_PROBES_H */
