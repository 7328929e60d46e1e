// SPDX-License-Identifier: GPL-2.0
/*
 * The read of a chunk's references holds while the owner maps and zaps
 * pages of that very chunk: a view page left in a pipe keeps every REFS
 * answer naming the chunk and every DONATE refused, however the owner's
 * insertions (reference, then mapcount) and zaps (mapcount, then
 * reference) fall around the read. For $PINMEM_REFS_READ_SECONDS
 * (default 15) two owner processes each zap and refault a page of the
 * chunk of their own, the first and the last (6.1 sums the pages'
 * mapcounts in order), one at a time so that the counts go up and down by
 * one, as fast as they can (processes of their own: a zap's TLB flush
 * then waits for no other CPU); one thread loops REFS and the test loops
 * DONATE. The counts go out as TAP diagnostics.
 */
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>

#include "refs_test.h"

/* Shared with the owner processes. */
struct churn {
	int stop;
	unsigned long rounds[2];
};

struct reader {
	int rfd;
	unsigned long calls, missed, errors;
};

static int stop;

/* An owner process: zap its page of the region, then fault it back in. */
static int churn(int rfd, off_t off, struct churn *c, int i)
{
	char *p = mmap(NULL, PG, PROT_READ | PROT_WRITE, MAP_SHARED, rfd, off);

	if (p == MAP_FAILED)
		return 2;
	while (!__atomic_load_n(&c->stop, __ATOMIC_ACQUIRE)) {
		madvise(p, PG, MADV_DONTNEED);
		*(volatile char *)p;
		c->rounds[i]++;
	}
	return 0;
}

/* REFS, over and over: the chunk must always be named. */
static void *refs_loop(void *arg)
{
	struct reader *r = arg;
	struct pinmem_ref_range rr[2];
	struct pinmem_refs q = { .ranges_ptr = (uintptr_t)rr, .capacity = 2 };

	while (!__atomic_load_n(&stop, __ATOMIC_ACQUIRE)) {
		if (ioctl(r->rfd, PINMEM_IOC_REFS, &q))
			r->errors++;
		else if (q.count != 1 || !rr[0].refs)
			r->missed++;
		r->calls++;
	}
	return NULL;
}

PM_FIXTURE(refs_read)

TEST_F_TIMEOUT(refs_read, owner_map_and_zap_never_hide_a_view_ref, 300)
{
	int rfd = pm_alloc(self->env.dev, 2 * MiB);
	char *o = pm_map(rfd, 2 * MiB, PROT_READ | PROT_WRITE, 0);
	struct reader r = { .rfd = rfd };
	const char *e = getenv("PINMEM_REFS_READ_SECONDS");
	double secs = e ? atof(e) : 15, end;
	unsigned long donates = 0;
	int vfd = pm_view(rfd, 0, 2 * MiB, 0);
	char *v = pm_map(vfd, 2 * MiB, PROT_READ, 0);
	static char buf[PG];
	struct churn *c;
	pid_t owner[2];
	pthread_t t;
	int p[2], ret = EBUSY;

	c = mmap(NULL, sizeof(*c), PROT_READ | PROT_WRITE,
		 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, c);
	memset(c, 0, sizeof(*c));
	pm_fill(o + 100 * PG, PG, 7);
	pm_splice(p, v + 100 * PG, 1);
	pm_unmap(v, 2 * MiB);
	close(vfd);
	ASSERT_REFS(rfd, 0, 2 * MiB, 1, 0);

	for (int i = 0; i < 2; i++) {
		owner[i] = fork();
		ASSERT_LE(0, owner[i]);
		if (owner[i] == 0)
			_exit(churn(rfd, i ? 2 * MiB - PG : 0, c, i));
	}
	__atomic_store_n(&stop, 0, __ATOMIC_RELEASE);
	ASSERT_EQ(0, pthread_create(&t, NULL, refs_loop, &r));
	for (end = pm_now() + secs; pm_now() < end && ret == EBUSY;
	     donates++)
		ret = pm_donate(rfd);
	__atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
	__atomic_store_n(&c->stop, 1, __ATOMIC_RELEASE);
	ASSERT_EQ(0, pthread_join(t, NULL));
	for (int i = 0; i < 2; i++)
		ASSERT_EQ(0, pm_wait(owner[i]));
	TH_LOG("%.0f s: %lu + %lu owner zap-and-refault rounds of a page, %lu REFS (%lu missed the reference), %lu DONATE",
	       secs, c->rounds[0], c->rounds[1], r.calls, r.missed, donates);
	EXPECT_EQ(EBUSY, ret) TH_LOG("DONATE %lu with a view page in a pipe",
				     donates);
	EXPECT_EQ(0, r.errors);
	EXPECT_EQ(0, r.missed) TH_LOG("REFS said the chunk was clean");

	/* The pipe gives the bytes from before; then DONATE goes through. */
	ASSERT_EQ(PG, pm_drain(p, buf, sizeof(buf)));
	ASSERT_PATTERN(buf, PG, 7);
	if (ret == EBUSY)
		ASSERT_TRANSITION(0, pm_donate_wait(rfd, 20000));
	pm_unmap(o, 2 * MiB);
	munmap(c, sizeof(*c));
	close(rfd);
}

TEST_HARNESS_MAIN
