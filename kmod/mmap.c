// SPDX-License-Identifier: GPL-2.0
/*
 * pinmem: mappings. Owner mappings (mmap of a region fd) and view mappings
 * (mmap of a view fd) insert the region's pages as ordinary struct pages,
 * so GUP works on them. Every VMA carries its own holder record; vm_ops
 * open/close keep the region's counts exact through fork, VMA splits,
 * mremap and exit.
 *
 * A view fd of a SEALED region can also be mapped MAP_PRIVATE (ABI 7): the
 * region's pages are inserted as in a shared view, but with the private
 * VMA's page protection, which never has write: a write fault copies the
 * page into anonymous memory (do_wp_page), so the region's pages are never
 * written through such a mapping. It counts as a view mapping (it reads
 * the region's pages, and can get them back after MADV_DONTNEED) and never
 * as a writable one.
 *
 * A failed mmap leaves no count: ->mmap counts as its very last step and
 * cannot fail after it (prefaulting is best effort). Where mmap_region()
 * can still fail after ->mmap succeeded (6.12: arch_validate_flags, the
 * maple tree preallocation) it calls vm_ops->close, which uncounts; 6.1
 * has no failure path after ->mmap. No VMA disappears without ->close in
 * a merge either: VM_MIXEDMAP and VM_DONTEXPAND are VM_SPECIAL, and the
 * kernel never merges special VMAs.
 *
 * Locking: vm_ops and ->mmap run under mmap_lock and take the region lock
 * inside it. The region lock is never held while mapping pages, nor across
 * copies to or from user space.
 */
#include <linux/mm.h>
#include <linux/mman.h>
#include <linux/pid.h>
#include <linux/sched.h>
#include <linux/slab.h>

#include "compat.h"
#include "pinmem.h"
#include "trace.h"

#define PINMEM_INSERT_BATCH	64

/* A copy-on-write view mapping (MAP_PRIVATE of a view fd). */
static bool pinmem_vma_private(struct vm_area_struct *vma)
{
	return !(vma->vm_flags & VM_MAYSHARE);
}

/* Whether a VMA may write the region's pages: shared, with VM_MAYWRITE. */
static bool pinmem_vma_maywrite(struct vm_area_struct *vma)
{
	return !pinmem_vma_private(vma) && vma->vm_flags & VM_MAYWRITE;
}

/* Count a VMA in (delta 1) or out (-1); the caller holds region->lock. */
static void pinmem_count(struct pinmem_holder_rec *rec, int delta)
{
	struct pinmem_region *region = rec->region;

	lockdep_assert_held(&region->lock);
	if (rec->kind == PINMEM_HOLDER_OWNER) {
		region->owner_mappings += delta;
	} else {
		region->view_mappings += delta;
		if (rec->maywrite)
			region->writable_view_mappings += delta;
	}
	atomic64_add(delta, &pinmem_totals.mappings);
}

/*
 * The process a new record names, for HOLDERS: the caller's, when the VMA
 * is in its own mm (mmap, a split, mremap); none for a fork child's VMA,
 * whose vm_ops->open runs in the parent (HOLDERS finds that process by
 * its mm).
 */
static struct pid *pinmem_rec_tgid(struct vm_area_struct *vma)
{
	if (vma->vm_mm != current->mm)
		return NULL;
	return get_task_pid(current, PIDTYPE_TGID);
}

static void pinmem_rec_free(struct pinmem_holder_rec *rec)
{
	put_pid(rec->tgid);
	kfree(rec);
}

static void pinmem_rec_add(struct pinmem_holder_rec *rec)
{
	struct pinmem_region *region = rec->region;

	lockdep_assert_held(&region->lock);
	list_add_tail(&rec->node, &region->holders);
	pinmem_count(rec, 1);
}

/*
 * A copy of the VMA being made: split, fork (in the parent's context, for a
 * VMA of the child's mm), mremap. The new VMA starts with the old VMA's
 * vm_private_data and gets a record of its own. vm_ops->open cannot fail,
 * so the small allocation uses __GFP_NOFAIL (a few dozen bytes, the same
 * kind of allocation the caller has just made for the VMA itself).
 */
static void pinmem_vm_open(struct vm_area_struct *vma)
{
	struct pinmem_holder_rec *old = vma->vm_private_data;
	struct pinmem_holder_rec *rec;

	rec = kmalloc(sizeof(*rec), GFP_KERNEL_ACCOUNT | __GFP_NOFAIL);
	rec->vma = vma;
	rec->region = old->region;
	rec->base = old->base;
	rec->kind = old->kind;
	rec->maywrite = pinmem_vma_maywrite(vma);
	rec->tgid = pinmem_rec_tgid(vma);
	vma->vm_private_data = rec;

	mutex_lock(&rec->region->lock);
	pinmem_rec_add(rec);
	mutex_unlock(&rec->region->lock);
}

