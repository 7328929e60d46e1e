// SPDX-License-Identifier: GPL-2.0
/*
 * HOLDERS and LIST under load cost their caller, not the host: with two
 * processes holding 30,000 one-page view mappings each, made in turns so
 * that consecutive records are of different processes, and 5,000 idle
 * threads on the host, a third process looping HOLDERS and LIST must not
 * hold up another user's ALLOC (the global regions lock) nor the owner's
 * munmap (the region's lock). The figures (max, median, how many over)
 * go out as TAP diagnostics.
 *
 * "Held up" is judged against the same calls timed just before, without
 * the load, in the same guest, and against the HOLDERS calls' length:
 * the emulator's speed, the host's other work (make check runs two guests
 * at once) and the debug kernel's checks (a 2 MiB munmap takes ~50 ms
 * under KASAN) stretch all of them alike. A call under the load may take
 * LIMIT_MS, SLOWDOWN times its unloaded median (LIST takes the regions
 * lock ALLOC needs tens of thousands of times a second, and the loader
 * shares the guest's CPUs: ALLOC's median grows 4-fold), or half the
 * longest HOLDERS call, whichever is most; two of the 30 may pass that,
 * none OUTLIER_MS (or 20 medians). The stall this is about lasts the
 * whole HOLDERS call (tens of seconds once): back-to-back calls holding
 * the lock make about half the samples wait more than half a call.
 */
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/utsname.h>

#include "pinmem_test.h"

#define NR_MAPS		30000	/* one-page view mappings per holder */
#define NR_IDLE		5000	/* idle threads on the host */
#define DEBUG_SCALE	5	/* both divided by it on the debug kernel */
#define NR_SAMPLES	30
#define LIMIT_MS	50.0	/* the least "held up" means */
#define SLOWDOWN	8.0	/* times the unloaded median */
#define NR_OVER		2	/* samples that may pass the limit */
#define OUTLIER_MS	1000.0	/* that none may pass */
#define MEASURE_S	60.0	/* give up on samples after this long */

/*
 * The load: NR_MAPS and NR_IDLE on a stock kernel, where the timing is
 * the point; a fifth of each on the debug kernel (KASAN, lockdep), where
 * the point is running the same paths under its checks, and making the
 * full load alone takes over 3 minutes of make check.
 */
static int nr_maps = NR_MAPS, nr_idle = NR_IDLE;

static void scale_to_kernel(void)
{
	struct utsname u;

	if (!uname(&u) && strstr(u.release, "pinmem-debug")) {
		nr_maps = NR_MAPS / DEBUG_SCALE;
		nr_idle = NR_IDLE / DEBUG_SCALE;
	}
}

#define LOAD_CAP	(2 * nr_maps + 16)

/* One kind of call's samples: unloaded first, then under the load. */
struct samples {
	double base[NR_SAMPLES], loaded[NR_SAMPLES];
	int nr_base, nr_loaded;
};

/* Shared with the children: what the loader and the other user saw. */
struct load_stats {
	int loading;			/* the loader has made its first call */
	int stop;
	unsigned long holders_calls, list_calls;
	double holders_max_ms;
	int alloc_err;
	struct samples alloc;
};

static void *idle_thread(void *arg)
{
	for (;;)
		pause();
	return arg;
}

/* A process of n idle threads; says how many it made through fd. */
static void idle_threads(int n, int fd)
{
	pthread_attr_t a;
	pthread_t t;
	int made = 0;

	pthread_attr_init(&a);
	pthread_attr_setstacksize(&a, 64 * 1024);
	while (made < n && !pthread_create(&t, &a, idle_thread, NULL))
		made++;
	if (write(fd, &made, sizeof(made)) != sizeof(made))
		_exit(2);
	for (;;)
		pause();
}

/* Holder i maps one page when the other one has: records alternate. */
static int holder(int vfd, int in, int out, int ready, int done)
{
	char c = 0;
	void *p;

	for (int k = 0; k < nr_maps; k++) {
		if (read(in, &c, 1) != 1)
			return 2;
		p = mmap(NULL, PG, PROT_READ, MAP_SHARED, vfd,
			 (off_t)(k % 512) * PG);
		if (p == MAP_FAILED)
			return 3;
		if (write(out, &c, 1) != 1)
			return 4;
	}
	if (write(ready, &c, 1) != 1 || read(done, &c, 1) != 1)
		return 5;
	return 0;
}

struct loader {
	int vfd, dev;
	struct load_stats *st;
};

static void *loop_holders(void *arg)
{
	struct loader *l = arg;
	struct pinmem_holder *h = calloc(LOAD_CAP, sizeof(*h));
	struct pinmem_holders q = { .capacity = LOAD_CAP,
				    .holders_ptr = (uintptr_t)h };
	double t, ms;

	while (h && !__atomic_load_n(&l->st->stop, __ATOMIC_ACQUIRE)) {
		__atomic_store_n(&l->st->loading, 1, __ATOMIC_RELEASE);
		t = pm_now();
		if (ioctl(l->vfd, PINMEM_IOC_HOLDERS, &q))
			break;
		ms = (pm_now() - t) * 1e3;
		if (ms > l->st->holders_max_ms)
			l->st->holders_max_ms = ms;
		l->st->holders_calls++;
	}
	return NULL;
}

