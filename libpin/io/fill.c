// SPDX-License-Identifier: MIT
/*
 * Filling a fresh region from a file with the pinning under the reads.
 *
 * On the portable backend most of a load's cost is making memfd pages
 * present and locked; done first, it adds to the read instead of hiding
 * under it. So helper threads prepare the region one step at a time
 * while the reads (io_read.c, paced) follow them step by step:
 *
 *  - the owner mapping is read-only from the start (a mapping of an
 *    O_RDONLY reopen of the memfd);
 *  - the reads go through a second, writable mapping, unmapped when the
 *    reads are done; for each step the helper allocates the pages
 *    (fallocate, unless shmem THP is "advise"), makes them present in the
 *    reads' mapping (write faults: zeroing and mapping), then mlock()s
 *    them in the owner mapping (minor faults, sixteen pages a fault);
 *  - the seal then finds no writable mapping and has nothing to remap.
 *
 * A region that stays OPEN after the load (PIN__FILL_OPEN) needs no
 * read-only owner: its one mapping is writable, the reads go through it,
 * each step is locked in it, and it stays as the owner mapping, so that
 * the caller uses the pages as they are (unmapping the reads' mapping
 * and faulting and locking the owner's would walk every page twice more).
 *
 * Preparing 4 KiB pages is CPU work (allocation, zeroing, a fault a page)
 * that can run slower than the disk, so up to PREPARERS_MAX helpers (no
 * more than the CPUs online) take steps in turn; the reads may use the
 * prefix of steps that are all prepared.
 *
 * A device region made with ALLOC_LAZY is filled by the kernel where the
 * module has FILL (ABI 5; fill_kernel.c). Otherwise (module ABI 4, or
 * PIN_IO_NO_KERNEL_FILL) it is mapped at once with nothing in it; the
 * helper POPULATEs it a step at a time (the kernel allocates the 2 MiB
 * chunks, on several CPUs for a large step; the reads' first touch maps
 * each chunk in one fault), and the reads follow as on the portable
 * backend. An older module's region is allocated whole by ALLOC and
 * mapped at once: only the fixed buffers are registered step by step.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <uapi/pinmem.h>

#include "internal.h"
#include "io_internal.h"
#include "fill.h"

#define PREPARERS_MAX	4

struct filler {
	struct pin__pace pace;		/* first: io_read.c hands it back */
	struct pin_region *r;
	char *owner;			/* read-only owner mapping */
	char *fill;			/* writable mapping the reads go to */
	uint64_t span;
	size_t nsteps;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	uint64_t prepared;		/* under lock: a prefix of the steps */
	size_t nready;			/* under lock: steps in that prefix */
	unsigned char *ready;		/* under lock: per step, prepared */
	int err;			/* under lock */
	atomic_size_t next;		/* the next step to claim */
	atomic_int stop;
	atomic_int unlocked;		/* mlock refused at some step */
	int falloc;			/* fallocate each step first */
	int locked_on_fault;		/* MLOCK_ONFAULT: faults lock pages */
};

/* Step size: a multiple of the request size, at most a fixed buffer. */
static uint64_t step_for(uint64_t span, uint32_t request_size)
{
	uint64_t step = pin__fill_step_bytes(span);
	uint64_t max = pin__io_fixed_span_max();

	if (step > max)
		step = max;
	step = step / request_size * request_size;
	return step ? step : request_size;
}

static int filler_ready(struct pin__pace *p, uint64_t want, int block,
			uint64_t *ready)
{
	struct filler *fl = (struct filler *)p;
	int err;

	pthread_mutex_lock(&fl->lock);
	while (block && fl->prepared < want && !fl->err)
		pthread_cond_wait(&fl->cond, &fl->lock);
	*ready = fl->prepared;
	err = fl->err;
	pthread_mutex_unlock(&fl->lock);
	return err;
}

/* Step k is prepared (or failed): the reads may go up to the prefix. */
static void publish(struct filler *fl, size_t k, int err)
{
	uint64_t step = fl->pace.step;

	pthread_mutex_lock(&fl->lock);
	if (err) {
		if (!fl->err)
			fl->err = err;
	} else {
		fl->ready[k] = 1;
		while (fl->nready < fl->nsteps && fl->ready[fl->nready])
			fl->nready++;
		fl->prepared = fl->nready * step < fl->span ?
			       fl->nready * step : fl->span;
	}
	pthread_cond_broadcast(&fl->cond);
	pthread_mutex_unlock(&fl->lock);
}

