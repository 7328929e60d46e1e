/* SPDX-License-Identifier: MIT */
/*
 * Filling a fresh region from a file, pinning under the reads (fill.c).
 * Not installed.
 */
#ifndef LIBPIN_FILL_H
#define LIBPIN_FILL_H

#include <stddef.h>
#include <stdint.h>

#include "io_internal.h"

/*
 * Bytes per step, before each path rounds it to its own unit: about
 * sixteen steps over the span, so that the first is small and the reads
 * start early, but each 4-64 MiB.
 */
static inline uint64_t pin__fill_step_bytes(uint64_t span)
{
	const uint64_t min = 4ULL << 20, max = 64ULL << 20;
	uint64_t step = span / 16;

	return step < min ? min : step > max ? max : step;
}

/* What a fill did, step by step; times is the caller's to free. */
struct pin__fill_report {
	uint64_t pin_ns;	/* time spent preparing (overlaps the reads) */
	uint64_t step;		/* bytes per step */
	size_t nsteps;
	struct pin__step_times *times;
	int kernel_fill;	/* the module's FILL pinned and read each step */
};

/*
 * An internal bit of pin_io_opts.flags for pin__fill_from_file (never a
 * caller's: pin__io_opts refuses it): the region stays OPEN after the
 * fill, so its portable owner mapping is the writable one the reads used.
 */
#define PIN__FILL_OPEN		(1U << 31)

/*
 * Read file bytes [aoff, aoff + span) into the start of r, a region that
 * is neither mapped nor filled yet (portable: allocated without its pages,
 * see pin__alloc_to_fill), while helper threads pin it step by step
 * ahead of the reads. On return r->map is the owner mapping, locked where
 * RLIMIT_MEMLOCK allowed; on the portable backend read-only, so that the
 * seal need not remap it, or with PIN__FILL_OPEN in o->flags writable.
 */
int pin__fill_from_file(struct pin_region *r, struct pin__file *f,
			uint64_t aoff, uint64_t span, uint64_t need_end,
			const struct pin_io_opts *o, struct pin__io_stats *st,
			struct pin__fill_report *rep);

/*
 * The same for a lazy device region (not mapped yet) through the module's
 * FILL (fill_kernel.c), each step allocated and read by the kernel; the
 * region is whole and mapped (r->map) on return. -EOPNOTSUPP, with the
 * reason in st->fallback_reason, where the module or the file cannot
 * (nothing counted in st; chunks it made stay, as POPULATE would make
 * them).
 */
int pin__fill_kernel(struct pin_region *r, struct pin__file *f,
		     uint64_t aoff, uint64_t span, uint64_t need_end,
		     const struct pin_io_opts *o, struct pin__io_stats *st,
		     struct pin__fill_report *rep);

#endif /* LIBPIN_FILL_H */
