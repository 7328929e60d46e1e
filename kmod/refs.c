// SPDX-License-Identifier: GPL-2.0
/*
 * pinmem: page references beyond the mappings. A view's pages can be
 * reached after the view is unmapped through references taken while it
 * was mapped (vmsplice into a pipe, O_DIRECT in flight, io_uring fixed
 * buffers, process_vm_readv, long-term pins): DONATE and SEAL must wait
 * for those too.
 *
 * Per chunk (a folio) at rest: refcount = 1 (the allocation) + one per
 * page table entry + every other reference, and the page table entries
 * are its mapcount; "extra" = refcount - 1 - mapcount. The kernel keeps no
 * record of which mapping a GUP reference came through, so:
 *  - only chunks a view has mapped since the region was last donated are
 *    examined ("tainted"): nothing but the owner can reach the others;
 *  - on those, the only references allowed are the ones the owner
 *    declared (EXPECT). There is no implicit allowance: any amount taken
 *    from what the chunk happened to hold at some instant could be the
 *    owner's transient (a pipe, O_DIRECT in flight, a zap's mmu_gather)
 *    and would become room for a view holder's reference to outlive
 *    DONATE.
 * A chunk is clean when extra <= declared.
 *
 * Reading a chunk without locks (pinmem_chunk_read): insertion and fork
 * take the reference before the mapcount, zaps drop the mapcount before
 * the reference, so at every instant refcount - 1 - mapcount is at least
 * the references beyond the mappings; a reading taken at one instant can
 * only be too high (a false suspect, which the rescans absorb). The loads
 * are not one instant, though: an insertion and a zap both landing
 * between two loads could show an instant that never was, one too low.
 * So a reading counts only when two rounds agree (refcount, mapcount,
 * refcount, mapcount, refcount: three equal refcounts, two equal
 * mapcounts), and one that never does is a suspect. Documentation/
 * design.md says what that rules out. Only the upward direction is safe,
 * which is why no reading ever becomes an allowance.
 */
#include <linux/bitmap.h>
#include <linux/irqflags.h>
#include <linux/jiffies.h>
#include <linux/mm.h>
#include <linux/sched.h>
#include <linux/slab.h>

#include "compat.h"
#include "pinmem.h"
#include "testgate.h"

/* Without WAIT, transients get rescans after 1, 2, 4 ... 32 ms. */
#define PINMEM_GRACE_MS		32
/* With WAIT, the poll interval doubles from 1 ms up to this. */
#define PINMEM_POLL_MAX_MS	100
#define PINMEM_SCAN_BATCH	64
/* Tries at a reading of a chunk on which two rounds agree. */
#define PINMEM_READ_TRIES	8

struct pinmem_chunk_refs {
	unsigned long *tainted;		/* chunks views mapped since last donated */
	unsigned long *wtainted;	/* chunks writable views mapped since last sealed */
	u32 *declared;			/* EXPECT, in references */
	/* Under region->lock: */
	unsigned long nr_tainted;
	unsigned long nr_wtainted;
	u64 declared_total;
	u64 outside;			/* of the last refused scan */
};

struct pinmem_chunk_look {
	long extra;			/* references beyond the mapcount */
	long pinned;			/* of which FOLL_PIN */
	long expected;			/* declared by the owner */
	bool unsettled;			/* no two rounds agreed: a suspect */
};

static unsigned int pinmem_chunk_order(struct pinmem_region *region,
				       unsigned long idx)
{
	int order;

	for (order = PINMEM_CHUNK_ORDER; order > 0; order--) {
		if (idx < region->nr_by_order[order])
			return order;
		idx -= region->nr_by_order[order];
	}
	return 0;
}

/* The chunk holding region page pgoff: its index, first page and order. */
static void pinmem_chunk_at(struct pinmem_region *region, pgoff_t pgoff,
			    unsigned long *idx, pgoff_t *start,
			    unsigned int *order)
{
	unsigned long base = 0;
	pgoff_t first = 0;
	int o;

	for (o = PINMEM_CHUNK_ORDER; o > 0; o--) {
		pgoff_t span = region->nr_by_order[o] << o;

		if (pgoff - first < span)
			break;
		first += span;
		base += region->nr_by_order[o];
	}
	*idx = base + ((pgoff - first) >> o);
	*start = first + (((pgoff - first) >> o) << o);
	*order = o;
}

static void pinmem_chunk_next(struct pinmem_region *region,
			      unsigned long *idx, pgoff_t *start,
			      unsigned int *order)
{
	*start += 1UL << *order;
	(*idx)++;
	*order = pinmem_chunk_order(region, *idx);
}

