// SPDX-License-Identifier: GPL-2.0
/*
 * DONATE: succeeds only with no view mapping; who holds the views is one
 * HOLDERS call away; while DONATED or while a DONATE waits, new view
 * mappings are refused; PUBLISH and REOPEN bring the region back.
 */
#include <pthread.h>
#include <sys/time.h>

#include "pinmem_test.h"

PM_FIXTURE(donate)

TEST_F(donate, busy_names_the_holder)
{
	int rfd = pm_alloc(self->env.dev, 2 * MiB);
	int vfd = pm_view(rfd, MiB, MiB, 0);
	char *p = pm_map(vfd, 2 * PG, PROT_READ, PG);
	struct pinmem_holder h[4];
	char comm[16] = { 0 };
	FILE *f;

	ASSERT_TRANSITION(EBUSY, pm_donate(rfd));
	ASSERT_EQ(PINMEM_STATE_OPEN, pm_state(rfd));
	ASSERT_EQ(1, pm_holders(rfd, h, 4));
	EXPECT_EQ(getpid(), (pid_t)h[0].tgid);
	EXPECT_EQ((uintptr_t)p, h[0].start);
	EXPECT_EQ(2 * PG, h[0].length);
	EXPECT_EQ(MiB + PG, h[0].offset) TH_LOG("offset is into the region");
	EXPECT_EQ(PROT_READ, h[0].prot);
	EXPECT_EQ(PINMEM_HOLDER_VIEW, h[0].kind);
	EXPECT_EQ(0, h[0].flags);
	f = fopen("/proc/self/comm", "re");
	ASSERT_NE(NULL, f);
	ASSERT_NE(NULL, fgets(comm, sizeof(comm), f));
	fclose(f);
	comm[strcspn(comm, "\n")] = 0;
	EXPECT_STREQ(comm, h[0].comm);
	/* The same answer through the view fd. */
	ASSERT_EQ(1, pm_holders(vfd, h, 4));
	EXPECT_EQ((uintptr_t)p, h[0].start);
	pm_unmap(p, 2 * PG);
	close(vfd);
	close(rfd);
}

/* count says how many exist even when capacity is smaller. */
TEST_F(donate, holders_count_beyond_capacity)
{
	int rfd = pm_alloc(self->env.dev, 2 * MiB);
	int vfd = pm_view(rfd, 0, 2 * MiB, 0);
	void *p[3];
	struct pinmem_holder h[1];

	for (int i = 0; i < 3; i++)
		p[i] = pm_map(vfd, PG, PROT_READ, i * PG);
	ASSERT_EQ(3, pm_holders(rfd, h, 1));
	ASSERT_NE(NULL, pm_find_holder(h, 1, p[0]) ?: pm_find_holder(h, 1, p[1])
			?: pm_find_holder(h, 1, p[2]));
	ASSERT_EQ(3, pm_holders(rfd, NULL, 0));
	for (int i = 0; i < 3; i++)
		pm_unmap(p[i], PG);
	close(vfd);
	close(rfd);
}

TEST_F(donate, succeeds_after_munmap)
{
	int rfd = pm_alloc(self->env.dev, 2 * MiB);
	int vfd = pm_view(rfd, 0, 2 * MiB, PINMEM_VIEW_WRITE);
	void *p = pm_map(vfd, PG, PROT_READ | PROT_WRITE, 0);

	ASSERT_TRANSITION(EBUSY, pm_donate(rfd));
	pm_unmap(p, PG);
	ASSERT_TRANSITION(0, pm_donate(rfd));
	ASSERT_EQ(PINMEM_STATE_DONATED, pm_state(rfd));
	ASSERT_TRANSITION(0, pm_donate(rfd));
	close(vfd);
	close(rfd);
}

/* The owner mapping does not hold the region back. */
TEST_F(donate, owner_mapping_allows_donate)
{
	int rfd = pm_alloc(self->env.dev, 2 * MiB);
	char *o = pm_map(rfd, 2 * MiB, PROT_READ | PROT_WRITE, 0);

	ASSERT_TRANSITION(0, pm_donate(rfd));
	o[0] = 1;
	pm_expect_counts(rfd, 1, 0, 0);
	pm_unmap(o, 2 * MiB);
	close(rfd);
}

