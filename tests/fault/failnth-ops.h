/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The operations the fail-nth sweep (failnth.c) injects faults into, one
 * per ioctl and mmap path: for each, what it needs set up first, the call
 * made under injection, and the check of what the call left behind
 * (failed: nothing half-made; succeeded despite a fault: the object whole).
 * Included by failnth.c alone; ops[] is indexed by its OP_VARIANTs.
 */
#ifndef FAILNTH_OPS_H
#define FAILNTH_OPS_H

#include <inttypes.h>
#include <stdio.h>

#include "../kselftest/refs_test.h"

#define REGION	(4 * MiB)

struct fx {
	int dev, rfd, vfd;
	int file;		/* what FILL reads: a memfd, or -1 */
	int pipe[2];		/* holds view pages through vmsplice */
	void *map, *vmap;
	pid_t child;
	uint32_t seed;
};

struct op {
	const char *name;
	void (*setup)(struct __test_metadata *_metadata, struct fx *f);
	long (*call)(struct fx *f);	/* under injection: -errno or >= 0 */
	void (*verify)(struct __test_metadata *_metadata, struct fx *f,
		       long ret);
};

/* The region's owner and view mapping counts (INFO). */
#define expect_maps(fd, owner, views) do {				\
	struct pinmem_region_info __ri;					\
	pm_info(fd, &__ri);						\
	ASSERT_EQ((uint64_t)(owner), __ri.owner_mappings);		\
	ASSERT_EQ((uint64_t)(views), __ri.view_mappings);		\
} while (0)

/* The VMAs that /proc/self/maps shows inside [addr, addr + len). */
static int vmas_in(const void *addr, size_t len)
{
	uintptr_t lo = (uintptr_t)addr, hi = lo + len, start, end;
	char line[512];
	int n = 0;
	FILE *maps = fopen("/proc/self/maps", "re");

	if (!maps)
		return -errno;
	while (fgets(line, sizeof(line), maps))
		if (sscanf(line, "%" SCNxPTR "-%" SCNxPTR, &start, &end) == 2 &&
		    start >= lo && end <= hi)
			n++;
	fclose(maps);
	return n;
}

static void fx_release(struct fx *f)
{
	if (f->child > 0) {
		kill(f->child, SIGKILL);
		pm_wait(f->child);
	}
	for (int i = 0; i < 2; i++)
		if (f->pipe[i] >= 0)
			close(f->pipe[i]);
	if (f->vmap)
		munmap(f->vmap, REGION);
	if (f->map)
		munmap(f->map, REGION);
	if (f->vfd >= 0)
		close(f->vfd);
	if (f->rfd >= 0)
		close(f->rfd);
	if (f->file >= 0)
		close(f->file);
	f->file = -1;
	f->child = 0;
	f->map = f->vmap = NULL;
	f->vfd = f->rfd = -1;
	f->pipe[0] = f->pipe[1] = -1;
}

/* A region filled with a pattern, mapped by its owner at f->map. */
static void setup_region(struct __test_metadata *_metadata, struct fx *f)
{
	f->rfd = pm_alloc(f->dev, REGION);
	f->map = pm_map(f->rfd, REGION, PROT_READ | PROT_WRITE, 0);
	pm_fill(f->map, REGION, f->seed);
}

static void setup_view(struct __test_metadata *_metadata, struct fx *f)
{
	setup_region(_metadata, f);
	f->vfd = pm_view(f->rfd, 0, REGION, PINMEM_VIEW_WRITE);
}

static void setup_view_mapped(struct __test_metadata *_metadata, struct fx *f)
{
	setup_view(_metadata, f);
	f->vmap = pm_map(f->vfd, REGION, PROT_READ, 0);
}

static long call_alloc(struct fx *f, uint32_t flags)
{
	struct pinmem_alloc a = { .size = REGION, .flags = flags };

	if (ioctl(f->dev, PINMEM_IOC_ALLOC, &a))
		return -errno;
	f->rfd = a.fd;
	return a.fd;
}

