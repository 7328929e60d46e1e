// SPDX-License-Identifier: GPL-2.0
/*
 * Region memory: zeroed pages, shared between the owner mapping and the
 * views, stable across MADV_DONTNEED, allocated in order-9 chunks.
 */
#include "pinmem_test.h"

PM_FIXTURE(memory)

TEST_F(memory, pages_are_zeroed)
{
	const size_t len = 4 * MiB;
	int rfd = pm_alloc(self->env.dev, len);
	int vfd = pm_view(rfd, 0, len, 0);
	uint64_t *o = pm_map(rfd, len, PROT_READ, 0);
	uint64_t *v = pm_map(vfd, len, PROT_READ, 0);

	for (size_t i = 0; i < len / 8; i++) {
		ASSERT_EQ(0, o[i]) TH_LOG("owner mapping byte %zu not zero", i * 8);
		ASSERT_EQ(0, v[i]) TH_LOG("view mapping byte %zu not zero", i * 8);
	}
	pm_unmap(v, len);
	pm_unmap(o, len);
	close(vfd);
	close(rfd);
}

/* The owner's writes show through a read-write view, and the view's back. */
TEST_F(memory, owner_and_view_share_pages)
{
	const size_t len = 2 * MiB;
	int rfd = pm_alloc(self->env.dev, len);
	int vfd = pm_view(rfd, 0, len, PINMEM_VIEW_WRITE);
	char *o = pm_map(rfd, len, PROT_READ | PROT_WRITE, 0);
	char *v = pm_map(vfd, len, PROT_READ | PROT_WRITE, 0);

	pm_fill(o, len / 2, 1);
	ASSERT_PATTERN(v, len / 2, 1);
	pm_fill(v + len / 2, len / 2, 2);
	ASSERT_PATTERN(o + len / 2, len / 2, 2);
	pm_unmap(v, len);
	pm_unmap(o, len);
	close(vfd);
	close(rfd);
}

/* Dropping the page tables loses nothing: the pages are the region's. */
TEST_F(memory, data_survives_madv_dontneed)
{
	const size_t len = 2 * MiB;
	int rfd = pm_alloc(self->env.dev, len);
	int vfd = pm_view(rfd, 0, len, PINMEM_VIEW_WRITE);
	char *o = pm_map(rfd, len, PROT_READ | PROT_WRITE, 0);
	char *v = pm_map(vfd, len, PROT_READ | PROT_WRITE, 0);

	pm_fill(v, len, 3);
	ASSERT_OK(madvise(v, len, MADV_DONTNEED));
	ASSERT_OK(madvise(o, len, MADV_DONTNEED));
	ASSERT_PATTERN(v, len, 3);
	ASSERT_PATTERN(o, len, 3);
	/* Writable again after the refault, and still shared. */
	pm_fill(o, len, 4);
	ASSERT_PATTERN(v, len, 4);
	pm_unmap(v, len);
	pm_unmap(o, len);
	close(vfd);
	close(rfd);
}

/* INFO describes the region: size, chunks, owner, state. */
TEST_F(memory, info_describes_region)
{
	uint64_t id;
	int rfd = pm_alloc_id(self->env.dev, 6 * MiB, &id);
	struct pinmem_region_info ri;

	pm_info(rfd, &ri);
	EXPECT_EQ(id, ri.region_id);
	EXPECT_EQ(6 * MiB, ri.size);
	EXPECT_EQ(PINMEM_STATE_OPEN, ri.state);
	EXPECT_EQ(PINMEM_CHUNK_ORDER, ri.chunk_order);
	EXPECT_EQ(PINMEM_CHUNK_ORDER, ri.min_order);
	EXPECT_EQ(3, ri.nr_chunks);
	EXPECT_EQ(0, ri.nr_fallback_chunks);
	EXPECT_EQ(0, ri.owner_mappings);
	EXPECT_EQ(0, ri.view_mappings);
	EXPECT_EQ(0, ri.view_fds);
	EXPECT_EQ(getuid(), ri.owner_uid);
	EXPECT_EQ(getpid(), (pid_t)ri.owner_tgid);
	close(rfd);
}

