// SPDX-License-Identifier: GPL-2.0
/*
 * View fds and view mappings: protection, the mmap rules (MAP_SHARED
 * while OPEN, within the view, no growing), sub-range views and VIEW_INFO.
 */
#include "pinmem_test.h"

PM_FIXTURE(views)

/* A read-only view fd is O_RDONLY: the kernel's own check says EACCES. */
TEST_F(views, readonly_view_refuses_prot_write)
{
	int rfd = pm_alloc(self->env.dev, 2 * MiB);
	int vfd = pm_view(rfd, 0, 2 * MiB, 0);

	ASSERT_ERRNO(EACCES, mmap(NULL, PG, PROT_READ | PROT_WRITE,
				  MAP_SHARED, vfd, 0));
	pm_expect_counts(rfd, 0, 0, 0);
	close(vfd);
	close(rfd);
}

TEST_F(views, readonly_view_refuses_mprotect_write)
{
	int rfd = pm_alloc(self->env.dev, 2 * MiB);
	int vfd = pm_view(rfd, 0, 2 * MiB, 0);
	void *p = pm_map(vfd, 2 * MiB, PROT_READ, 0);

	pm_expect_counts(rfd, 0, 1, 0);
	ASSERT_ERRNO(EACCES, mprotect(p, 2 * MiB, PROT_READ | PROT_WRITE));
	ASSERT_ERRNO(EACCES, mprotect(p, PG, PROT_WRITE));
	pm_unmap(p, 2 * MiB);
	close(vfd);
	close(rfd);
}

/* Mappings cannot grow: mremap refuses with EFAULT, moved or in place. */
TEST_F(views, mremap_grow_is_efault)
{
	int rfd = pm_alloc(self->env.dev, 2 * MiB);
	int vfd = pm_view(rfd, 0, 2 * MiB, 0);
	char *p = pm_map(vfd, PG, PROT_READ, 0);

	ASSERT_ERRNO(EFAULT, mremap(p, PG, 2 * PG, MREMAP_MAYMOVE));
	ASSERT_ERRNO(EFAULT, mremap(p, PG, 2 * PG, 0));
	pm_expect_counts(rfd, 0, 1, 0);
	pm_unmap(p, PG);
	close(vfd);
	close(rfd);
}

/* A view must lie within the region; a mapping within the view. */
TEST_F(views, beyond_region_or_view_is_einval)
{
	int rfd = pm_alloc(self->env.dev, 2 * MiB);
	struct pinmem_view v = { .offset = MiB, .length = MiB + PG };
	int vfd;

	ASSERT_ERRNO(EINVAL, ioctl(rfd, PINMEM_IOC_VIEW, &v));
	vfd = pm_view(rfd, MiB, 4 * PG, 0);
	ASSERT_ERRNO(EINVAL, mmap(NULL, 5 * PG, PROT_READ, MAP_SHARED, vfd, 0));
	ASSERT_ERRNO(EINVAL, mmap(NULL, 2 * PG, PROT_READ, MAP_SHARED, vfd,
				  3 * PG));
	ASSERT_ERRNO(EINVAL, mmap(NULL, PG, PROT_READ, MAP_SHARED, vfd,
				  4 * PG));
	pm_expect_counts(rfd, 0, 0, 0);
	close(vfd);
	close(rfd);
}

/* File offset 0 of a view is the view's first byte. */
TEST_F(views, subrange_views_see_their_bytes)
{
	const size_t len = 2 * MiB;
	int rfd = pm_alloc(self->env.dev, len);
	char *o = pm_map(rfd, len, PROT_READ | PROT_WRITE, 0);
	int v1 = pm_view(rfd, 3 * PG, 4 * PG, 0);
	int v2 = pm_view(rfd, len - PG, PG, PINMEM_VIEW_WRITE);
	char *a, *b, *c;

	for (int i = 0; i < 512; i++)
		pm_fill(o + i * PG, PG, 100 + i);
	a = pm_map(v1, 4 * PG, PROT_READ, 0);
	b = pm_map(v1, 2 * PG, PROT_READ, 2 * PG);
	c = pm_map(v2, PG, PROT_READ | PROT_WRITE, 0);
	for (int i = 0; i < 4; i++)
		ASSERT_PATTERN(a + i * PG, PG, 103 + i);
	ASSERT_PATTERN(b, PG, 105);
	ASSERT_PATTERN(b + PG, PG, 106);
	ASSERT_PATTERN(c, PG, 611);
	pm_fill(c, PG, 9);
	ASSERT_PATTERN(o + len - PG, PG, 9);
	pm_unmap(c, PG);
	pm_unmap(b, 2 * PG);
	pm_unmap(a, 4 * PG);
	pm_unmap(o, len);
	close(v2);
	close(v1);
	close(rfd);
}

