// SPDX-License-Identifier: GPL-2.0
/*
 * The kernel's count of mappings stays exact through fork,
 * MADV_DONTFORK/DOFORK, VMA splits, mremap, exit, closing the region fd,
 * and failed mmaps. Whom the holders list names is holders.c's.
 */
#include "pinmem_test.h"

PM_FIXTURE(counting)

/*
 * A child that runs fn, tells the parent over a pipe that it is ready,
 * then waits for the parent's go before exiting.
 */
struct child {
	pid_t pid;
	int ready;	/* read end: the child's report */
	int go;		/* write end: release the child */
};

static int child_start(struct child *c, int (*fn)(void *), void *arg)
{
	int up[2], down[2];

	if (pipe2(up, O_CLOEXEC) || pipe2(down, O_CLOEXEC))
		return -1;
	c->pid = fork();
	if (c->pid < 0)
		return -1;
	if (c->pid == 0) {
		int r = fn(arg);
		char b;

		close(up[0]);
		close(down[1]);
		if (write(up[1], &r, sizeof(r)) != sizeof(r))
			_exit(90);
		if (read(down[0], &b, 1) < 0)
			_exit(91);
		_exit(r);
	}
	close(up[1]);
	close(down[0]);
	c->ready = up[0];
	c->go = down[1];
	return 0;
}

/* The child's fn result, once it is ready. */
static int child_ready(struct child *c)
{
	int r = -1;

	if (read(c->ready, &r, sizeof(r)) != sizeof(r))
		return -1;
	return r;
}

static int child_finish(struct child *c)
{
	close(c->go);
	close(c->ready);
	return pm_wait(c->pid);
}

static int nothing(void *arg)
{
	(void)arg;
	return 0;
}

/* 0 if addr is mapped in this process, 1 if not. */
static int unmapped_here(void *addr)
{
	unsigned char vec;

	return mincore(addr, PG, &vec) && errno == ENOMEM;
}

static int is_unmapped(void *addr)
{
	return unmapped_here(addr) ? 0 : 1;
}

TEST_F(counting, fork_inherits_mapping)
{
	int rfd = pm_alloc(self->env.dev, 2 * MiB);
	int vfd = pm_view(rfd, 0, 2 * MiB, 0);
	void *p = pm_map(vfd, PG, PROT_READ, 0);
	struct pinmem_holder h[4];
	const struct pinmem_holder *x;
	struct child c;
	uint32_t n;

	ASSERT_OK(child_start(&c, nothing, NULL));
	ASSERT_EQ(0, child_ready(&c));
	pm_expect_counts(rfd, 0, 2, 0);
	n = pm_holders(rfd, h, 4);
	ASSERT_EQ(2, n);
	/* Same address in both; one record per process. */
	x = h[0].tgid == (uint32_t)c.pid ? &h[0] : &h[1];
	EXPECT_EQ((uint32_t)c.pid, x->tgid);
	EXPECT_EQ((uintptr_t)p, x->start);
	x = h[0].tgid == (uint32_t)c.pid ? &h[1] : &h[0];
	EXPECT_EQ((uint32_t)getpid(), x->tgid);
	ASSERT_EQ(0, child_finish(&c));
	pm_expect_counts(rfd, 0, 1, 0);
	pm_unmap(p, PG);
	close(vfd);
	close(rfd);
}

TEST_F(counting, madv_dontfork_and_dofork)
{
	int rfd = pm_alloc(self->env.dev, 2 * MiB);
	int vfd = pm_view(rfd, 0, 2 * MiB, 0);
	void *p = pm_map(vfd, PG, PROT_READ, 0);
	struct child c;

	ASSERT_OK(madvise(p, PG, MADV_DONTFORK));
	ASSERT_OK(child_start(&c, is_unmapped, p));
	ASSERT_EQ(0, child_ready(&c)) TH_LOG("the child has the mapping");
	pm_expect_counts(rfd, 0, 1, 0);
	ASSERT_EQ(0, child_finish(&c));

	ASSERT_OK(madvise(p, PG, MADV_DOFORK));
	ASSERT_OK(child_start(&c, nothing, NULL));
	ASSERT_EQ(0, child_ready(&c));
	pm_expect_counts(rfd, 0, 2, 0);
	ASSERT_EQ(0, child_finish(&c));
	pm_expect_counts(rfd, 0, 1, 0);
	pm_unmap(p, PG);
	close(vfd);
	close(rfd);
}

