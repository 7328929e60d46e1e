/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Shared helpers for the pinmem kselftests: each one asserts and, on
 * failure, says what it was doing and on which line of the test.
 *
 * Every test opens the device in its fixture setup and records the
 * module's totals (DEV_INFO); the teardown checks that the totals are back
 * where they started, so each test is also a leak check of the module.
 */
#ifndef PINMEM_TEST_H
#define PINMEM_TEST_H

#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <uapi/pinmem.h>

#include "kselftest_harness.h"

#define KiB (1ULL << 10)
#define MiB (1ULL << 20)
#define GiB (1ULL << 30)
#define PG  4096ULL

#define PM_PARAM_DIR "/sys/module/pinmem/parameters"

static inline const char *pm_errname(int e)
{
	const char *n = strerrorname_np(e);

	return n ? n : "?";
}

/*
 * Assert that EXPR fails (returns -1 or MAP_FAILED) with errno ERR.
 * The message names the call and what happened instead.
 */
#define ASSERT_ERRNO(err, expr) do {					\
	long __r;							\
	int __e;							\
	errno = 0;							\
	__r = (long)(expr);						\
	__e = errno;							\
	ASSERT_EQ(-1, __r) TH_LOG("%s: expected %s, but it returned %ld", \
				  #expr, pm_errname(err), __r);		\
	ASSERT_EQ(err, __e) TH_LOG("%s: expected %s, got %s", #expr,	\
				   pm_errname(err), pm_errname(__e));	\
} while (0)

/* Assert that EXPR (a syscall or ioctl) returns 0, naming the errno if not. */
#define ASSERT_OK(expr) do {						\
	long __r;							\
	errno = 0;							\
	__r = (long)(expr);						\
	ASSERT_EQ(0, __r) TH_LOG("%s failed: %s", #expr,		\
				 pm_errname(errno));			\
} while (0)

/* The same, without ending the test. */
#define EXPECT_OK(expr) do {						\
	long __r;							\
	errno = 0;							\
	__r = (long)(expr);						\
	EXPECT_EQ(0, __r) TH_LOG("%s failed: %s", #expr,		\
				 pm_errname(errno));			\
} while (0)

/* The module's debugfs counters (the rig checks they end at 0). */
#define PM_DEBUGFS_DIR "/sys/kernel/debug/pinmem"
static const char *const pm_debugfs_names[] = {
	"regions", "pages", "mappings", "view_fds",
};
#define PM_NR_DEBUGFS 4

/* What every fixture holds: the device and the totals at the start. */
struct pm_env {
	int dev;
	struct pinmem_dev_info base;
	long long debugfs[PM_NR_DEBUGFS];	/* -1: not readable */
};

static inline long long pm_debugfs_get(const char *name)
{
	char path[128];
	long long v;
	FILE *f;
	int ok;

	snprintf(path, sizeof(path), PM_DEBUGFS_DIR "/%s", name);
	f = fopen(path, "re");
	if (!f)
		return -1;
	ok = fscanf(f, "%lld", &v) == 1;
	fclose(f);
	return ok ? v : -1;
}

static inline int pm_in_guest(void)
{
	return getenv("PINMEM_SCRATCH") || getenv("PINMEM_KERNEL") ||
	       access("/sys/module/pinmem", F_OK) == 0;
}

static inline int pm_dev_info_at(struct __test_metadata *_metadata, int line,
				 int dev, struct pinmem_dev_info *di)
{
	memset(di, 0xa5, sizeof(*di));
	ASSERT_EQ(0, ioctl(dev, PINMEM_IOC_DEV_INFO, di))
		TH_LOG("line %d: DEV_INFO: %s", line, pm_errname(errno));
	return 0;
}
#define pm_dev_info(dev, di) pm_dev_info_at(_metadata, __LINE__, dev, di)

/*
 * Open the device. In the guest (or wherever the module is loaded) a
 * missing device is a failure; elsewhere the test is skipped. The 6.1
 * harness runs the test body after a SKIP in setup, so jump past it.
 */
