// SPDX-License-Identifier: GPL-2.0
/*
 * DONATE and SEAL count page references, not only mappings: references
 * taken through a view (vmsplice into a pipe, process_vm_readv) block
 * DONATE after the view is gone, until released; so do the owner's own
 * on chunks a view mapped, until it declares them with EXPECT, and no
 * owner reference that came and went leaves room for a view's; REFS
 * names the bytes. The canary at the end checks that no history of
 * mappings leaves a false reference behind.
 */
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <linux/userfaultfd.h>

#include "refs_test.h"

PM_FIXTURE(refs)

/* The first reproduction: a pipe keeps a view's pages. */
TEST_F(refs, vmsplice_through_view_blocks_until_drained)
{
	int rfd = pm_alloc(self->env.dev, 4 * MiB);
	char *o = pm_map(rfd, 4 * MiB, PROT_READ | PROT_WRITE, 0);
	int vfd = pm_view(rfd, 2 * MiB, 2 * MiB, 0);
	char *v = pm_map(vfd, 2 * MiB, PROT_READ, 0);
	struct pinmem_region_info ri;
	static char buf[4 * PG];
	int p[2];
	double t0;

	pm_fill(o + 2 * MiB + MiB, 4 * PG, 11);
	pm_splice(p, v + MiB, 4);
	pm_unmap(v, 2 * MiB);
	close(vfd);
	t0 = pm_now();
	ASSERT_TRANSITION(EBUSY, pm_donate(rfd));
	EXPECT_GE(pm_now() - t0, 0.05) TH_LOG("no grace for transients");
	ASSERT_EQ(PINMEM_STATE_OPEN, pm_state(rfd));
	ASSERT_REFS(rfd, 2 * MiB, 2 * MiB, 4, 0);
	pm_info(rfd, &ri);
	EXPECT_EQ(4, ri.outside_refs);
	EXPECT_TRUE(ri.flags & PINMEM_INFO_REFS_HELD);
	/* The reader gets the bytes from before; then the region is free. */
	ASSERT_EQ(sizeof(buf), pm_drain(p, buf, sizeof(buf)));
	ASSERT_PATTERN(buf, sizeof(buf), 11);
	ASSERT_EQ(0, pm_refs(rfd, NULL, 0));
	ASSERT_TRANSITION(0, pm_donate(rfd));
	pm_info(rfd, &ri);
	EXPECT_EQ(PINMEM_STATE_DONATED, ri.state);
	EXPECT_EQ(0, ri.outside_refs);
	EXPECT_FALSE(ri.flags & PINMEM_INFO_REFS_HELD);
	pm_unmap(o, 4 * MiB);
	close(rfd);
}

/* REFS answers on the view fd and on the device fd by id too. */
TEST_F(refs, refs_by_view_fd_and_by_id)
{
	uint64_t id;
	int rfd = pm_alloc_id(self->env.dev, 6 * MiB, &id);
	int vfd = pm_view(rfd, 0, 6 * MiB, 0);
	char *v = pm_map(vfd, 6 * MiB, PROT_READ, 0);
	struct pinmem_ref_range r[4];
	struct pinmem_refs q = { .region_id = id };
	int p1[2], p2[2];
	char buf[2 * PG];

	pm_splice(p1, v + 100 * PG, 1);
	pm_splice(p2, v + 4 * MiB, 2);
	ASSERT_EQ(2, pm_refs_at(_metadata, __LINE__, self->env.dev, id, r, 4));
	EXPECT_EQ(0, r[0].offset);
	EXPECT_EQ(2 * MiB, r[0].length);
	EXPECT_EQ(1, r[0].refs);
	EXPECT_EQ(4 * MiB, r[1].offset);
	EXPECT_EQ(2, r[1].refs);
	ASSERT_EQ(2, pm_refs(vfd, r, 1)) TH_LOG("count beyond capacity");
	/* A region fd takes no id; unknown ids are ENOENT. */
	ASSERT_ERRNO(EINVAL, ioctl(rfd, PINMEM_IOC_REFS, &q));
	q.region_id = id + 1000;
	ASSERT_ERRNO(ENOENT, ioctl(self->env.dev, PINMEM_IOC_REFS, &q));
	q.region_id = 0;
	q.reserved = 1;
	ASSERT_ERRNO(EINVAL, ioctl(vfd, PINMEM_IOC_REFS, &q));
	pm_unmap(v, 6 * MiB);
	ASSERT_TRANSITION(EBUSY, pm_donate(rfd));
	pm_drain(p1, buf, sizeof(buf));
	ASSERT_TRANSITION(EBUSY, pm_donate(rfd));
	ASSERT_REFS(rfd, 4 * MiB, 2 * MiB, 2, 0);
	pm_drain(p2, buf, sizeof(buf));
	ASSERT_TRANSITION(0, pm_donate(rfd));
	close(vfd);
	close(rfd);
}

