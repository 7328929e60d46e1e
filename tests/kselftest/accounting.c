// SPDX-License-Identifier: GPL-2.0
/*
 * Charging: pinned pages count against the allocating user's
 * RLIMIT_MEMLOCK unless it has CAP_IPC_LOCK; chunks are charged whole;
 * freeing a region gives its charge back.
 *
 * The unprivileged cases run in a forked child that opens the device as
 * root, then sets a small RLIMIT_MEMLOCK and becomes nobody (65534), which
 * drops every capability. The child reports the step that went wrong
 * through its exit status and a line on stderr.
 */
#include <grp.h>
#include <sys/resource.h>

#include "pinmem_test.h"

#define NOBODY 65534

PM_FIXTURE(accounting)

#define CHILD_CHECK(step, cond, ...) do {				\
	if (!(cond)) {							\
		fprintf(stderr, "# child step %d: ", step);		\
		fprintf(stderr, __VA_ARGS__);				\
		fprintf(stderr, "\n");					\
		_exit(step);						\
	}								\
} while (0)

static void become_nobody(int memlock)
{
	struct rlimit rl = { .rlim_cur = memlock, .rlim_max = memlock };

	CHILD_CHECK(1, setrlimit(RLIMIT_MEMLOCK, &rl) == 0, "setrlimit: %s",
		    pm_errname(errno));
	CHILD_CHECK(1, setgroups(0, NULL) == 0, "setgroups: %s",
		    pm_errname(errno));
	CHILD_CHECK(1, setgid(NOBODY) == 0, "setgid: %s", pm_errname(errno));
	CHILD_CHECK(1, setuid(NOBODY) == 0, "setuid: %s", pm_errname(errno));
}

static int child_alloc(int dev, uint64_t size, int *fd)
{
	struct pinmem_alloc a = { .size = size };

	*fd = -1;
	if (ioctl(dev, PINMEM_IOC_ALLOC, &a))
		return errno;
	*fd = a.fd;
	return 0;
}

/* 8 MiB limit: 4 MiB fits, 6 more does not until the 4 are freed. */
static void rlimit_child(int dev)
{
	struct pinmem_region_info ri;
	struct pinmem_dev_info d0, d1;
	int a, b, c, e;

	become_nobody(8 * MiB);
	CHILD_CHECK(2, ioctl(dev, PINMEM_IOC_DEV_INFO, &d0) == 0, "DEV_INFO");
	e = child_alloc(dev, 4 * MiB, &a);
	CHILD_CHECK(3, e == 0, "4 MiB under an 8 MiB limit: %s", pm_errname(e));
	CHILD_CHECK(4, ioctl(a, PINMEM_IOC_INFO, &ri) == 0 &&
		    ri.owner_uid == NOBODY, "INFO owner_uid %u", ri.owner_uid);
	e = child_alloc(dev, 6 * MiB, &b);
	CHILD_CHECK(5, e == ENOMEM, "4 + 6 MiB over 8 MiB: got %s",
		    e ? pm_errname(e) : "success");
	CHILD_CHECK(6, ioctl(dev, PINMEM_IOC_DEV_INFO, &d1) == 0 &&
		    d1.total_bytes == d0.total_bytes + 4 * MiB &&
		    d1.nr_regions == d0.nr_regions + 1,
		    "the refused ALLOC left pages behind");
	close(a);
	e = child_alloc(dev, 6 * MiB, &b);
	CHILD_CHECK(7, e == 0, "6 MiB after freeing the 4: %s", pm_errname(e));
	e = child_alloc(dev, 4 * MiB, &c);
	CHILD_CHECK(8, e == ENOMEM, "6 + 4 MiB over 8 MiB: got %s",
		    e ? pm_errname(e) : "success");
	close(b);
	e = child_alloc(dev, 8 * MiB, &c);
	CHILD_CHECK(9, e == 0, "8 MiB alone: %s", pm_errname(e));
	close(c);
	_exit(0);
}

TEST_F(accounting, rlimit_memlock_charged_and_returned)
{
	pid_t pid = fork();

	ASSERT_GE(pid, 0);
	if (pid == 0)
		rlimit_child(self->env.dev);
	ASSERT_EQ(0, pm_wait(pid)) TH_LOG("see the child's step above");
}

/* A one-page region is charged a whole 2 MiB chunk. */
static void whole_chunk_child(int dev)
{
	int fd[4], e;

	become_nobody(8 * MiB);
	for (int i = 0; i < 4; i++) {
		e = child_alloc(dev, PG, &fd[i]);
		CHILD_CHECK(2, e == 0, "one-page region %d: %s", i, pm_errname(e));
	}
	e = child_alloc(dev, PG, &fd[0]);
	CHILD_CHECK(3, e == ENOMEM, "a fifth chunk under 8 MiB: got %s",
		    e ? pm_errname(e) : "success");
	_exit(0);
}