static void *loop_list(void *arg)
{
	struct loader *l = arg;
	struct pinmem_region_info info[64];
	struct pinmem_list q = { .capacity = 64,
				 .regions_ptr = (uintptr_t)info };

	while (!__atomic_load_n(&l->st->stop, __ATOMIC_ACQUIRE)) {
		if (ioctl(l->dev, PINMEM_IOC_LIST, &q))
			break;
		l->st->list_calls++;
	}
	return NULL;
}

/* The third process: HOLDERS and LIST in a loop, from a thread each. */
static int loader(int vfd, int dev, struct load_stats *st)
{
	struct loader l = { .vfd = vfd, .dev = dev, .st = st };
	pthread_t t[2];

	if (pthread_create(&t[0], NULL, loop_holders, &l) ||
	    pthread_create(&t[1], NULL, loop_list, &l))
		return 2;
	pthread_join(t[0], NULL);
	pthread_join(t[1], NULL);
	return 0;
}

/*
 * Another user (65534): ALLOC of 2 MiB, timed, up to NR_SAMPLES times,
 * into ms[] (*nr of them); the first error's errno in *err.
 */
static int other_user_allocs(int dev, double *ms, int *nr, int *err,
			     double until)
{
	struct pinmem_alloc a = { .size = 2 * MiB };
	double t;

	if (setresgid(65534, 65534, 65534) || setresuid(65534, 65534, 65534))
		return 2;
	while (*nr < NR_SAMPLES && pm_now() < until) {
		t = pm_now();
		if (ioctl(dev, PINMEM_IOC_ALLOC, &a)) {
			*err = errno;
			return 3;
		}
		ms[(*nr)++] = (pm_now() - t) * 1e3;
		close(a.fd);
		usleep(10000);
	}
	return 0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* How many of n samples are over limit. */
static int nr_over(const double *v, int n, double limit)
{
	int over = 0;

	for (int i = 0; i < n; i++)
		over += v[i] > limit;
	return over;
}

/* The max of n samples, their median through *median. */
static double max_median(double *v, int n, double *median)
{
	if (!n) {
		*median = 0;
		return 0;
	}
	qsort(v, n, sizeof(*v), cmp_double);
	*median = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
	return v[n - 1];
}

/* The loaded samples judged by the unloaded ones and HOLDERS' length. */
struct verdict {
	double base_med, limit, outlier, max, med;
	int over;
};

static struct verdict judge(struct samples *s, double holders_max_ms)
{
	struct verdict v;

	max_median(s->base, s->nr_base, &v.base_med);
	v.limit = fmax(fmax(LIMIT_MS, SLOWDOWN * v.base_med),
		       holders_max_ms / 2);
	v.outlier = fmax(OUTLIER_MS, 20 * v.base_med);
	v.over = nr_over(s->loaded, s->nr_loaded, v.limit);
	v.max = max_median(s->loaded, s->nr_loaded, &v.med);
	return v;
}

/* Unmaps own[0..n), timing each into ms[] (*nr of them) until until. */
static void time_munmaps(void **own, double *ms, int *nr, double until)
{
	double t;

	while (*nr < NR_SAMPLES && pm_now() < until) {
		t = pm_now();
		if (munmap(own[*nr], 2 * MiB))
			break;
		ms[*nr] = (pm_now() - t) * 1e3;
		(*nr)++;
		usleep(10000);
	}
}

static pid_t spawn_holder(int vfd, int *in, int *out, int ready, int done)
{
	pid_t pid = fork();

	if (pid == 0)
		_exit(holder(vfd, in[0], out[1], ready, done));
	return pid;
}

static pid_t spawn_other(int dev, double *ms, int *nr, int *err,
			 double until)
{
	pid_t pid = fork();

	if (pid == 0)
		_exit(other_user_allocs(dev, ms, nr, err, until));
	return pid;
}

PM_FIXTURE(holders_load)

TEST_F_TIMEOUT(holders_load, alloc_and_munmap_not_held_up_by_holders_and_list,
	       600)
{
	int rfd = pm_alloc(self->env.dev, 2 * MiB);
	int vfd = pm_view(rfd, 0, 2 * MiB, 0);
	int turn[2][2], ready[2], done[2], idle[2];
	struct load_stats *st;
	struct samples mun = { 0 };
	struct verdict v;
	double t, until;
	pid_t idler, holders[2], load, other;
	int made;
	void *own[2 * NR_SAMPLES];
	char c = 0;

	st = mmap(NULL, sizeof(*st), PROT_READ | PROT_WRITE,
		  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, st);
	memset(st, 0, sizeof(*st));
	ASSERT_OK(pipe2(idle, O_CLOEXEC));
	ASSERT_OK(pipe2(ready, O_CLOEXEC));
	ASSERT_OK(pipe2(done, O_CLOEXEC));
	for (int i = 0; i < 2; i++)
		ASSERT_OK(pipe2(turn[i], O_CLOEXEC));

	/* The idle threads first: walks of the task list cross them all. */
	scale_to_kernel();
	t = pm_now();
	idler = fork();
	ASSERT_GE(idler, 0);
	if (idler == 0)
		idle_threads(nr_idle, idle[1]);
	ASSERT_EQ(sizeof(made), read(idle[0], &made, sizeof(made)));
	ASSERT_EQ(nr_idle, made);
	TH_LOG("%d idle threads made in %.1f s", made, pm_now() - t);

	t = pm_now();
	holders[0] = spawn_holder(vfd, turn[0], turn[1], ready[1], done[0]);
	ASSERT_GE(holders[0], 0);
	holders[1] = spawn_holder(vfd, turn[1], turn[0], ready[1], done[0]);
	ASSERT_GE(holders[1], 0);
	ASSERT_EQ(1, write(turn[0][1], &c, 1));
	ASSERT_EQ(1, read(ready[0], &c, 1));
	ASSERT_EQ(1, read(ready[0], &c, 1));
	TH_LOG("2 x %d alternating view mappings made in %.1f s", nr_maps,
	       pm_now() - t);
	/* The owner's mappings, to be unmapped before and under the load. */
	for (int i = 0; i < 2 * NR_SAMPLES; i++)
		own[i] = pm_map(rfd, 2 * MiB, PROT_READ | PROT_WRITE, 0);
	pm_expect_counts(rfd, 2 * NR_SAMPLES, 2 * nr_maps, 0);

	/* The same calls without the load: what "held up" is judged by. */
	until = pm_now() + MEASURE_S;
	other = spawn_other(self->env.dev, st->alloc.base, &st->alloc.nr_base,
			    &st->alloc_err, until);
	ASSERT_GE(other, 0);
	ASSERT_EQ(0, pm_wait(other));
	time_munmaps(own, mun.base, &mun.nr_base, until);
	ASSERT_EQ(NR_SAMPLES, mun.nr_base);

	load = fork();
	ASSERT_GE(load, 0);
	if (load == 0)
		_exit(loader(vfd, self->env.dev, st));
	while (!__atomic_load_n(&st->loading, __ATOMIC_ACQUIRE))
		usleep(1000);
	usleep(100000);

	until = pm_now() + MEASURE_S;
	other = spawn_other(self->env.dev, st->alloc.loaded, &st->alloc.nr_loaded,
			    &st->alloc_err, until);
	ASSERT_GE(other, 0);
	time_munmaps(own + NR_SAMPLES, mun.loaded, &mun.nr_loaded, until);
	EXPECT_EQ(0, pm_wait(other)) TH_LOG("other user: ALLOC %s",
					    pm_errname(st->alloc_err));
	__atomic_store_n(&st->stop, 1, __ATOMIC_RELEASE);
	ASSERT_EQ(0, pm_wait(load));
	TH_LOG("loader: %lu HOLDERS calls (longest %.1f ms), %lu LIST calls",
	       st->holders_calls, st->holders_max_ms, st->list_calls);

	EXPECT_EQ(NR_SAMPLES, st->alloc.nr_base);
	v = judge(&st->alloc, st->holders_max_ms);
	TH_LOG("other user's ALLOC of 2 MiB: unloaded median %.1f ms; loaded: %d samples, max %.1f ms, median %.1f ms, %d over %.1f ms",
	       v.base_med, st->alloc.nr_loaded, v.max, v.med, v.over, v.limit);
	EXPECT_EQ(NR_SAMPLES, st->alloc.nr_loaded);
	EXPECT_GE(NR_OVER, v.over);
	EXPECT_GT(v.outlier, v.max);
	v = judge(&mun, st->holders_max_ms);
	TH_LOG("owner's munmap of 2 MiB: unloaded median %.1f ms; loaded: %d samples, max %.1f ms, median %.1f ms, %d over %.1f ms",
	       v.base_med, mun.nr_loaded, v.max, v.med, v.over, v.limit);
	EXPECT_EQ(NR_SAMPLES, mun.nr_loaded);
	EXPECT_GE(NR_OVER, v.over);
	EXPECT_GT(v.outlier, v.max);

	for (int i = NR_SAMPLES + mun.nr_loaded; i < 2 * NR_SAMPLES; i++)
		pm_unmap(own[i], 2 * MiB);
	ASSERT_EQ(2, write(done[1], "xx", 2));
	ASSERT_EQ(0, pm_wait(holders[0]));
	ASSERT_EQ(0, pm_wait(holders[1]));
	kill(idler, SIGKILL);
	pm_wait(idler);
	for (int i = 0; i < 2; i++) {
		close(turn[i][0]);
		close(turn[i][1]);
		close(ready[i]);
		close(done[i]);
		close(idle[i]);
	}
	munmap(st, sizeof(*st));
	close(vfd);
	close(rfd);
}

TEST_HARNESS_MAIN
