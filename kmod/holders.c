// SPDX-License-Identifier: GPL-2.0
/*
 * pinmem: HOLDERS, who maps a region. Each mapping has a record on the
 * region's holders list (mmap.c); HOLDERS walks that list and copies a
 * struct pinmem_holder per record to the caller.
 *
 * The walk costs its caller, not the region: it takes records in batches
 * of PINMEM_HOLDERS_BATCH under region->lock, keeping its place with a
 * mark of its own on the list between them, and names the batch's
 * processes, checks who may see their addresses and copies the batch out
 * with the lock dropped. It ends at a second mark put at the tail when it
 * began, so records added meanwhile cannot keep it going: every mapping
 * that exists from the start of the call to its end is in the answer,
 * and count is the number of records passed.
 *
 * A record names the process that made the mapping by the tgid it took
 * then: the thread group leader of that tgid is the holder, as for
 * /proc/TGID/maps. A fork child's records (made by its parent) and a
 * record whose process has left the mm since (a vfork child that went on
 * to exec) are named by a walk of the processes for one using the mm,
 * outside every lock, once per run of records of one mm.
 */
#include <linux/capability.h>
#include <linux/cred.h>
#include <linux/mm.h>
#include <linux/mman.h>
#include <linux/pid.h>
#include <linux/pid_namespace.h>
#include <linux/rcupdate.h>
#include <linux/sched.h>
#include <linux/sched/coredump.h>
#include <linux/sched/mm.h>
#include <linux/sched/signal.h>
#include <linux/slab.h>
#include <linux/string.h>

#include "pinmem.h"
#include "testgate.h"

#define PINMEM_HOLDERS_BATCH	32

/* What a batch takes of a record under the lock, for use after it. */
struct pinmem_holder_ref {
	struct pid *tgid;		/* a reference, or NULL */
	struct mm_struct *mm;		/* mmgrab()bed */
};

struct pinmem_holders_walk {
	struct pinmem_region *region;
	struct pinmem_holder_rec mark;	/* after the last record taken */
	struct pinmem_holder_rec end;	/* the tail when the walk began */
	u32 n;				/* records passed */
	u32 first;			/* the batch's first record */
	u32 nr;				/* records in the batch */
	bool all_addr;			/* CAP_SYS_PTRACE: every address */
	struct mm_struct *last_mm;	/* the last mm a process walk was for */
	struct pid *last_tgid;		/* and the process it found */
	struct pinmem_holder buf[PINMEM_HOLDERS_BATCH];
	struct pinmem_holder_ref refs[PINMEM_HOLDERS_BATCH];
};

static u32 pinmem_prot(vm_flags_t flags)
{
	return (flags & VM_READ ? PROT_READ : 0) |
	       (flags & VM_WRITE ? PROT_WRITE : 0) |
	       (flags & VM_EXEC ? PROT_EXEC : 0);
}

/*
 * Record rec into the batch. Start, length and protection come from the
 * live VMA: splits and mprotect change them after the record was made.
 * The VMA, so its mm, stays alive while rec is on the list, which
 * vm_ops->close leaves under region->lock.
 */
static void pinmem_holders_take(struct pinmem_holders_walk *w,
				struct pinmem_holder_rec *rec)
{
	struct vm_area_struct *vma = rec->vma;
	struct pinmem_holder *h = &w->buf[w->nr];
	struct pinmem_holder_ref *r = &w->refs[w->nr];
	unsigned long start = READ_ONCE(vma->vm_start);
	vm_flags_t flags = READ_ONCE(vma->vm_flags);

	lockdep_assert_held(&rec->region->lock);
	memset(h, 0, sizeof(*h));
	h->kind = rec->kind;
	h->start = start;
	h->length = READ_ONCE(vma->vm_end) - start;
	h->offset = (u64)(rec->base + READ_ONCE(vma->vm_pgoff)) << PAGE_SHIFT;
	h->prot = pinmem_prot(flags);
	h->flags = rec->maywrite ? PINMEM_HOLDER_MAYWRITE : 0;
	if (!(flags & VM_MAYSHARE))
		h->flags |= PINMEM_HOLDER_PRIVATE;
	r->tgid = get_pid(rec->tgid);
	r->mm = vma->vm_mm;
	mmgrab(r->mm);
	w->nr++;
}

/*
 * Take the next batch: up to PINMEM_HOLDERS_BATCH records after the mark
 * (those past capacity only counted), then move the mark past them.
 * Returns false when the walk has reached its end mark.
 */
