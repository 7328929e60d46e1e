// SPDX-License-Identifier: GPL-2.0
/*
 * pinmem: POPULATE, the chunks of an ALLOC_LAZY region allocated a range
 * at a time.
 *
 * A loader that ALLOCs the whole region before its first read adds the
 * allocation (zeroing 2 MiB chunks) to the transfer. With ALLOC_LAZY the
 * charges are taken at ALLOC and the chunks come with POPULATE, so that
 * the loader can read into one range while the next is being allocated.
 *
 * Every chunk entry is set once, NULL to a page, with release semantics
 * (alloc_parallel.c); readers (the fault handler, mmap's prefault) load it
 * with acquire and see either nothing or a zeroed chunk. populate_lock
 * keeps two POPULATEs from allocating the same entry, and keeps the
 * chunks a FILL has claimed (region->filling) apart: an overlapping
 * POPULATE or FILL fails at once with EBUSY, so no chunk is ever
 * allocated twice and no call holds memory the region was not charged
 * for. Lock order: populate_lock, then region->lock (for nr_unpopulated
 * only); never under mmap_lock, and nothing under it touches user memory.
 * It is taken killably: a POPULATE may hold it for a whole allocation.
 *
 * Claims are made under populate_lock, but a FILL ends its own claim
 * without it (fill.c), so that a FILL that has read its file never waits
 * for another range's allocation: it publishes its chunks, then clears
 * their bits with release semantics. So the bits change by atomic bit
 * operations, and whoever finds a claimed chunk's bit clear reads the
 * chunk entry only after it (smp_rmb), where the FILL's chunk then is.
 */
#include <linux/bitmap.h>
#include <linux/sched/signal.h>
#include <linux/slab.h>

#include "pinmem.h"
#include "testgate.h"
#include "trace.h"

#define PINMEM_CHUNK_SHIFT	(PAGE_SHIFT + PINMEM_CHUNK_ORDER)

/* Order-9 chunk indexes [*first, *first + *nr) covering the byte range. */
static void pinmem_populate_span(u64 offset, u64 length,
				 unsigned long *first, unsigned long *nr)
{
	u64 last = (offset + length - 1) >> PINMEM_CHUNK_SHIFT;

	*first = offset >> PINMEM_CHUNK_SHIFT;
	*nr = last - *first + 1;
}

static unsigned long pinmem_count_missing(struct page **chunks,
					  unsigned long nr)
{
	unsigned long i, n = 0;

	for (i = 0; i < nr; i++)
		n += !READ_ONCE(chunks[i]);
	return n;
}

/*
 * Whether a FILL holds a chunk of [first, first + nr). Under populate_lock,
 * so no claim is made meanwhile; one may end. Entries read after a false
 * answer are those the FILLs that ended put there (smp_rmb below).
 */
static bool pinmem_chunks_filling(struct pinmem_region *region,
				  unsigned long first, unsigned long nr)
{
	unsigned long i;

	lockdep_assert_held(&region->populate_lock);
	if (!region->filling)
		return false;
	for (i = first; i < first + nr; i++)
		if (test_bit(i, region->filling))
			return true;
	/* Pairs with clear_bit_unlock() in pinmem_chunks_release(). */
	smp_rmb();
	return false;
}

/* Whether a chunk of [first, first + nr) is there. */
static bool pinmem_chunks_any(struct pinmem_region *region,
			      unsigned long first, unsigned long nr)
{
	unsigned long i;

	for (i = first; i < first + nr; i++)
		if (READ_ONCE(region->chunks[i]))
			return true;
	return false;
}

/*
 * FILL's claim on chunks [first, first + nr): none populated (EEXIST),
 * none claimed by another FILL (EBUSY). Until released, POPULATE and
 * FILL leave them alone. Under populate_lock.
 */
int pinmem_chunks_claim(struct pinmem_region *region, unsigned long first,
			unsigned long nr)
{
	unsigned long i;

	lockdep_assert_held(&region->populate_lock);
	if (pinmem_chunks_any(region, first, nr))
		return -EEXIST;
	if (pinmem_chunks_filling(region, first, nr))
		return -EBUSY;
	/* A FILL that ended between the two looks left its chunks. */
	if (pinmem_chunks_any(region, first, nr))
		return -EEXIST;
	if (!region->filling) {
		region->filling = kvcalloc(BITS_TO_LONGS(region->nr_chunks),
					   sizeof(long), GFP_KERNEL_ACCOUNT);
		if (!region->filling)
			return -ENOMEM;
	}
	for (i = first; i < first + nr; i++)
		set_bit(i, region->filling);
	return 0;
}

/*
 * The claim ends, its chunks published (before this) or never. Needs no
 * lock: the bits are the claim's own, cleared atomically.
 */
void pinmem_chunks_release(struct pinmem_region *region, unsigned long first,
			   unsigned long nr)
{
	unsigned long i;

	for (i = first; i < first + nr; i++)
		clear_bit_unlock(i, region->filling);
}

/*
 * POPULATE bytes [offset, offset + length) of the region (a range ioctl.c
 * has checked): allocate the missing chunks of it.
 */
int pinmem_populate(struct pinmem_region *region, u64 offset, u64 length)
{
	gfp_t gfp = pinmem_chunk_gfp(PINMEM_CHUNK_ORDER, false);
	unsigned long first, nr, missing, had;
	struct page **chunks;
	bool intr;
	int ret;

	/* Only ever decreases: a stale nonzero just takes the lock. */
	if (!READ_ONCE(region->nr_unpopulated))
		return 0;
	pinmem_populate_span(offset, length, &first, &nr);
	chunks = region->chunks + first;
	if (mutex_lock_killable(&region->populate_lock))
		return -EINTR;
	/* Claims first: a FILL ending now may yet publish into the range. */
	if (pinmem_chunks_filling(region, first, nr)) {
		mutex_unlock(&region->populate_lock);
		return -EBUSY;
	}
	missing = pinmem_count_missing(chunks, nr);
	if (!missing) {
		mutex_unlock(&region->populate_lock);
		return 0;
	}
	if (pinmem_beyond_available(missing << PINMEM_CHUNK_ORDER)) {
		mutex_unlock(&region->populate_lock);
		trace_pinmem_populate(region->id, offset, length, 0, -ENOMEM);
		return -ENOMEM;
	}
	had = pinmem_alloc_parallel(chunks, nr, gfp, &region->place, &intr);
	/* nr - had are still missing; the rest of missing are new. */
	mutex_lock(&region->lock);
	region->nr_unpopulated -= missing - (nr - had);
	mutex_unlock(&region->lock);
	pinmem_gate(PINMEM_GATE_POPULATE_HELD);
	mutex_unlock(&region->populate_lock);
	ret = intr ? -EINTR : had == nr ? 0 : -ENOMEM;
	trace_pinmem_populate(region->id, offset, length,
			      missing - (nr - had), ret);
	return ret;
}