static inline void pm_setup(struct __test_metadata *_metadata,
			    struct pm_env *env)
{
	env->dev = open(PINMEM_DEVICE_PATH, O_RDWR | O_CLOEXEC);
	if (env->dev < 0) {
		int e = errno;

		if (pm_in_guest())
			ASSERT_GE(env->dev, 0)
				TH_LOG("open %s: %s (the module should be loaded here)",
				       PINMEM_DEVICE_PATH, pm_errname(e));
		SKIP(longjmp(_metadata->env, 1),
		     "no %s (run in the guest: tests/vm/run tests/guest.d/10-kselftest)",
		     PINMEM_DEVICE_PATH);
	}
	pm_dev_info_at(_metadata, __LINE__, env->dev, &env->base);
	for (int i = 0; i < PM_NR_DEBUGFS; i++)
		env->debugfs[i] = pm_debugfs_get(pm_debugfs_names[i]);
}

/* The leak check: the module's totals are back where the test began. */
static inline void pm_teardown(struct __test_metadata *_metadata,
			       struct pm_env *env)
{
	struct pinmem_dev_info now;

	if (env->dev <= 0)
		return;
	if (_metadata->passed && !_metadata->skip) {
		pm_dev_info_at(_metadata, __LINE__, env->dev, &now);
		EXPECT_EQ(env->base.nr_regions, now.nr_regions)
			TH_LOG("leak: regions left after the test");
		EXPECT_EQ(env->base.total_bytes, now.total_bytes)
			TH_LOG("leak: pinned bytes left after the test");
		EXPECT_EQ(env->base.nr_mappings, now.nr_mappings)
			TH_LOG("leak: mappings left after the test");
		EXPECT_EQ(env->base.nr_view_fds, now.nr_view_fds)
			TH_LOG("leak: view fds left after the test");
		for (int i = 0; i < PM_NR_DEBUGFS; i++) {
			if (env->debugfs[i] < 0)
				continue;
			EXPECT_EQ(env->debugfs[i],
				  pm_debugfs_get(pm_debugfs_names[i]))
				TH_LOG("leak: debugfs %s/%s", PM_DEBUGFS_DIR,
				       pm_debugfs_names[i]);
		}
	}
	close(env->dev);
}

/* Whether reading the byte at p kills a child with SIGBUS (-1: no child). */
static inline int pm_read_is_sigbus(const volatile char *p)
{
	int status;
	pid_t pid = fork();

	if (pid == 0) {
		(void)*p;
		_exit(0);
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid)
		return -1;
	return WIFSIGNALED(status) && WTERMSIG(status) == SIGBUS;
}

#define PM_FIXTURE(name)						\
	FIXTURE(name) { struct pm_env env; };				\
	FIXTURE_SETUP(name) { pm_setup(_metadata, &self->env); }	\
	FIXTURE_TEARDOWN(name) { pm_teardown(_metadata, &self->env); }

/* ALLOC: returns the region fd, the id through *id when id is not NULL. */
static inline int pm_alloc_at(struct __test_metadata *_metadata, int line,
			      int dev, uint64_t size, uint32_t flags,
			      uint64_t *id)
{
	struct pinmem_alloc a = { .size = size, .flags = flags };

	ASSERT_EQ(0, ioctl(dev, PINMEM_IOC_ALLOC, &a))
		TH_LOG("line %d: ALLOC of %llu bytes: %s", line,
		       (unsigned long long)size, pm_errname(errno));
	ASSERT_GE(a.fd, 0) TH_LOG("line %d: ALLOC returned fd %d", line, a.fd);
	if (id)
		*id = a.region_id;
	return a.fd;
}
#define pm_alloc(dev, size) pm_alloc_at(_metadata, __LINE__, dev, size, 0, NULL)
#define pm_alloc_id(dev, size, id) \
	pm_alloc_at(_metadata, __LINE__, dev, size, 0, id)

/* ALLOC expected to fail: returns the errno (0 and closes fd if it didn't). */
static inline int pm_try_alloc(int dev, uint64_t size, uint32_t flags)
{
	struct pinmem_alloc a = { .size = size, .flags = flags };

	if (ioctl(dev, PINMEM_IOC_ALLOC, &a) == 0) {
		close(a.fd);
		return 0;
	}
	return errno;
}