static long call_alloc0(struct fx *f) { return call_alloc(f, 0); }
static long call_allocfb(struct fx *f)
{
	return call_alloc(f, PINMEM_ALLOC_FALLBACK);
}

static void verify_alloc(struct __test_metadata *_metadata, struct fx *f,
			 long ret)
{
	struct pinmem_region_info ri;

	if (ret < 0)
		return;
	pm_info(f->rfd, &ri);
	ASSERT_EQ(REGION, ri.size);
	ASSERT_EQ(PINMEM_STATE_OPEN, ri.state);
	f->map = pm_map(f->rfd, REGION, PROT_READ | PROT_WRITE, 0);
	pm_fill(f->map, REGION, f->seed);
	ASSERT_PATTERN(f->map, REGION, f->seed);
	expect_maps(f->rfd, 1, 0);
}

static long call_alloc_lazy(struct fx *f)
{
	return call_alloc(f, PINMEM_ALLOC_LAZY);
}

static int populate_all(struct fx *f)
{
	struct pinmem_populate p = { .length = REGION };

	return ioctl(f->rfd, PINMEM_IOC_POPULATE, &p) ? -errno : 0;
}

/* A lazy region made under injection is whole once populated. */
static void verify_alloc_lazy(struct __test_metadata *_metadata,
			      struct fx *f, long ret)
{
	if (ret < 0)
		return;
	ASSERT_EQ(0, populate_all(f));
	verify_alloc(_metadata, f, ret);
}

/* A lazy region, mapped by its owner with nothing in it yet. */
static void setup_lazy(struct __test_metadata *_metadata, struct fx *f)
{
	f->rfd = pm_alloc_at(_metadata, __LINE__, f->dev, REGION,
			     PINMEM_ALLOC_LAZY, NULL);
	f->map = pm_map(f->rfd, REGION, PROT_READ | PROT_WRITE, 0);
}

static long call_populate(struct fx *f)
{
	return populate_all(f);
}

/*
 * A failed POPULATE leaves a chunk missing and a retry completes it; then
 * the owner mapping holds what is written and the region seals.
 */
static void verify_populate(struct __test_metadata *_metadata, struct fx *f,
			    long ret)
{
	struct pinmem_region_info ri;

	pm_info(f->rfd, &ri);
	ASSERT_EQ(ret < 0 ? PINMEM_INFO_UNPOPULATED : 0,
		  ri.flags & PINMEM_INFO_UNPOPULATED);
	ASSERT_EQ(0, populate_all(f));
	pm_info(f->rfd, &ri);
	ASSERT_EQ(REGION / (2 * MiB), ri.nr_chunks);
	pm_fill(f->map, REGION, f->seed);
	ASSERT_PATTERN(f->map, REGION, f->seed);
	ASSERT_EQ(0, pm_seal(f->rfd));
}

/* A lazy region and a file of REGION bytes in the seed's pattern. */
static void setup_fill(struct __test_metadata *_metadata, struct fx *f)
{
	char *p;

	setup_lazy(_metadata, f);
	f->file = memfd_create("failnth-fill", MFD_CLOEXEC);
	ASSERT_LE(0, f->file);
	ASSERT_OK(ftruncate(f->file, REGION));
	p = pm_map(f->file, REGION, PROT_READ | PROT_WRITE, 0);
	pm_fill(p, REGION, f->seed);
	pm_unmap(p, REGION);
}

static long call_fill(struct fx *f)
{
	struct pinmem_fill fl = { .fd = f->file, .length = REGION };

	return ioctl(f->rfd, PINMEM_IOC_FILL, &fl) ? -errno : (long)fl.bytes;
}

/*
 * A failed FILL populates no chunk of its range, and a second FILL
 * completes it; one that succeeded despite a fault read the whole file.
 */