static bool pinmem_holders_batch(struct pinmem_holders_walk *w, u32 capacity)
{
	struct pinmem_holder_rec *rec = &w->mark, *next;
	bool more = true;
	u32 steps;

	lockdep_assert_held(&w->region->lock);
	w->first = w->n;
	for (steps = 0; steps < PINMEM_HOLDERS_BATCH; steps++) {
		next = list_next_entry(rec, node);
		if (next == &w->end) {
			more = false;
			break;
		}
		rec = next;
		if (!rec->vma)		/* another walk's mark */
			continue;
		if (w->n++ < capacity)
			pinmem_holders_take(w, rec);
	}
	if (rec != &w->mark)
		list_move(&w->mark.node, &rec->node);
	return more;
}

/*
 * A process using mm, for a record that does not name one: its thread
 * group leader. The leader's mm answers for its group, unless the leader
 * has exited before its threads. Kernel threads that borrow an mm are
 * passed over. Under rcu_read_lock(); NULL if none is found.
 */
static struct task_struct *pinmem_mm_leader(struct mm_struct *mm)
{
	struct task_struct *p, *t;
	struct mm_struct *pmm;

	RCU_LOCKDEP_WARN(!rcu_read_lock_held(), "pinmem: task list needs RCU");
	for_each_process(p) {
		if (p->flags & PF_KTHREAD)
			continue;
		pmm = READ_ONCE(p->mm);
		if (pmm == mm)
			return p;
		if (pmm)
			continue;
		for_each_thread(p, t)
			if (READ_ONCE(t->mm) == mm)
				return p;
	}
	return NULL;
}

/*
 * The holder of a record taken into r, when the record names it: the
 * leader of its tgid while that process still uses the mm (or has no mm
 * left, exiting). NULL when the record names none, or names a process
 * that has left the mm. Under rcu_read_lock().
 */
static struct task_struct *pinmem_tgid_leader(const struct pinmem_holder_ref *r)
{
	struct task_struct *leader;
	struct mm_struct *mm;

	RCU_LOCKDEP_WARN(!rcu_read_lock_held(), "pinmem: tasks need RCU");
	leader = r->tgid ? pid_task(r->tgid, PIDTYPE_TGID) : NULL;
	if (!leader)
		return NULL;
	mm = READ_ONCE(leader->mm);
	return !mm || mm == r->mm ? leader : NULL;
}

/* Remember (with references) that the search for mm found tgid. */
static void pinmem_holders_remember(struct pinmem_holders_walk *w,
				    struct mm_struct *mm, struct pid *tgid)
{
	put_pid(w->last_tgid);
	if (w->last_mm)
		mmdrop(w->last_mm);
	mmgrab(mm);
	w->last_mm = mm;
	w->last_tgid = tgid;
}

/*
 * Whether the caller may learn where the holder maps the region: its own
 * mappings, any with CAP_SYS_PTRACE in the initial user namespace
 * (all_addr), none of a holder with no pid in the caller's pid namespace
 * ns (another container's: the caller has no /proc/PID/maps to open for
 * it), and otherwise /proc/PID/maps' rule (__ptrace_may_access with
 * FSCREDS) applied to the holder's thread group leader: the caller's
 * fsuid and fsgid equal to every uid and gid of the leader, and its mm
 * dumpable. Modules cannot call ptrace_may_access(), so the LSM's say is
 * not asked: stated in security.md. Another user's addresses would undo
 * its ASLR. Under rcu_read_lock().
 */
static bool pinmem_addr_visible(struct task_struct *leader,
				struct mm_struct *mm, bool all_addr,
				struct pid_namespace *ns)
{
	const struct cred *cred = current_cred(), *tcred;
	bool same;

	RCU_LOCKDEP_WARN(!rcu_read_lock_held(), "pinmem: task creds need RCU");
	if (all_addr || mm == current->mm)
		return true;
	if (!leader || !task_tgid_nr_ns(leader, ns))
		return false;
	tcred = __task_cred(leader);
	same = uid_eq(cred->fsuid, tcred->euid) &&
	       uid_eq(cred->fsuid, tcred->suid) &&
	       uid_eq(cred->fsuid, tcred->uid) &&
	       gid_eq(cred->fsgid, tcred->egid) &&
	       gid_eq(cred->fsgid, tcred->sgid) &&
	       gid_eq(cred->fsgid, tcred->gid);
	/*
	 * Dumpability after the credentials, as in __ptrace_may_access():
	 * pairs with the write barrier in commit_creds(), so that a task
	 * seen with its new credentials is seen undumpable if it became so.
	 */
	smp_rmb();
	return same && get_dumpable(mm) == SUID_DUMP_USER;
}

