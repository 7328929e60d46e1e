// SPDX-License-Identifier: GPL-2.0
/*
 * pinmem: FILL, the chunks of an ALLOC_LAZY region read from a file by
 * the kernel before any mapping can see them.
 *
 * A loader that POPULATEs a range and then reads into it through a mapping
 * pays for each page twice: the allocator zeroes it, the read overwrites
 * it, and the read (O_DIRECT, or io_uring's fixed buffers) first takes
 * each 4 KiB page into the kernel through the page tables (GUP). FILL
 * allocates the chunks without __GFP_ZERO, reads the file into them
 * through a bvec of whole 2 MiB chunks (no GUP, no page references: the
 * chunks are this call's until it publishes them), zeroes only what the
 * read did not write, and then publishes them as POPULATE does. Where the
 * kernel zeroes every allocation anyway (init_on_alloc=1, Debian's
 * default) only the per-page work of the read goes away.
 *
 * Before allocating, the call claims the range's chunks under
 * populate_lock (populate.c), and ends the claim without it: a chunk
 * already there fails it with EEXIST, one another FILL holds with EBUSY,
 * and a POPULATE or FILL overlapping the claim fails at once with EBUSY.
 * So the memory FILLs hold never exceeds the region's own size, which
 * ALLOC charged (RLIMIT_MEMLOCK, the module's total), however many run at
 * once. No lock is held across the allocation or the read. FILL comes
 * in two halves, claim-allocate-read and publish, between which ioctl.c
 * writes the count read back: on any error, the copy's included, none of
 * the chunks is published.
 */
#include <linux/bvec.h>
#include <linux/fs.h>
#include <linux/highmem.h>
#include <linux/sched/signal.h>
#include <linux/slab.h>
#include <linux/uio.h>

#include "pinmem.h"
#include "testgate.h"
#include "trace.h"

#define PINMEM_CHUNK_SHIFT	(PAGE_SHIFT + PINMEM_CHUNK_ORDER)

static void pinmem_fill_free(struct pinmem_fill_job *job)
{
	unsigned long i;

	for (i = 0; job->chunks && i < job->nr; i++)
		if (job->chunks[i])
			__free_pages(job->chunks[i], PINMEM_CHUNK_ORDER);
	kvfree(job->chunks);
	kvfree(job->bvec);
}

/* Private chunks for the job, not zeroed unless the kernel always does. */
static int pinmem_fill_alloc(struct pinmem_region *region,
			     struct pinmem_fill_job *job)
{
	gfp_t gfp = pinmem_chunk_gfp(PINMEM_CHUNK_ORDER, false) & ~__GFP_ZERO;
	unsigned long i;
	bool intr;

	job->chunks = kvcalloc(job->nr, sizeof(*job->chunks),
			       GFP_KERNEL_ACCOUNT);
	job->bvec = kvcalloc(job->nr, sizeof(*job->bvec), GFP_KERNEL_ACCOUNT);
	if (!job->chunks || !job->bvec)
		return -ENOMEM;
	if (pinmem_beyond_available(job->nr << PINMEM_CHUNK_ORDER))
		return -ENOMEM;
	if (pinmem_alloc_parallel(job->chunks, job->nr, gfp, &region->place,
				  &intr) != job->nr)
		return intr ? -EINTR : -ENOMEM;
	for (i = 0; i < job->nr; i++) {
		job->bvec[i].bv_page = job->chunks[i];
		job->bvec[i].bv_offset = 0;
		job->bvec[i].bv_len = min_t(u64, PINMEM_CHUNK_SIZE,
					    job->length - (i << PINMEM_CHUNK_SHIFT));
	}
	return 0;
}

/*
 * Read job->length bytes at pos; *done is what the file gave. The
 * iterator is set up afresh for each call at what is done so far: a
 * read_iter may leave it anywhere after a short read (netfs advances it
 * by the whole request), so only the returned count is trusted.
 */
static int pinmem_fill_read_file(struct file *file, loff_t pos,
				 struct pinmem_fill_job *job, u64 *done)
{
	struct iov_iter iter;
	loff_t at;
	ssize_t ret;

