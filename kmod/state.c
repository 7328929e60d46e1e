// SPDX-License-Identifier: GPL-2.0
/*
 * pinmem: region states. Every check and transition is made under the
 * region lock, the same lock view mmaps take to be admitted, so no view
 * mapping can appear between a check and the transition it allows.
 */
#include <linux/jiffies.h>
#include <linux/ktime.h>
#include <linux/sched.h>
#include <linux/wait.h>

#include "pinmem.h"
#include "trace.h"

int pinmem_seal(struct pinmem_region *region)
{
	int ret = 0;

	mutex_lock(&region->lock);
	switch (region->state) {
	case PINMEM_STATE_OPEN:
		if (region->writable_view_mappings)
			ret = -EBUSY;
		else
			region->state = PINMEM_STATE_SEALED;
		break;
	case PINMEM_STATE_SEALED:
		break;
	default:
		ret = -EPERM;
		break;
	}
	trace_pinmem_seal(region->id, ret, region->writable_view_mappings);
	mutex_unlock(&region->lock);
	return ret;
}

/* Wait condition, read without the lock; rechecked under it. */
static bool pinmem_donate_ready(struct pinmem_region *region)
{
	return !READ_ONCE(region->view_mappings) ||
	       READ_ONCE(region->state) == PINMEM_STATE_DONATED;
}

/*
 * OPEN or SEALED -> DONATED once no view mapping exists. With
 * PINMEM_DONATE_WAIT the caller waits (timeout_ms, 0 meaning no limit);
 * while any donater waits, view mmaps are refused (mmap.c), so the views
 * can only drain. Several donaters may wait; the first to find no views
 * makes the transition and the others find the region DONATED.
 */
int pinmem_donate(struct pinmem_region *region, u32 flags, u32 timeout_ms)
{
	long left = timeout_ms ? (long)msecs_to_jiffies(timeout_ms) :
				 MAX_SCHEDULE_TIMEOUT;
	u64 start_ns = ktime_get_ns();
	bool waiting = false;
	long t;
	int ret;

	mutex_lock(&region->lock);
	for (;;) {
		if (region->state == PINMEM_STATE_DONATED) {
			ret = 0;
			break;
		}
		if (!region->view_mappings) {
			region->state = PINMEM_STATE_DONATED;
			ret = 0;
			break;
		}
		if (!(flags & PINMEM_DONATE_WAIT)) {
			ret = -EBUSY;
			break;
		}
		if (!left) {
			ret = -ETIMEDOUT;
			break;
		}
		if (!waiting) {
			region->donate_waiters++;
			waiting = true;
		}
		mutex_unlock(&region->lock);
		t = wait_event_interruptible_timeout(region->donate_wq,
						     pinmem_donate_ready(region),
						     left);
		mutex_lock(&region->lock);
		if (t < 0) {
			ret = -EINTR;
			break;
		}
		left = t;
	}
	if (waiting)
		region->donate_waiters--;
	trace_pinmem_donate(region->id, ret, ktime_get_ns() - start_ns,
			    region->view_mappings, flags & PINMEM_DONATE_WAIT);
	mutex_unlock(&region->lock);
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