/*
 * Device, ALLOC_LAZY: the kernel allocates the step's chunks. Nothing
 * maps them here: the first touch of a chunk (the fixed-buffer
 * registration's GUP, or an O_DIRECT read's) maps all of it in one fault,
 * and a populate-write walk here would only repeat that GUP's page walk
 * (measured: 16 steps of 16 MiB in a TCG guest, 0.20-0.27 s without it,
 * 0.27-0.42 s with it).
 */
static int populate(struct pin_region *r, uint64_t off, uint64_t len)
{
	struct pinmem_populate p;

	memset(&p, 0, sizeof(p));
	p.offset = off;
	p.length = len;
	return pin__ioctl(r->fd, PINMEM_IOC_POPULATE, &p);
}

/* Allocate, zero, map and lock one step; then map it for the reads. */
static int prepare_step(struct filler *fl, uint64_t off, uint64_t len)
{
	int err;

	if (fl->r->lazy)
		return populate(fl->r, off, len);
	/*
	 * 4 KiB pages: fallocate allocates without faults; the write faults
	 * then zero and map the pages (one a fault), and the owner's read
	 * faults map sixteen cached pages a fault (fault-around). Measured
	 * cheaper than faults allocating, or mlock first. Where shmem THP is
	 * "advise" the MADV_HUGEPAGE mapping's faults allocate instead: a
	 * fallocate has no mapping to take the advice from and would fix the
	 * pages at 4 KiB. Before Linux 5.14 (EINVAL) mlock maps them instead.
	 */
	err = fl->falloc ? pin__fallocate(fl->r->fd, off, len) : 0;
	if (err)
		return err == -ENOSPC ? -ENOMEM : err;
	if (madvise(fl->fill + off, len, MADV_POPULATE_WRITE)) {
		if (errno != EINVAL)
			return -errno;
	} else if (fl->locked_on_fault) {
		return 0;	/* those faults locked the pages */
	}
	if (atomic_load(&fl->unlocked) || mlock(fl->owner + off, len)) {
		/* Over RLIMIT_MEMLOCK: present, not locked (as pin_region_map). */
		atomic_store(&fl->unlocked, 1);
		if (madvise(fl->owner + off, len, MADV_POPULATE_READ) &&
		    errno != EINVAL)
			return -errno;
	}
	return 0;
}

/* Claim and prepare steps until none is left, or one failed. */
static void *prepare_all(void *arg)
{
	struct filler *fl = arg;
	uint64_t step = fl->pace.step;
	struct pin__place_scope scope;
	size_t k;
	int err;

	/* A portable region placed on a node: this thread allocates there. */
	err = pin__place_enter(&fl->r->place, &scope);
	if (err) {
		publish(fl, 0, err);
		atomic_store(&fl->stop, 1);
		return NULL;
	}
	while (!atomic_load(&fl->stop)) {
		struct pin__step_times *t;
		uint64_t off, len;

		k = atomic_fetch_add(&fl->next, 1);
		if (k >= fl->nsteps)
			break;
		t = &fl->pace.times[k];
		off = k * step;
		len = fl->span - off < step ? fl->span - off : step;
		t->pin_begin_ns = pin__now_ns();
		err = prepare_step(fl, off, len);
		t->pin_end_ns = pin__now_ns();
		publish(fl, k, err);
		if (err)
			atomic_store(&fl->stop, 1);
	}
	pin__place_leave(&scope);
	return NULL;
}

/*
 * Helpers for a portable region's 4 KiB pages, one a CPU up to
 * PREPARERS_MAX; one for a device region (POPULATE spreads a step over
 * the CPUs itself) or where the pages are huge (little work a step).
 */
static unsigned preparers_wanted(const struct filler *fl)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	unsigned n;

	if (fl->r->lazy || fl->r->hugetlb || !fl->falloc || cpus < 2)
		return 1;
	n = cpus < PREPARERS_MAX ? (unsigned)cpus : PREPARERS_MAX;
	return n < fl->nsteps ? n : (unsigned)(fl->nsteps ? fl->nsteps : 1);
}