/* Owner references on chunks no view ever mapped are never looked at. */
TEST_F(refs, owner_refs_without_views_never_block)
{
	int rfd = pm_alloc(self->env.dev, 2 * MiB);
	char *o = pm_map(rfd, 2 * MiB, PROT_READ | PROT_WRITE, 0);
	char buf[8 * PG];
	int p[2];

	pm_splice(p, o, 8);
	ASSERT_TRANSITION(0, pm_donate(rfd));
	ASSERT_EQ(0, pm_refs(rfd, NULL, 0));
	pm_drain(p, buf, sizeof(buf));
	pm_unmap(o, 2 * MiB);
	close(rfd);
}

/*
 * The owner's references on a chunk a view mapped block DONATE whenever
 * they were taken, before the views or after, until declared: the module
 * grants no allowance of its own.
 */
TEST_F(refs, owner_refs_before_views_block_until_declared)
{
	int rfd = pm_alloc(self->env.dev, 2 * MiB);
	char *o = pm_map(rfd, 2 * MiB, PROT_READ | PROT_WRITE, 0);
	int vfd = pm_view(rfd, 0, 2 * MiB, 0);
	char buf[8 * PG];
	int p[2];

	pm_splice(p, o, 8);
	pm_unmap(pm_map(vfd, 2 * MiB, PROT_READ, 0), 2 * MiB);
	ASSERT_TRANSITION(EBUSY, pm_donate(rfd));
	ASSERT_REFS(rfd, 0, 2 * MiB, 8, 0);
	ASSERT_EQ(0, pm_expect(rfd, 0, 8 * PG, PINMEM_EXPECT_PER_PAGE));
	ASSERT_EQ(0, pm_refs(rfd, NULL, 0));
	ASSERT_TRANSITION(0, pm_donate(rfd));
	/* ...and still declared after another round of views. */
	ASSERT_TRANSITION(0, pm_reopen(rfd));
	pm_unmap(pm_map(vfd, 2 * MiB, PROT_READ, 0), 2 * MiB);
	ASSERT_TRANSITION(0, pm_donate(rfd));
	pm_drain(p, buf, sizeof(buf));
	ASSERT_EQ(0, pm_expect(rfd, 0, 8 * PG,
			       PINMEM_EXPECT_PER_PAGE | PINMEM_EXPECT_REMOVE));
	pm_unmap(o, 2 * MiB);
	close(vfd);
	close(rfd);
}

/*
 * The review's sequence: an owner reference that is gone by the time of
 * DONATE (a pipe it closed) must leave no room on the chunk for a view
 * holder's reference. With an allowance taken when the view first mapped
 * the chunk, the view's pipe below kept 16 KiB of the region through a
 * successful DONATE and read the owner's next data.
 */
