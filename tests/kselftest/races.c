// SPDX-License-Identifier: GPL-2.0
/*
 * DONATE against concurrent view mmap/munmap: a donate that succeeds never
 * coexists with a view mapping.
 *
 * Mapper threads map and unmap a view in a loop; while one holds a mapping
 * (the shared counter "holding" is raised after mmap returns and lowered
 * before munmap) the region must not be DONATED. The donor loops
 * DONATE / PUBLISH or REOPEN; after each successful DONATE "holding" must
 * be 0 and INFO must show no view mapping, until it hands the region back.
 */
#include <pthread.h>
#include <stdatomic.h>

#include "pinmem_test.h"

#define RUN_SECONDS	2.5
#define MAPPERS		2

struct race {
	int rfd, vro, vrw;
	double deadline;
	atomic_int holding;
	atomic_long maps, refused, donations, busy;
	atomic_long violations, bad_errno;
	atomic_int last_bad_errno;
};

static void bad(struct race *r, int e)
{
	atomic_fetch_add(&r->bad_errno, 1);
	atomic_store(&r->last_bad_errno, e);
}

static void *mapper(void *arg)
{
	struct race *r = arg;
	unsigned int n = 0;

	while (pm_now() < r->deadline) {
		int fd = (n++ & 1) ? r->vro : r->vrw;
		struct pinmem_region_info ri;
		volatile char *p;

		p = mmap(NULL, PG, PROT_READ, MAP_SHARED, fd, 0);
		if (p == MAP_FAILED) {
			if (errno == EBUSY)
				atomic_fetch_add(&r->refused, 1);
			else
				bad(r, errno);
			continue;
		}
		atomic_fetch_add(&r->holding, 1);
		atomic_fetch_add(&r->maps, 1);
		if (ioctl(r->vro, PINMEM_IOC_INFO, &ri))
			bad(r, errno);
		else if (ri.state == PINMEM_STATE_DONATED)
			atomic_fetch_add(&r->violations, 1);
		(void)p[0];
		atomic_fetch_sub(&r->holding, 1);
		if (munmap((void *)p, PG))
			bad(r, errno);
	}
	return NULL;
}

static void donor(struct race *r)
{
	unsigned int n = 0;

	while (pm_now() < r->deadline) {
		struct pinmem_region_info ri;
		int e;

		n++;
		e = (n & 1) ? pm_donate(r->rfd) : pm_donate_wait(r->rfd, 100);
		if (e == EBUSY || e == ETIMEDOUT) {
			atomic_fetch_add(&r->busy, 1);
			continue;
		}
		if (e) {
			bad(r, e);
			continue;
		}
		atomic_fetch_add(&r->donations, 1);
		if (atomic_load(&r->holding) != 0)
			atomic_fetch_add(&r->violations, 1);
		if (ioctl(r->rfd, PINMEM_IOC_INFO, &ri))
			bad(r, errno);
		else if (ri.view_mappings != 0 || ri.state != PINMEM_STATE_DONATED)
			atomic_fetch_add(&r->violations, 1);
		/* Give the mappers a chance at the region. */
		e = (n & 2) ? pm_publish(r->rfd) : pm_reopen(r->rfd);
		if (e)
			bad(r, e);
		usleep(1000);
	}
}

PM_FIXTURE(races)

TEST_F_TIMEOUT(races, donate_never_coexists_with_a_view, 120)
{
	struct race r = { 0 };
	pthread_t t[MAPPERS];

	r.rfd = pm_alloc(self->env.dev, 2 * MiB);
	r.vro = pm_view(r.rfd, 0, PG, 0);
	r.vrw = pm_view(r.rfd, 0, PG, PINMEM_VIEW_WRITE);
	r.deadline = pm_now() + RUN_SECONDS;
	for (int i = 0; i < MAPPERS; i++)
		ASSERT_EQ(0, pthread_create(&t[i], NULL, mapper, &r));
	donor(&r);
	for (int i = 0; i < MAPPERS; i++)
		ASSERT_EQ(0, pthread_join(t[i], NULL));

	TH_LOG("%ld maps, %ld refused, %ld donations, %ld busy",
	       atomic_load(&r.maps), atomic_load(&r.refused),
	       atomic_load(&r.donations), atomic_load(&r.busy));
	EXPECT_EQ(0, atomic_load(&r.violations))
		TH_LOG("a view mapping coexisted with DONATED");
	EXPECT_EQ(0, atomic_load(&r.bad_errno))
		TH_LOG("unexpected errno, last %s",
		       pm_errname(atomic_load(&r.last_bad_errno)));
	EXPECT_GT(atomic_load(&r.donations), 0);
	EXPECT_GT(atomic_load(&r.maps), 0);
	pm_expect_counts(r.rfd, 0, 0, 0);
	close(r.vrw);
	close(r.vro);
	close(r.rfd);
}

TEST_HARNESS_MAIN
