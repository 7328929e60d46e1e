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
 * The task an mm belongs to, for naming a mapping's holder. Must be called
 * under rcu_read_lock(); may return NULL (the owner is exiting, or the
 * kernel does not track mm owners). Resolving the holder from the mm, not
 * from current, is what names a fork child for the mappings it inherited:
 * vm_ops->open runs in the parent for the child's VMAs.
 */
static inline struct task_struct *pinmem_mm_task(struct mm_struct *mm)
{
#ifdef CONFIG_MEMCG
	return rcu_dereference(mm->owner);
#else
	return NULL;
#endif
}

#endif /* _PINMEM_COMPAT_H */