static void verify_fill(struct __test_metadata *_metadata, struct fx *f,
			long ret)
{
	struct pinmem_region_info ri;

	pm_info(f->rfd, &ri);
	if (ret < 0) {
		ASSERT_EQ(0, ri.nr_chunks);
		ASSERT_EQ(REGION, (uint64_t)call_fill(f));
	} else {
		ASSERT_EQ(REGION, (uint64_t)ret);
	}
	pm_info(f->rfd, &ri);
	ASSERT_EQ(REGION / (2 * MiB), ri.nr_chunks);
	ASSERT_PATTERN(f->map, REGION, f->seed);
	ASSERT_EQ(0, pm_seal(f->rfd));
}

static long call_view(struct fx *f, uint32_t flags)
{
	struct pinmem_view v = { .offset = 0, .length = REGION, .flags = flags };

	if (ioctl(f->rfd, PINMEM_IOC_VIEW, &v))
		return -errno;
	f->vfd = v.fd;
	return v.fd;
}

static long call_view_ro(struct fx *f) { return call_view(f, 0); }
static long call_view_rw(struct fx *f)
{
	return call_view(f, PINMEM_VIEW_WRITE);
}

static void verify_view(struct __test_metadata *_metadata, struct fx *f,
			long ret)
{
	if (ret < 0)
		return;
	f->vmap = pm_map(f->vfd, REGION, PROT_READ, 0);
	ASSERT_PATTERN(f->vmap, REGION, f->seed);
	expect_maps(f->rfd, 1, 1);
}

static struct pinmem_holder holders_buf[8];

static long call_holders(struct fx *f)
{
	struct pinmem_holders h = {
		.holders_ptr = (uintptr_t)holders_buf, .capacity = 8,
	};

	if (ioctl(f->rfd, PINMEM_IOC_HOLDERS, &h))
		return -errno;
	return h.count;
}

static void verify_holders(struct __test_metadata *_metadata, struct fx *f,
			   long ret)
{
	if (ret >= 0)
		ASSERT_EQ(2, ret) TH_LOG("owner map + view map");
}

static struct pinmem_region_info list_buf[64];

static long call_list(struct fx *f)
{
	struct pinmem_list l = {
		.regions_ptr = (uintptr_t)list_buf, .capacity = 64,
	};

	if (ioctl(f->dev, PINMEM_IOC_LIST, &l))
		return -errno;
	return l.count;
}

static void verify_list(struct __test_metadata *_metadata, struct fx *f,
			long ret)
{
	if (ret >= 0)
		ASSERT_LE(1, ret);
}

static long call_mmap(void **p, int fd, int prot)
{
	*p = mmap(NULL, REGION, prot, MAP_SHARED, fd, 0);
	if (*p == MAP_FAILED) {
		*p = NULL;
		return -errno;
	}
	return 0;
}

static long call_map_view(struct fx *f)
{
	return call_mmap(&f->vmap, f->vfd, PROT_READ | PROT_WRITE);
}

static void setup_region_unmapped(struct __test_metadata *_metadata,
				  struct fx *f)
{
	setup_region(_metadata, f);
	pm_unmap(f->map, REGION);
	f->map = NULL;
}

static long call_map_region(struct fx *f)
{
	return call_mmap(&f->map, f->rfd, PROT_READ | PROT_WRITE);
}

static void verify_map_region(struct __test_metadata *_metadata,
			      struct fx *f, long ret)
{
	expect_maps(f->rfd, ret < 0 ? 0 : 1, 0);
	if (ret >= 0)
		ASSERT_PATTERN(f->map, REGION, f->seed);
}

static void verify_map_view(struct __test_metadata *_metadata, struct fx *f,
			    long ret)
{
	expect_maps(f->rfd, 1, ret < 0 ? 0 : 1);
	if (ret >= 0)
		ASSERT_PATTERN(f->vmap, REGION, f->seed);
}