TEST_F(accounting, chunks_are_charged_whole)
{
	pid_t pid = fork();

	ASSERT_GE(pid, 0);
	if (pid == 0)
		whole_chunk_child(self->env.dev);
	ASSERT_EQ(0, pm_wait(pid)) TH_LOG("see the child's step above");
}

/* CAP_IPC_LOCK (root here) is not held to RLIMIT_MEMLOCK. */
TEST_F(accounting, cap_ipc_lock_bypasses_rlimit)
{
	struct rlimit rl = { .rlim_cur = 2 * MiB, .rlim_max = 2 * MiB };
	int rfd;

	ASSERT_EQ(0, geteuid()) TH_LOG("needs root");
	ASSERT_OK(setrlimit(RLIMIT_MEMLOCK, &rl));
	rfd = pm_alloc(self->env.dev, 8 * MiB);
	close(rfd);
}

/* A region that outlives its process's fds is still charged until freed. */
TEST_F(accounting, charge_follows_the_region)
{
	struct pinmem_dev_info di;
	int rfd = pm_alloc(self->env.dev, 4 * MiB);
	void *p = pm_map(rfd, PG, PROT_READ, 0);

	close(rfd);
	pm_dev_info(self->env.dev, &di);
	EXPECT_EQ(self->env.base.total_bytes + 4 * MiB, di.total_bytes);
	pm_unmap(p, PG);
	pm_dev_info(self->env.dev, &di);
	EXPECT_EQ(self->env.base.total_bytes, di.total_bytes);
}

/* Whether LIST's records hold id; *other: a record of another uid. */
static int list_has(const struct pinmem_region_info *ri, uint32_t n,
		    uint64_t id, int *other)
{
	int found = 0;

	if (other)
		*other = 0;
	for (uint32_t i = 0; i < n && i < 8; i++) {
		if (ri[i].region_id == id)
			found = 1;
		if (other && ri[i].owner_uid != NOBODY)
			*other = 1;
	}
	return found;
}

/* Without CAP_SYS_ADMIN, another user's region is as if it did not exist. */
static void other_user_child(int dev, uint64_t root_id)
{
	struct pinmem_region_info ri[8];
	struct pinmem_list l = { .regions_ptr = (uintptr_t)ri, .capacity = 8 };
	struct pinmem_holder h[2];
	struct pinmem_holders q = { .region_id = root_id,
				    .holders_ptr = (uintptr_t)h,
				    .capacity = 2 };
	struct pinmem_alloc a = { .size = 2 * MiB };
	int r, seen_other;

	become_nobody(8 * MiB);
	r = ioctl(dev, PINMEM_IOC_HOLDERS, &q);
	CHILD_CHECK(2, r == -1 && errno == ENOENT,
		    "HOLDERS of root's region as nobody: %s",
		    r ? pm_errname(errno) : "success");
	CHILD_CHECK(3, ioctl(dev, PINMEM_IOC_LIST, &l) == 0 &&
		    !list_has(ri, l.count, root_id, NULL),
		    "LIST as nobody shows root's region");
	CHILD_CHECK(4, ioctl(dev, PINMEM_IOC_ALLOC, &a) == 0, "ALLOC: %s",
		    pm_errname(errno));
	CHILD_CHECK(5, ioctl(dev, PINMEM_IOC_LIST, &l) == 0 &&
		    list_has(ri, l.count, a.region_id, &seen_other) &&
		    !seen_other, "LIST as nobody: its own region, nobody else's");
	q.region_id = a.region_id;
	CHILD_CHECK(6, ioctl(dev, PINMEM_IOC_HOLDERS, &q) == 0 && q.count == 0,
		    "HOLDERS of its own region: %s", pm_errname(errno));
	close(a.fd);
	_exit(0);
}

TEST_F(accounting, other_users_regions_are_invisible)
{
	uint64_t id;
	int rfd = pm_alloc_id(self->env.dev, 2 * MiB, &id);
	void *p = pm_map(rfd, PG, PROT_READ, 0);
	pid_t pid;

	pid = fork();
	ASSERT_GE(pid, 0);
	if (pid == 0) {
		munmap(p, PG);
		close(rfd);
		other_user_child(self->env.dev, id);
	}
	ASSERT_EQ(0, pm_wait(pid)) TH_LOG("see the child's step above");
	pm_unmap(p, PG);
	close(rfd);
}

TEST_HARNESS_MAIN
