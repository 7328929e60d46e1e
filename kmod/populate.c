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
 * keeps two POPULATEs from allocating the same entry; it is never held
 * with region->lock, nor under mmap_lock.
 */
#include <linux/sched/signal.h>
#include <linux/uaccess.h>

#include "pinmem.h"
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
		n += !chunks[i];
	return n;
}

static int pinmem_populate(struct pinmem_region *region, u64 offset,
			   u64 length)
{
	gfp_t gfp = pinmem_chunk_gfp(PINMEM_CHUNK_ORDER, false);
	unsigned long first, nr, missing, had;
	struct page **chunks;
	bool intr;
	int ret;

	pinmem_populate_span(offset, length, &first, &nr);
	chunks = region->chunks + first;
	mutex_lock(&region->populate_lock);
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
	mutex_unlock(&region->populate_lock);
	ret = intr ? -EINTR : had == nr ? 0 : -ENOMEM;
	trace_pinmem_populate(region->id, offset, length,
			      missing - (nr - had), ret);
	return ret;
}

int pinmem_ioc_populate(struct pinmem_region *region, void __user *arg)
{
	struct pinmem_populate p;

	if (copy_from_user(&p, arg, sizeof(p)))
		return -EFAULT;
	if (p.reserved[0] || p.reserved[1])
		return -EINVAL;
	if (!p.length || !PAGE_ALIGNED(p.offset) || !PAGE_ALIGNED(p.length))
		return -EINVAL;
	if (p.offset > region->size || p.length > region->size - p.offset)
		return -EINVAL;
	/* Only ever decreases: a stale nonzero just takes the lock. */
	if (!READ_ONCE(region->nr_unpopulated))
		return 0;
	return pinmem_populate(region, p.offset, p.length);
}
