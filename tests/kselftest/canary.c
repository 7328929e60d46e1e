// SPDX-License-Identifier: GPL-2.0
/*
 * No false refusals: after any history of view and owner mappings - fork
 * (children touching, splitting and exiting), partial munmap, mremap
 * moves and shrinks, MADV_DONTNEED, mprotect splits, writes - once every
 * view mapping is gone, REFS finds nothing and DONATE succeeds at once.
 * This is also the canary for the invariant the reference count rests on
 * (one reference and one mapcount per page table entry for pinmem's
 * VM_MIXEDMAP pages): a kernel that counted them differently would fail
 * here first. The owner also holds transient references of its own (owner
 * pages in pipes, taken and dropped at random points, so that views first
 * map chunks while they are held), and about one round in four a view's
 * page stays in a pipe after its mappings are gone: DONATE must then be
 * refused, however the owner's references came and went (no room is left
 * behind for a view's), and succeed once the pipe is drained.
 * Rounds: $PINMEM_CANARY_ROUNDS (default 300), seeded by
 * $PINMEM_CANARY_SEED (default: the time, printed).
 */
#include <sys/uio.h>

#include "refs_test.h"

#define REGION		(8 * MiB)
#define MAX_MAPS	64
#define MAX_PIPES	8

struct map {
	char *addr;
	size_t len;
	bool writable;
};

struct history {
	struct map maps[MAX_MAPS];
	int n;
	int pipes[MAX_PIPES][2];	/* the owner's, holding its pages */
	int npipes;
	int rofd, rwfd;
	unsigned int seed;
};

static unsigned int rnd(struct history *h, unsigned int n)
{
	return n ? (unsigned int)rand_r(&h->seed) % n : 0;
}

static void add_map(struct history *h, char *addr, size_t len, bool w)
{
	if (h->n < MAX_MAPS)
		h->maps[h->n++] = (struct map){ addr, len, w };
	else
		munmap(addr, len);
}

static void drop_map(struct history *h, int i)
{
	h->maps[i] = h->maps[--h->n];
}

/* A new view mapping of a random page range. */
static int op_map(struct history *h)
{
	size_t pages = REGION / PG;
	size_t off = rnd(h, pages - 1), len = 1 + rnd(h, pages - off);
	bool w = rnd(h, 2);
	char *p;

	if (rnd(h, 2)) {	/* often whole chunks, as real users map */
		off &= ~511UL;
		len = (1 + rnd(h, (pages - off) / 512)) * 512;
	}
	p = mmap(NULL, len * PG, PROT_READ | (w ? PROT_WRITE : 0),
		 MAP_SHARED, w ? h->rwfd : h->rofd, off * PG);
	if (p == MAP_FAILED)
		return -1;
	add_map(h, p, len * PG, w);
	return 0;
}

/* One random change to mapping i. */
static int op_change(struct history *h, int i)
{
	struct map *m = &h->maps[i];
	size_t pages = m->len / PG, a = rnd(h, pages), b = a + 1 + rnd(h, pages - a);
	char *t;

	switch (rnd(h, 6)) {
	case 0:	/* partial munmap: up to two pieces remain */
		if (munmap(m->addr + a * PG, (b - a) * PG))
			return -1;
		if (b < pages)
			add_map(h, m->addr + b * PG, (pages - b) * PG,
				m->writable);
		if (a)
			m->len = a * PG;
		else
			drop_map(h, i);
		return 0;
	case 1:	/* mremap: move elsewhere */
		t = mmap(NULL, m->len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS,
			 -1, 0);
		if (t == MAP_FAILED)
			return -1;
		t = mremap(m->addr, m->len, m->len,
			   MREMAP_MAYMOVE | MREMAP_FIXED, t);
		if (t == MAP_FAILED)
			return -1;
		m->addr = t;
		return 0;
	case 2:	/* mremap: shrink */
		if (mremap(m->addr, m->len, a ? a * PG : PG, 0) == MAP_FAILED)
			return -1;
		m->len = a ? a * PG : PG;
		return 0;
	case 3:
		return madvise(m->addr + a * PG, (b - a) * PG, MADV_DONTNEED);
	case 4:	/* mprotect splits the VMA: track the pieces apart (mremap
		 * works on one VMA at a time) */
		if (mprotect(m->addr + a * PG, (b - a) * PG,
			     rnd(h, 2) ? PROT_READ : PROT_NONE))
			return -1;
		if (b < pages)
			add_map(h, m->addr + b * PG, (pages - b) * PG,
				m->writable);
		if (a) {
			add_map(h, m->addr + a * PG, (b - a) * PG,
				m->writable);
			m->len = a * PG;
		} else {
			m->len = b * PG;
		}
		return 0;
	default: /* touch: a write where allowed (dirty PTEs), else a read */
		if (mprotect(m->addr, m->len,
			     PROT_READ | (m->writable ? PROT_WRITE : 0)))
			return -1;
		for (size_t p = a; p < b; p += 1 + rnd(h, 64)) {
			volatile char *c = m->addr + p * PG;

			if (m->writable)
				*c = (char)p;
			else
				(void)*c;
		}
		return 0;
	}
}

/* A child that changes its inherited copies and exits (or is killed). */
static int op_fork(struct history *h)
{
	bool killed = rnd(h, 2);	/* decided before: the child knows */
	pid_t pid = fork();

	if (pid < 0)
		return -1;
	if (pid == 0) {
		for (int k = 0; k < 4 && h->n; k++)
			op_change(h, (int)rnd(h, (unsigned int)h->n));
		if (killed)
			pause();	/* until killed below */
		_exit(0);
	}
	if (killed)
		kill(pid, SIGKILL);
	return waitpid(pid, NULL, 0) == pid ? 0 : -1;
}

