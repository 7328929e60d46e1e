/* SPDX-License-Identifier: GPL-2.0 */
/*
 * pinmem: internal structures shared by the module's files.
 */
#ifndef _PINMEM_INTERNAL_H
#define _PINMEM_INTERNAL_H

#include <linux/atomic.h>
#include <linux/fs.h>
#include <linux/gfp.h>
#include <linux/kref.h>
#include <linux/list.h>
#include <linux/mm.h>
#include <linux/mutex.h>
#include <linux/pid.h>
#include <linux/types.h>
#include <linux/uidgid.h>
#include <linux/wait.h>

#include <uapi/pinmem.h>

/*
 * Where a region's chunks come from: nid NUMA_NO_NODE is the caller's
 * mempolicy; gfp adds __GFP_THISNODE when no other node will do.
 */
struct pinmem_place {
	int nid;
	gfp_t gfp;
};

/*
 * A region: the pages, their charge, and the state the views obey.
 * Lifetime: a kref held by the region file and by each view file; VMAs hold
 * their file, so a mapping keeps the region alive after its fd is closed.
 */
struct pinmem_region {
	struct kref kref;
	struct list_head node;		/* pinmem_regions, pinmem_regions_lock */
	u64 id;
	u64 size;			/* bytes, page multiple */
	unsigned long nr_pages;		/* size >> PAGE_SHIFT: mappable */
	unsigned long nr_alloc_pages;	/* whole chunks: allocated, charged */

	/*
	 * Chunks in non-increasing order: nr_by_order[o] chunks of order o.
	 * An ALLOC_LAZY region has all its order-9 entries from the start,
	 * NULL until POPULATE sets them (once, with release semantics).
	 */
	struct page **chunks;
	unsigned long nr_chunks;
	unsigned long nr_by_order[PINMEM_CHUNK_ORDER + 1];
	unsigned int min_order;
	struct pinmem_place place;	/* where POPULATE allocates */
	struct mutex populate_lock;	/* one POPULATE at a time; before lock */
	/* Chunks FILLs hold: set under populate_lock, cleared by the FILL. */
	unsigned long *filling;

	struct user_struct *user;	/* RLIMIT_MEMLOCK charge, or NULL */
	kuid_t owner_uid;
	struct pid *owner_pid;		/* tgid of the allocating process */

	/* Everything below is under lock. */
	struct mutex lock;
	u32 state;			/* PINMEM_STATE_* */
	u32 donate_waiters;		/* DONATE calls waiting for views to go */
	u32 seal_waiters;		/* SEAL calls waiting for references */
	unsigned long nr_unpopulated;	/* NULL entries of chunks[] */
	u64 owner_mappings;
	u64 view_mappings;
	u64 writable_view_mappings;
	u64 view_fds;
	struct list_head holders;	/* struct pinmem_holder_rec */
	wait_queue_head_t donate_wq;	/* woken when view_mappings drops to 0 */
	struct pinmem_chunk_refs *refs;	/* refs.c; made on first need */
};

/* A wait of DONATE or SEAL (wait.c). */
struct pinmem_wait {
	ktime_t deadline;		/* CLOCK_MONOTONIC (ktime_get) */
	bool forever;			/* no deadline */
	bool killable;			/* only a fatal signal ends it */
	bool deferred;			/* a task work wakeup was set aside */
};

/* A view file's private data. */
struct pinmem_view_file {
	struct pinmem_region *region;
	pgoff_t pgoff;			/* first region page of the view */
	pgoff_t nr_pages;
	u32 flags;			/* PINMEM_VIEW_* */
};

/* An EXPECT declaration (refs.c), its range checked by ioctl.c. */
struct pinmem_expect_req {
	pgoff_t pgoff;
	pgoff_t nr_pages;
	bool per_page;			/* else one reference per chunk */
	bool remove;
};