TEST_F(refs, owner_transient_leaves_no_room_for_a_view_ref)
{
	int rfd = pm_alloc(self->env.dev, 2 * MiB);
	char *o = pm_map(rfd, 2 * MiB, PROT_READ | PROT_WRITE, 0);
	static char buf[4 * PG];
	int vfd, po[2], pv[2];
	size_t i;
	char *v;

	memset(o, 0x11, 2 * MiB);
	ASSERT_TRANSITION(0, pm_seal(rfd));
	pm_splice(po, o, 4);
	vfd = pm_view(rfd, 0, 4 * PG, 0);
	v = pm_map(vfd, 4 * PG, PROT_READ, 0);
	pm_drain(po, buf, sizeof(buf));
	pm_splice(pv, v, 4);
	pm_unmap(v, 4 * PG);
	close(vfd);
	ASSERT_TRANSITION(EBUSY, pm_donate(rfd));
	ASSERT_EQ(PINMEM_STATE_SEALED, pm_state(rfd));
	ASSERT_REFS(rfd, 0, 2 * MiB, 4, 0);
	/* The pipe reads the sealed bytes; then the region can be reused. */
	ASSERT_EQ(sizeof(buf), pm_drain(pv, buf, sizeof(buf)));
	for (i = 0; i < sizeof(buf) && buf[i] == 0x11; i++)
		;
	ASSERT_EQ(sizeof(buf), i) TH_LOG("byte %zu: 0x%x", i, buf[i]);
	ASSERT_TRANSITION(0, pm_donate(rfd));
	memset(o, 0x22, 2 * MiB);
	pm_unmap(o, 2 * MiB);
	close(rfd);
}

struct zapper {
	char *owner;
	size_t len;
	int run;		/* 0: pause, 1: zap, -1: end */
	int paused;
};

/* The owner zaps and refaults its own pages as fast as it can. */
static void *zap_loop(void *arg)
{
	struct zapper *z = arg;
	int run;

	while ((run = __atomic_load_n(&z->run, __ATOMIC_ACQUIRE)) >= 0) {
		__atomic_store_n(&z->paused, !run, __ATOMIC_RELEASE);
		if (!run) {
			usleep(1000);
			continue;
		}
		madvise(z->owner, z->len, MADV_DONTNEED);
		for (size_t off = 0; off < z->len; off += PG)
			z->owner[off]++;
	}
	return NULL;
}

static void zapper_set(struct zapper *z, int run)
{
	__atomic_store_n(&z->run, run, __ATOMIC_RELEASE);
	while (run == 0 && !__atomic_load_n(&z->paused, __ATOMIC_ACQUIRE))
		usleep(1000);
}

/*
 * The view holder of the zap race, in its own process: the owner's zap
 * holds its mm's mmap_lock for reading, so a view mapped by the owner's
 * own threads could never land inside the zap. On 'm' it maps the view
 * (the chunk's first view mapping), leaves one page in a pipe and unmaps;
 * on 'd' it drains the pipe; on 'q' it ends. Answers 'k', or 'e' on error.
 */
static void zap_view_holder(int sock, int vfd)
{
	char cmd, buf[PG], ok;
	int round = 0, p[2] = { -1, -1 };

	while (read(sock, &cmd, 1) == 1 && cmd != 'q') {
		ok = 'k';
		if (cmd == 'm') {
			struct iovec iov;
			char *v = mmap(NULL, 2 * MiB, PROT_READ, MAP_SHARED,
				       vfd, 0);

			iov.iov_base = v + (round++ % 64) * PG;
			iov.iov_len = PG;
			if (v == MAP_FAILED || pipe2(p, O_CLOEXEC) ||
			    vmsplice(p[1], &iov, 1, 0) != PG ||
			    munmap(v, 2 * MiB))
				ok = 'e';
		} else if (pm_drain(p, buf, sizeof(buf)) != PG) {
			ok = 'e';
		}
		if (write(sock, &ok, 1) != 1)
			break;
	}
	_exit(0);
}

static char zap_ask(int sock, char cmd)
{
	char ok = 0;

	if (write(sock, &cmd, 1) != 1 || read(sock, &ok, 1) != 1)
		return 0;
	return ok;
}

/*
 * A zap drops the mapcount before the mmu_gather drops the references:
 * a view holder mapping the chunk first at that instant must not turn the
 * owner's in-flight references into room for its own. Whatever the
 * timing, a pipe holding a view page keeps DONATE refused. Rounds:
 * $PINMEM_ZAP_ROUNDS (default 40; make stress runs 1000); pages the owner
 * zaps each time: $PINMEM_ZAP_PAGES (default 64, at most 512). A module
 * that took an allowance when a view first mapped a chunk failed this at
 * round 4 (6.1) and round 162 (6.12) of 300.
 */