/* fork: the child checks its copies of both mappings and exits. */
static long call_fork(struct fx *f)
{
	pid_t pid = fork();

	if (pid < 0)
		return -errno;
	if (pid == 0)
		_exit(pm_check(f->map, REGION, f->seed) >= 0 ||
		      pm_check(f->vmap, REGION, f->seed) >= 0);
	f->child = pid;
	return pid;
}

static void verify_fork(struct __test_metadata *_metadata, struct fx *f,
			long ret)
{
	if (ret < 0)
		return;
	ASSERT_EQ(0, pm_wait(f->child));
	f->child = 0;
	expect_maps(f->rfd, 1, 1);
}

/* mprotect of the middle page: splits the VMA into three. */
static long call_split(struct fx *f)
{
	if (mprotect((char *)f->map + PG, PG, PROT_READ))
		return -errno;
	return 0;
}

static void verify_split(struct __test_metadata *_metadata, struct fx *f,
			 long ret)
{
	int vmas = vmas_in(f->map, REGION);

	/*
	 * A failed mprotect keeps the splits made before the failure (the
	 * first of its two splits may have happened): the count must equal
	 * the VMAs that exist, whatever their number.
	 */
	if (ret >= 0)
		ASSERT_EQ(3, vmas);
	ASSERT_LE(1, vmas);
	expect_maps(f->rfd, vmas, 1);
	ASSERT_PATTERN(f->map, REGION, f->seed);
}

/* A child holds a view mapping for a moment: DONATE WAIT must sleep. */
static void setup_donate(struct __test_metadata *_metadata, struct fx *f)
{
	setup_view(_metadata, f);
	f->child = fork();
	ASSERT_GE(f->child, 0);
	if (f->child == 0) {
		void *p = mmap(NULL, REGION, PROT_READ, MAP_SHARED, f->vfd, 0);

		if (p == MAP_FAILED)
			_exit(1);
		usleep(20000);
		_exit(0);
	}
	for (int i = 0; i < 1000; i++) {
		struct pinmem_region_info ri;

		pm_info(f->rfd, &ri);
		if (ri.view_mappings)
			return;
		usleep(1000);
	}
	ASSERT_TRUE(0) TH_LOG("the child never mapped the view");
}

static long call_donate_wait(struct fx *f)
{
	return pm_donate_wait(f->rfd, 5000) ? -errno : 0;
}

static void verify_donate(struct __test_metadata *_metadata, struct fx *f,
			  long ret)
{
	ASSERT_EQ(0, pm_wait(f->child));
	f->child = 0;
	if (ret < 0)
		return;
	ASSERT_EQ(PINMEM_STATE_DONATED, pm_state(f->rfd));
	ASSERT_PATTERN(f->map, REGION, f->seed);
}

/* A writable view mapped once: SEAL must look for references it left. */
static void setup_view_unmapped(struct __test_metadata *_metadata,
				struct fx *f)
{
	setup_view(_metadata, f);
	munmap(pm_map(f->vfd, REGION, PROT_READ | PROT_WRITE, 0), REGION);
}

/* SEAL after a writable view mapping: the scan of what it reached. */
static long call_seal(struct fx *f)
{
	return -pm_seal(f->rfd);
}

static void verify_seal(struct __test_metadata *_metadata, struct fx *f,
			long ret)
{
	ASSERT_EQ(ret < 0 ? PINMEM_STATE_OPEN : PINMEM_STATE_SEALED,
		  pm_state(f->rfd));
	expect_maps(f->rfd, 1, 0);
	ASSERT_PATTERN(f->map, REGION, f->seed);
}

static void setup_donated(struct __test_metadata *_metadata, struct fx *f)
{
	setup_region(_metadata, f);
	ASSERT_EQ(0, pm_donate(f->rfd));
}

static long call_publish(struct fx *f)
{
	return -pm_publish(f->rfd);
}

