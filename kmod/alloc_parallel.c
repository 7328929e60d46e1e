// SPDX-License-Identifier: GPL-2.0
/*
 * pinmem: a large region's 2 MiB chunks allocated on several CPUs.
 *
 * Debian's kernels zero every page the allocator hands out
 * (init_on_alloc=1), so the zeroing cannot be moved after allocation:
 * the allocation itself is what runs in parallel. The caller takes part
 * and a bounded number of workers of an unbound workqueue join it, each
 * claiming chunk indexes from a shared counter. The workers charge the
 * caller's memory cgroup (set_active_memcg), never the kworker's, with
 * the caller's GFP (no OOM killer, no warning). They allocate on the
 * caller's node (or the node asked for), which is what the default local
 * mempolicy would do; a caller with a mempolicy of its own allocates
 * alone, so that its policy holds for every chunk.
 */
#include <linux/cpuset.h>
#include <linux/gfp.h>
#include <linux/memcontrol.h>
#include <linux/mempolicy.h>
#include <linux/moduleparam.h>
#include <linux/sched/mm.h>
#include <linux/sched/signal.h>
#include <linux/slab.h>
#include <linux/workqueue.h>

#include "pinmem.h"

/* The most CPUs one ALLOC uses, and the workqueue's concurrency bound. */
#define PINMEM_ALLOC_THREADS_MAX	32
/*
 * A worker is worth starting for this many chunks (16 MiB, some ms of
 * zeroing) or more: a loader POPULATEs its region in steps of about this.
 */
#define PINMEM_CHUNKS_PER_WORKER	8

static unsigned int pinmem_alloc_threads;
module_param_named(alloc_threads, pinmem_alloc_threads, uint, 0644);
MODULE_PARM_DESC(alloc_threads,
		 "CPUs one ALLOC allocates on (0: all online, at most 32; 1: the caller only)");

static struct workqueue_struct *pinmem_alloc_wq;

struct pinmem_alloc_job {
	struct page **chunks;		/* chunks[i] for claimed i, or NULL */
	unsigned long nr;
	gfp_t gfp;
	struct pinmem_place place;
	struct mem_cgroup *memcg;	/* the caller's, for the workers */
	atomic_long_t next;		/* next chunk index to claim */
	atomic_t stop;			/* a chunk failed or a fatal signal */
};

struct pinmem_alloc_worker {
	struct work_struct work;
	struct pinmem_alloc_job *job;
};

/* Pages of an order from where place says. */
struct page *pinmem_alloc_pages(const struct pinmem_place *place, gfp_t gfp,
				unsigned int order)
{
	if (place->nid == NUMA_NO_NODE)
		return alloc_pages(gfp, order);
	return alloc_pages_node(place->nid, gfp | place->gfp, order);
}

/* Claim and allocate chunks until none is left or the job stops. */
static void pinmem_alloc_claim(struct pinmem_alloc_job *job, bool caller)
{
	unsigned long i;
	struct page *page;

	while (!atomic_read(&job->stop)) {
		if (caller && fatal_signal_pending(current))
			break;
		i = atomic_long_fetch_inc(&job->next);
		if (i >= job->nr)
			return;
		/* POPULATE: a chunk of the range that is already there. */
		if (job->chunks[i])
			continue;
		page = pinmem_alloc_pages(&job->place, job->gfp,
					  PINMEM_CHUNK_ORDER);
		if (!page)
			break;
		/* Pairs with the acquire in pinmem_region_page(): zeroed. */
		smp_store_release(&job->chunks[i], page);
		cond_resched();
	}
	atomic_set(&job->stop, 1);
}

static void pinmem_alloc_work(struct work_struct *work)
{
	struct pinmem_alloc_worker *w =
		container_of(work, struct pinmem_alloc_worker, work);
	struct mem_cgroup *old = set_active_memcg(w->job->memcg);

	pinmem_alloc_claim(w->job, false);
	set_active_memcg(old);
}

/* How many workers join the caller for nr chunks. */
static unsigned int pinmem_alloc_nr_workers(unsigned long nr)
{
	unsigned int threads = READ_ONCE(pinmem_alloc_threads);

	if (!threads)
		threads = num_online_cpus();
	threads = min(threads, PINMEM_ALLOC_THREADS_MAX);
#ifdef CONFIG_NUMA
	/*
	 * The workers are kernel threads outside the caller's cpuset and
	 * mempolicy and could follow neither: a caller with a policy, or
	 * confined to some of the nodes with memory, allocates alone. The
	 * nodemask is read without its seqcount: a cpuset changing at this
	 * moment may see one allocation decided by its old nodes.
	 */
	if (current->mempolicy ||
	    !nodes_subset(node_states[N_MEMORY], cpuset_current_mems_allowed))
		return 0;
#endif
	return min_t(unsigned long, threads - 1, nr / PINMEM_CHUNKS_PER_WORKER);
}

/* How many entries of chunks[] hold a chunk. */
static unsigned long pinmem_alloc_count(struct page **chunks,
					unsigned long nr)
{
	unsigned long i, n = 0;

	for (i = 0; i < nr; i++)
		n += !!chunks[i];
	return n;
}

/*
 * Allocate an order-9 chunk for every NULL entry of chunks[0..nr) on
 * several CPUs; entries already set are kept. Returns how many entries
 * are set after it: fewer than nr when a chunk could not be had, or on a
 * fatal signal (*intr). Where the missing ones are is for the caller.
 */
unsigned long pinmem_alloc_parallel(struct page **chunks, unsigned long nr,
				    gfp_t gfp, const struct pinmem_place *place,
				    bool *intr)
{
	struct pinmem_alloc_job job = {
		.chunks = chunks, .nr = nr, .gfp = gfp, .place = *place,
	};
	struct pinmem_alloc_worker *workers = NULL;
	unsigned int i, nr_workers = pinmem_alloc_nr_workers(nr);

	atomic_long_set(&job.next, 0);
	atomic_set(&job.stop, 0);
	if (nr_workers)
		workers = kcalloc(nr_workers, sizeof(*workers),
				  GFP_KERNEL | __GFP_NOWARN);
	if (workers) {
		/* Prefer the caller's node, as its default policy would. */
		if (place->nid == NUMA_NO_NODE)
			job.place.nid = numa_mem_id();
		job.memcg = get_mem_cgroup_from_mm(current->mm);
		for (i = 0; i < nr_workers; i++) {
			workers[i].job = &job;
			INIT_WORK(&workers[i].work, pinmem_alloc_work);
			queue_work(pinmem_alloc_wq, &workers[i].work);
		}
	}
	pinmem_alloc_claim(&job, true);
	/* A worker not started yet never runs; a running one ends its chunk. */
	for (i = 0; workers && i < nr_workers; i++)
		cancel_work_sync(&workers[i].work);
	if (workers)
		mem_cgroup_put(job.memcg);
	kfree(workers);
	*intr = fatal_signal_pending(current);
	return pinmem_alloc_count(chunks, nr);
}

int pinmem_alloc_init(void)
{
	pinmem_alloc_wq = alloc_workqueue("pinmem_alloc", WQ_UNBOUND,
					  PINMEM_ALLOC_THREADS_MAX);
	return pinmem_alloc_wq ? 0 : -ENOMEM;
}

void pinmem_alloc_exit(void)
{
	destroy_workqueue(pinmem_alloc_wq);
}