TEST_F_TIMEOUT(refs, owner_zap_racing_first_view_map_leaves_no_room, 300)
{
	int rfd = pm_alloc(self->env.dev, 2 * MiB);
	struct zapper z = {
		.owner = pm_map(rfd, 2 * MiB, PROT_READ | PROT_WRITE, 0),
		.run = 1,
	};
	int vfd = pm_view(rfd, 0, 2 * MiB, 0);
	const char *e = getenv("PINMEM_ZAP_ROUNDS");
	const char *pages = getenv("PINMEM_ZAP_PAGES");
	int rounds = e ? atoi(e) : 40;
	int sv[2], status;
	pthread_t t;
	pid_t pid;

	z.len = (pages ? atoi(pages) : 64) * PG;
	ASSERT_TRUE(z.len > 0 && z.len <= 2 * MiB);
	ASSERT_OK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv));
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		close(sv[0]);
		zap_view_holder(sv[1], vfd);
	}
	close(sv[1]);
	ASSERT_EQ(0, pthread_create(&t, NULL, zap_loop, &z));
	for (int i = 0; i < rounds; i++) {
		ASSERT_EQ('k', zap_ask(sv[0], 'm'));
		ASSERT_EQ(EBUSY, pm_donate(rfd))
			TH_LOG("round %d: DONATE with a view page in a pipe", i);
		/* Quiet owner: the donation then has nothing to wait for. */
		zapper_set(&z, 0);
		ASSERT_EQ('k', zap_ask(sv[0], 'd'));
		ASSERT_TRANSITION(0, pm_donate_wait(rfd, 20000));
		ASSERT_TRANSITION(0, pm_reopen(rfd));
		zapper_set(&z, 1);
	}
	zapper_set(&z, -1);
	ASSERT_EQ(0, pthread_join(t, NULL));
	ASSERT_EQ(1, write(sv[0], "q", 1));
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_EQ(0, status);
	close(sv[0]);
	pm_unmap(z.owner, 2 * MiB);
	close(vfd);
	close(rfd);
}

/*
 * An owner reference taken after a view mapped the chunk cannot be told
 * from a view's: it blocks until declared; the declaration is per range
 * and taken back.
 */
TEST_F(refs, owner_refs_after_views_block_until_declared)
{
	int rfd = pm_alloc(self->env.dev, 4 * MiB);
	char *o = pm_map(rfd, 4 * MiB, PROT_READ | PROT_WRITE, 0);
	int vfd = pm_view(rfd, 0, 4 * MiB, 0);
	struct pinmem_region_info ri;
	char buf[8 * PG];
	int p[2];

	pm_unmap(pm_map(vfd, 4 * MiB, PROT_READ, 0), 4 * MiB);
	pm_splice(p, o + 2 * MiB + 8 * PG, 8);
	ASSERT_TRANSITION(EBUSY, pm_donate(rfd));
	ASSERT_REFS(rfd, 2 * MiB, 2 * MiB, 8, 0);
	/* Declared on the wrong chunk: still refused. */
	ASSERT_EQ(0, pm_expect(rfd, 0, 8 * PG, PINMEM_EXPECT_PER_PAGE));
	ASSERT_TRANSITION(EBUSY, pm_donate(rfd));
	ASSERT_EQ(0, pm_expect(rfd, 2 * MiB + 8 * PG, 8 * PG,
			       PINMEM_EXPECT_PER_PAGE));
	pm_info(rfd, &ri);
	EXPECT_EQ(16, ri.expected_refs);
	ASSERT_EQ(0, pm_refs(rfd, NULL, 0));
	ASSERT_TRANSITION(0, pm_donate(rfd));
	pm_drain(p, buf, sizeof(buf));
	ASSERT_EQ(0, pm_expect(rfd, 2 * MiB + 8 * PG, 8 * PG,
			       PINMEM_EXPECT_PER_PAGE | PINMEM_EXPECT_REMOVE));
	ASSERT_EQ(0, pm_expect(rfd, 0, 8 * PG,
			       PINMEM_EXPECT_PER_PAGE | PINMEM_EXPECT_REMOVE));
	pm_info(rfd, &ri);
	EXPECT_EQ(0, ri.expected_refs);
	pm_unmap(o, 4 * MiB);
	close(vfd);
	close(rfd);
}

