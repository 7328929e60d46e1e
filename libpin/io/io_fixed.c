// SPDX-License-Identifier: MIT
/*
 * Registered (fixed) buffers of the io_uring engine: how large one may be
 * (a kernel bug bounds it), registering a whole destination at once or a
 * paced read's steps one by one, and which buffer a request uses. Every
 * refusal is recorded and the transfer goes on without them.
 */
#include <stdlib.h>
#include <sys/uio.h>
#include <unistd.h>

#include "internal.h"
#include "io_internal.h"
#include "io_engine.h"

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

/* Bytes one registered buffer may span: see FIXED_MAX_BVECS. */
uint64_t pin__io_fixed_span_max(void)
{
	long page = sysconf(_SC_PAGESIZE);
	uint64_t max = (FIXED_MAX_BVECS - 1) * (uint64_t)(page > 0 ? page : 4096);

	return max < FIXED_MAX ? max : FIXED_MAX;
}

/* The span of each registered buffer of a read: whole requests only. */
uint64_t pin__io_fixed_chunk(unsigned request_size)
{
	return pin__io_fixed_span_max() / request_size * request_size;
}

/*
 * Register [base, base + len) as fixed buffers of `chunk` bytes each
 * (the last one shorter). Records why not on failure; never fails the I/O.
 */
void pin__engine_register(struct engine *e, char *base, uint64_t len,
			  uint64_t chunk, const struct pin_io_opts *o,
			  struct pin__io_stats *st)
{
	struct iovec *iov;
	size_t n, i;
	int ret;

	if (e->plain)
		return;		/* no ring: the reason is noted already */
	if (o->flags & PIN_IO_NO_FIXED) {
		pin__io_note_fallback(st, "fixed buffers not asked for");
		return;
	}
	if (!chunk || chunk > pin__io_fixed_span_max()) {
		pin__io_note_fallback(st, "fixed buffers: %llu bytes per buffer over %llu",
				      (unsigned long long)chunk,
				      (unsigned long long)pin__io_fixed_span_max());
		return;
	}
	n = (len + chunk - 1) / chunk;
	if (!n || n > 16384) {
		pin__io_note_fallback(st, "fixed buffers: %zu buffers needed", n);
		return;
	}
	iov = calloc(n, sizeof(*iov));
	if (!iov) {
		pin__io_note_fallback(st, "fixed buffers: no memory for iovecs");
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

		pin__io_note_fallback(st, "fixed buffers refused by the kernel (%s)",
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
void pin__engine_register_sparse(struct engine *e, uint64_t span,
				 uint64_t step, const struct pin_io_opts *o,
				 struct pin__io_stats *st)
{
	size_t n = step ? (span + step - 1) / step : 0;
	char ebuf[64];
	int ret;

	if (e->plain)
		return;		/* no ring: the reason is noted already */
	if (o->flags & PIN_IO_NO_FIXED) {
		pin__io_note_fallback(st, "fixed buffers not asked for");
		return;
	}
	if (!step || step > pin__io_fixed_span_max() || !n || n > 16384) {
		pin__io_note_fallback(st, "fixed buffers: %zu steps of %llu bytes", n,
				      (unsigned long long)step);
		return;
	}
	e->reg = calloc(n, 1);
	if (!e->reg) {
		pin__io_note_fallback(st, "fixed buffers: no memory for the table");
		return;
	}
	ret = io_uring_register_buffers_sparse(&e->ring, (unsigned)n);
	if (ret < 0) {
		free(e->reg);
		e->reg = NULL;
		pin__io_note_fallback(st, "fixed buffers: sparse table refused by the kernel (%s)",
				      pin__strerror(ret, ebuf, sizeof(ebuf)));
		return;
	}
	e->nreg = n;
	e->fixed = 1;
}

/* Register step i of a paced read, [base, base + len), in its slot. */
void pin__engine_register_step(struct engine *e, size_t i, char *base,
			       uint64_t len, struct pin__io_stats *st)
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
		pin__io_note_fallback(st, "fixed buffers refused by the kernel (%s)",
				      pin__strerror(ret, ebuf, sizeof(ebuf)));
		return;
	}
	e->reg[i] = 1;
}

/* The fixed buffer index of dst + rel, or -1. */
int pin__io_fixed_index(struct engine *e, uint64_t rel, uint64_t chunk)
{
	uint64_t i = rel / chunk;

	if (!e->fixed && !e->reg)
		return -1;
	if (e->reg)
		return i < e->nreg && e->reg[i] ? (int)i : -1;
	return (int)i;
}
