// SPDX-License-Identifier: GPL-2.0
/*
 * Races made to happen every time: the module's test gates (debugfs
 * pinmem/gates, kmod/testgate.c, only in the tests' builds) stop one
 * thread of the test at a named point of a call until the test, having
 * made its own move there, lets it go.
 *  - A chunk's reading with an insertion and a zap around its mapcount
 *    (the page put in first, the other zapped after the mapcount was
 *    read): REFS and DONATE must still see the view page left in a pipe.
 *  - HOLDERS and LIST while mappings (regions) are added between every
 *    two looks the call takes: the answer says what it counted, whole,
 *    not a buffer's worth of it passed off as the count.
 *  - A FILL whose file is read ends while a POPULATE of another range of
 *    the region holds populate_lock for its allocation: the FILL returns.
 * Without the gates (a module built by DKMS) every case skips.
 */
#include <pthread.h>
#include <stdarg.h>
#include <sys/syscall.h>

#include "refs_test.h"

#define PM_GATES	PM_DEBUGFS_DIR "/gates"

static int pm_gates_present(void)
{
	return access(PM_GATES, W_OK) == 0;
}

#define SKIP_WITHOUT_GATES() do {					\
	if (!pm_gates_present())					\
		SKIP(return, "no %s: the module was built without its test gates (PINMEM_TEST_GATES=y, as kmod/kmod.mk builds it)", \
		     PM_GATES);						\
} while (0)

/* One command to pinmem/gates; 0 or errno. */
static int pm_gate(const char *fmt, ...)
{
	char cmd[96];
	va_list ap;
	int fd, n, ret = 0;

	va_start(ap, fmt);
	n = vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	fd = open(PM_GATES, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return errno;
	if (write(fd, cmd, n) != n)
		ret = errno ? errno : EIO;
	close(fd);
	return ret;
}

/* How many stops the gate at point has made since armed (-1: unknown). */
static long pm_gate_parked(const char *point)
{
	char line[160], name[40];
	unsigned long parked, released;
	unsigned int left;
	long ret = -1;
	FILE *f = fopen(PM_GATES, "re");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%39s parked %lu released %lu left %u", name,
			   &parked, &released, &left) == 4 &&
		    !strcmp(name, point))
			ret = (long)parked;
	fclose(f);
	return ret;
}

/* A call made by a thread of its own, so that a gate can stop it. */
struct pm_call {
	long (*fn)(struct pm_call *c);
	void *arg;
	int fd;
	int tid, go, done;
	long ret;
	int err;
	pthread_t t;
};