/*
 * One try at reading folio: refcount, mapcount, refcount, mapcount,
 * refcount, with interrupts off so that the loads run back to back. Sets
 * *extra from the first round; true when the rounds agree.
 */
static bool pinmem_chunk_try(struct folio *folio, long *extra)
{
	unsigned long flags;
	int r1, r2, r3;
	long p1, p2;

	local_irq_save(flags);
	r1 = folio_ref_count(folio);
	pinmem_gate_irq(PINMEM_GATE_READ_REF, &flags);
	smp_rmb();	/* the mapcount after the first refcount */
	p1 = pinmem_folio_ptes(folio);
	pinmem_gate_irq(PINMEM_GATE_READ_MAP, &flags);
	smp_rmb();	/* the second refcount after the mapcount */
	r2 = folio_ref_count(folio);
	smp_rmb();	/* the second mapcount after the second refcount */
	p2 = pinmem_folio_ptes(folio);
	smp_rmb();	/* the third refcount after the second mapcount */
	r3 = folio_ref_count(folio);
	local_irq_restore(flags);
	*extra = (long)r1 - 1 - p1;
	return r1 == r2 && r2 == r3 && p1 == p2;
}

static void pinmem_chunk_read(struct pinmem_region *region,
			      struct pinmem_chunk_refs *refs, unsigned long idx,
			      struct pinmem_chunk_look *c)
{
	struct folio *folio = page_folio(region->chunks[idx]);
	int tries = 0;
	long extra;
	bool agreed;

	do {
		agreed = pinmem_chunk_try(folio, &extra);
	} while (!agreed && ++tries < PINMEM_READ_TRIES);
	c->unsettled = !agreed;
	c->extra = max(extra, 0L);
	if (folio_test_large(folio))
		c->pinned = min(pinmem_folio_pincount(folio), c->extra);
	else
		c->pinned = c->extra / GUP_PIN_COUNTING_BIAS;
	c->expected = READ_ONCE(refs->declared[idx]);
}

/* References on chunk idx that nobody accounts for (0: clean). */
static long pinmem_chunk_outside(struct pinmem_region *region,
				 struct pinmem_chunk_refs *refs, unsigned long idx)
{
	struct pinmem_chunk_look c;

	pinmem_chunk_read(region, refs, idx, &c);
	if (c.unsettled)
		return max(c.extra - c.expected, 1L);
	return max(c.extra - c.expected, 0L);
}

static struct pinmem_chunk_refs *pinmem_refs_get(struct pinmem_region *region)
{
	/* Pairs with the release in pinmem_refs_make(): filled arrays. */
	return smp_load_acquire(&region->refs);
}

static void pinmem_refs_destroy(struct pinmem_chunk_refs *refs)
{
	kvfree(refs->tainted);
	kvfree(refs->wtainted);
	kvfree(refs->declared);
	kfree(refs);
}

/* The region's bookkeeping, made on first need; under region->lock. */
static struct pinmem_chunk_refs *pinmem_refs_make(struct pinmem_region *region)
{
	unsigned long n = region->nr_chunks;
	struct pinmem_chunk_refs *refs;

	lockdep_assert_held(&region->lock);
	if (region->refs)
		return region->refs;
	refs = kzalloc(sizeof(*refs), GFP_KERNEL_ACCOUNT);
	if (!refs)
		return NULL;
	/* kvcalloc: 64 KiB each for a 1 TiB region, no contiguity needed. */
	refs->tainted = kvcalloc(BITS_TO_LONGS(n), sizeof(long),
				 GFP_KERNEL_ACCOUNT);
	refs->wtainted = kvcalloc(BITS_TO_LONGS(n), sizeof(long),
				  GFP_KERNEL_ACCOUNT);
	refs->declared = kvcalloc(n, sizeof(u32), GFP_KERNEL_ACCOUNT);
	if (!refs->tainted || !refs->wtainted || !refs->declared) {
		pinmem_refs_destroy(refs);
		return NULL;
	}
	/* Pairs with pinmem_refs_get(): readers see the arrays filled. */
	smp_store_release(&region->refs, refs);
	return refs;
}

void pinmem_refs_free(struct pinmem_region *region)
{
	if (region->refs)
		pinmem_refs_destroy(region->refs);
	region->refs = NULL;
}

/*
 * A view is about to map region pages [pgoff, pgoff + nr): mark their
 * chunks. Only bits: nothing is read from the pages, so the mmap that
 * calls it holds its locks no longer for it. Under region->lock, before
 * the view is counted; -ENOMEM fails the mmap.
 */