/* VIEW: returns the view fd. */
static inline int pm_view_at(struct __test_metadata *_metadata, int line,
			     int rfd, uint64_t off, uint64_t len,
			     uint32_t flags)
{
	struct pinmem_view v = { .offset = off, .length = len,
				 .flags = flags };

	ASSERT_EQ(0, ioctl(rfd, PINMEM_IOC_VIEW, &v))
		TH_LOG("line %d: VIEW offset %llu length %llu flags %u: %s",
		       line, (unsigned long long)off,
		       (unsigned long long)len, flags, pm_errname(errno));
	ASSERT_GE(v.fd, 0) TH_LOG("line %d: VIEW returned fd %d", line, v.fd);
	return v.fd;
}
#define pm_view(rfd, off, len, flags) \
	pm_view_at(_metadata, __LINE__, rfd, off, len, flags)

/* A shared mapping that must succeed. */
static inline void *pm_map_at(struct __test_metadata *_metadata, int line,
			      int fd, size_t len, int prot, off_t off)
{
	void *p = mmap(NULL, len, prot, MAP_SHARED, fd, off);

	ASSERT_NE(MAP_FAILED, p)
		TH_LOG("line %d: mmap fd %d length %zu prot %d offset %lld: %s",
		       line, fd, len, prot, (long long)off, pm_errname(errno));
	return p;
}
#define pm_map(fd, len, prot, off) \
	pm_map_at(_metadata, __LINE__, fd, len, prot, off)

#define pm_unmap(p, len) ASSERT_OK(munmap(p, len))

static inline void pm_info_at(struct __test_metadata *_metadata, int line,
			      int fd, struct pinmem_region_info *ri)
{
	memset(ri, 0xa5, sizeof(*ri));
	ASSERT_EQ(0, ioctl(fd, PINMEM_IOC_INFO, ri))
		TH_LOG("line %d: INFO on fd %d: %s", line, fd,
		       pm_errname(errno));
}
#define pm_info(fd, ri) pm_info_at(_metadata, __LINE__, fd, ri)

/* Assert the region's mapping counts (from INFO on fd). */
static inline void pm_expect_counts_at(struct __test_metadata *_metadata,
				       int line, int fd, uint64_t owner,
				       uint64_t views, uint64_t writable)
{
	struct pinmem_region_info ri;

	pm_info_at(_metadata, line, fd, &ri);
	ASSERT_EQ(owner, ri.owner_mappings)
		TH_LOG("line %d: owner_mappings", line);
	ASSERT_EQ(views, ri.view_mappings)
		TH_LOG("line %d: view_mappings", line);
	ASSERT_EQ(writable, ri.writable_view_mappings)
		TH_LOG("line %d: writable_view_mappings", line);
}
#define pm_expect_counts(fd, owner, views, writable) \
	pm_expect_counts_at(_metadata, __LINE__, fd, owner, views, writable)

static inline uint32_t pm_state_at(struct __test_metadata *_metadata,
				   int line, int fd)
{
	struct pinmem_region_info ri;

	pm_info_at(_metadata, line, fd, &ri);
	return ri.state;
}
#define pm_state(fd) pm_state_at(_metadata, __LINE__, fd)

/* SEAL/DONATE/PUBLISH/REOPEN: 0 or the errno. */
static inline int pm_transition(int rfd, unsigned long cmd, uint32_t flags,
				uint32_t timeout_ms)
{
	struct pinmem_transition t = { .flags = flags,
				       .timeout_ms = timeout_ms };

	return ioctl(rfd, cmd, &t) ? errno : 0;
}
#define pm_seal(rfd)	pm_transition(rfd, PINMEM_IOC_SEAL, 0, 0)
#define pm_donate(rfd)	pm_transition(rfd, PINMEM_IOC_DONATE, 0, 0)
#define pm_publish(rfd)	pm_transition(rfd, PINMEM_IOC_PUBLISH, 0, 0)
#define pm_reopen(rfd)	pm_transition(rfd, PINMEM_IOC_REOPEN, 0, 0)
#define pm_donate_wait(rfd, ms) \
	pm_transition(rfd, PINMEM_IOC_DONATE, PINMEM_DONATE_WAIT, ms)

/* Assert a transition's outcome (0 or an errno), by name. */
#define ASSERT_TRANSITION(err, call) do {				\
	int __e = (call);						\
	ASSERT_EQ(err, __e) TH_LOG("%s: expected %s, got %s", #call,	\
				   (err) ? pm_errname(err) : "success",	\
				   __e ? pm_errname(__e) : "success");	\
} while (0)

