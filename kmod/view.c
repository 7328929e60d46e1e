// SPDX-License-Identifier: GPL-2.0
/*
 * pinmem: view files. A view is a window of a region, read-only unless
 * made with PINMEM_VIEW_WRITE while the region is OPEN; every mmap of it is
 * a view mapping (mmap.c).
 */
#include <linux/anon_inodes.h>
#include <linux/err.h>
#include <linux/file.h>
#include <linux/slab.h>

#include "pinmem.h"
#include "trace.h"

static int pinmem_view_release(struct inode *inode, struct file *file)
{
	struct pinmem_view_file *view = file->private_data;
	struct pinmem_region *region = view->region;

	mutex_lock(&region->lock);
	region->view_fds--;
	mutex_unlock(&region->lock);
	atomic64_dec(&pinmem_totals.view_fds);
	kfree(view);
	pinmem_region_put(region);
	return 0;
}

const struct file_operations pinmem_view_fops = {
	.owner		= THIS_MODULE,
	.release	= pinmem_view_release,
	.mmap		= pinmem_view_mmap,
	.unlocked_ioctl	= pinmem_view_ioctl,
	.compat_ioctl	= compat_ptr_ioctl,
	.llseek		= noop_llseek,
};

/*
 * A new view file over region pages [pgoff, pgoff + nr_pages) (a range
 * ioctl.c has checked), read-write if write. The read-write check and the
 * view_fds count are one step with the region lock taken, so no
 * read-write view appears after a SEAL or DONATE.
 */
int pinmem_view_create(struct pinmem_region *region, pgoff_t pgoff,
		       pgoff_t nr_pages, bool write, struct file **out)
{
	int refused = 0;
	struct pinmem_view_file *view;
	struct file *file;

	view = kzalloc(sizeof(*view), GFP_KERNEL_ACCOUNT);
	if (!view)
		return -ENOMEM;
	view->region = region;
	view->pgoff = pgoff;
	view->nr_pages = nr_pages;
	view->flags = write ? PINMEM_VIEW_WRITE : 0;

	kref_get(&region->kref);
	file = anon_inode_getfile("[pinmem-view]", &pinmem_view_fops, view,
				  write ? O_RDWR : O_RDONLY);
	if (IS_ERR(file)) {
		pinmem_region_put(region);
		kfree(view);
		return PTR_ERR(file);
	}

	mutex_lock(&region->lock);
	region->view_fds++;
	/* Views see whole chunks: refs.c reads every chunk they map. */
	if (region->nr_unpopulated)
		refused = -ENODATA;
	else if (write && region->state != PINMEM_STATE_OPEN)
		refused = -EPERM;
	mutex_unlock(&region->lock);
	atomic64_inc(&pinmem_totals.view_fds);
	trace_pinmem_view_create(region->id, (u64)pgoff << PAGE_SHIFT,
				 (u64)nr_pages << PAGE_SHIFT, write, refused);
	if (refused) {
		fput(file);	/* its release undoes the count */
		return refused;
	}
	*out = file;
	return 0;
}