/* The two mappings of a portable region; r->map becomes the owner's. */
static int map_portable_sealable(struct filler *fl)
{
	struct pin_region *r = fl->r;
	char path[64];
	void *p;
	int fd, ret = 0;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", r->fd);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return pin__fail(r->err, -errno, "fill: reopen %s", path);
	p = mmap(NULL, r->size, PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (p == MAP_FAILED)
		return pin__fail(r->err, -errno, "fill: owner mapping");
	fl->owner = p;
	p = mmap(NULL, r->size, PROT_READ | PROT_WRITE, MAP_SHARED, r->fd, 0);
	if (p == MAP_FAILED) {
		ret = pin__fail(r->err, -errno, "fill: writable mapping");
		munmap(fl->owner, r->size);
		return ret;
	}
	fl->fill = p;
	r->map_prot = PROT_READ;
	return 0;
}

/* One writable mapping, the reads' and the owner's (PIN__FILL_OPEN). */
static int map_portable_open(struct filler *fl)
{
	struct pin_region *r = fl->r;
	void *p;

	p = mmap(NULL, r->size, PROT_READ | PROT_WRITE, MAP_SHARED, r->fd, 0);
	if (p == MAP_FAILED)
		return pin__fail(r->err, -errno, "fill: writable mapping");
	fl->owner = p;
	fl->fill = p;
	/*
	 * Locked as the steps' write faults bring the pages in, with no walk
	 * of its own: 1 GiB prepared by two threads in 0.23 s against 0.29 s
	 * with an mlock a step. Refused (RLIMIT_MEMLOCK, a kernel before
	 * 4.4): each step's mlock tries, and says so, as for two mappings.
	 */
	fl->locked_on_fault = !mlock2(p, r->size, MLOCK_ONFAULT);
	r->map_prot = PROT_READ | PROT_WRITE;
	return 0;
}

static int map_portable(struct filler *fl, unsigned flags)
{
	struct pin_region *r = fl->r;
	int ret;

	ret = (flags & PIN__FILL_OPEN) ? map_portable_open(fl) :
					 map_portable_sealable(fl);
	if (ret)
		return ret;
	if (!r->hugetlb) {
		/* Where shmem THP is "advise", these make the pages huge. */
		madvise(fl->owner, r->size, MADV_HUGEPAGE);
		if (fl->fill != fl->owner)
			madvise(fl->fill, r->size, MADV_HUGEPAGE);
		fl->falloc = !pin__shmem_thp_advise(PIN_THP_SYSFS);
	}
	r->map = fl->owner;
	r->unlocked = 1;	/* until every step is locked */
	return 0;
}

static int filler_init(struct filler *fl, struct pin_region *r,
		       uint64_t span, const struct pin_io_opts *o)
{
	size_t k;

	memset(fl, 0, sizeof(*fl));
	fl->r = r;
	fl->span = span;
	fl->pace.step = step_for(span, o->request_size);
	fl->pace.ready = filler_ready;
	fl->nsteps = (size_t)((span + fl->pace.step - 1) / fl->pace.step);
	fl->pace.times = calloc(fl->nsteps ? fl->nsteps : 1,
				sizeof(*fl->pace.times));
	fl->ready = calloc(fl->nsteps ? fl->nsteps : 1, 1);
	if (!fl->pace.times || !fl->ready) {
		free(fl->pace.times);
		free(fl->ready);
		return pin__fail(r->err, -ENOMEM, "fill: step table");
	}
	atomic_init(&fl->next, 0);
	atomic_init(&fl->stop, 0);
	atomic_init(&fl->unlocked, 0);
	for (k = 0; k < fl->nsteps; k++) {
		uint64_t len = span - k * fl->pace.step;

		if (len > fl->pace.step)
			len = fl->pace.step;
		fl->pace.times[k].reads_left =
			(unsigned)((len + o->request_size - 1) / o->request_size);
	}
	pthread_mutex_init(&fl->lock, NULL);
	pthread_cond_init(&fl->cond, NULL);
	return 0;
}

static void filler_destroy(struct filler *fl)
{
	pthread_cond_destroy(&fl->cond);
	pthread_mutex_destroy(&fl->lock);
	free(fl->pace.times);
	free(fl->ready);
}

/* What the steps did not reach of a lazy region (a no-op when whole). */
static int populate_rest(struct pin_region *r)
{
	int ret = populate(r, 0, r->size);

	if (ret)
		return pin__fail(r->err, ret, "fill: populating region %" PRIu64,
				 r->id);
	r->lazy = 0;
	return 0;
}

/* A device region made with ALLOC_LAZY: mapped with nothing in it yet. */
static int map_device_lazy(struct filler *fl)
{
	void *p;
	int ret = pin_region_map(fl->r, &p);

	if (ret)
		return ret;
	fl->fill = p;	/* the owner mapping itself; not unmapped after */
	return 0;
}

/*
 * Not lazy, PIN_IO_PIN_FIRST, or no thread to be had: everything prepared
 * before the reads, in this thread; a lazy device region in one POPULATE,
 * which the kernel spreads over several CPUs as it does an ALLOC.
 */
static int prepare_inline(struct filler *fl, void **dst)
{
	struct pin_region *r = fl->r;
	uint64_t t0 = pin__now_ns(), t1;
	size_t k;
	int ret = 0;

	if (fl->fill && !r->lazy) {
		prepare_all(fl);
		ret = fl->err;
		*dst = fl->fill;
		return ret;
	}
	if (r->lazy) {
		ret = populate(r, 0, r->size);
		*dst = fl->fill;
	} else {
		ret = pin_region_map(r, dst);
	}
	t1 = pin__now_ns();
	for (k = 0; k < fl->nsteps; k++) {
		fl->pace.times[k].pin_begin_ns = t0;
		fl->pace.times[k].pin_end_ns = t1;
		publish(fl, k, ret);
	}
	return ret;
}

/* Preparing took from the first step's start to the last one's end. */
static uint64_t pin_wall_ns(const struct filler *fl)
{
	uint64_t first = UINT64_MAX, last = 0;
	size_t k;

	for (k = 0; k < fl->nsteps; k++) {
		const struct pin__step_times *t = &fl->pace.times[k];

		if (!t->pin_end_ns)
			continue;	/* not reached: a failure stopped them */
		if (t->pin_begin_ns < first)
			first = t->pin_begin_ns;
		if (t->pin_end_ns > last)
			last = t->pin_end_ns;
	}
	return last > first ? last - first : 0;
}

static void report(struct filler *fl, struct pin__fill_report *rep)
{
	rep->pin_ns = pin_wall_ns(fl);
	rep->nsteps = fl->nsteps;
	rep->step = fl->pace.step;
	rep->times = fl->pace.times;
	fl->pace.times = NULL;
}

int pin__fill_from_file(struct pin_region *r, struct pin__file *f,
			uint64_t aoff, uint64_t span, uint64_t need_end,
			const struct pin_io_opts *o, struct pin__io_stats *st,
			struct pin__fill_report *rep)
{
	pthread_t helpers[PREPARERS_MAX];
	struct pin__refs_hold hold;
	unsigned threads = 0, want;
	struct filler fl;
	void *dst = NULL;
	int ret;

	memset(rep, 0, sizeof(*rep));
	if (r->backend == PIN_BACKEND_DEVICE && r->lazy && !r->map &&
	    !(o->flags & (PIN_IO_PIN_FIRST | PIN_IO_NO_KERNEL_FILL))) {
		ret = pin__fill_kernel(r, f, aoff, span, need_end, o, st, rep);
		if (!ret)
			return populate_rest(r);	/* span 0: no step */
		if (ret != -EOPNOTSUPP)
			return ret;
	}
	ret = filler_init(&fl, r, span, o);
	if (ret)
		return ret;
	if (r->backend == PIN_BACKEND_PORTABLE && !r->map)
		ret = map_portable(&fl, o->flags);
	else if (r->lazy)
		ret = map_device_lazy(&fl);
	if (ret)
		goto out;
	if (fl.fill && !(o->flags & PIN_IO_PIN_FIRST)) {
		dst = fl.fill;
		for (want = preparers_wanted(&fl); threads < want; threads++)
			if (pthread_create(&helpers[threads], NULL,
					   prepare_all, &fl))
				break;
	}
	if (!threads) {
		ret = prepare_inline(&fl, &dst);
		if (ret) {
			pin__fail(r->err, ret, "fill: preparing the region");
			goto out_unmap;
		}
	}
	/* The read's fixed buffers are the owner's: declared (refs.c). */
	pin__refs_hold(&hold, r, dst, span, PIN_EXPECT_PER_CHUNK);
	ret = pin__io_read_paced(f, dst, aoff, span, need_end, o, st,
				 &fl.pace);
	pin__refs_release(&hold);
	atomic_store(&fl.stop, 1);
	while (threads)
		pthread_join(helpers[--threads], NULL);
	/* A lazy region whole, for the seal (a file with no data: no step). */
	if (!ret && r->lazy)
		ret = populate_rest(r);
	else if (!ret)
		r->unlocked = atomic_load(&fl.unlocked);
out_unmap:
	if (fl.fill && fl.fill != r->map)
		munmap(fl.fill, r->size);
	report(&fl, rep);
out:
	filler_destroy(&fl);
	return ret;
}