static void *pm_call_main(void *arg)
{
	struct pm_call *c = arg;

	__atomic_store_n(&c->tid, (int)syscall(SYS_gettid), __ATOMIC_RELEASE);
	while (!__atomic_load_n(&c->go, __ATOMIC_ACQUIRE))
		usleep(1000);
	errno = 0;
	c->ret = c->fn(c);
	c->err = errno;
	__atomic_store_n(&c->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

/* Start c's thread; its tid is known on return (0 on failure). */
static int pm_call_start(struct pm_call *c)
{
	if (pthread_create(&c->t, NULL, pm_call_main, c))
		return 0;
	while (!__atomic_load_n(&c->tid, __ATOMIC_ACQUIRE))
		usleep(1000);
	return c->tid;
}

static void pm_call_go(struct pm_call *c)
{
	__atomic_store_n(&c->go, 1, __ATOMIC_RELEASE);
}

/*
 * Wait (up to secs) until the gate at point has stopped c for the n-th
 * time (1) or c's call has returned (0); -1 when neither happened.
 */
static int pm_call_wait(struct pm_call *c, const char *point, long n,
			double secs)
{
	double end = pm_now() + secs;

	while (pm_now() < end) {
		if (point && pm_gate_parked(point) >= n)
			return 1;
		if (__atomic_load_n(&c->done, __ATOMIC_ACQUIRE))
			return 0;
		usleep(1000);
	}
	return -1;
}

PM_FIXTURE(gated)

static long call_refs(struct pm_call *c)
{
	struct pinmem_refs *q = c->arg;

	return ioctl(c->fd, PINMEM_IOC_REFS, q);
}

static long call_donate(struct pm_call *c)
{
	return pm_donate(c->fd);
}

/*
 * A view page of the region's one chunk is in a pipe (one reference past
 * the mappings), page A of the owner's mapping is mapped and page B not.
 * c's call reads the chunk, stopped after its first refcount (B is
 * faulted in there: reference, then mapcount) and after the mapcount that
 * follows (A is zapped there: mapcount, then reference). The refcounts
 * before and after are equal and the mapcount is one too high: a reading
 * that trusted that would find the chunk clean.
 */
static void insert_and_zap_around_a_reading(struct __test_metadata *_metadata,
					    struct pm_call *c, char *o)
{
	char *a = o + 3 * PG, *b = o + 7 * PG;

	ASSERT_OK(madvise(b, PG, MADV_DONTNEED));
	ASSERT_NE(0, pm_call_start(c));
	ASSERT_EQ(0, pm_gate("arm chunk_read_ref %d 1", c->tid));
	ASSERT_EQ(0, pm_gate("arm chunk_read_map %d 1", c->tid));
	pm_call_go(c);
	EXPECT_EQ(1, pm_call_wait(c, "chunk_read_ref", 1, 20))
		TH_LOG("the reading never came to its first refcount");
	*(volatile char *)b = 1;
	EXPECT_EQ(0, pm_gate("release chunk_read_ref"));
	EXPECT_EQ(1, pm_call_wait(c, "chunk_read_map", 1, 20))
		TH_LOG("the reading never came to its mapcount");
	EXPECT_OK(madvise(a, PG, MADV_DONTNEED));
	EXPECT_EQ(0, pm_gate("release chunk_read_map"));
	EXPECT_EQ(0, pm_call_wait(c, NULL, 0, 20));
	pm_gate("disarm chunk_read_ref");
	pm_gate("disarm chunk_read_map");
	ASSERT_EQ(0, pthread_join(c->t, NULL));
}

/*
 * A region with a view page in a pipe (then drained: the bytes are
 * checked) and its owner mapping at *o, read by c around an insertion
 * and a zap. Returns the region fd.
 */
static int read_with_a_piped_view_page(struct __test_metadata *_metadata,
				       int dev, struct pm_call *c, char **o)
{
	int rfd = pm_alloc(dev, 2 * MiB);
	int vfd = pm_view(rfd, 0, 2 * MiB, 0);
	char *v = pm_map(vfd, 2 * MiB, PROT_READ, 0);
	static char buf[PG];
	int p[2];

	*o = pm_map(rfd, 2 * MiB, PROT_READ | PROT_WRITE, 0);
	pm_fill(*o + 100 * PG, PG, 9);
	pm_splice(p, v + 100 * PG, 1);
	pm_unmap(v, 2 * MiB);
	close(vfd);
	ASSERT_REFS(rfd, 0, 2 * MiB, 1, 0);
	c->fd = rfd;
	insert_and_zap_around_a_reading(_metadata, c, *o);
	EXPECT_EQ(PG, pm_drain(p, buf, sizeof(buf)));
	EXPECT_EQ(-1, pm_check(buf, PG, 9));
	return rfd;
}

TEST_F(gated, refs_reads_through_an_insert_and_a_zap)
{
	struct pinmem_ref_range rr[2];
	struct pinmem_refs q = { .ranges_ptr = (uintptr_t)rr, .capacity = 2 };
	struct pm_call c = { .fn = call_refs, .arg = &q };
	int rfd;
	char *o;

	SKIP_WITHOUT_GATES();
	rfd = read_with_a_piped_view_page(_metadata, self->env.dev, &c, &o);
	ASSERT_EQ(0, c.ret) TH_LOG("REFS: %s", pm_errname(c.err));
	EXPECT_EQ(1, q.count) TH_LOG("REFS found the chunk clean");
	EXPECT_LE(1, q.count ? rr[0].refs : 0);
	pm_unmap(o, 2 * MiB);
	close(rfd);
}

TEST_F(gated, donate_reads_through_an_insert_and_a_zap)
{
	struct pm_call c = { .fn = call_donate };
	int rfd;
	char *o;

	SKIP_WITHOUT_GATES();
	rfd = read_with_a_piped_view_page(_metadata, self->env.dev, &c, &o);
	EXPECT_EQ(EBUSY, c.ret)
		TH_LOG("DONATE with a view page in a pipe: %ld", c.ret);
	/* The pipe is empty now: DONATE goes through. */
	if (c.ret == EBUSY)
		ASSERT_TRANSITION(0, pm_donate_wait(rfd, 20000));
	pm_unmap(o, 2 * MiB);
	close(rfd);
}

#define GROWN_MAX	2048

static long call_holders(struct pm_call *c)
{
	return ioctl(c->fd, PINMEM_IOC_HOLDERS, c->arg);
}

/*
 * HOLDERS of 40 view mappings; at every stop between two looks at the
 * list the test adds more mappings than the last look could have made
 * room for (three quarters of all there are, and 20). The walk ends at
 * the list's end as the call began: the answer is the 40, count 40, and
 * not one record more. (A count that kept growing used to end, after the
 * fifth look, as the size of the last buffer: neither the mappings at the
 * start nor at the end, and records filled to it.)
 */
TEST_F(gated, holders_counts_what_it_walked_while_mappings_come)
{
	int rfd = pm_alloc(self->env.dev, 2 * MiB);
	int vfd = pm_view(rfd, 0, 2 * MiB, 0);
	static struct pinmem_holder h[GROWN_MAX + 1];
	static void *maps[GROWN_MAX];
	struct pinmem_holders q = { .holders_ptr = (uintptr_t)h,
				    .capacity = GROWN_MAX };
	struct pm_call c = { .fn = call_holders, .arg = &q, .fd = rfd };
	int made = 0, stops = 0, strangers = 0, more, r;

	SKIP_WITHOUT_GATES();
	for (; made < 40; made++)
		maps[made] = pm_map(vfd, PG, PROT_READ, (off_t)made * PG);
	memset(h, 0xa5, sizeof(h));
	ASSERT_NE(0, pm_call_start(&c));
	ASSERT_EQ(0, pm_gate("arm records_round %d 64", c.tid));
	pm_call_go(&c);
	while ((r = pm_call_wait(&c, "records_round", stops + 1, 20)) == 1) {
		stops++;
		more = made * 3 / 4 + 20;
		for (int i = 0; i < more && made < GROWN_MAX; i++, made++)
			maps[made] = pm_map(vfd, PG, PROT_READ,
					    (off_t)(made % 512) * PG);
		ASSERT_EQ(0, pm_gate("release records_round"));
	}
	pm_gate("disarm records_round");
	ASSERT_EQ(0, pthread_join(c.t, NULL));
	ASSERT_EQ(0, r) TH_LOG("HOLDERS neither stopped nor returned");
	ASSERT_EQ(0, c.ret) TH_LOG("HOLDERS: %s", pm_errname(c.err));
	TH_LOG("%d stops between looks, %d mappings at the end, count %u",
	       stops, made, q.count);
	EXPECT_LE(1, stops);
	EXPECT_EQ(40, q.count)
		TH_LOG("count %u of 40 mappings at the start, %d at the end",
		       q.count, made);
	for (uint32_t i = 0; i < q.count && i < GROWN_MAX; i++) {
		int k;

		for (k = 0; k < 40 && (uintptr_t)maps[k] != h[i].start; k++)
			;
		strangers += k == 40;
	}
	EXPECT_EQ(0, strangers) TH_LOG("records not of the first 40");
	EXPECT_EQ(0xa5a5a5a5u, h[40].kind) TH_LOG("a 41st record filled");
	for (int i = 0; i < made; i++)
		pm_unmap(maps[i], PG);
	close(vfd);
	close(rfd);
}

static long call_list(struct pm_call *c)
{
	return ioctl(c->fd, PINMEM_IOC_LIST, c->arg);
}

/*
 * LIST while regions are made at every stop between its looks (three
 * quarters of all there are, and 20): nothing changes after the last
 * look, so the answer must hold every region there is, with the count
 * saying so, not a buffer's worth of them with the count cut to match.
 */
TEST_F(gated, list_counts_every_region_of_its_last_look)
{
	static struct pinmem_region_info ri[GROWN_MAX + 1];
	static int fds[GROWN_MAX];
	struct pinmem_list q = { .regions_ptr = (uintptr_t)ri,
				 .capacity = GROWN_MAX };
	struct pm_call c = { .fn = call_list, .arg = &q,
			     .fd = self->env.dev };
	int made = 0, stops = 0, more, r;
	uint32_t base;

	SKIP_WITHOUT_GATES();
	ASSERT_OK(ioctl(self->env.dev, PINMEM_IOC_LIST, &q));
	base = q.count;
	fds[made++] = pm_alloc(self->env.dev, PG);
	q.count = 0;
	ASSERT_NE(0, pm_call_start(&c));
	ASSERT_EQ(0, pm_gate("arm records_round %d 64", c.tid));
	pm_call_go(&c);
	while ((r = pm_call_wait(&c, "records_round", stops + 1, 20)) == 1) {
		stops++;
		more = (int)(base + made) * 3 / 4 + 20;
		for (int i = 0; i < more && made < GROWN_MAX - (int)base;
		     i++)
			fds[made++] = pm_alloc(self->env.dev, PG);
		ASSERT_EQ(0, pm_gate("release records_round"));
	}
	pm_gate("disarm records_round");
	ASSERT_EQ(0, pthread_join(c.t, NULL));
	ASSERT_EQ(0, r) TH_LOG("LIST neither stopped nor returned");
	ASSERT_EQ(0, c.ret) TH_LOG("LIST: %s", pm_errname(c.err));
	TH_LOG("%d stops between looks, %u + %d regions, count %u", stops,
	       base, made, q.count);
	EXPECT_LE(1, stops);
	EXPECT_EQ(base + made, q.count)
		TH_LOG("LIST cut its answer and said it was whole");
	for (int i = 0; i < made; i++)
		close(fds[i]);
}

struct fill_pop {
	int file;
	uint64_t off, len;
	struct pinmem_fill f;
};

static long call_fill(struct pm_call *c)
{
	struct fill_pop *a = c->arg;

	a->f = (struct pinmem_fill){ .fd = a->file, .offset = a->off,
				     .length = a->len };
	return ioctl(c->fd, PINMEM_IOC_FILL, &a->f) ? errno : 0;
}

static long call_populate(struct pm_call *c)
{
	struct fill_pop *a = c->arg;
	struct pinmem_populate p = { .offset = a->off, .length = a->len };

	return ioctl(c->fd, PINMEM_IOC_POPULATE, &p) ? errno : 0;
}

/*
 * A FILL of the first chunk of a lazy region, stopped once it has claimed
 * it; a POPULATE of the second, stopped while it holds populate_lock (as
 * a large allocation would). The FILL, let go, reads its file and must
 * return while the POPULATE still holds the lock: it used to wait there,
 * unkillably, for the other range's whole allocation.
 */
TEST_F(gated, fill_ends_while_a_populate_holds_the_lock)
{
	struct pinmem_alloc al = { .size = 4 * MiB,
				   .flags = PINMEM_ALLOC_LAZY };
	struct fill_pop fa = { .off = 0, .len = 2 * MiB };
	struct fill_pop pa = { .off = 2 * MiB, .len = 2 * MiB };
	struct pm_call fc = { .fn = call_fill, .arg = &fa };
	struct pm_call pc = { .fn = call_populate, .arg = &pa };
	int rfd, fill_returned;
	char *m;

	SKIP_WITHOUT_GATES();
	fa.file = memfd_create("pinmem-gates-fill", MFD_CLOEXEC);
	ASSERT_LE(0, fa.file);
	m = mmap(NULL, 2 * MiB, PROT_READ | PROT_WRITE, MAP_SHARED, fa.file, 0);
	ASSERT_OK(ftruncate(fa.file, 2 * MiB));
	ASSERT_NE(MAP_FAILED, m);
	pm_fill(m, 2 * MiB, 23);
	ASSERT_OK(munmap(m, 2 * MiB));
	ASSERT_OK(ioctl(self->env.dev, PINMEM_IOC_ALLOC, &al));
	rfd = al.fd;
	fc.fd = pc.fd = rfd;

	ASSERT_NE(0, pm_call_start(&fc));
	ASSERT_EQ(0, pm_gate("arm fill_claimed %d 1", fc.tid));
	pm_call_go(&fc);
	ASSERT_EQ(1, pm_call_wait(&fc, "fill_claimed", 1, 20));
	ASSERT_NE(0, pm_call_start(&pc));
	ASSERT_EQ(0, pm_gate("arm populate_held %d 1", pc.tid));
	pm_call_go(&pc);
	EXPECT_EQ(1, pm_call_wait(&pc, "populate_held", 1, 20));
	EXPECT_EQ(0, pm_gate("release fill_claimed"));
	fill_returned = pm_call_wait(&fc, NULL, 0, 5) == 0;
	EXPECT_TRUE(fill_returned)
		TH_LOG("the FILL did not return within 5 s while a POPULATE of another range held populate_lock");
	EXPECT_FALSE(__atomic_load_n(&pc.done, __ATOMIC_ACQUIRE));
	EXPECT_EQ(0, pm_gate("release populate_held"));
	EXPECT_EQ(0, pm_call_wait(&pc, NULL, 0, 20));
	EXPECT_EQ(0, pm_call_wait(&fc, NULL, 0, 20));
	pm_gate("disarm fill_claimed");
	pm_gate("disarm populate_held");
	ASSERT_EQ(0, pthread_join(fc.t, NULL));
	ASSERT_EQ(0, pthread_join(pc.t, NULL));
	ASSERT_EQ(0, fc.ret) TH_LOG("FILL: %s", pm_errname((int)fc.ret));
	ASSERT_EQ(0, pc.ret) TH_LOG("POPULATE: %s", pm_errname((int)pc.ret));
	EXPECT_EQ(2 * MiB, fa.f.bytes);
	m = pm_map(rfd, 4 * MiB, PROT_READ, 0);
	ASSERT_PATTERN(m, 2 * MiB, 23);
	for (uint64_t i = 2 * MiB; i < 4 * MiB; i += PG)
		ASSERT_EQ(0, m[i]);
	pm_unmap(m, 4 * MiB);
	close(rfd);
	close(fa.file);
}

TEST_HARNESS_MAIN