/* A declaration is no blank cheque: a view's references beyond it count. */
TEST_F(refs, declared_refs_do_not_hide_more)
{
	int rfd = pm_alloc(self->env.dev, 2 * MiB);
	int vfd = pm_view(rfd, 0, 2 * MiB, 0);
	char *v = pm_map(vfd, 2 * MiB, PROT_READ, 0);
	char buf[8 * PG];
	int p[2];

	ASSERT_EQ(0, pm_expect(rfd, 0, 2 * MiB, PINMEM_EXPECT_PER_CHUNK));
	pm_splice(p, v, 3);
	pm_unmap(v, 2 * MiB);
	ASSERT_TRANSITION(EBUSY, pm_donate(rfd));
	ASSERT_REFS(rfd, 0, 2 * MiB, 3, 0);
	pm_drain(p, buf, sizeof(buf));
	ASSERT_TRANSITION(0, pm_donate(rfd));
	close(vfd);
	close(rfd);
}

TEST_F(refs, expect_checks_its_arguments)
{
	int rfd = pm_alloc(self->env.dev, 4 * MiB);
	int vfd = pm_view(rfd, 0, 2 * MiB, 0);
	struct pinmem_expect e = { .length = PG,
				   .flags = PINMEM_EXPECT_PER_PAGE };
	struct pinmem_region_info ri;
	const uint32_t page = PINMEM_EXPECT_PER_PAGE;
	int i, ret = 0;

	ASSERT_EQ(EINVAL, pm_expect(rfd, 0, PG, 0));
	ASSERT_EQ(EINVAL, pm_expect(rfd, 0, PG, page |
				    PINMEM_EXPECT_PER_CHUNK));
	ASSERT_EQ(EINVAL, pm_expect(rfd, 0, PG, PINMEM_EXPECT_REMOVE));
	ASSERT_EQ(EINVAL, pm_expect(rfd, 0, PG, page | 1U << 7));
	ASSERT_EQ(EINVAL, pm_expect(rfd, 1, PG, page));
	ASSERT_EQ(EINVAL, pm_expect(rfd, 0, PG + 1, page));
	ASSERT_EQ(EINVAL, pm_expect(rfd, 0, 0, page));
	ASSERT_EQ(EINVAL, pm_expect(rfd, 4 * MiB, PG, page));
	ASSERT_EQ(EINVAL, pm_expect(rfd, PG, 4 * MiB, page));
	ASSERT_EQ(EINVAL, pm_expect(rfd, -PG, 2 * PG, page));
	e.pad = 1;
	ASSERT_ERRNO(EINVAL, ioctl(rfd, PINMEM_IOC_EXPECT, &e));
	e.pad = 0;
	e.reserved = 1;
	ASSERT_ERRNO(EINVAL, ioctl(rfd, PINMEM_IOC_EXPECT, &e));
	e.reserved = 0;
	/* The owner's capability: not on a view fd nor the device. */
	ASSERT_ERRNO(ENOTTY, ioctl(vfd, PINMEM_IOC_EXPECT, &e));
	ASSERT_ERRNO(ENOTTY, ioctl(self->env.dev, PINMEM_IOC_EXPECT, &e));
	/* Removing what was never declared, in part or whole: nothing moves. */
	ASSERT_EQ(0, pm_expect(rfd, 0, 2 * PG, page));
	ASSERT_EQ(EINVAL, pm_expect(rfd, 0, 3 * PG,
				    page | PINMEM_EXPECT_REMOVE));
	pm_info(rfd, &ri);
	EXPECT_EQ(2, ri.expected_refs);
	/* Bounded: PINMEM_EXPECT_MAX per chunk. */
	for (i = 0; i < 200 && !ret; i++)
		ret = pm_expect(rfd, 2 * MiB, 2 * MiB, page);
	ASSERT_EQ(ENOSPC, ret);
	EXPECT_EQ((PINMEM_EXPECT_MAX / 512) + 1, i);
	pm_info(rfd, &ri);
	EXPECT_EQ(2 + PINMEM_EXPECT_MAX, ri.expected_refs);
	/* A PER_CHUNK range across two chunks counts once on each. */
	ASSERT_EQ(0, pm_expect(rfd, 2 * MiB - PG, 2 * PG,
			       PINMEM_EXPECT_PER_CHUNK | PINMEM_EXPECT_REMOVE));
	pm_info(rfd, &ri);
	EXPECT_EQ(PINMEM_EXPECT_MAX, ri.expected_refs);
	close(vfd);
	close(rfd);
}