/* HOLDERS through fd (region_id 0 unless fd is the device): the count. */
static inline uint32_t pm_holders_at(struct __test_metadata *_metadata,
				     int line, int fd, uint64_t region_id,
				     struct pinmem_holder *h, uint32_t cap)
{
	struct pinmem_holders q = {
		.region_id = region_id,
		.holders_ptr = (uintptr_t)h,
		.capacity = cap,
	};

	if (cap)
		memset(h, 0xa5, cap * sizeof(*h));
	ASSERT_EQ(0, ioctl(fd, PINMEM_IOC_HOLDERS, &q))
		TH_LOG("line %d: HOLDERS: %s", line, pm_errname(errno));
	return q.count;
}
#define pm_holders(fd, h, cap) pm_holders_at(_metadata, __LINE__, fd, 0, h, cap)

/* The holder record whose start is addr, or NULL. */
static inline const struct pinmem_holder *
pm_find_holder(const struct pinmem_holder *h, uint32_t n, const void *addr)
{
	for (uint32_t i = 0; i < n; i++)
		if (h[i].start == (uintptr_t)addr)
			return &h[i];
	return NULL;
}

/* Fill len bytes with a pattern that depends on seed and position. */
static inline void pm_fill(void *p, size_t len, uint32_t seed)
{
	uint32_t *w = p;

	for (size_t i = 0; i < len / 4; i++)
		w[i] = seed * 2654435761u + (uint32_t)i;
}

/* Index of the first word that differs from the pattern, or -1. */
static inline long pm_check(const void *p, size_t len, uint32_t seed)
{
	const uint32_t *w = p;

	for (size_t i = 0; i < len / 4; i++)
		if (w[i] != seed * 2654435761u + (uint32_t)i)
			return (long)i;
	return -1;
}

#define ASSERT_PATTERN(p, len, seed) do {				\
	long __i = pm_check(p, len, seed);				\
	ASSERT_EQ(-1, __i) TH_LOG("pattern %u wrong at byte %ld of %s",	\
				  (unsigned)(seed), __i * 4, #p);	\
} while (0)

/* Module parameters (sysfs): read and write as decimal. */
static inline int pm_param_get(const char *name, unsigned long long *v)
{
	char path[256];
	FILE *f;
	int ok;

	snprintf(path, sizeof(path), PM_PARAM_DIR "/%s", name);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	ok = fscanf(f, "%llu", v) == 1;
	fclose(f);
	return ok ? 0 : -EIO;
}

static inline int pm_param_set(const char *name, unsigned long long v)
{
	char path[256], buf[32];
	int fd, n, ret = 0;

	snprintf(path, sizeof(path), PM_PARAM_DIR "/%s", name);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = snprintf(buf, sizeof(buf), "%llu\n", v);
	if (write(fd, buf, n) != n)
		ret = -errno;
	close(fd);
	return ret;
}

/*
 * /dev/nullb0, opened with flags (O_DIRECT for no page cache), every I/O
 * completing after delay_ns (null_blk in timer mode): a device whose
 * reads and writes stay in flight as long as a test needs. The caller
 * closes it and runs "rmmod null_blk".
 */
static inline int pm_nullb_open(struct __test_metadata *_metadata,
				unsigned long long delay_ns, int flags)
{
	char cmd[160];
	int fd;

	if (access("/sys/module/null_blk", F_OK) == 0)
		ASSERT_EQ(0, system("rmmod null_blk"));
	snprintf(cmd, sizeof(cmd),
		 "modprobe null_blk nr_devices=1 irqmode=2 completion_nsec=%llu",
		 delay_ns);
	ASSERT_EQ(0, system(cmd)) TH_LOG("%s failed", cmd);
	fd = open("/dev/nullb0", flags | O_CLOEXEC);
	ASSERT_GE(fd, 0) TH_LOG("open /dev/nullb0: %s", pm_errname(errno));
	return fd;
}

static inline double pm_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Wait for a child; its exit status, or 128 + signal. */
static inline int pm_wait(pid_t pid)
{
	int st;

	if (waitpid(pid, &st, 0) != pid)
		return -1;
	if (WIFEXITED(st))
		return WEXITSTATUS(st);
	return 128 + WTERMSIG(st);
}

#endif /* PINMEM_TEST_H */
