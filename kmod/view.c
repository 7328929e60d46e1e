// SPDX-License-Identifier: GPL-2.0
/*
 * pinmem: views. A view is a window of a region, read-only unless made
 * with PINMEM_VIEW_WRITE while the region is OPEN, held by its view file
 * (ioctl.c); every mmap of it is a view mapping (mmap.c).
 */
#include <linux/slab.h>

#include "pinmem.h"
#include "trace.h"

/*
 * A new view of region pages [pgoff, pgoff + nr_pages) (a range ioctl.c
 * has checked), read-write if write; it holds a region reference and
 * counts as a view fd until pinmem_view_put(). The read-write check and
 * the view_fds count are one step with the region lock taken, so no
 * read-write view appears after a SEAL or DONATE.
 */
int pinmem_view_create(struct pinmem_region *region, pgoff_t pgoff,
		       pgoff_t nr_pages, bool write,
		       struct pinmem_view_file **out)
{
	int refused = 0;
	struct pinmem_view_file *view;

	view = kzalloc(sizeof(*view), GFP_KERNEL_ACCOUNT);
	if (!view)
		return -ENOMEM;
	view->region = region;
	view->pgoff = pgoff;
	view->nr_pages = nr_pages;
	view->flags = write ? PINMEM_VIEW_WRITE : 0;

	mutex_lock(&region->lock);
	/* Views see whole chunks: refs.c reads every chunk they map. */
	if (region->nr_unpopulated)
		refused = -ENODATA;
	else if (write && region->state != PINMEM_STATE_OPEN)
		refused = -EPERM;
	else
		region->view_fds++;
	mutex_unlock(&region->lock);
	trace_pinmem_view_create(region->id, (u64)pgoff << PAGE_SHIFT,
				 (u64)nr_pages << PAGE_SHIFT, write, refused);
	if (refused) {
		kfree(view);
		return refused;
	}
	kref_get(&region->kref);
	atomic64_inc(&pinmem_totals.view_fds);
	*out = view;
	return 0;
}

/* Undo pinmem_view_create(): the view file's release, or its failure. */
void pinmem_view_put(struct pinmem_view_file *view)
{
	struct pinmem_region *region = view->region;

	mutex_lock(&region->lock);
	region->view_fds--;
	mutex_unlock(&region->lock);
	atomic64_dec(&pinmem_totals.view_fds);
	kfree(view);
	pinmem_region_put(region);
}