TEST_F(counting, munmap_middle_splits)
{
	int rfd = pm_alloc(self->env.dev, 2 * MiB);
	int vfd = pm_view(rfd, 0, 2 * MiB, 0);
	char *p = pm_map(vfd, 3 * PG, PROT_READ, 4 * PG);
	struct pinmem_holder h[4];
	const struct pinmem_holder *x;

	pm_unmap(p + PG, PG);
	pm_expect_counts(rfd, 0, 2, 0);
	ASSERT_EQ(2, pm_holders(rfd, h, 4));
	x = pm_find_holder(h, 2, p);
	ASSERT_NE(NULL, x);
	EXPECT_EQ(PG, x->length);
	EXPECT_EQ(4 * PG, x->offset);
	x = pm_find_holder(h, 2, p + 2 * PG);
	ASSERT_NE(NULL, x);
	EXPECT_EQ(PG, x->length);
	EXPECT_EQ(6 * PG, x->offset);
	pm_unmap(p, PG);
	pm_expect_counts(rfd, 0, 1, 0);
	pm_unmap(p + 2 * PG, PG);
	pm_expect_counts(rfd, 0, 0, 0);
	close(vfd);
	close(rfd);
}

TEST_F(counting, mprotect_splits)
{
	int rfd = pm_alloc(self->env.dev, 2 * MiB);
	int vfd = pm_view(rfd, 0, 2 * MiB, PINMEM_VIEW_WRITE);
	char *p = pm_map(vfd, 3 * PG, PROT_READ | PROT_WRITE, 0);
	struct pinmem_holder h[4];
	const struct pinmem_holder *x;

	ASSERT_OK(mprotect(p + PG, PG, PROT_READ));
	/* Three VMAs now, all of a read-write fd: all may write. */
	pm_expect_counts(rfd, 0, 3, 3);
	ASSERT_EQ(3, pm_holders(rfd, h, 4));
	x = pm_find_holder(h, 3, p + PG);
	ASSERT_NE(NULL, x);
	EXPECT_EQ(PROT_READ, x->prot);
	EXPECT_EQ(PG, x->length);
	x = pm_find_holder(h, 3, p + 2 * PG);
	ASSERT_NE(NULL, x);
	EXPECT_EQ(PROT_READ | PROT_WRITE, x->prot);
	pm_unmap(p, 3 * PG);
	pm_expect_counts(rfd, 0, 0, 0);
	close(vfd);
	close(rfd);
}

TEST_F(counting, mremap_move_keeps_count)
{
	int rfd = pm_alloc(self->env.dev, 2 * MiB);
	int vfd = pm_view(rfd, 0, 2 * MiB, 0);
	char *p = pm_map(vfd, 2 * PG, PROT_READ, 0);
	char *to = mmap(NULL, 2 * PG, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS,
			-1, 0);
	struct pinmem_holder h[4];
	char *q;

	ASSERT_NE(MAP_FAILED, to);
	q = mremap(p, 2 * PG, 2 * PG, MREMAP_MAYMOVE | MREMAP_FIXED, to);
	ASSERT_EQ(to, q) TH_LOG("mremap move: %s", pm_errname(errno));
	pm_expect_counts(rfd, 0, 1, 0);
	ASSERT_EQ(1, pm_holders(rfd, h, 4));
	EXPECT_EQ((uintptr_t)q, h[0].start);
	EXPECT_EQ(2 * PG, h[0].length);
	EXPECT_EQ(1, unmapped_here(p));
	pm_unmap(q, 2 * PG);
	pm_expect_counts(rfd, 0, 0, 0);
	close(vfd);
	close(rfd);
}

/*
 * mremap(old_len 0) duplicates a shared mapping. The header says a
 * duplicate is counted like any other mapping; a mapping that may not grow
 * (VM_DONTEXPAND) is refused by the kernel's own mremap with EFAULT, in
 * which case nothing may be counted.
 */
/*
 * mremap(old_len = 0) would duplicate a shared mapping, but a duplicate is
 * growth from zero, and VM_DONTEXPAND (how growth is refused) refuses it
 * too: EFAULT, and the count must not move.
 */
TEST_F(counting, mremap_duplicate_refused)
{
	int rfd = pm_alloc(self->env.dev, 2 * MiB);
	int vfd = pm_view(rfd, 0, 2 * MiB, 0);
	char *p = pm_map(vfd, PG, PROT_READ, 0);
	struct pinmem_holder h[4];

	ASSERT_EQ(MAP_FAILED, mremap(p, 0, PG, MREMAP_MAYMOVE));
	ASSERT_EQ(EFAULT, errno) TH_LOG("duplicate: %s", pm_errname(errno));
	pm_expect_counts(rfd, 0, 1, 0);
	ASSERT_EQ(1, pm_holders(rfd, h, 4));
	ASSERT_NE(NULL, pm_find_holder(h, 1, p));
	pm_unmap(p, PG);
	pm_expect_counts(rfd, 0, 0, 0);
	close(vfd);
	close(rfd);
}