TEST_F(views, view_info_and_info_through_view)
{
	uint64_t id;
	int rfd = pm_alloc_id(self->env.dev, 4 * MiB, &id);
	int vfd = pm_view(rfd, 2 * MiB, MiB, PINMEM_VIEW_WRITE);
	int vro = pm_view(rfd, 0, PG, 0);
	struct pinmem_view_info vi;
	struct pinmem_region_info ri;

	memset(&vi, 0xa5, sizeof(vi));
	ASSERT_OK(ioctl(vfd, PINMEM_IOC_VIEW_INFO, &vi));
	EXPECT_EQ(id, vi.region_id);
	EXPECT_EQ(2 * MiB, vi.offset);
	EXPECT_EQ(MiB, vi.length);
	EXPECT_EQ(PINMEM_VIEW_WRITE, vi.flags);
	ASSERT_OK(ioctl(vro, PINMEM_IOC_VIEW_INFO, &vi));
	EXPECT_EQ(0, vi.flags);
	EXPECT_EQ(PG, vi.length);
	/* INFO through a view fd describes its region. */
	pm_info(vfd, &ri);
	EXPECT_EQ(id, ri.region_id);
	EXPECT_EQ(4 * MiB, ri.size);
	EXPECT_EQ(2, ri.view_fds);
	close(vro);
	pm_info(rfd, &ri);
	EXPECT_EQ(1, ri.view_fds);
	close(vfd);
	pm_info(rfd, &ri);
	EXPECT_EQ(0, ri.view_fds);
	close(rfd);
}

/* A view fd keeps its region alive after the region fd is closed. */
TEST_F(views, view_fd_outlives_region_fd)
{
	int rfd = pm_alloc(self->env.dev, 2 * MiB);
	char *o = pm_map(rfd, PG, PROT_READ | PROT_WRITE, 0);
	int vfd = pm_view(rfd, 0, PG, 0);
	char *v;

	pm_fill(o, PG, 21);
	pm_unmap(o, PG);
	close(rfd);
	v = pm_map(vfd, PG, PROT_READ, 0);
	ASSERT_PATTERN(v, PG, 21);
	pm_unmap(v, PG);
	close(vfd);
}

/* Counts split by kind and writability. */
TEST_F(views, counts_by_kind)
{
	int rfd = pm_alloc(self->env.dev, 2 * MiB);
	int vro = pm_view(rfd, 0, 2 * MiB, 0);
	int vrw = pm_view(rfd, 0, 2 * MiB, PINMEM_VIEW_WRITE);
	void *o = pm_map(rfd, PG, PROT_READ | PROT_WRITE, 0);
	void *a = pm_map(vro, PG, PROT_READ, 0);
	void *b = pm_map(vrw, PG, PROT_READ | PROT_WRITE, 0);
	/* PROT_READ of a read-write fd may still be mprotect()ed to write. */
	void *c = pm_map(vrw, PG, PROT_READ, 0);
	struct pinmem_holder h[8];
	const struct pinmem_holder *x;

	pm_expect_counts(rfd, 1, 3, 2);
	ASSERT_EQ(4, pm_holders(rfd, h, 8));
	x = pm_find_holder(h, 4, o);
	ASSERT_NE(NULL, x);
	EXPECT_EQ(PINMEM_HOLDER_OWNER, x->kind);
	x = pm_find_holder(h, 4, a);
	ASSERT_NE(NULL, x);
	EXPECT_EQ(PINMEM_HOLDER_VIEW, x->kind);
	EXPECT_EQ(0, x->flags & PINMEM_HOLDER_MAYWRITE);
	x = pm_find_holder(h, 4, c);
	ASSERT_NE(NULL, x);
	EXPECT_EQ(PROT_READ, x->prot);
	EXPECT_EQ(PINMEM_HOLDER_MAYWRITE, x->flags & PINMEM_HOLDER_MAYWRITE);
	pm_unmap(c, PG);
	pm_unmap(b, PG);
	pm_unmap(a, PG);
	pm_unmap(o, PG);
	pm_expect_counts(rfd, 0, 0, 0);
	close(vrw);
	close(vro);
	close(rfd);
}

TEST_HARNESS_MAIN