int pinmem_refs_taint(struct pinmem_region *region, pgoff_t pgoff,
		      pgoff_t nr, bool writable)
{
	struct pinmem_chunk_refs *refs = pinmem_refs_make(region);
	pgoff_t start, end = pgoff + nr;
	unsigned long idx;
	unsigned int order;

	lockdep_assert_held(&region->lock);
	if (!refs)
		return -ENOMEM;
	if (!nr)
		return 0;
	pinmem_chunk_at(region, pgoff, &idx, &start, &order);
	for (; start < end; pinmem_chunk_next(region, &idx, &start, &order)) {
		if (!test_and_set_bit(idx, refs->tainted))
			refs->nr_tainted++;
		if (writable && !test_and_set_bit(idx, refs->wtainted))
			refs->nr_wtainted++;
	}
	return 0;
}

/* Whether DONATE (or SEAL) has chunks to examine; under region->lock. */
bool pinmem_refs_pending(struct pinmem_region *region, bool seal)
{
	struct pinmem_chunk_refs *refs = region->refs;

	lockdep_assert_held(&region->lock);
	return refs && (seal ? refs->nr_wtainted : refs->nr_tainted);
}

/*
 * Mark every suspect of bits (tainted or wtainted) in suspects, or, when
 * rescan, re-examine the suspects and keep only those still referenced.
 * Returns the references outside all accounts on the suspects.
 */
static u64 pinmem_refs_scan(struct pinmem_region *region,
			    struct pinmem_chunk_refs *refs, const unsigned long *bits,
			    unsigned long *suspects, bool rescan)
{
	const unsigned long *set = rescan ? suspects : bits;
	unsigned long idx, done = 0;
	u64 outside = 0;
	long o;

	for_each_set_bit(idx, set, region->nr_chunks) {
		o = pinmem_chunk_outside(region, refs, idx);
		if (o)
			set_bit(idx, suspects);
		else
			clear_bit(idx, suspects);
		outside += o;
		if (++done % PINMEM_SCAN_BATCH == 0)
			cond_resched();
	}
	return outside;
}

/*
 * Wait, without region->lock, until no chunk of those views mapped (for
 * SEAL: writable views) holds references outside all accounts. The caller
 * keeps new (writable) view mappings out meanwhile. wait false: a grace of
 * rescans for transients, then -EBUSY; wait true: poll until w's deadline
 * (-ETIMEDOUT) or a signal (-EINTR). *outside: what the last scan found.
 * References have no wakeup of their own, hence the polling.
 */
int pinmem_refs_settle(struct pinmem_region *region, bool seal, bool wait,
		       struct pinmem_wait *w, u64 *outside)
{
	struct pinmem_chunk_refs *refs = pinmem_refs_get(region);
	const unsigned long *bits = seal ? refs->wtainted : refs->tainted;
	unsigned long *suspects;
	unsigned int ms = 1;
	int ret;

	suspects = kvcalloc(BITS_TO_LONGS(region->nr_chunks), sizeof(long),
			    GFP_KERNEL);
	if (!suspects)
		return -ENOMEM;
	*outside = pinmem_refs_scan(region, refs, bits, suspects, false);
	while (*outside) {
		if (!wait && ms > PINMEM_GRACE_MS) {
			ret = -EBUSY;
			goto out;
		}
		if (wait && !pinmem_wait_left(w)) {
			ret = -ETIMEDOUT;
			goto out;
		}
		ret = pinmem_wait_sleep(w, msecs_to_jiffies(ms));
		if (ret)
			goto out;
		ms = min(ms * 2, wait ? PINMEM_POLL_MAX_MS : ms * 2);
		*outside = pinmem_refs_scan(region, refs, bits, suspects,
					    true);
	}
	ret = 0;
out:
	kvfree(suspects);
	return ret;
}

/*
 * After a settle, under region->lock: a success clears the marks (for
 * DONATE all of them; for SEAL those of writable views), a refusal keeps
 * what it found for INFO.
 */
void pinmem_refs_settled(struct pinmem_region *region, bool seal, int ret,
			 u64 outside)
{
	struct pinmem_chunk_refs *refs = region->refs;

	lockdep_assert_held(&region->lock);
	if (ret) {
		if (ret != -ENOMEM)
			refs->outside = outside;
		return;
	}
	refs->outside = 0;
	bitmap_zero(refs->wtainted, region->nr_chunks);
	refs->nr_wtainted = 0;
	if (seal)
		return;
	bitmap_zero(refs->tainted, region->nr_chunks);
	refs->nr_tainted = 0;
}

