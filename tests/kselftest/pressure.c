// SPDX-License-Identifier: GPL-2.0
/*
 * Memory pressure never kills: an ALLOC that cannot be had fails with
 * ENOMEM, promptly, with or without PINMEM_ALLOC_FALLBACK, also under a
 * cgroup v2 memory.max limit, and never invokes the OOM killer (the rig
 * fails the run on any OOM report; the memcg case reads memory.events).
 * A fatal signal ends a large ALLOC early. The fixture checks that
 * nothing is left behind.
 *
 * Times are TCG times; only the ratios printed as "# ratio" mean anything.
 */
#include <sys/mount.h>
#include <sys/sysinfo.h>

#include "pinmem_test.h"

#define CHUNK (2 * MiB)

PM_FIXTURE(pressure);

static uint64_t meminfo_bytes(const char *key)
{
	char line[256];
	unsigned long long kb = 0;
	size_t n = strlen(key);
	FILE *f = fopen("/proc/meminfo", "re");

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, key, n) && line[n] == ':') {
			sscanf(line + n + 1, "%llu", &kb);
			break;
		}
	fclose(f);
	return kb * KiB;
}

static uint64_t chunk_down(uint64_t v)
{
	return v / CHUNK * CHUNK;
}

/* Seconds one ALLOC of size takes; *err gets its errno (0: it worked). */
static double timed_alloc(int dev, uint64_t size, uint32_t flags, int *err)
{
	double t0 = pm_now();

	*err = pm_try_alloc(dev, size, flags);
	return pm_now() - t0;
}

static void twice_ram(struct __test_metadata *_metadata, int dev,
		      uint32_t flags)
{
	uint64_t big = chunk_down(2 * meminfo_bytes("MemTotal"));
	uint64_t ref = chunk_down(meminfo_bytes("MemAvailable") / 4);
	double t_ok, t_fail;
	int err;

	ASSERT_GT(ref, 0);
	t_ok = timed_alloc(dev, ref, flags, &err);
	ASSERT_EQ(0, err) TH_LOG("reference ALLOC of %llu MiB: %s",
				 ref / MiB, pm_errname(err));
	t_fail = timed_alloc(dev, big, flags, &err);
	ASSERT_EQ(ENOMEM, err) TH_LOG("ALLOC of 2x RAM (%llu MiB): %s",
				      big / MiB, pm_errname(err));
	printf("# ratio: ALLOC of 2x RAM (%llu MiB, flags %u) failed in %.4f s; "
	       "a successful ALLOC of %llu MiB took %.4f s (%.3fx)\n",
	       big / MiB, flags, t_fail, ref / MiB, t_ok, t_fail / t_ok);
	fflush(stdout);	/* the harness child ends in _exit */
	/* Prompt: less than succeeding with a quarter of what is free. */
	EXPECT_LT(t_fail, t_ok) TH_LOG("ENOMEM took %.2f s", t_fail);
	/* And the machine still has its memory: the same ALLOC works again. */
	t_ok = timed_alloc(dev, ref, flags, &err);
	EXPECT_EQ(0, err);
}

TEST_F_TIMEOUT(pressure, twice_ram_enomem, 120)
{
	twice_ram(_metadata, self->env.dev, 0);
}

TEST_F_TIMEOUT(pressure, twice_ram_fallback_enomem, 120)
{
	twice_ram(_metadata, self->env.dev, PINMEM_ALLOC_FALLBACK);
}

/* cgroup v2 with the memory controller: the root's path, or NULL. */
static const char *cgroup_root(void)
{
	static const char *const root = "/sys/fs/cgroup";
	char path[128];
	int fd;

	snprintf(path, sizeof(path), "%s/cgroup.controllers", root);
	if (access(path, F_OK) &&
	    mount("none", root, "cgroup2", 0, NULL))
		return NULL;
	snprintf(path, sizeof(path), "%s/cgroup.subtree_control", root);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	if (write(fd, "+memory", 7) != 7) {
		close(fd);
		return NULL;
	}
	close(fd);
	return root;
}

static int write_str(const char *dir, const char *file, const char *s)
{
	char path[256];
	int fd, ok;

	snprintf(path, sizeof(path), "%s/%s", dir, file);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ok = write(fd, s, strlen(s)) == (ssize_t)strlen(s);
	close(fd);
	return ok ? 0 : -1;
}

/* A memory.events field, or -1. */
static long long memcg_event(const char *dir, const char *key)
{
	char path[256], name[64];
	long long v;
	FILE *f;

	snprintf(path, sizeof(path), "%s/memory.events", dir);
	f = fopen(path, "re");
	if (!f)
		return -1;
	while (fscanf(f, "%63s %lld", name, &v) == 2)
		if (!strcmp(name, key)) {
			fclose(f);
			return v;
		}
	fclose(f);
	return -1;
}

/*
 * In a child inside the cgroup: ALLOC size with flags; exits with the
 * errno (0: it worked) and reports the seconds through the pipe.
 */