/* SEAL waits for references taken through writable views only. */
TEST_F(refs, seal_refused_while_writable_view_refs_remain)
{
	int rfd = pm_alloc(self->env.dev, 4 * MiB);
	int wfd = pm_view(rfd, 0, 2 * MiB, PINMEM_VIEW_WRITE);
	int rofd = pm_view(rfd, 2 * MiB, 2 * MiB, 0);
	char *w = pm_map(wfd, 2 * MiB, PROT_READ | PROT_WRITE, 0);
	char *r = pm_map(rofd, 2 * MiB, PROT_READ, 0);
	char buf[4 * PG];
	int pw[2], pr[2];

	pm_splice(pw, w, 2);
	pm_splice(pr, r, 2);
	pm_unmap(w, 2 * MiB);
	ASSERT_TRANSITION(EBUSY, pm_seal(rfd));
	ASSERT_EQ(PINMEM_STATE_OPEN, pm_state(rfd));
	/* The read-only view's pipe does not stop SEAL, only DONATE. */
	pm_drain(pw, buf, sizeof(buf));
	ASSERT_TRANSITION(0, pm_seal(rfd));
	pm_unmap(r, 2 * MiB);
	ASSERT_TRANSITION(EBUSY, pm_donate(rfd));
	pm_drain(pr, buf, sizeof(buf));
	ASSERT_TRANSITION(0, pm_donate(rfd));
	close(wfd);
	close(rofd);
	close(rfd);
}

struct drainer {
	int *pfd;
	int delay_ms;
	size_t got;
};

static void *drain_later(void *arg)
{
	struct drainer *d = arg;
	char buf[16 * PG];

	usleep(d->delay_ms * 1000);
	d->got = pm_drain(d->pfd, buf, sizeof(buf));
	return NULL;
}

TEST_F(refs, wait_woken_by_pipe_drain)
{
	int rfd = pm_alloc(self->env.dev, 2 * MiB);
	int vfd = pm_view(rfd, 0, 2 * MiB, 0);
	char *v = pm_map(vfd, 2 * MiB, PROT_READ, 0);
	int p[2];
	struct drainer d = { .pfd = p, .delay_ms = 400 };
	pthread_t t;
	double t0;

	pm_splice(p, v, 16);
	pm_unmap(v, 2 * MiB);
	ASSERT_TRANSITION(ETIMEDOUT, pm_donate_wait(rfd, 200));
	ASSERT_EQ(0, pthread_create(&t, NULL, drain_later, &d));
	t0 = pm_now();
	ASSERT_TRANSITION(0, pm_donate_wait(rfd, 20000));
	EXPECT_GE(pm_now() - t0, 0.3) TH_LOG("donated before the drain");
	ASSERT_EQ(0, pthread_join(t, NULL));
	EXPECT_EQ(16 * PG, d.got);
	close(vfd);
	close(rfd);
}