	*done = 0;
	do {
		iov_iter_bvec(&iter, ITER_DEST, job->bvec, job->nr,
			      job->length);
		iov_iter_advance(&iter, *done);
		/* One call reads at most MAX_RW_COUNT (rw_verify_area). */
		iov_iter_truncate(&iter, MAX_RW_COUNT);
		at = pos + *done;
		ret = vfs_iter_read(file, &iter, &at, 0);
		if (ret <= 0)
			break;
		*done += ret;
		if (fatal_signal_pending(current))
			return -EINTR;
	} while (*done < job->length);
	return ret < 0 ? ret : 0;
}

/*
 * Zero the chunks from byte from on: what the read did not reach, and
 * anything a direct read wrote past the end of the file it reported.
 */
static void pinmem_fill_zero_rest(struct pinmem_fill_job *job, u64 from)
{
	u64 end = (u64)job->nr << PINMEM_CHUNK_SHIFT;

	while (from < end) {
		struct page *page = job->chunks[from >> PINMEM_CHUNK_SHIFT] +
			((from >> PAGE_SHIFT) & ((1UL << PINMEM_CHUNK_ORDER) - 1));
		size_t off = offset_in_page(from);

		memzero_page(page, off, PAGE_SIZE - off);
		from += PAGE_SIZE - off;
		cond_resched();
	}
}

static int pinmem_fill_claim(struct pinmem_region *region,
			     struct pinmem_fill_job *job)
{
	int ret;

	if (mutex_lock_killable(&region->populate_lock))
		return -EINTR;
	ret = pinmem_chunks_claim(region, job->first, job->nr);
	mutex_unlock(&region->populate_lock);
	job->claimed = !ret;
	return ret;
}

/*
 * End the claim: with publish, the job's chunks become the region's
 * (all of them); without, they stay the job's, to be freed unseen. No
 * populate_lock: a POPULATE of another range may hold it for its whole
 * allocation, and a FILL that has read its file must not wait for that,
 * unkillably. The claimed entries are the job's alone until the bits
 * clear (populate.c).
 */
static void pinmem_fill_end(struct pinmem_region *region,
			    struct pinmem_fill_job *job, bool publish)
{
	unsigned long i;

	for (i = 0; publish && i < job->nr; i++) {
		/* Pairs with the acquire in pinmem_region_page(): filled. */
		smp_store_release(&region->chunks[job->first + i],
				  job->chunks[i]);
		job->chunks[i] = NULL;
	}
	if (publish) {
		mutex_lock(&region->lock);
		region->nr_unpopulated -= job->nr;
		mutex_unlock(&region->lock);
	}
	pinmem_chunks_release(region, job->first, job->nr);
}

/*
 * The first half of FILL: claim the chunks of bytes [offset, offset +
 * length) of the region (a range ioctl.c has checked), allocate them and
 * read the file at pos into them; job->bytes is what the read returned.
 * Whatever it returns, pinmem_fill_finish() ends the job.
 */
int pinmem_fill_read(struct pinmem_region *region, struct file *file,
		     loff_t pos, u64 offset, u64 length,
		     struct pinmem_fill_job *job)
{
	int ret;

	memset(job, 0, sizeof(*job));
	job->offset = offset;
	job->length = length;
	job->first = offset >> PINMEM_CHUNK_SHIFT;
	job->nr = DIV_ROUND_UP_ULL(length, PINMEM_CHUNK_SIZE);
	/* A region made whole (not lazy, or every chunk there): all taken. */
	if (!READ_ONCE(region->nr_unpopulated))
		return -EEXIST;
	/* Lazy regions only: their entries are all order 9, chunk-indexed. */
	ret = pinmem_fill_claim(region, job);
	if (!ret) {
		pinmem_gate(PINMEM_GATE_FILL_CLAIMED);
		ret = pinmem_fill_alloc(region, job);
	}
	if (!ret)
		ret = pinmem_fill_read_file(file, pos, job, &job->bytes);
	if (!ret)
		pinmem_fill_zero_rest(job, job->bytes);
	return ret;
}

/*
 * The second half: with ret 0 (the count read reached the caller) the
 * chunks become the region's; otherwise they are freed unseen.
 */
void pinmem_fill_finish(struct pinmem_region *region,
			struct pinmem_fill_job *job, int ret)
{
	if (job->claimed)
		pinmem_fill_end(region, job, !ret);
	pinmem_fill_free(job);
	trace_pinmem_fill(region->id, job->offset, job->length, job->bytes,
			  ret);
}
