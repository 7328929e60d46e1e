// SPDX-License-Identifier: GPL-2.0
/*
 * Systematic fault injection: for each ioctl and mmap path, make the 1st,
 * 2nd, 3rd, ... allocation the call performs fail (/proc/thread-self/
 * fail-nth with failslab and fail_page_alloc set to fail any allocation),
 * until the call runs through without meeting the n-th. Each time:
 *  - a failing call reports ENOMEM or EINTR, nothing else;
 *  - a call that succeeds despite the fault left nothing out: the object
 *    is checked in full (size, counts, every page's data through a map);
 *  - after teardown every module counter is back at its baseline.
 * Then the call runs once more without injection and must work.
 *
 * Needs a kernel with CONFIG_FAULT_INJECTION, FAILSLAB, FAIL_PAGE_ALLOC and
 * FAULT_INJECTION_DEBUG_FS (the debug kernel); skips elsewhere.
 */
#include <inttypes.h>
#include <stdio.h>

#include "../kselftest/refs_test.h"

#define REGION	(4 * MiB)
#define MAX_NTH	20000

struct fx {
	int dev, rfd, vfd;
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

static int nth_fd = -1;
static int kmsg_fd = -1;

/*
 * Tell the rig (tests/vm/guest) where injected faults may make the kernel
 * log an allocation failure: it excuses those reports, and only those,
 * between the two markers.
 */
static void kmsg_mark(const char *what, unsigned int n)
{
	char buf[64];
	int len = snprintf(buf, sizeof(buf), "pinmem-fault: %s %u\n", what, n);

	if (kmsg_fd >= 0 && write(kmsg_fd, buf, len) != len)
		abort();
}

/* Let failslab and fail_page_alloc fail whatever fail-nth points at. */
static int injection_setup(void)
{
	static const char *const knobs[][2] = {
		{ "failslab/ignore-gfp-wait", "N" },
		{ "failslab/verbose", "0" },
		{ "fail_page_alloc/ignore-gfp-wait", "N" },
		{ "fail_page_alloc/ignore-gfp-highmem", "N" },
		{ "fail_page_alloc/min-order", "0" },
		{ "fail_page_alloc/verbose", "0" },
	};
	char path[128];

	for (size_t i = 0; i < sizeof(knobs) / sizeof(knobs[0]); i++) {
		int fd;
		ssize_t n;

		snprintf(path, sizeof(path), "/sys/kernel/debug/%s", knobs[i][0]);
		fd = open(path, O_WRONLY | O_CLOEXEC);
		if (fd < 0)
			return -1;
		n = write(fd, knobs[i][1], strlen(knobs[i][1]));
		close(fd);
		if (n < 0)
			return -1;
	}
	kmsg_fd = open("/dev/kmsg", O_WRONLY | O_CLOEXEC);
	if (kmsg_fd < 0)
		return -1;
	nth_fd = open("/proc/thread-self/fail-nth", O_RDWR | O_CLOEXEC);
	return nth_fd < 0 ? -1 : 0;
}

static void nth_arm(unsigned int n)
{
	char buf[16];
	int len = snprintf(buf, sizeof(buf), "%u", n);

	kmsg_mark("armed", n);
	if (pwrite(nth_fd, buf, len, 0) != len)
		abort();
}

/* Disarm; whether the armed fault was injected. */
static int nth_disarm(void)
{
	char buf[16] = "";
	int fired;

	if (pread(nth_fd, buf, sizeof(buf) - 1, 0) <= 0)
		abort();
	fired = atoi(buf) == 0;
	if (pwrite(nth_fd, "0", 1, 0) != 1)
		abort();
	kmsg_mark("disarmed, fired", fired);
	return fired;
}

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
};

FIXTURE(failnth) {
	struct pm_env env;
};

FIXTURE_VARIANT(failnth) {
	unsigned int op;
};

#define OP_VARIANT(i, n) \
	FIXTURE_VARIANT_ADD(failnth, n) { .op = i }