/* A view mapped while references are awaited would add new ones: EBUSY. */
TEST_F(refs, views_refused_while_donate_waits_for_refs)
{
	int rfd = pm_alloc(self->env.dev, 2 * MiB);
	int vfd = pm_view(rfd, 0, 2 * MiB, 0);
	char *v = pm_map(vfd, 2 * MiB, PROT_READ, 0);
	int p[2];
	struct drainer d = { .pfd = p, .delay_ms = 800 };
	pthread_t t;
	double t0 = pm_now();
	pid_t child;

	pm_splice(p, v, 1);
	pm_unmap(v, 2 * MiB);
	ASSERT_EQ(0, pthread_create(&t, NULL, drain_later, &d));
	child = fork();
	ASSERT_GE(child, 0);
	if (child == 0) {
		/* A second process tries to map while the DONATE waits. */
		usleep(300 * 1000);
		_exit(mmap(NULL, PG, PROT_READ, MAP_SHARED, vfd, 0) ==
		      MAP_FAILED && errno == EBUSY ? 0 : 1);
	}
	ASSERT_TRANSITION(0, pm_donate_wait(rfd, 20000));
	ASSERT_EQ(0, pm_wait(child)) TH_LOG("the child's view was admitted");
	EXPECT_GE(pm_now() - t0, 0.7);
	ASSERT_EQ(0, pthread_join(t, NULL));
	close(vfd);
	close(rfd);
}

/*
 * process_vm_readv pins the remote (view) pages, then copies into the
 * local buffer; a userfaultfd-registered local buffer stalls the copy
 * with the view's pages pinned, as long as the test wants.
 */
struct pvm {
	void *local, *remote;
	size_t len;
	ssize_t ret;
};

static void *pvm_read(void *arg)
{
	struct pvm *a = arg;
	struct iovec l = { .iov_base = a->local, .iov_len = a->len };
	struct iovec r = { .iov_base = a->remote, .iov_len = a->len };

	a->ret = process_vm_readv(getpid(), &l, 1, &r, 1, 0);
	return NULL;
}

TEST_F(refs, process_vm_readv_in_flight_blocks)
{
	int rfd = pm_alloc(self->env.dev, 2 * MiB);
	int vfd = pm_view(rfd, 0, 2 * MiB, 0);
	char *v = pm_map(vfd, 2 * MiB, PROT_READ, 0);
	struct uffdio_api api = { .api = UFFD_API };
	struct uffdio_register reg = { .mode = UFFDIO_REGISTER_MODE_MISSING };
	struct uffdio_zeropage zp = { .mode = 0 };
	struct pvm a = { .remote = v, .len = 4 * PG };
	struct pollfd pfd;
	struct uffd_msg msg;
	pthread_t t;
	int uffd;

	uffd = syscall(SYS_userfaultfd, O_CLOEXEC);
	if (uffd < 0 && errno == ENOSYS)
		SKIP(return, "no userfaultfd in this kernel (CONFIG_USERFAULTFD)");
	ASSERT_GE(uffd, 0) TH_LOG("userfaultfd: %s", pm_errname(errno));
	ASSERT_OK(ioctl(uffd, UFFDIO_API, &api));
	a.local = mmap(NULL, 4 * PG, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, a.local);
	reg.range.start = (uintptr_t)a.local;
	reg.range.len = 4 * PG;
	ASSERT_OK(ioctl(uffd, UFFDIO_REGISTER, &reg));
	ASSERT_EQ(0, pthread_create(&t, NULL, pvm_read, &a));
	pfd = (struct pollfd){ .fd = uffd, .events = POLLIN };
	ASSERT_EQ(1, poll(&pfd, 1, 20000)) TH_LOG("no fault from the copy");
	ASSERT_EQ(sizeof(msg), read(uffd, &msg, sizeof(msg)));
	/* The copy stalls on the local fault, the view's pages pinned. */
	pm_unmap(v, 2 * MiB);
	close(vfd);
	ASSERT_TRANSITION(EBUSY, pm_donate(rfd));
	ASSERT_REFS(rfd, 0, 2 * MiB, 4, 4);
	zp.range.start = (uintptr_t)a.local;
	zp.range.len = 4 * PG;
	ASSERT_OK(ioctl(uffd, UFFDIO_ZEROPAGE, &zp));
	ASSERT_EQ(0, pthread_join(t, NULL));
	ASSERT_EQ(4 * PG, a.ret) TH_LOG("process_vm_readv: %s",
					pm_errname(errno));
	ASSERT_TRANSITION(0, pm_donate_wait(rfd, 5000));
	munmap(a.local, 4 * PG);
	close(uffd);
	close(rfd);
}

TEST_HARNESS_MAIN
