// SPDX-License-Identifier: GPL-2.0
/*
 * DONATE with PINMEM_DONATE_WAIT and a timeout never gives up early: like
 * poll(), futex() and epoll_wait(), ETIMEDOUT comes no sooner than
 * timeout_ms after the call began, measured on CLOCK_MONOTONIC around the
 * ioctl, whatever the tick (HZ=250 means 4 ms ticks, and a deadline
 * counted in jiffies from the middle of one ends up to a tick early). Both
 * ways a wait can be held up are measured: a view mapped the whole time
 * (the wait queue) and a pipe holding a view's pages (the polling of
 * references).
 *
 * The lower bound is asserted exactly, for every wait. The upper bound is
 * generous, 2 * timeout + 500 ms: under TCG on a busy host a guest can be
 * descheduled for tens of ms, and the bound is there to catch a wait that
 * ignores its timeout or misreads its unit, not to measure latency. Each
 * test logs the lateness it saw (least, greatest).
 *
 * Calls come at any point of a tick, and a wait that counts in ticks is
 * early only when it starts late in one: right after a wait ends (on a
 * tick) the next would start early in a tick every time. So each wait
 * starts after a busy spin of a length that steps through 0 to 4.1 ms,
 * moving its start through the tick.
 *
 * PINMEM_TIMEOUT_REPEAT=N multiplies the number of waits (default 1:
 * 1000 waits with a view mapped, about 17 s without TCG's overhead).
 */
#include <time.h>

#include "refs_test.h"

PM_FIXTURE(timeouts)

#define NSEC_PER_MS 1000000LL
#define SLACK_NS (500 * NSEC_PER_MS)

static long long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Spin (no sleep: the tick stays regular) for ns nanoseconds. */
static void spin(long long ns)
{
	long long end = now_ns() + ns;

	while (now_ns() < end)
		;
}

static int repeat(void)
{
	const char *e = getenv("PINMEM_TIMEOUT_REPEAT");
	int n = e ? atoi(e) : 1;

	return n > 0 ? n : 1;
}

/*
 * n waits of timeout_ms on rfd, each expected to end in ETIMEDOUT with the
 * region still OPEN and no DONATE pending. Counts and logs the early ones
 * (the assertion comes after all of them, so that a failure says how many)
 * and asserts the upper bound.
 */
static void waits(struct __test_metadata *_metadata, int rfd,
		  unsigned int timeout_ms, int n, const char *how)
{
	const long long want = timeout_ms * NSEC_PER_MS;
	long long t0, dt, late_min = -1, late_max = 0, earliest = want;
	struct pinmem_region_info ri;
	int early = 0;

	for (int i = 0; i < n; i++) {
		spin(i * 397000LL % 4100000);
		t0 = now_ns();
		ASSERT_TRANSITION(ETIMEDOUT, pm_donate_wait(rfd, timeout_ms));
		dt = now_ns() - t0;
		ASSERT_LE(dt, 2 * want + SLACK_NS)
			TH_LOG("%s, %u ms: wait %d took %.3f ms", how,
			       timeout_ms, i, dt / 1e6);
		pm_info(rfd, &ri);
		ASSERT_EQ(PINMEM_STATE_OPEN, ri.state);
		ASSERT_EQ(0, ri.flags & PINMEM_INFO_DONATE_PENDING);
		if (dt < want) {
			early++;
			if (dt < earliest)
				earliest = dt;
			continue;
		}
		if (late_min < 0 || dt - want < late_min)
			late_min = dt - want;
		if (dt - want > late_max)
			late_max = dt - want;
	}
	TH_LOG("%s, %u ms: %d waits, %d early; the others late by %.3f to %.3f ms",
	       how, timeout_ms, n, early, late_min / 1e6, late_max / 1e6);
	ASSERT_EQ(0, early)
		TH_LOG("%s, %u ms: %d of %d waits returned ETIMEDOUT early, "
		       "one after %.3f ms", how, timeout_ms, early, n,
		       earliest / 1e6);
}

/* A region with one view page mapped, which the waits wait for. */
#define VIEW_TEST(ms, count, limit_s)					\
TEST_F_TIMEOUT(timeouts, view_mapped_##ms##_ms, limit_s)		\
{									\
	int rfd = pm_alloc(self->env.dev, 2 * MiB);			\
	int vfd = pm_view(rfd, 0, 2 * MiB, 0);				\
	void *v = pm_map(vfd, PG, PROT_READ, 0);			\
									\
	waits(_metadata, rfd, ms, (count) * repeat(), "view mapped");	\
	/* Still usable: the view goes, and DONATE succeeds at once. */	\
	pm_unmap(v, PG);						\
	ASSERT_TRANSITION(0, pm_donate_wait(rfd, ms));			\
	ASSERT_EQ(PINMEM_STATE_DONATED, pm_state(rfd));			\
	close(vfd);							\
	close(rfd);							\
}

/* 425 + 300 + 210 + 60 + 5 = 1000 waits, 14.7 s of timeouts. */
VIEW_TEST(1, 425, 120)
VIEW_TEST(4, 300, 120)
VIEW_TEST(10, 210, 120)
VIEW_TEST(100, 60, 180)
VIEW_TEST(1000, 5, 120)

/* No view mapped, but a pipe holds a page it mapped: references polled. */
#define REFS_TEST(ms, count, limit_s)					\
TEST_F_TIMEOUT(timeouts, refs_held_##ms##_ms, limit_s)			\
{									\
	int rfd = pm_alloc(self->env.dev, 2 * MiB);			\
	int vfd = pm_view(rfd, 0, 2 * MiB, 0);				\
	char *v = pm_map(vfd, 2 * MiB, PROT_READ, 0);			\
	static char buf[PG];						\
	int p[2];							\
									\
	pm_splice(p, v, 1);						\
	pm_unmap(v, 2 * MiB);						\
	waits(_metadata, rfd, ms, (count) * repeat(), "refs held");	\
	ASSERT_EQ(PG, pm_drain(p, buf, sizeof(buf)));			\
	ASSERT_TRANSITION(0, pm_donate_wait(rfd, ms));			\
	ASSERT_EQ(PINMEM_STATE_DONATED, pm_state(rfd));			\
	close(vfd);							\
	close(rfd);							\
}

/* 100 + 100 + 50 + 10 + 2 = 262 waits, 4.9 s of timeouts. */
REFS_TEST(1, 100, 60)
REFS_TEST(4, 100, 60)
REFS_TEST(10, 50, 60)
REFS_TEST(100, 10, 60)
REFS_TEST(1000, 2, 60)

TEST_HARNESS_MAIN