/* A FILL's chunks (fill.c), claimed and read before they are the region's. */
struct pinmem_fill_job {
	struct page **chunks;
	struct bio_vec *bvec;
	u64 offset;			/* bytes into the region */
	u64 length;			/* bytes to read, <= nr chunks */
	u64 bytes;			/* bytes the read returned */
	unsigned long first;		/* index of chunks[0] in the region */
	unsigned long nr;
	bool claimed;			/* its chunks are marked in filling */
};

/*
 * One per VMA, at vm_private_data; on region->holders while the VMA lives.
 * A HOLDERS walk keeps its place on the list with records of its own, whose
 * vma is NULL (holders.c).
 */
struct pinmem_holder_rec {
	struct list_head node;
	struct vm_area_struct *vma;
	struct pinmem_region *region;
	struct pid *tgid;		/* who mapped; NULL for a fork child's */
	pgoff_t base;			/* region page of file offset 0 */
	u32 kind;			/* PINMEM_HOLDER_* */
	bool maywrite;			/* VM_MAYWRITE when counted */
};

/* Global totals (limits.c), for the module limit, debugfs and DEV_INFO. */
struct pinmem_totals {
	atomic64_t regions;
	atomic64_t pages;
	atomic64_t mappings;
	atomic64_t view_fds;
};

/*
 * The most records one LIST, HOLDERS or REFS call fills, whatever its
 * capacity: it bounds the kernel's buffer (LIST, REFS) and the copying.
 */
#define PINMEM_RECORDS_MAX	BIT(20)

/*
 * A records query of LIST, HOLDERS or REFS (records.c): either snap()
 * puts up to cap records of size bytes at buf and sets *count to how many
 * there are, or walk() copies them itself (pinmem_records_put()) and sets
 * *count. Each returns 0 or -errno.
 */
struct pinmem_records {
	int (*snap)(void *ctx, void *buf, u32 cap, u32 *count);
	int (*walk)(const struct pinmem_records *q, u32 *count);
	void *ctx;
	size_t size;			/* of a record, to the module */
	u32 size_ver0;			/* of a record, first published */
	u64 ptr;			/* the caller's array */
	u32 capacity;			/* its records */
	u32 record_size;		/* as the caller gave it; 0: size_ver0 */
};

/* limits.c */
extern struct pinmem_totals pinmem_totals;
extern unsigned long long pinmem_max_total_bytes;
extern unsigned long long pinmem_max_region_bytes;

/* region.c */
int pinmem_region_create(u64 size, u32 flags,
			 const struct pinmem_place *place,
			 struct pinmem_region **out);
void pinmem_region_put(struct pinmem_region *region);
struct pinmem_region *pinmem_region_get_queried(struct pinmem_region *fd_region,
						u64 id);
struct page *pinmem_region_page(struct pinmem_region *region, pgoff_t pgoff);
gfp_t pinmem_chunk_gfp(unsigned int order, bool fallback);
bool pinmem_beyond_available(unsigned long nr_pages);
void pinmem_region_fill_info(struct pinmem_region *region,
			     struct pinmem_region_info *info);
int pinmem_region_list(void *buf, u32 capacity, u32 *count);

/* alloc_parallel.c */
struct page *pinmem_alloc_pages(const struct pinmem_place *place, gfp_t gfp,
				unsigned int order);
unsigned long pinmem_alloc_parallel(struct page **chunks, unsigned long nr,
				    gfp_t gfp, const struct pinmem_place *place,
				    bool *intr);
int pinmem_alloc_init(void);
void pinmem_alloc_exit(void);

/* populate.c */
int pinmem_populate(struct pinmem_region *region, u64 offset, u64 length);
int pinmem_chunks_claim(struct pinmem_region *region, unsigned long first,
			unsigned long nr);
void pinmem_chunks_release(struct pinmem_region *region, unsigned long first,
			   unsigned long nr);

/* fill.c */
int pinmem_fill_read(struct pinmem_region *region, struct file *file,
		     loff_t pos, u64 offset, u64 length,
		     struct pinmem_fill_job *job);