/*
 * Name the holder of record h (taken into r), in the caller's pid
 * namespace (tgid 0, an empty comm and no address when it is not visible
 * there), and withhold its address unless the caller may see it. A record that
 * names no holder has one searched for by its mm, unless the last search
 * was for the same mm: consecutive records are mostly of one process.
 * No lock held.
 */
static void pinmem_holder_name(struct pinmem_holders_walk *w,
			       struct pinmem_holder *h,
			       const struct pinmem_holder_ref *r)
{
	struct pid_namespace *ns = task_active_pid_ns(current);
	struct pid *found = NULL;
	struct task_struct *leader;
	bool visible, searched = false;

	rcu_read_lock();
	leader = pinmem_tgid_leader(r);
	if (!leader && w->last_mm == r->mm && w->last_tgid) {
		leader = pid_task(w->last_tgid, PIDTYPE_TGID);
	} else if (!leader && w->last_mm != r->mm) {
		leader = pinmem_mm_leader(r->mm);
		found = leader ? get_pid(task_tgid(leader)) : NULL;
		searched = true;
	}
	if (leader) {
		h->tgid = task_tgid_nr_ns(leader, ns);
		/* Not visible in the caller's namespace: no name either. */
		if (h->tgid)
			get_task_comm(h->comm, leader);
	}
	visible = pinmem_addr_visible(leader, r->mm, w->all_addr, ns);
	rcu_read_unlock();
	if (searched)
		pinmem_holders_remember(w, r->mm, found);
	if (!visible) {
		h->start = 0;
		h->flags |= PINMEM_HOLDER_ADDR_HIDDEN;
	}
}

/* Name the batch's holders, drop what it took and copy it to the caller. */
static int pinmem_holders_emit(struct pinmem_holders_walk *w,
			       const struct pinmem_records *q)
{
	u32 i;

	for (i = 0; i < w->nr; i++) {
		pinmem_holder_name(w, &w->buf[i], &w->refs[i]);
		put_pid(w->refs[i].tgid);
		mmdrop(w->refs[i].mm);
	}
	i = w->nr;
	w->nr = 0;
	return i ? pinmem_records_put(q, w->first, w->buf, i) : 0;
}

static void pinmem_holders_start(struct pinmem_holders_walk *w)
{
	struct pinmem_region *region = w->region;

	mutex_lock(&region->lock);
	list_add(&w->mark.node, &region->holders);
	list_add_tail(&w->end.node, &region->holders);
	mutex_unlock(&region->lock);
}

static void pinmem_holders_stop(struct pinmem_holders_walk *w)
{
	struct pinmem_region *region = w->region;

	mutex_lock(&region->lock);
	list_del(&w->mark.node);
	list_del(&w->end.node);
	mutex_unlock(&region->lock);
	put_pid(w->last_tgid);
	if (w->last_mm)
		mmdrop(w->last_mm);
}

/*
 * PINMEM_IOC_HOLDERS on the region q->ctx: up to q->capacity records to
 * the caller, the number of mappings passed to *count.
 */
int pinmem_holders_walk(const struct pinmem_records *q, u32 *count)
{
	struct pinmem_holders_walk *w;
	bool more = true;
	int ret = 0;

	w = kzalloc(sizeof(*w), GFP_KERNEL);
	if (!w)
		return -ENOMEM;
	w->region = q->ctx;
	/* Asked once, outside the locks, and without an audit record. */
	w->all_addr = ns_capable_noaudit(&init_user_ns, CAP_SYS_PTRACE);
	pinmem_holders_start(w);
	while (more && !ret) {
		mutex_lock(&w->region->lock);
		more = pinmem_holders_batch(w, q->capacity);
		mutex_unlock(&w->region->lock);
		ret = pinmem_holders_emit(w, q);
		if (!ret && fatal_signal_pending(current))
			ret = -EINTR;
		cond_resched();
		if (more && !ret)
			pinmem_gate(PINMEM_GATE_RECORDS_ROUND);
	}
	pinmem_holders_stop(w);
	*count = w->n;
	kfree(w);
	return ret;
}