TEST_F(donate, donated_refuses_view_mmap)
{
	int rfd = pm_alloc(self->env.dev, 2 * MiB);
	int vro = pm_view(rfd, 0, 2 * MiB, 0);
	int vrw = pm_view(rfd, 0, 2 * MiB, PINMEM_VIEW_WRITE);
	void *o;

	ASSERT_TRANSITION(0, pm_donate(rfd));
	ASSERT_ERRNO(EBUSY, mmap(NULL, PG, PROT_READ, MAP_SHARED, vro, 0));
	ASSERT_ERRNO(EBUSY, mmap(NULL, PG, PROT_READ | PROT_WRITE, MAP_SHARED,
				 vrw, 0));
	ASSERT_ERRNO(EBUSY, mmap(NULL, PG, PROT_READ, MAP_SHARED, vrw, 0));
	pm_expect_counts(rfd, 0, 0, 0);
	/* The owner can still map it. */
	o = pm_map(rfd, PG, PROT_READ | PROT_WRITE, 0);
	pm_unmap(o, PG);
	close(vrw);
	close(vro);
	close(rfd);
}

/* PUBLISH: DONATED -> SEALED; the owner's new contents show in views. */
TEST_F(donate, publish_makes_sealed)
{
	int rfd = pm_alloc(self->env.dev, 2 * MiB);
	int vfd = pm_view(rfd, 0, 2 * MiB, PINMEM_VIEW_WRITE);
	char *o = pm_map(rfd, 2 * MiB, PROT_READ | PROT_WRITE, 0);
	char *v;

	ASSERT_TRANSITION(0, pm_donate(rfd));
	pm_fill(o, 2 * MiB, 31);
	ASSERT_TRANSITION(0, pm_publish(rfd));
	ASSERT_EQ(PINMEM_STATE_SEALED, pm_state(rfd));
	v = pm_map(vfd, 2 * MiB, PROT_READ, 0);
	ASSERT_PATTERN(v, 2 * MiB, 31);
	ASSERT_ERRNO(EPERM, mmap(NULL, PG, PROT_READ | PROT_WRITE, MAP_SHARED,
				 vfd, 0));
	ASSERT_TRANSITION(EPERM, pm_publish(rfd));
	pm_unmap(v, 2 * MiB);
	pm_unmap(o, 2 * MiB);
	close(vfd);
	close(rfd);
}

/* REOPEN: DONATED -> OPEN; writable views again. */
TEST_F(donate, reopen_makes_open)
{
	int rfd = pm_alloc(self->env.dev, 2 * MiB);
	char *v;
	int vfd;

	ASSERT_TRANSITION(0, pm_seal(rfd));
	ASSERT_TRANSITION(0, pm_donate(rfd));
	ASSERT_TRANSITION(0, pm_reopen(rfd));
	ASSERT_EQ(PINMEM_STATE_OPEN, pm_state(rfd));
	vfd = pm_view(rfd, 0, PG, PINMEM_VIEW_WRITE);
	v = pm_map(vfd, PG, PROT_READ | PROT_WRITE, 0);
	v[0] = 5;
	ASSERT_TRANSITION(EPERM, pm_reopen(rfd));
	pm_unmap(v, PG);
	close(vfd);
	close(rfd);
}

struct unmapper {
	void *addr;
	size_t len;
	unsigned int delay_ms;
	int ret;
};

static void *unmap_later(void *arg)
{
	struct unmapper *u = arg;

	usleep(u->delay_ms * 1000);
	u->ret = munmap(u->addr, u->len) ? errno : 0;
	return NULL;
}