void pinmem_fill_finish(struct pinmem_region *region,
			struct pinmem_fill_job *job, int ret);

/* numa.c */
int pinmem_place_on_node(struct pinmem_place *place, int node, bool any);
void pinmem_region_nodes(struct pinmem_region *region, u64 *bytes);

/* view.c */
int pinmem_view_create(struct pinmem_region *region, pgoff_t pgoff,
		       pgoff_t nr_pages, bool write,
		       struct pinmem_view_file **out);
void pinmem_view_put(struct pinmem_view_file *view);

/* state.c */
int pinmem_seal(struct pinmem_region *region);
int pinmem_donate(struct pinmem_region *region, bool wait, u32 timeout_ms);
int pinmem_publish(struct pinmem_region *region);
int pinmem_reopen(struct pinmem_region *region);

/* refs.c */
int pinmem_refs_taint(struct pinmem_region *region, pgoff_t pgoff,
		      pgoff_t nr, bool writable);
bool pinmem_refs_pending(struct pinmem_region *region, bool seal);
int pinmem_refs_settle(struct pinmem_region *region, bool seal, bool wait,
		       struct pinmem_wait *w, u64 *outside);
void pinmem_refs_settled(struct pinmem_region *region, bool seal, int ret,
			 u64 outside);
int pinmem_refs_expect(struct pinmem_region *region,
		       const struct pinmem_expect_req *e);
void pinmem_refs_fill_info(struct pinmem_region *region,
			   struct pinmem_region_info *info);
int pinmem_refs_snapshot(void *region, void *buf, u32 capacity, u32 *count);
void pinmem_refs_free(struct pinmem_region *region);

/* wait.c */
void pinmem_wait_init(struct pinmem_wait *w, u32 timeout_ms, bool killable);
long pinmem_wait_left(struct pinmem_wait *w);
int pinmem_wait_queue(struct pinmem_wait *w, wait_queue_head_t *wq,
		      bool (*ready)(void *arg), void *arg);
int pinmem_wait_sleep(struct pinmem_wait *w, long t);
void pinmem_wait_end(struct pinmem_wait *w);

/* mmap.c */
int pinmem_region_mmap(struct file *file, struct vm_area_struct *vma);
int pinmem_view_mmap(struct file *file, struct vm_area_struct *vma);

/* holders.c */
int pinmem_holders_walk(const struct pinmem_records *q, u32 *count);

/* records.c */
int pinmem_records_to_user(const struct pinmem_records *q, u32 *count);
int pinmem_records_put(const struct pinmem_records *q, u32 index,
		       const void *buf, u32 n);

/* ioctl.c */
long pinmem_dev_ioctl(struct file *file, unsigned int cmd, unsigned long arg);

/*
 * Test gates: points where a test stops a thread of its choice until it
 * lets it go (testgate.c; the calls at the points: testgate.h). Only
 * builds made with PINMEM_TEST_GATES=y (the tests' own, kmod/kmod.mk)
 * have them; elsewhere they compile to nothing.
 */
enum pinmem_gate_point {
	PINMEM_GATE_RECORDS_ROUND,	/* between two looks of a records query */
	PINMEM_GATE_READ_REF,		/* a chunk's reading: after a refcount */
	PINMEM_GATE_READ_MAP,		/* and after the mapcount that follows */
	PINMEM_GATE_FILL_CLAIMED,	/* FILL: chunks claimed, not yet read */
	PINMEM_GATE_POPULATE_HELD,	/* POPULATE: allocated, populate_lock held */
	PINMEM_GATE_NR
};

#ifdef PINMEM_TEST_GATES
/* testgate.c */
extern int pinmem_gates_armed;
void pinmem_gate_wait(enum pinmem_gate_point point);
void pinmem_gates_init(struct dentry *dir);
void pinmem_gates_exit(void);
#else
static inline void pinmem_gates_init(struct dentry *dir) { }
static inline void pinmem_gates_exit(void) { }
#endif

#endif /* _PINMEM_INTERNAL_H */
