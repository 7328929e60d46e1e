/* SPDX-License-Identifier: GPL-2.0 */
/*
 * pinmem: the kernel API differences between the kernels we build for
 * (6.1 and 6.12), as small named helpers. Nothing else in the module tests
 * the kernel. The PINMEM_HAVE_* macros come from probes in Kbuild.
 */
#ifndef _PINMEM_COMPAT_H
#define _PINMEM_COMPAT_H

#include <linux/mm.h>
#include <linux/mm_types.h>
#include <linux/rcupdate.h>
#include <linux/sched.h>

/* vma->vm_flags became read-only in 6.3: vm_flags_set/clear replaced it. */
static inline void pinmem_vm_flags_set(struct vm_area_struct *vma,
				       vm_flags_t flags)
{
#ifdef PINMEM_HAVE_VM_FLAGS_SET
	vm_flags_set(vma, flags);
#else
	vma->vm_flags |= flags;
#endif
}

static inline void pinmem_vm_flags_clear(struct vm_area_struct *vma,
					 vm_flags_t flags)
{
#ifdef PINMEM_HAVE_VM_FLAGS_SET
	vm_flags_clear(vma, flags);
#else
	vma->vm_flags &= ~flags;
#endif
}

/*
 * Page table entries mapping any page of a chunk (a folio of any order).
 * 6.12 keeps the total in _large_mapcount (folio_mapcount(), inline);
 * 6.1's folio_mapcount() is not exported, so sum the pages' _mapcount
 * there (pinmem chunks are never PMD-mapped: no entire mapcount).
 */
static inline long pinmem_folio_ptes(struct folio *folio)
{
#ifdef PINMEM_HAVE_FOLIO_LARGE_MAPCOUNT
	return folio_mapcount(folio);
#else
	long i, n = folio_nr_pages(folio), sum = 0;

	for (i = 0; i < n; i++)
		sum += atomic_read(&folio_page(folio, i)->_mapcount) + 1;
	return sum;
#endif
}

/* FOLL_PIN pins of a large folio (exact); order 0 keeps no count. */
static inline long pinmem_folio_pincount(struct folio *folio)
{
	if (!folio_test_large(folio))
		return 0;
#ifdef PINMEM_HAVE_FOLIO_PINCOUNT_PTR
	return atomic_read(folio_pincount_ptr(folio));
#else
	return atomic_read(&folio->_pincount);
#endif
}

#endif /* _PINMEM_COMPAT_H */