TEST_F(donate, wait_succeeds_when_views_drain)
{
	int rfd = pm_alloc(self->env.dev, 2 * MiB);
	int vfd = pm_view(rfd, 0, 2 * MiB, 0);
	struct unmapper u = { .len = PG, .delay_ms = 300, .ret = -1 };
	pthread_t t;

	u.addr = pm_map(vfd, PG, PROT_READ, 0);
	ASSERT_EQ(0, pthread_create(&t, NULL, unmap_later, &u));
	ASSERT_TRANSITION(0, pm_donate_wait(rfd, 30000));
	ASSERT_EQ(0, pthread_join(t, NULL));
	ASSERT_EQ(0, u.ret);
	ASSERT_EQ(PINMEM_STATE_DONATED, pm_state(rfd));
	close(vfd);
	close(rfd);
}

TEST_F(donate, wait_times_out)
{
	int rfd = pm_alloc(self->env.dev, 2 * MiB);
	int vfd = pm_view(rfd, 0, 2 * MiB, 0);
	void *p = pm_map(vfd, PG, PROT_READ, 0);
	struct pinmem_region_info ri;
	double t0 = pm_now();

	ASSERT_TRANSITION(ETIMEDOUT, pm_donate_wait(rfd, 300));
	EXPECT_GE(pm_now() - t0, 0.29) TH_LOG("returned before the timeout");
	pm_info(rfd, &ri);
	EXPECT_EQ(PINMEM_STATE_OPEN, ri.state);
	EXPECT_EQ(0, ri.flags & PINMEM_INFO_DONATE_PENDING);
	/* No longer waiting: view mappings are allowed again. */
	pm_unmap(pm_map(vfd, PG, PROT_READ, 0), PG);
	pm_unmap(p, PG);
	close(vfd);
	close(rfd);
}

static void on_alarm(int sig)
{
	(void)sig;
}

TEST_F(donate, wait_interrupted_by_signal)
{
	int rfd = pm_alloc(self->env.dev, 2 * MiB);
	int vfd = pm_view(rfd, 0, 2 * MiB, 0);
	void *p = pm_map(vfd, PG, PROT_READ, 0);
	struct sigaction sa = { .sa_handler = on_alarm };	/* no SA_RESTART */
	struct itimerval it = { .it_value = { .tv_usec = 200000 } };
	struct pinmem_region_info ri;

	ASSERT_OK(sigaction(SIGALRM, &sa, NULL));
	ASSERT_OK(setitimer(ITIMER_REAL, &it, NULL));
	ASSERT_TRANSITION(EINTR, pm_donate_wait(rfd, 20000));
	pm_info(rfd, &ri);
	EXPECT_EQ(PINMEM_STATE_OPEN, ri.state);
	EXPECT_EQ(0, ri.flags & PINMEM_INFO_DONATE_PENDING);
	pm_unmap(p, PG);
	close(vfd);
	close(rfd);
}

struct waiter {
	int rfd;
	int ret;
};

static void *donate_waiting(void *arg)
{
	struct waiter *w = arg;

	w->ret = pm_donate_wait(w->rfd, 30000);
	return NULL;
}

/* Poll INFO until a DONATE on another thread shows as pending. */
static bool donate_shows_pending(int rfd, double seconds)
{
	struct pinmem_region_info ri;
	double t0 = pm_now();

	do {
		if (ioctl(rfd, PINMEM_IOC_INFO, &ri) == 0 &&
		    (ri.flags & PINMEM_INFO_DONATE_PENDING))
			return true;
		usleep(10000);
	} while (pm_now() - t0 < seconds);
	return false;
}

/* While a DONATE waits, new view mappings are refused: no starvation. */
TEST_F(donate, pending_donate_refuses_new_views)
{
	int rfd = pm_alloc(self->env.dev, 2 * MiB);
	int vfd = pm_view(rfd, 0, 2 * MiB, 0);
	void *p = pm_map(vfd, PG, PROT_READ, 0);
	struct waiter w = { .rfd = rfd, .ret = -1 };
	struct pinmem_region_info ri;
	pthread_t t;

	ASSERT_EQ(0, pthread_create(&t, NULL, donate_waiting, &w));
	ASSERT_TRUE(donate_shows_pending(rfd, 20))
		TH_LOG("the DONATE never showed as pending");
	ASSERT_ERRNO(EBUSY, mmap(NULL, PG, PROT_READ, MAP_SHARED, vfd, 0));
	pm_unmap(p, PG);
	ASSERT_EQ(0, pthread_join(t, NULL));
	ASSERT_TRANSITION(0, w.ret);
	pm_info(rfd, &ri);
	EXPECT_EQ(PINMEM_STATE_DONATED, ri.state);
	EXPECT_EQ(0, ri.flags & PINMEM_INFO_DONATE_PENDING);
	close(vfd);
	close(rfd);
}

