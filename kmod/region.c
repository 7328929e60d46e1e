// SPDX-License-Identifier: GPL-2.0
/*
 * pinmem: regions. Allocation in order-9 chunks (smaller orders only when
 * asked to fall back), the RLIMIT_MEMLOCK and module-limit charges,
 * lookup by id, and freeing on the last reference.
 */
#include <linux/capability.h>
#include <linux/cred.h>
#include <linux/err.h>
#include <linux/gfp.h>
#include <linux/mm.h>
#include <linux/pid_namespace.h>
#include <linux/sched/signal.h>
#include <linux/sched/user.h>
#include <linux/slab.h>
#include <linux/string.h>

#include "pinmem.h"
#include "trace.h"

#define PINMEM_CHUNK_PAGES	BIT(PINMEM_CHUNK_ORDER)
/*
 * The chunk arrays: no OOM killer (memcg's included) and no allocation
 * warning either; a failure is ALLOC's ENOMEM, nothing more.
 */
#define PINMEM_ARRAY_GFP \
	(GFP_KERNEL_ACCOUNT | __GFP_RETRY_MAYFAIL | __GFP_NOWARN)

static LIST_HEAD(pinmem_regions);		/* ordered by id */
static DEFINE_MUTEX(pinmem_regions_lock);
static u64 pinmem_next_id = 1;			/* under pinmem_regions_lock */

/* The module's own limit on the bytes held by all regions. */
static int pinmem_reserve_total(unsigned long nr_pages)
{
	u64 limit = READ_ONCE(pinmem_max_total_bytes);
	s64 pages = atomic64_add_return(nr_pages, &pinmem_totals.pages);

	if (limit && (u64)pages << PAGE_SHIFT > limit) {
		atomic64_sub(nr_pages, &pinmem_totals.pages);
		return -ENOSPC;
	}
	return 0;
}

/* RLIMIT_MEMLOCK, charged to the user as io_uring and RDMA do. */
static int pinmem_charge_user(struct pinmem_region *region)
{
	unsigned long limit = rlimit(RLIMIT_MEMLOCK) >> PAGE_SHIFT;
	struct user_struct *user = current_user();
	unsigned long cur, new;

	if (capable(CAP_IPC_LOCK))
		return 0;
	cur = atomic_long_read(&user->locked_vm);
	do {
		new = cur + region->nr_alloc_pages;
		if (new > limit || new < cur)
			return -ENOMEM;
	} while (!atomic_long_try_cmpxchg(&user->locked_vm, &cur, new));
	region->user = get_uid(user);
	return 0;
}

static void pinmem_uncharge_user(struct pinmem_region *region)
{
	if (!region->user)
		return;
	atomic_long_sub(region->nr_alloc_pages, &region->user->locked_vm);
	free_uid(region->user);
	region->user = NULL;
}

/*
 * Never __GFP_DIRECT_RECLAIM alone: every order gets NORETRY or
 * RETRY_MAYFAIL, so that neither the page allocator nor a memcg charge
 * ever invokes the OOM killer for pinned memory; ALLOC fails instead.
 */
gfp_t pinmem_chunk_gfp(unsigned int order, bool fallback)
{
	gfp_t gfp = GFP_HIGHUSER | __GFP_ZERO | __GFP_ACCOUNT | __GFP_NOWARN;

	if (order)
		gfp |= __GFP_COMP;
	/* Try hard for 2 MiB unless a smaller chunk will do. */
	if (order && fallback)
		gfp |= __GFP_NORETRY;
	else
		gfp |= __GFP_RETRY_MAYFAIL;
	return gfp;
}

/*
 * Pages that cannot be had without swapping out or killing: more than the
 * kernel's estimate of available memory fails at once rather than after
 * reclaim and compaction have emptied the page cache.
 */
bool pinmem_beyond_available(unsigned long nr_pages)
{
	return nr_pages > si_mem_available();
}

/* Make room in the chunk array for the remaining pages at a lower order. */
static int pinmem_grow_chunks(struct pinmem_region *region,
			      unsigned long *cap, unsigned long remaining,
			      unsigned int order)
{
	unsigned long want = region->nr_chunks + (remaining >> order);
	struct page **chunks;

	if (want <= *cap)
		return 0;
	chunks = kvmalloc_array(want, sizeof(*chunks), PINMEM_ARRAY_GFP);
	if (!chunks)
		return -ENOMEM;
	memcpy(chunks, region->chunks, region->nr_chunks * sizeof(*chunks));
	kvfree(region->chunks);
	region->chunks = chunks;
	*cap = want;
	return 0;
}