static int alloc_in_cgroup(const char *cg, int dev, uint64_t size,
			   uint32_t flags, double *secs)
{
	int p[2], st;
	pid_t pid;

	if (pipe(p))
		return -1;
	pid = fork();
	if (pid == 0) {
		double t;
		int err;

		close(p[0]);
		if (write_str(cg, "cgroup.procs", "0"))
			_exit(255);
		t = timed_alloc(dev, size, flags, &err);
		if (write(p[1], &t, sizeof(t)) != sizeof(t))
			_exit(254);
		_exit(err);
	}
	close(p[1]);
	if (pid < 0 || read(p[0], secs, sizeof(*secs)) != sizeof(*secs))
		*secs = -1;
	close(p[0]);
	st = pm_wait(pid);
	return st;
}

TEST_F_TIMEOUT(pressure, memcg_limit_enomem_no_oom, 120)
{
	const uint64_t size = 256 * MiB, limit = 32 * MiB;
	const uint32_t flags[] = { 0, PINMEM_ALLOC_FALLBACK };
	const char *root = cgroup_root();
	char cg[128], v[32];
	double t_ok, t_fail;
	int err;

	if (!root)
		SKIP(return, "no cgroup v2 memory controller");
	snprintf(cg, sizeof(cg), "%s/pinmem-pressure-%d", root, getpid());
	ASSERT_OK(mkdir(cg, 0755));
	snprintf(v, sizeof(v), "%llu", (unsigned long long)limit);
	EXPECT_OK(write_str(cg, "memory.max", v));

	for (unsigned int i = 0; i < 2; i++) {
		t_ok = timed_alloc(self->env.dev, size, flags[i], &err);
		EXPECT_EQ(0, err) TH_LOG("ALLOC of %llu MiB outside the cgroup: %s",
					 size / MiB, pm_errname(err));
		err = alloc_in_cgroup(cg, self->env.dev, size, flags[i], &t_fail);
		EXPECT_EQ(ENOMEM, err)
			TH_LOG("flags %u: ALLOC of %llu MiB under memory.max=%llu MiB: "
			       "status %d (137 = killed: the OOM killer)",
			       flags[i], size / MiB, limit / MiB, err);
		printf("# ratio: flags %u: ALLOC of %llu MiB under memory.max=%llu MiB "
		       "failed in %.4f s; without the limit it took %.4f s (%.3fx)\n",
		       flags[i], size / MiB, limit / MiB, t_fail, t_ok,
		       t_fail / t_ok);
		fflush(stdout);	/* the harness child ends in _exit */
		EXPECT_LT(t_fail, 2 * t_ok + 0.05);
	}
	EXPECT_EQ(0, memcg_event(cg, "oom"));
	EXPECT_EQ(0, memcg_event(cg, "oom_kill"));
	EXPECT_LT(0, memcg_event(cg, "max")) TH_LOG("the limit was never hit");
	EXPECT_OK(rmdir(cg));
}

TEST_F_TIMEOUT(pressure, fatal_signal_ends_alloc, 120)
{
	uint64_t size = chunk_down(meminfo_bytes("MemAvailable") / 2);
	struct pinmem_dev_info di;
	double t_full, t0, t_kill;
	int err, in_progress = 0;
	pid_t pid;

	t_full = timed_alloc(self->env.dev, size, PINMEM_ALLOC_FALLBACK, &err);
	ASSERT_EQ(0, err) TH_LOG("ALLOC of %llu MiB: %s", size / MiB,
				 pm_errname(err));
	pid = fork();
	ASSERT_GE(pid, 0);
	if (pid == 0) {
		pm_try_alloc(self->env.dev, size, PINMEM_ALLOC_FALLBACK);
		pause();
		_exit(0);
	}
	/* Wait until the ALLOC has charged its pages but not finished. */
	t0 = pm_now();
	while (pm_now() - t0 < 10) {
		pm_dev_info(self->env.dev, &di);
		if (di.total_bytes > self->env.base.total_bytes &&
		    di.nr_regions == self->env.base.nr_regions) {
			in_progress = 1;
			break;
		}
	}
	usleep(t_full * 1e6 / 8);
	pm_dev_info(self->env.dev, &di);
	in_progress &= di.nr_regions == self->env.base.nr_regions;
	t0 = pm_now();
	kill(pid, SIGKILL);
	EXPECT_EQ(128 + SIGKILL, pm_wait(pid));
	t_kill = pm_now() - t0;
	printf("# ratio: SIGKILL during an ALLOC of %llu MiB: dead in %.4f s; "
	       "the whole ALLOC takes %.4f s (%.3fx)%s\n", size / MiB, t_kill,
	       t_full, t_kill / t_full, in_progress ? "" : " (ALLOC had finished)");
	fflush(stdout);	/* the harness child ends in _exit */
	EXPECT_TRUE(in_progress) TH_LOG("could not catch the ALLOC in progress");
	EXPECT_LT(t_kill, t_full * 0.75);
}

TEST_HARNESS_MAIN