static void pinmem_vm_close(struct vm_area_struct *vma)
{
	struct pinmem_holder_rec *rec = vma->vm_private_data;
	struct pinmem_region *region = rec->region;

	mutex_lock(&region->lock);
	list_del(&rec->node);
	pinmem_count(rec, -1);
	if (rec->kind == PINMEM_HOLDER_VIEW && !region->view_mappings)
		wake_up_all(&region->donate_wq);
	mutex_unlock(&region->lock);
	pinmem_rec_free(rec);
}

/*
 * Insert region pages [pgoff, pgoff + nr) at addr, in batches. Stops at
 * the first page not there (a chunk of an ALLOC_LAZY region that is not
 * populated), at an error (no memory for page tables, a page already
 * mapped), or on a fatal signal; what is not inserted here the fault
 * handler inserts.
 */
static void pinmem_insert_run(struct vm_area_struct *vma,
			      struct pinmem_region *region, unsigned long addr,
			      pgoff_t pgoff, unsigned long nr)
{
	struct page *pages[PINMEM_INSERT_BATCH];
	unsigned long n, i, left;

	while (nr) {
		n = min_t(unsigned long, PINMEM_INSERT_BATCH, nr);
		for (i = 0; i < n; i++) {
			pages[i] = pinmem_region_page(region, pgoff + i);
			if (!pages[i])
				break;
		}
		left = i;
		if (!i || vm_insert_pages(vma, addr, pages, &left) || i < n)
			return;
		addr += n << PAGE_SHIFT;
		pgoff += n;
		nr -= n;
		if (fatal_signal_pending(current))
			return;
		cond_resched();
	}
}

/*
 * A fault maps the rest of its order-9 chunk with it: pages of a chunk
 * that POPULATE added after the mmap then cost one fault a chunk, not
 * one a page. The faulting page is inserted last on its own, which is a
 * no-op (VM_FAULT_NOPAGE) when the run has mapped it.
 */
static vm_fault_t pinmem_vm_fault(struct vm_fault *vmf)
{
	struct vm_area_struct *vma = vmf->vma;
	struct pinmem_holder_rec *rec = vma->vm_private_data;
	struct pinmem_region *region = rec->region;
	pgoff_t pgoff = rec->base + vmf->pgoff;
	unsigned long addr = vmf->address & PAGE_MASK;
	unsigned long nr;
	struct page *page;

	if (pgoff >= region->nr_pages)
		return VM_FAULT_SIGBUS;
	page = pinmem_region_page(region, pgoff);
	if (!page)
		return VM_FAULT_SIGBUS;
	if (pgoff < region->nr_by_order[PINMEM_CHUNK_ORDER] <<
		    PINMEM_CHUNK_ORDER) {
		nr = BIT(PINMEM_CHUNK_ORDER) -
		     (pgoff & (BIT(PINMEM_CHUNK_ORDER) - 1));
		nr = min3(nr, (vma->vm_end - addr) >> PAGE_SHIFT,
			  region->nr_pages - pgoff);
		pinmem_insert_run(vma, region, addr, pgoff, nr);
	}
	return vmf_insert_page(vma, addr, page);
}

static const struct vm_operations_struct pinmem_vm_ops = {
	.open	= pinmem_vm_open,
	.close	= pinmem_vm_close,
	.fault	= pinmem_vm_fault,
};

/*
 * Checks common to both kinds: bounds, and MAP_SHARED unless allow_private
 * (a view; its state decides). A read-only fd's MAP_SHARED loses VM_SHARED
 * but keeps VM_MAYSHARE.
 */
static int pinmem_mmap_check(struct vm_area_struct *vma, pgoff_t nr_pages,
			     bool allow_private)
{
	unsigned long len = vma_pages(vma);

	if (pinmem_vma_private(vma) && !allow_private)
		return -EINVAL;
	if (vma->vm_pgoff > nr_pages || len > nr_pages - vma->vm_pgoff)
		return -EINVAL;
	return 0;
}

static struct pinmem_holder_rec *pinmem_rec_new(struct vm_area_struct *vma,
						struct pinmem_region *region,
						pgoff_t base, u32 kind)
{
	struct pinmem_holder_rec *rec;

	rec = kzalloc(sizeof(*rec), GFP_KERNEL_ACCOUNT);
	if (!rec)
		return NULL;
	rec->vma = vma;
	rec->region = region;
	rec->base = base;
	rec->kind = kind;
	rec->tgid = pinmem_rec_tgid(vma);
	return rec;
}