static int map_and_exit(void *arg)
{
	int vfd = *(int *)arg;

	/* No munmap: exit tears it down. */
	return mmap(NULL, 2 * PG, PROT_READ, MAP_SHARED, vfd, 0) == MAP_FAILED;
}

TEST_F(counting, exit_without_munmap)
{
	int rfd = pm_alloc(self->env.dev, 2 * MiB);
	int vfd = pm_view(rfd, 0, 2 * MiB, 0);
	struct pinmem_dev_info di;
	struct child c;

	ASSERT_OK(child_start(&c, map_and_exit, &vfd));
	ASSERT_EQ(0, child_ready(&c));
	pm_expect_counts(rfd, 0, 1, 0);
	ASSERT_EQ(0, child_finish(&c));
	pm_expect_counts(rfd, 0, 0, 0);
	pm_dev_info(self->env.dev, &di);
	EXPECT_EQ(self->env.base.nr_mappings, di.nr_mappings);
	close(vfd);
	close(rfd);
}

/* The mapping keeps the region alive after its last fd is closed. */
TEST_F(counting, region_fd_closed_while_mapped)
{
	int rfd = pm_alloc(self->env.dev, 2 * MiB);
	int vfd = pm_view(rfd, 0, 2 * MiB, 0);
	char *o = pm_map(rfd, 2 * MiB, PROT_READ | PROT_WRITE, 0);
	char *v = pm_map(vfd, 2 * MiB, PROT_READ, 0);
	struct pinmem_dev_info di;

	pm_fill(o, 2 * MiB, 41);
	close(vfd);
	close(rfd);
	ASSERT_PATTERN(v, 2 * MiB, 41);
	ASSERT_PATTERN(o, 2 * MiB, 41);
	pm_dev_info(self->env.dev, &di);
	EXPECT_EQ(self->env.base.nr_regions + 1, di.nr_regions);
	EXPECT_EQ(self->env.base.total_bytes + 2 * MiB, di.total_bytes);
	EXPECT_EQ(self->env.base.nr_mappings + 2, di.nr_mappings);
	pm_unmap(v, 2 * MiB);
	pm_dev_info(self->env.dev, &di);
	EXPECT_EQ(self->env.base.nr_regions + 1, di.nr_regions)
		TH_LOG("freed while the owner mapping lives");
	pm_unmap(o, 2 * MiB);
	pm_dev_info(self->env.dev, &di);
	EXPECT_EQ(self->env.base.nr_regions, di.nr_regions);
	EXPECT_EQ(self->env.base.total_bytes, di.total_bytes);
}

/* Every refused mmap leaves the counts as they were. */
TEST_F(counting, failed_mmap_leaves_no_count)
{
	int rfd = pm_alloc(self->env.dev, 2 * MiB);
	int vro = pm_view(rfd, 0, MiB, 0);
	int vrw = pm_view(rfd, 0, MiB, PINMEM_VIEW_WRITE);
	struct pinmem_dev_info di;

	ASSERT_ERRNO(EPERM, mmap(NULL, PG, PROT_READ, MAP_PRIVATE, vro, 0));
	ASSERT_ERRNO(EINVAL, mmap(NULL, MiB + PG, PROT_READ, MAP_SHARED, vro, 0));
	ASSERT_ERRNO(EACCES, mmap(NULL, PG, PROT_WRITE, MAP_SHARED, vro, 0));
	ASSERT_TRANSITION(0, pm_seal(rfd));
	ASSERT_ERRNO(EPERM, mmap(NULL, PG, PROT_READ | PROT_WRITE, MAP_SHARED,
				 vrw, 0));
	ASSERT_TRANSITION(0, pm_donate(rfd));
	ASSERT_ERRNO(EBUSY, mmap(NULL, PG, PROT_READ, MAP_SHARED, vro, 0));
	ASSERT_ERRNO(EBUSY, mmap(NULL, PG, PROT_READ, MAP_PRIVATE, vro, 0));
	pm_expect_counts(rfd, 0, 0, 0);
	ASSERT_EQ(0, pm_holders(rfd, NULL, 0));
	pm_dev_info(self->env.dev, &di);
	EXPECT_EQ(self->env.base.nr_mappings, di.nr_mappings);
	close(vrw);
	close(vro);
	close(rfd);
}

TEST_HARNESS_MAIN