/*
 * The chunks that the order-9 pass could not have, at lower orders. The
 * order only ever goes down, so chunk i's place follows from nr_by_order
 * (see pinmem_region_page). Killable: a fatal signal ends it.
 */
static int pinmem_alloc_fallback(struct pinmem_region *region,
				 unsigned long cap,
				 const struct pinmem_place *place)
{
	unsigned long remaining = region->nr_alloc_pages -
				  (region->nr_chunks << PINMEM_CHUNK_ORDER);
	unsigned int order = PINMEM_CHUNK_ORDER;
	struct page *page;
	int ret;

	while (remaining) {
		if (fatal_signal_pending(current))
			return -EINTR;
		page = pinmem_alloc_pages(place, pinmem_chunk_gfp(order, true),
					  order);
		if (!page) {
			if (!order)
				return -ENOMEM;
			order--;
			ret = pinmem_grow_chunks(region, &cap, remaining, order);
			if (ret)
				return ret;
			continue;
		}
		region->chunks[region->nr_chunks++] = page;
		region->nr_by_order[order]++;
		region->min_order = min(region->min_order, order);
		remaining -= 1UL << order;
		cond_resched();
	}
	return 0;
}

/* Move the chunks had to the front; returns how many there are. */
static unsigned long pinmem_chunks_compact(struct page **chunks,
					   unsigned long nr)
{
	unsigned long i, n = 0;

	for (i = 0; i < nr; i++)
		if (chunks[i])
			chunks[n++] = chunks[i];
	return n;
}

/*
 * Fill the region with chunks: order-9 ones on several CPUs, then, when
 * asked to fall back, smaller ones for what could not be had at order 9.
 */
static int pinmem_alloc_chunks(struct pinmem_region *region, bool fallback,
			       const struct pinmem_place *place)
{
	unsigned long cap = region->nr_alloc_pages >> PINMEM_CHUNK_ORDER;
	gfp_t gfp = pinmem_chunk_gfp(PINMEM_CHUNK_ORDER, fallback);
	bool intr;

	if (pinmem_beyond_available(region->nr_alloc_pages))
		return -ENOMEM;
	region->chunks = kvmalloc_array(cap, sizeof(*region->chunks),
					PINMEM_ARRAY_GFP | __GFP_ZERO);
	if (!region->chunks)
		return -ENOMEM;
	region->min_order = PINMEM_CHUNK_ORDER;
	pinmem_alloc_parallel(region->chunks, cap, gfp, place, &intr);
	region->nr_chunks = pinmem_chunks_compact(region->chunks, cap);
	region->nr_by_order[PINMEM_CHUNK_ORDER] = region->nr_chunks;
	if (intr)
		return -EINTR;
	if (region->nr_chunks == cap)
		return 0;
	if (!fallback)
		return -ENOMEM;
	return pinmem_alloc_fallback(region, cap, place);
}

static void pinmem_free_chunks(struct pinmem_region *region)
{
	unsigned long i = 0;
	int order;

	for (order = PINMEM_CHUNK_ORDER; order >= 0; order--) {
		unsigned long n;

		for (n = 0; n < region->nr_by_order[order]; n++, i++) {
			if (!region->chunks[i])	/* ALLOC_LAZY, not populated */
				continue;
			__free_pages(region->chunks[i], order);
			cond_resched();
		}
	}
	kvfree(region->chunks);
}

/*
 * The page at a region page offset (pgoff < nr_pages); NULL where an
 * ALLOC_LAZY region's chunk is not populated yet.
 */
struct page *pinmem_region_page(struct pinmem_region *region, pgoff_t pgoff)
{
	unsigned long base = 0;
	struct page *chunk;
	int order;

	for (order = PINMEM_CHUNK_ORDER; order >= 0; order--) {
		unsigned long span = region->nr_by_order[order] << order;

		if (pgoff < span) {
			/* Pairs with POPULATE's release: the zeroed chunk. */
			chunk = smp_load_acquire(&region->chunks[base +
							(pgoff >> order)]);
			return chunk ? chunk + (pgoff & ((1UL << order) - 1)) :
				       NULL;
		}
		pgoff -= span;
		base += region->nr_by_order[order];
	}
	return NULL;
}

static void pinmem_region_free(struct pinmem_region *region)
{
	pinmem_refs_free(region);
	kvfree(region->filling);
	pinmem_free_chunks(region);
	pinmem_uncharge_user(region);
	atomic64_sub(region->nr_alloc_pages, &pinmem_totals.pages);
	put_pid(region->owner_pid);
	mutex_destroy(&region->populate_lock);
	mutex_destroy(&region->lock);
	kfree(region);
}