OP_VARIANT(0, alloc);
OP_VARIANT(1, alloc_fallback);
OP_VARIANT(2, view_ro);
OP_VARIANT(3, view_rw);
OP_VARIANT(4, holders);
OP_VARIANT(5, list);
OP_VARIANT(6, mmap_region);
OP_VARIANT(7, mmap_view);
OP_VARIANT(8, fork);
OP_VARIANT(9, vma_split);
OP_VARIANT(10, donate_wait);
OP_VARIANT(11, seal);
OP_VARIANT(12, publish);
OP_VARIANT(13, reopen);
OP_VARIANT(14, refs);
OP_VARIANT(15, expect);
OP_VARIANT(16, alloc_lazy);
OP_VARIANT(17, populate);

FIXTURE_SETUP(failnth)
{
	pm_setup(_metadata, &self->env);
	/* The 6.1 harness runs the body after a SKIP in setup: jump past. */
	if (nth_fd < 0 && injection_setup())
		SKIP(longjmp(_metadata->env, 1), "no fault injection here (needs the debug kernel: "
		     "PINMEM_KERNEL=debug)");
}

FIXTURE_TEARDOWN(failnth)
{
	pm_teardown(_metadata, &self->env);
}

/* Module totals equal the baseline (releases may finish a moment late). */
static void expect_baseline(struct __test_metadata *_metadata,
			    struct pm_env *env, const char *op, unsigned int n)
{
	struct pinmem_dev_info di;

	for (int i = 0; i < 200; i++) {
		pm_dev_info(env->dev, &di);
		if (di.nr_regions == env->base.nr_regions &&
		    di.total_bytes == env->base.total_bytes &&
		    di.nr_mappings == env->base.nr_mappings &&
		    di.nr_view_fds == env->base.nr_view_fds)
			return;
		usleep(10000);
	}
	ASSERT_TRUE(0) TH_LOG("%s, fault %u: totals not back: regions %llu "
			      "bytes %llu mappings %llu view fds %llu", op, n,
			      di.nr_regions, di.total_bytes, di.nr_mappings,
			      di.nr_view_fds);
}

/* fork alone meets a few hundred fault points: more than 30 s under KASAN/TCG. */
TEST_F_TIMEOUT(failnth, sweep, 900)
{
	const struct op *op = &ops[variant->op];
	unsigned int n, failed = 0, tolerated = 0;
	struct fx f;
	long ret;
	int fired = 1;

	for (n = 1; n <= MAX_NTH && fired; n++) {
		f = (struct fx){ .dev = self->env.dev, .rfd = -1, .vfd = -1,
				 .pipe = { -1, -1 }, .seed = n };
		if (op->setup)
			op->setup(_metadata, &f);
		nth_arm(n);
		ret = op->call(&f);
		fired = nth_disarm();
		if (ret < 0) {
			ASSERT_TRUE(fired) TH_LOG("%s failed without a fault: %s",
						  op->name, pm_errname(-ret));
			ASSERT_TRUE(ret == -ENOMEM || ret == -EINTR)
				TH_LOG("%s, fault %u: %s", op->name, n,
				       pm_errname(-ret));
			failed++;
		} else if (fired) {
			tolerated++;
		}
		op->verify(_metadata, &f, ret);
		fx_release(&f);
		expect_baseline(_metadata, &self->env, op->name, n);
	}
	ASSERT_FALSE(fired) TH_LOG("%s: still failing after %u faults",
				   op->name, MAX_NTH);
	/* And a normal run works. */
	f = (struct fx){ .dev = self->env.dev, .rfd = -1, .vfd = -1,
			 .pipe = { -1, -1 }, .seed = 7 };
	if (op->setup)
		op->setup(_metadata, &f);
	ret = op->call(&f);
	ASSERT_LE(0, ret) TH_LOG("%s without injection: %s", op->name,
				 pm_errname(-ret));
	op->verify(_metadata, &f, ret);
	fx_release(&f);
	printf("# sweep %s: %u fault points, %u failed cleanly, %u tolerated\n",
	       op->name, n - 2, failed, tolerated);
	fflush(stdout);	/* the harness child ends in _exit */
}

TEST_HARNESS_MAIN