static long call_reopen(struct fx *f)
{
	return -pm_reopen(f->rfd);
}

static void verify_publish(struct __test_metadata *_metadata, struct fx *f,
			   long ret)
{
	ASSERT_EQ(ret < 0 ? PINMEM_STATE_DONATED : PINMEM_STATE_SEALED,
		  pm_state(f->rfd));
	ASSERT_PATTERN(f->map, REGION, f->seed);
}

static void verify_reopen(struct __test_metadata *_metadata, struct fx *f,
			  long ret)
{
	ASSERT_EQ(ret < 0 ? PINMEM_STATE_DONATED : PINMEM_STATE_OPEN,
		  pm_state(f->rfd));
	ASSERT_PATTERN(f->map, REGION, f->seed);
}

static struct pinmem_ref_range refs_buf[8];

/* A view page held by a pipe: REFS has a range to report. */
static void setup_view_spliced(struct __test_metadata *_metadata,
			       struct fx *f)
{
	setup_view_mapped(_metadata, f);
	pm_splice(f->pipe, f->vmap, 1);
}

static long call_refs(struct fx *f)
{
	struct pinmem_refs r = {
		.ranges_ptr = (uintptr_t)refs_buf, .capacity = 8,
	};

	if (ioctl(f->vfd, PINMEM_IOC_REFS, &r))
		return -errno;
	return r.count;
}

/* The pipe's page: one chunk referenced beyond what the owner may hold. */
static void verify_refs(struct __test_metadata *_metadata, struct fx *f,
			long ret)
{
	if (ret < 0)
		return;
	ASSERT_EQ(1, ret);
	ASSERT_LT(refs_buf[0].expected, refs_buf[0].refs);
}

static int expect_op(struct fx *f, uint32_t flags)
{
	struct pinmem_expect e = {
		.length = REGION, .flags = PINMEM_EXPECT_PER_PAGE | flags,
	};

	return ioctl(f->rfd, PINMEM_IOC_EXPECT, &e) ? -errno : 0;
}

static long call_expect(struct fx *f)
{
	return expect_op(f, 0);
}

/* A declaration exists exactly when EXPECT succeeded: taking it back says. */
static void verify_expect(struct __test_metadata *_metadata, struct fx *f,
			  long ret)
{
	ASSERT_EQ(ret < 0 ? -EINVAL : 0, expect_op(f, PINMEM_EXPECT_REMOVE));
}

static const struct op ops[] = {
	{ "alloc", NULL, call_alloc0, verify_alloc },
	{ "alloc_fallback", NULL, call_allocfb, verify_alloc },
	{ "view_ro", setup_region, call_view_ro, verify_view },
	{ "view_rw", setup_region, call_view_rw, verify_view },
	{ "holders", setup_view_mapped, call_holders, verify_holders },
	{ "list", setup_region, call_list, verify_list },
	{ "mmap_region", setup_region_unmapped, call_map_region, verify_map_region },
	{ "mmap_view", setup_view, call_map_view, verify_map_view },
	{ "fork", setup_view_mapped, call_fork, verify_fork },
	{ "vma_split", setup_view_mapped, call_split, verify_split },
	{ "donate_wait", setup_donate, call_donate_wait, verify_donate },
	{ "seal", setup_view_unmapped, call_seal, verify_seal },
	{ "publish", setup_donated, call_publish, verify_publish },
	{ "reopen", setup_donated, call_reopen, verify_reopen },
	{ "refs", setup_view_spliced, call_refs, verify_refs },
	{ "expect", setup_region, call_expect, verify_expect },
	{ "alloc_lazy", NULL, call_alloc_lazy, verify_alloc_lazy },
	{ "populate", setup_lazy, call_populate, verify_populate },
	{ "fill", setup_fill, call_fill, verify_fill },
};

#endif /* FAILNTH_OPS_H */