/*
 * VM_DONTEXPAND refuses growth by mremap; VM_DONTCOPY is left clear, so
 * children inherit mappings (and MADV_DONTFORK/DOFORK work as usual).
 * VM_MIXEDMAP without VM_PFNMAP: pages stay normal pages for GUP.
 */
static void pinmem_vma_setup(struct vm_area_struct *vma,
			     struct pinmem_holder_rec *rec)
{
	pinmem_vm_flags_set(vma, VM_MIXEDMAP | VM_DONTEXPAND | VM_DONTDUMP);
	vma->vm_ops = &pinmem_vm_ops;
	vma->vm_private_data = rec;
}

int pinmem_region_mmap(struct file *file, struct vm_area_struct *vma)
{
	struct pinmem_region *region = file->private_data;
	struct pinmem_holder_rec *rec;
	int ret;

	ret = pinmem_mmap_check(vma, region->nr_pages, false);
	if (ret)
		return ret;
	rec = pinmem_rec_new(vma, region, 0, PINMEM_HOLDER_OWNER);
	if (!rec)
		return -ENOMEM;
	pinmem_vma_setup(vma, rec);
	rec->maywrite = pinmem_vma_maywrite(vma);

	mutex_lock(&region->lock);
	pinmem_rec_add(rec);
	trace_pinmem_mmap(region->id, false, vma->vm_start,
			  vma->vm_end - vma->vm_start, vma->vm_flags & VM_WRITE,
			  region->state, 0);
	mutex_unlock(&region->lock);
	/* Counted: from here on the mmap cannot fail in this function. */
	pinmem_insert_run(vma, region, vma->vm_start, vma->vm_pgoff,
			  vma_pages(vma));
	return 0;
}

/*
 * View admission, decided with the region lock taken: refused while
 * DONATED or while a DONATE waits (EBUSY), a writable one while a SEAL
 * waits for references (EBUSY); a read-write mapping only while OPEN
 * (EPERM), and when the region is not OPEN VM_MAYWRITE goes, so mprotect
 * cannot add write later. A read-write view fd mapped read-only while
 * OPEN keeps VM_MAYWRITE and counts as writable, as memfd's F_SEAL_WRITE
 * does. A private (copy-on-write) mapping only while SEALED (EPERM): its
 * pages not yet copied must not change under it; it keeps VM_MAYWRITE,
 * as its writes go to its own copies.
 */
static int pinmem_view_admit(struct pinmem_region *region,
			     struct vm_area_struct *vma)
{
	lockdep_assert_held(&region->lock);
	if (region->state == PINMEM_STATE_DONATED || region->donate_waiters)
		return -EBUSY;
	if (pinmem_vma_private(vma))
		return region->state == PINMEM_STATE_SEALED ? 0 : -EPERM;
	if (region->state != PINMEM_STATE_OPEN) {
		if (vma->vm_flags & VM_WRITE)
			return -EPERM;
		pinmem_vm_flags_clear(vma, VM_MAYWRITE);
	} else if (region->seal_waiters && vma->vm_flags & VM_MAYWRITE) {
		return -EBUSY;	/* a SEAL waits for writers' references */
	}
	return 0;
}

/*
 * A view mapping: admitted (above), then its chunks are marked for the
 * reference checks (refs.c), as writable only when it may write them.
 */
int pinmem_view_mmap(struct file *file, struct vm_area_struct *vma)
{
	struct pinmem_view_file *view = file->private_data;
	struct pinmem_region *region = view->region;
	struct pinmem_holder_rec *rec;
	int ret;

	ret = pinmem_mmap_check(vma, view->nr_pages, true);
	if (ret)
		return ret;
	rec = pinmem_rec_new(vma, region, view->pgoff, PINMEM_HOLDER_VIEW);
	if (!rec)
		return -ENOMEM;

	mutex_lock(&region->lock);
	ret = pinmem_view_admit(region, vma);
	if (!ret)
		ret = pinmem_refs_taint(region, view->pgoff + vma->vm_pgoff,
					vma_pages(vma),
					pinmem_vma_maywrite(vma));
	trace_pinmem_mmap(region->id, true, vma->vm_start,
			  vma->vm_end - vma->vm_start, vma->vm_flags & VM_WRITE,
			  region->state, ret);
	if (ret) {
		mutex_unlock(&region->lock);
		pinmem_rec_free(rec);
		return ret;
	}
	pinmem_vma_setup(vma, rec);
	rec->maywrite = pinmem_vma_maywrite(vma);
	pinmem_rec_add(rec);
	mutex_unlock(&region->lock);

	pinmem_insert_run(vma, region, vma->vm_start,
			  view->pgoff + vma->vm_pgoff, vma_pages(vma));
	return 0;
}
