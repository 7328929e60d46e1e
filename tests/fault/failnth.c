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
 * The operations, and how each one's result is checked: failnth-ops.h.
 *
 * Needs a kernel with CONFIG_FAULT_INJECTION, FAILSLAB, FAIL_PAGE_ALLOC and
 * FAULT_INJECTION_DEBUG_FS (the debug kernel); skips elsewhere.
 */
#include "failnth-ops.h"

#define MAX_NTH	20000

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
OP_VARIANT(18, fill);

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
				 .file = -1, .pipe = { -1, -1 }, .seed = n };
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
			 .file = -1, .pipe = { -1, -1 }, .seed = 7 };
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
