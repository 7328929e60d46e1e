// SPDX-License-Identifier: GPL-2.0
/*
 * pinmem: region states. Every check and transition is made under the
 * region lock, the same lock view mmaps take to be admitted, so no view
 * mapping can appear between a check and the transition it allows.
 *
 * DONATE and SEAL also wait for page references taken through views that
 * outlive their mappings (refs.c). Those checks run without the lock; a
 * waiter count keeps the view mappings they care about out meanwhile
 * (donate_waiters: all views; seal_waiters: writable ones), so what was
 * checked still holds when the lock is taken again.
 */
#include <linux/jiffies.h>
#include <linux/ktime.h>
#include <linux/sched.h>
#include <linux/wait.h>

#include "pinmem.h"
#include "trace.h"

/*
 * Writable views gone, wait for their references: without the lock, with
 * seal_waiters raised. Called and returns with region->lock held.
 */
static int pinmem_seal_refs(struct pinmem_region *region)
{
	struct pinmem_wait w;
	u64 outside;
	int ret;

	lockdep_assert_held(&region->lock);
	pinmem_wait_init(&w, 0, true);
	region->seal_waiters++;
	mutex_unlock(&region->lock);
	ret = pinmem_refs_settle(region, true, false, &w, &outside);
	pinmem_wait_end(&w);
	mutex_lock(&region->lock);
	region->seal_waiters--;
	pinmem_refs_settled(region, true, ret, outside);
	return ret;
}

int pinmem_seal(struct pinmem_region *region)
{
	int ret = 0;

	mutex_lock(&region->lock);
	for (;;) {
		if (region->state == PINMEM_STATE_SEALED)
			break;
		if (region->state != PINMEM_STATE_OPEN) {
			ret = -EPERM;
			break;
		}
		/* Sealed contents are whole: no chunk left to populate. */
		if (region->nr_unpopulated) {
			ret = -ENODATA;
			break;
		}
		if (region->writable_view_mappings) {
			ret = -EBUSY;
			break;
		}
		if (pinmem_refs_pending(region, true)) {
			/* Unlocked meanwhile: look at the state again. */
			ret = pinmem_seal_refs(region);
			if (ret)
				break;
			continue;
		}
		region->state = PINMEM_STATE_SEALED;
		break;
	}
	trace_pinmem_seal(region->id, ret, region->writable_view_mappings);
	mutex_unlock(&region->lock);
	return ret;
}

/* Wait condition, read without the lock; rechecked under it. */
static bool pinmem_donate_ready(void *arg)
{
	struct pinmem_region *region = arg;

	return !READ_ONCE(region->view_mappings) ||
	       READ_ONCE(region->state) == PINMEM_STATE_DONATED;
}

/*
 * One step of DONATE with the lock dropped, donate_waiters raised: wait
 * for the views (views true) or for the references. Called and returns
 * with region->lock held.
 */
static int pinmem_donate_wait(struct pinmem_region *region, bool views,
			      bool wait, struct pinmem_wait *w)
{
	u64 outside;
	int ret;

	lockdep_assert_held(&region->lock);
	mutex_unlock(&region->lock);
	if (views)
		ret = pinmem_wait_queue(w, &region->donate_wq,
					pinmem_donate_ready, region);
	else
		ret = pinmem_refs_settle(region, false, wait, w, &outside);
	mutex_lock(&region->lock);
	if (!views)
		pinmem_refs_settled(region, false, ret, outside);
	return ret;
}

/*
 * OPEN or SEALED -> DONATED once no view mapping exists and no reference
 * taken through one remains. With wait (PINMEM_DONATE_WAIT) the caller
 * waits (timeout_ms, 0 meaning no limit); while any donater waits, view
 * mmaps are refused (mmap.c), so the views and their references can only
 * drain.
 * Several donaters may wait; the first to find nothing in the way makes
 * the transition and the others find the region DONATED.
 */
int pinmem_donate(struct pinmem_region *region, bool wait, u32 timeout_ms)
{
	u64 start_ns = ktime_get_ns();
	bool waiting = false;
	struct pinmem_wait w;
	int ret;

	pinmem_wait_init(&w, wait ? timeout_ms : 0, !wait);
	mutex_lock(&region->lock);
	for (;;) {
		if (region->state == PINMEM_STATE_DONATED) {
			ret = 0;
			break;
		}
		if (region->view_mappings && !wait) {
			ret = -EBUSY;
			break;
		}
		if (!region->view_mappings &&
		    !pinmem_refs_pending(region, false)) {
			region->state = PINMEM_STATE_DONATED;
			ret = 0;
			break;
		}
		if (!waiting) {
			region->donate_waiters++;
			waiting = true;
		}
		ret = pinmem_donate_wait(region, region->view_mappings, wait,
					 &w);
		if (ret)
			break;
	}
	if (waiting)
		region->donate_waiters--;
	trace_pinmem_donate(region->id, ret, ktime_get_ns() - start_ns,
			    region->view_mappings, wait);
	mutex_unlock(&region->lock);
	pinmem_wait_end(&w);
	return ret;
}

int pinmem_publish(struct pinmem_region *region)
{
	int ret = 0;

	mutex_lock(&region->lock);
	if (region->state == PINMEM_STATE_DONATED)
		region->state = PINMEM_STATE_SEALED;
	else
		ret = -EPERM;
	trace_pinmem_publish(region->id, ret, region->state);
	mutex_unlock(&region->lock);
	return ret;
}

int pinmem_reopen(struct pinmem_region *region)
{
	int ret = 0;

	mutex_lock(&region->lock);
	if (region->state == PINMEM_STATE_DONATED)
		region->state = PINMEM_STATE_OPEN;
	else
		ret = -EPERM;
	trace_pinmem_reopen(region->id, ret, region->state);
	mutex_unlock(&region->lock);
	return ret;
}