/* Two waiters: when the first gives up, the second still holds views off. */
TEST_F(donate, pending_lasts_while_any_donate_waits)
{
	int rfd = pm_alloc(self->env.dev, 2 * MiB);
	int vfd = pm_view(rfd, 0, 2 * MiB, 0);
	void *p = pm_map(vfd, PG, PROT_READ, 0);
	struct pinmem_region_info ri;
	struct waiter w = { .rfd = rfd, .ret = -1 };
	pthread_t t;

	ASSERT_EQ(0, pthread_create(&t, NULL, donate_waiting, &w));
	ASSERT_TRUE(donate_shows_pending(rfd, 20))
		TH_LOG("the DONATE never showed as pending");
	/* A second, short waiter times out... */
	ASSERT_TRANSITION(ETIMEDOUT, pm_donate_wait(rfd, 200));
	/* ...and the first one still waits: views are still refused. */
	pm_info(rfd, &ri);
	EXPECT_EQ(PINMEM_INFO_DONATE_PENDING,
		  ri.flags & PINMEM_INFO_DONATE_PENDING);
	ASSERT_ERRNO(EBUSY, mmap(NULL, PG, PROT_READ, MAP_SHARED, vfd, 0));
	pm_unmap(p, PG);
	ASSERT_EQ(0, pthread_join(t, NULL));
	ASSERT_TRANSITION(0, w.ret);
	close(vfd);
	close(rfd);
}

/*
 * A fork while a DONATE waits copies the view mapping into the child
 * (no mmap is involved); the DONATE must wait for the child's copy too.
 */
TEST_F(donate, fork_while_pending_is_waited_for)
{
	int rfd = pm_alloc(self->env.dev, 2 * MiB);
	int vfd = pm_view(rfd, 0, 2 * MiB, 0);
	void *p = pm_map(vfd, PG, PROT_READ, 0);
	struct waiter w = { .rfd = rfd, .ret = -1 };
	struct pinmem_region_info ri;
	int go[2], ready[2];
	pthread_t t;
	pid_t pid;
	char b;

	ASSERT_OK(pipe2(go, O_CLOEXEC));
	ASSERT_OK(pipe2(ready, O_CLOEXEC));
	ASSERT_EQ(0, pthread_create(&t, NULL, donate_waiting, &w));
	ASSERT_TRUE(donate_shows_pending(rfd, 20))
		TH_LOG("the DONATE never showed as pending");
	pid = fork();
	ASSERT_GE(pid, 0);
	if (pid == 0) {
		/* Holds the inherited mapping until told to go. */
		close(go[1]);
		if (write(ready[1], "r", 1) != 1 || read(go[0], &b, 1) < 0)
			_exit(1);
		_exit(0);
	}
	close(go[0]);
	close(ready[1]);
	ASSERT_EQ(1, read(ready[0], &b, 1));
	pm_expect_counts(rfd, 0, 2, 0);
	pm_unmap(p, PG);
	/* The child's copy still counts: the DONATE keeps waiting. */
	usleep(300000);
	pm_info(rfd, &ri);
	EXPECT_EQ(PINMEM_STATE_OPEN, ri.state) TH_LOG("donated under a child's view");
	EXPECT_EQ(1, ri.view_mappings);
	ASSERT_EQ(1, write(go[1], "g", 1));
	close(go[1]);
	close(ready[0]);
	ASSERT_EQ(0, pm_wait(pid));
	ASSERT_EQ(0, pthread_join(t, NULL));
	ASSERT_TRANSITION(0, w.ret);
	ASSERT_EQ(PINMEM_STATE_DONATED, pm_state(rfd));
	close(vfd);
	close(rfd);
}

TEST_HARNESS_MAIN