static void pinmem_region_release(struct kref *kref)
{
	struct pinmem_region *region =
		container_of(kref, struct pinmem_region, kref);

	mutex_lock(&pinmem_regions_lock);
	list_del(&region->node);
	mutex_unlock(&pinmem_regions_lock);
	atomic64_dec(&pinmem_totals.regions);
	trace_pinmem_free(region->id, region->size);
	pinmem_region_free(region);
}

void pinmem_region_put(struct pinmem_region *region)
{
	kref_put(&region->kref, pinmem_region_release);
}

/*
 * ALLOC_LAZY: every order-9 entry of the chunk array, none allocated;
 * POPULATE fills them.
 */
static int pinmem_alloc_lazy(struct pinmem_region *region)
{
	unsigned long cap = region->nr_alloc_pages >> PINMEM_CHUNK_ORDER;

	region->chunks = kvmalloc_array(cap, sizeof(*region->chunks),
					PINMEM_ARRAY_GFP | __GFP_ZERO);
	if (!region->chunks)
		return -ENOMEM;
	region->min_order = PINMEM_CHUNK_ORDER;
	region->nr_chunks = cap;
	region->nr_by_order[PINMEM_CHUNK_ORDER] = cap;
	region->nr_unpopulated = cap;
	return 0;
}

/* Allocate, charge and publish a region of size bytes (page-aligned). */
int pinmem_region_create(u64 size, u32 flags,
			 const struct pinmem_place *place,
			 struct pinmem_region **out)
{
	struct pinmem_region *region;
	int ret;

	region = kzalloc(sizeof(*region), GFP_KERNEL_ACCOUNT);
	if (!region)
		return -ENOMEM;
	kref_init(&region->kref);
	mutex_init(&region->lock);
	mutex_init(&region->populate_lock);
	region->place = *place;
	INIT_LIST_HEAD(&region->holders);
	init_waitqueue_head(&region->donate_wq);
	region->state = PINMEM_STATE_OPEN;
	region->size = size;
	region->nr_pages = size >> PAGE_SHIFT;
	region->nr_alloc_pages = ALIGN(region->nr_pages, PINMEM_CHUNK_PAGES);
	region->owner_uid = current_uid();
	region->owner_pid = get_task_pid(current, PIDTYPE_TGID);

	ret = pinmem_reserve_total(region->nr_alloc_pages);
	if (ret)
		goto err_reserve;
	ret = pinmem_charge_user(region);
	if (ret)
		goto err_charge;
	if (flags & PINMEM_ALLOC_LAZY)
		ret = pinmem_alloc_lazy(region);
	else
		ret = pinmem_alloc_chunks(region, flags & PINMEM_ALLOC_FALLBACK,
					  place);
	if (ret)
		goto err_alloc;

	mutex_lock(&pinmem_regions_lock);
	region->id = pinmem_next_id++;
	list_add_tail(&region->node, &pinmem_regions);
	mutex_unlock(&pinmem_regions_lock);
	atomic64_inc(&pinmem_totals.regions);
	trace_pinmem_alloc(region->id, size,
			   region->nr_chunks - region->nr_unpopulated,
			   region->min_order, 0);
	*out = region;
	return 0;

err_alloc:
	pinmem_free_chunks(region);
	pinmem_uncharge_user(region);
err_charge:
	atomic64_sub(region->nr_alloc_pages, &pinmem_totals.pages);
err_reserve:
	put_pid(region->owner_pid);
	mutex_destroy(&region->populate_lock);
	mutex_destroy(&region->lock);
	kfree(region);
	trace_pinmem_alloc(0, size, 0, 0, ret);
	return ret;
}

/* Whether the caller may see the region in LIST and HOLDERS by id. */
static bool pinmem_region_visible_to(struct pinmem_region *region, bool admin)
{
	return admin || uid_eq(current_uid(), region->owner_uid);
}

static bool pinmem_region_visible(struct pinmem_region *region)
{
	/* capable() only when needed: it marks the task as having used it. */
	return pinmem_region_visible_to(region, false) ||
	       capable(CAP_SYS_ADMIN);
}

/*
 * A reference to the region with this id; NULL when there is none or the
 * caller may not see it: both are ENOENT, so that ids of others' regions
 * reveal nothing.
 */
static struct pinmem_region *pinmem_region_get_visible(u64 id)
{
	struct pinmem_region *region, *found = NULL;