/* The owner puts a few of its pages in a pipe (a transient reference). */
static int op_owner_ref(struct history *h, char *owner)
{
	size_t n = 1 + rnd(h, 8), off = rnd(h, REGION / PG - n);
	struct iovec iov = { owner + off * PG, n * PG };
	int *p;

	if (h->npipes == MAX_PIPES)
		return 0;
	p = h->pipes[h->npipes];
	if (pipe2(p, O_CLOEXEC))
		return -1;
	h->npipes++;
	return vmsplice(p[1], &iov, 1, 0) == (ssize_t)(n * PG) ? 0 : -1;
}

/* The owner drops one of its pipes (or all of them). */
static void owner_unref(struct history *h, bool all)
{
	while (h->npipes) {
		int *p = h->pipes[rnd(h, (unsigned int)h->npipes)];

		close(p[0]);
		close(p[1]);
		memmove(p, h->pipes[--h->npipes], sizeof(h->pipes[0]));
		if (!all)
			return;
	}
}

/* A view's page into a new pipe (*vp), from a mapping still there. */
static int view_ref(struct history *h, int vp[2])
{
	struct map *m = &h->maps[rnd(h, (unsigned int)h->n)];
	struct iovec iov = { m->addr + rnd(h, m->len / PG) * PG, PG };

	if (mprotect(m->addr, m->len,
		     PROT_READ | (m->writable ? PROT_WRITE : 0)) ||
	    pipe2(vp, O_CLOEXEC))
		return -1;
	return vmsplice(vp[1], &iov, 1, 0) == PG ? 0 : -1;
}

/*
 * A history of view and owner operations, every view mapping gone at
 * the end, the owner's references dropped; when vp is given, a view page
 * is left in a pipe there (vp[0] < 0: none could be).
 */
static int one_history(struct history *h, char *owner, int *vp)
{
	int ops = 4 + (int)rnd(h, 12);

	/* Often held already when the round's first views map the chunks. */
	if (rnd(h, 2) && op_owner_ref(h, owner))
		return -1;
	for (int k = 0; k < ops; k++) {
		unsigned int what = rnd(h, 12);
		int ret = 0;

		if (what < 3 || !h->n)
			ret = op_map(h);
		else if (what < 8)
			ret = op_change(h, (int)rnd(h, (unsigned int)h->n));
		else if (what < 9)
			ret = op_fork(h);
		else if (what < 10)	/* the owner's mapping changes too */
			ret = madvise(owner + rnd(h, REGION / PG) * PG, PG,
				      MADV_DONTNEED);
		else if (what < 11)
			ret = op_owner_ref(h, owner);
		else
			owner_unref(h, false);
		if (ret)
			return -1;
	}
	owner_unref(h, true);
	if (vp) {
		vp[0] = -1;
		if (h->n && view_ref(h, vp))
			return -1;
	}
	while (h->n) {
		if (munmap(h->maps[0].addr, h->maps[0].len))
			return -1;
		drop_map(h, 0);
	}
	return 0;
}

PM_FIXTURE(canary)

TEST_F_TIMEOUT(canary, no_false_refusal, 900)
{
	const char *e = getenv("PINMEM_CANARY_ROUNDS");
	const char *s = getenv("PINMEM_CANARY_SEED");
	int rounds = e ? atoi(e) : 300;
	int rfd = pm_alloc(self->env.dev, REGION);
	char *o = pm_map(rfd, REGION, PROT_READ | PROT_WRITE, 0);
	struct history h = {
		.rofd = pm_view(rfd, 0, REGION, 0),
		.rwfd = pm_view(rfd, 0, REGION, PINMEM_VIEW_WRITE),
		.seed = s ? (unsigned int)atoi(s) : (unsigned int)time(NULL),
	};
	struct pinmem_ref_range r[4];
	unsigned int seed0 = h.seed;
	int refused = 0;

	TH_LOG("seed %u, %d rounds", seed0, rounds);
	memset(o, 1, REGION);
	for (int i = 0; i < rounds; i++) {
		int vp[2] = { -1, -1 };
		bool keep = rnd(&h, 4) == 0;
		char buf[PG];

		ASSERT_EQ(0, one_history(&h, o, keep ? vp : NULL))
			TH_LOG("round %d (seed %u): an operation failed: %s",
			       i, seed0, pm_errname(errno));
		if (vp[0] >= 0) {
			ASSERT_EQ(EBUSY, pm_donate(rfd))
				TH_LOG("round %d (seed %u): donated with a view page in a pipe",
				       i, seed0);
			ASSERT_EQ(PG, pm_drain(vp, buf, sizeof(buf)));
			refused++;
		}
		ASSERT_EQ(0, pm_refs(rfd, r, 4))
			TH_LOG("round %d (seed %u): %llu references on [%llu, +%llu)",
			       i, seed0, (unsigned long long)r[0].refs,
			       (unsigned long long)r[0].offset,
			       (unsigned long long)r[0].length);
		ASSERT_TRANSITION(0, pm_donate(rfd));
		ASSERT_TRANSITION(0, pm_reopen(rfd));
	}
	TH_LOG("%d rounds, %d with a view page kept: all refused until drained",
	       rounds, refused);
	pm_unmap(o, REGION);
	close(h.rofd);
	close(h.rwfd);
	close(rfd);
}

TEST_HARNESS_MAIN