/* The change EXPECT makes on one chunk of order o, n pages of it covered. */
static u32 pinmem_expect_delta(bool per_page, unsigned int order, pgoff_t n)
{
	if (!order)
		return GUP_PIN_COUNTING_BIAS;
	return per_page ? n : 1;
}

/* Check (apply false) or apply the declaration e. Under region->lock. */
static int pinmem_expect_walk(struct pinmem_region *region,
			      struct pinmem_chunk_refs *refs,
			      const struct pinmem_expect_req *e, bool apply)
{
	pgoff_t pgoff = e->pgoff;
	pgoff_t start, end = pgoff + e->nr_pages;
	bool remove = e->remove;
	unsigned long idx;
	unsigned int order;
	u32 d, cur;

	lockdep_assert_held(&region->lock);
	pinmem_chunk_at(region, pgoff, &idx, &start, &order);
	for (; start < end; pinmem_chunk_next(region, &idx, &start, &order)) {
		d = pinmem_expect_delta(e->per_page, order,
					min(end, start + (1UL << order)) -
					max(pgoff, start));
		cur = refs->declared[idx];
		if (!apply && remove && cur < d)
			return -EINVAL;
		if (!apply && !remove && d > PINMEM_EXPECT_MAX - cur)
			return -ENOSPC;
		if (apply) {
			WRITE_ONCE(refs->declared[idx],
				   remove ? cur - d : cur + d);
			if (remove)
				refs->declared_total -= d;
			else
				refs->declared_total += d;
		}
	}
	return 0;
}

/* PINMEM_IOC_EXPECT; ioctl.c has checked e's range. */
int pinmem_refs_expect(struct pinmem_region *region,
		       const struct pinmem_expect_req *e)
{
	struct pinmem_chunk_refs *refs;
	int ret;

	mutex_lock(&region->lock);
	refs = pinmem_refs_make(region);
	ret = refs ? pinmem_expect_walk(region, refs, e, false) : -ENOMEM;
	if (!ret)
		pinmem_expect_walk(region, refs, e, true);
	mutex_unlock(&region->lock);
	return ret;
}

void pinmem_refs_fill_info(struct pinmem_region *region,
			   struct pinmem_region_info *info)
{
	struct pinmem_chunk_refs *refs = region->refs;

	lockdep_assert_held(&region->lock);
	if (!refs)
		return;
	info->expected_refs = refs->declared_total;
	info->outside_refs = refs->outside;
	if (refs->outside)
		info->flags |= PINMEM_INFO_REFS_HELD;
}

/* Close the run in r (if any) into buf; returns the new count. */
static u32 pinmem_refs_emit(struct pinmem_region *region,
			    struct pinmem_ref_range *r, pgoff_t end,
			    struct pinmem_ref_range *buf, u32 n, u32 capacity)
{
	u64 limit = min_t(u64, (u64)end << PAGE_SHIFT, region->size);

	if (!r->length)
		return n;
	r->length = limit - r->offset;
	if (n < capacity)
		buf[n] = *r;
	memset(r, 0, sizeof(*r));
	return n + 1;
}

/*
 * REFS: runs of consecutive tainted chunks holding references outside all
 * accounts, into up to capacity records of buf; *count: how many exist.
 */
int pinmem_refs_snapshot(void *arg, void *out, u32 capacity, u32 *count)
{
	struct pinmem_region *region = arg;
	struct pinmem_chunk_refs *refs = pinmem_refs_get(region);
	struct pinmem_ref_range run = {}, *buf = out;
	struct pinmem_chunk_look c;
	pgoff_t start = 0, end = 0;
	unsigned long idx;
	unsigned int order;
	u32 n = 0;

	*count = 0;
	if (!refs)
		return 0;
	pinmem_chunk_at(region, 0, &idx, &start, &order);
	for (; idx < region->nr_chunks;
	     pinmem_chunk_next(region, &idx, &start, &order)) {
		if (idx % PINMEM_SCAN_BATCH == 0)
			cond_resched();
		if (!test_bit(idx, refs->tainted))
			continue;
		pinmem_chunk_read(region, refs, idx, &c);
		if (c.extra <= c.expected && !c.unsettled)
			continue;
		if (run.length && start != end)
			n = pinmem_refs_emit(region, &run, end, buf, n,
					     capacity);
		if (!run.length)
			run.offset = (u64)start << PAGE_SHIFT;
		run.length = 1;
		run.refs += c.extra;
		run.pinned += c.pinned;
		run.expected += c.expected;
		end = start + (1UL << order);
	}
	*count = pinmem_refs_emit(region, &run, end, buf, n, capacity);
	return 0;
}