	mutex_lock(&pinmem_regions_lock);
	list_for_each_entry(region, &pinmem_regions, node) {
		if (region->id == id) {
			if (kref_get_unless_zero(&region->kref))
				found = region;
			break;
		}
	}
	mutex_unlock(&pinmem_regions_lock);
	if (found && !pinmem_region_visible(found)) {
		pinmem_region_put(found);
		found = NULL;
	}
	return found;
}

/*
 * The region a query (HOLDERS, REFS, NODES) is about, with a reference:
 * on a region or view fd its own (the id must be 0: EINVAL), on the
 * device fd (fd_region NULL) the one with this id the caller may see.
 */
struct pinmem_region *pinmem_region_get_queried(struct pinmem_region *fd_region,
						u64 id)
{
	struct pinmem_region *region;

	if (fd_region) {
		if (id)
			return ERR_PTR(-EINVAL);
		kref_get(&fd_region->kref);
		return fd_region;
	}
	region = pinmem_region_get_visible(id);
	return region ? region : ERR_PTR(-ENOENT);
}

static void pinmem_region_fill_locked(struct pinmem_region *region,
				      struct pinmem_region_info *info)
{
	struct pid_namespace *ns = task_active_pid_ns(current);
	unsigned long fallback = region->nr_chunks -
				 region->nr_by_order[PINMEM_CHUNK_ORDER];

	lockdep_assert_held(&region->lock);
	memset(info, 0, sizeof(*info));
	info->region_id = region->id;
	info->size = region->size;
	info->state = region->state;
	if (region->donate_waiters)
		info->flags |= PINMEM_INFO_DONATE_PENDING;
	info->chunk_order = PINMEM_CHUNK_ORDER;
	info->min_order = region->min_order;
	info->nr_chunks = region->nr_by_order[PINMEM_CHUNK_ORDER] -
			  region->nr_unpopulated;
	if (region->nr_unpopulated)
		info->flags |= PINMEM_INFO_UNPOPULATED;
	info->nr_fallback_chunks = fallback;
	info->owner_mappings = region->owner_mappings;
	info->view_mappings = region->view_mappings;
	info->writable_view_mappings = region->writable_view_mappings;
	info->view_fds = region->view_fds;
	info->owner_uid = from_kuid_munged(current_user_ns(), region->owner_uid);
	info->owner_tgid = pid_nr_ns(region->owner_pid, ns);
	pinmem_refs_fill_info(region, info);
}

void pinmem_region_fill_info(struct pinmem_region *region,
			     struct pinmem_region_info *info)
{
	mutex_lock(&region->lock);
	pinmem_region_fill_locked(region, info);
	mutex_unlock(&region->lock);
}

/*
 * References to the first capacity regions the caller may see, at found;
 * returns how many it may see. A region being freed (no reference left)
 * is not one of them.
 */
static u32 pinmem_region_collect(struct pinmem_region **found, u32 capacity,
				 bool admin)
{
	struct pinmem_region *region;
	u32 n = 0;

	lockdep_assert_held(&pinmem_regions_lock);
	list_for_each_entry(region, &pinmem_regions, node) {
		if (!pinmem_region_visible_to(region, admin))
			continue;
		if (n < capacity) {
			if (!kref_get_unless_zero(&region->kref))
				continue;
			found[n] = region;
		} else if (!kref_read(&region->kref)) {
			continue;
		}
		n++;
	}
	return n;
}

/*
 * Snapshot the regions the caller may see into buf (up to capacity
 * records, struct pinmem_region_info); *count: how many there are. The
 * regions lock is held only to take references: each region's lock is
 * taken after it is dropped, so a region whose lock is busy holds up
 * this caller alone, never ALLOC, lookups by id or the freeing of
 * regions.
 */
int pinmem_region_list(void *buf, u32 capacity, u32 *count)
{
	struct pinmem_region_info *info = buf;
	bool admin = capable(CAP_SYS_ADMIN);
	struct pinmem_region **found = NULL;
	u32 i, n;

	if (capacity) {
		found = kvmalloc_array(capacity, sizeof(*found), GFP_KERNEL);
		if (!found)
			return -ENOMEM;
	}
	mutex_lock(&pinmem_regions_lock);
	n = pinmem_region_collect(found, capacity, admin);
	mutex_unlock(&pinmem_regions_lock);
	for (i = 0; i < min(n, capacity); i++) {
		pinmem_region_fill_info(found[i], &info[i]);
		pinmem_region_put(found[i]);
		cond_resched();
	}
	kvfree(found);
	*count = n;
	return 0;
}