/* Sizes round up to a page; chunks are whole and counted whole. */
TEST_F(memory, size_rounds_to_page_and_chunk)
{
	struct pinmem_region_info ri;
	struct pinmem_dev_info di;
	int r1 = pm_alloc(self->env.dev, PG + 1);
	int r2 = pm_alloc(self->env.dev, 3 * MiB);

	pm_info(r1, &ri);
	EXPECT_EQ(2 * PG, ri.size);
	EXPECT_EQ(1, ri.nr_chunks);
	pm_info(r2, &ri);
	EXPECT_EQ(3 * MiB, ri.size);
	EXPECT_EQ(2, ri.nr_chunks);
	pm_dev_info(self->env.dev, &di);
	EXPECT_EQ(self->env.base.total_bytes + 6 * MiB, di.total_bytes);
	EXPECT_EQ(self->env.base.nr_regions + 2, di.nr_regions);
	close(r2);
	close(r1);
}

/* The region fd obeys the same mmap rules as a view fd. */
TEST_F(memory, owner_mmap_rules)
{
	int rfd = pm_alloc(self->env.dev, 2 * MiB);

	ASSERT_ERRNO(EINVAL, mmap(NULL, PG, PROT_READ, MAP_PRIVATE, rfd, 0));
	ASSERT_ERRNO(EINVAL, mmap(NULL, 2 * MiB + PG, PROT_READ, MAP_SHARED,
				  rfd, 0));
	ASSERT_ERRNO(EINVAL, mmap(NULL, PG, PROT_READ, MAP_SHARED, rfd,
				  2 * MiB));
	pm_expect_counts(rfd, 0, 0, 0);
	close(rfd);
}

/* FALLBACK only permits smaller chunks; with memory to spare none are used. */
TEST_F(memory, fallback_flag_accepted)
{
	struct pinmem_region_info ri;
	int rfd = pm_alloc_at(_metadata, __LINE__, self->env.dev, 4 * MiB,
			      PINMEM_ALLOC_FALLBACK, NULL);

	pm_info(rfd, &ri);
	EXPECT_EQ(4 * MiB, ri.size);
	EXPECT_EQ(2, ri.nr_chunks);
	EXPECT_EQ(0, ri.nr_fallback_chunks);
	EXPECT_EQ(PINMEM_CHUNK_ORDER, ri.min_order);
	close(rfd);
}

/* A 1 GiB region in the 3 GiB guest: 512 order-9 chunks, no fallback. */
FIXTURE(big) {
	struct pm_env env;
	unsigned long long max_region, max_total;
	int saved;
};

FIXTURE_SETUP(big)
{
	pm_setup(_metadata, &self->env);
	ASSERT_OK(pm_param_get("max_region_bytes", &self->max_region));
	ASSERT_OK(pm_param_get("max_total_bytes", &self->max_total));
	self->saved = 1;
}

FIXTURE_TEARDOWN(big)
{
	if (self->saved) {
		EXPECT_OK(pm_param_set("max_region_bytes", self->max_region));
		EXPECT_OK(pm_param_set("max_total_bytes", self->max_total));
	}
	pm_teardown(_metadata, &self->env);
}

TEST_F_TIMEOUT(big, one_gib_is_512_order9_chunks, 600)
{
	struct pinmem_region_info ri;
	struct pinmem_dev_info di;
	char *o;
	int rfd;

	if (self->max_region < GiB)
		ASSERT_OK(pm_param_set("max_region_bytes", GiB));
	if (self->max_total && self->max_total < self->env.base.total_bytes + GiB)
		ASSERT_OK(pm_param_set("max_total_bytes", 0));
	rfd = pm_alloc(self->env.dev, GiB);
	pm_info(rfd, &ri);
	EXPECT_EQ(GiB, ri.size);
	EXPECT_EQ(512, ri.nr_chunks);
	EXPECT_EQ(0, ri.nr_fallback_chunks);
	EXPECT_EQ(PINMEM_CHUNK_ORDER, ri.chunk_order);
	EXPECT_EQ(PINMEM_CHUNK_ORDER, ri.min_order);
	pm_dev_info(self->env.dev, &di);
	EXPECT_EQ(self->env.base.total_bytes + GiB, di.total_bytes);
	/* First and last byte of each chunk are there and zero. */
	o = pm_map(rfd, GiB, PROT_READ | PROT_WRITE, 0);
	for (size_t c = 0; c < 512; c++) {
		ASSERT_EQ(0, o[c * 2 * MiB]) TH_LOG("chunk %zu", c);
		ASSERT_EQ(0, o[c * 2 * MiB + 2 * MiB - 1]) TH_LOG("chunk %zu", c);
	}
	o[GiB - 1] = 7;
	pm_unmap(o, GiB);
	close(rfd);
}

TEST_HARNESS_MAIN
