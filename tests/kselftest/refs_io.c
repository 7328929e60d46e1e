// SPDX-License-Identifier: GPL-2.0
/*
 * References held by I/O and registrations through views: O_DIRECT in
 * flight on a slow device (null_blk with timer completions: 6.1 takes
 * plain references, 6.12 pins), io_uring fixed buffers (6.12; 6.1 refuses
 * the registration), an AF_XDP UMEM (FOLL_LONGTERM, one pin per page: the
 * stand-in for cuMemHostRegister without a GPU), the owner's own I/O and
 * registrations (refused until declared, and never room for a view's),
 * and DONATE WAIT going on through io_uring completions posted to the
 * waiting thread as task work.
 */
#include <linux/if_xdp.h>
#include <liburing.h>
#include <pthread.h>
#include <sys/socket.h>

#include "refs_test.h"

#ifndef AF_XDP
#define AF_XDP 44
#endif
#ifndef SOL_XDP
#define SOL_XDP 283
#endif

/* Every I/O on /dev/nullb0 completes after this long (timer mode). */
#define NULLB_DELAY_NS	1000000000ULL
#define IO_BYTES	(32 * PG)

FIXTURE(io) {
	struct pm_env env;
	struct io_uring ring;
	bool ring_up;
	int nullb;
};

FIXTURE_SETUP(io)
{
	self->nullb = -1;
	pm_setup(_metadata, &self->env);
	ASSERT_EQ(0, io_uring_queue_init(8, &self->ring, 0));
	self->ring_up = true;
}

FIXTURE_TEARDOWN(io)
{
	if (self->ring_up)
		io_uring_queue_exit(&self->ring);
	if (self->nullb >= 0) {
		close(self->nullb);
		if (system("rmmod null_blk"))
			TH_LOG("rmmod null_blk failed");
	}
	pm_teardown(_metadata, &self->env);
}

/* /dev/nullb0, O_DIRECT, every I/O taking NULLB_DELAY_NS. */
static int nullb_open(struct __test_metadata *_metadata)
{
	return pm_nullb_open(_metadata, NULLB_DELAY_NS, O_RDWR | O_DIRECT);
}

/* Submit one O_DIRECT read (or write) of IO_BYTES at buf. */
static void submit_rw(struct __test_metadata *_metadata, struct io_uring *ring,
		      int fd, void *buf, bool write)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(ring);

	ASSERT_NE(NULL, sqe);
	if (write)
		io_uring_prep_write(sqe, fd, buf, IO_BYTES, 0);
	else
		io_uring_prep_read(sqe, fd, buf, IO_BYTES, 0);
	ASSERT_EQ(1, io_uring_submit(ring));
}

/*
 * Wait until the I/O holds its pages (io_uring may have handed the
 * request to a worker, which takes them a little later): REFS counts
 * them even while the view is still mapped.
 */
static void wait_in_flight(struct __test_metadata *_metadata, int rfd)
{
	struct pinmem_ref_range r[2];
	double t0 = pm_now();

	while (!(pm_refs(rfd, r, 2) == 1 && r[0].refs == IO_BYTES / PG)) {
		ASSERT_LT(pm_now() - t0, 0.5) TH_LOG("the I/O took no pages");
		usleep(1000);
	}
}

static int reap(struct io_uring *ring)
{
	struct io_uring_cqe *cqe;
	int res;

	if (io_uring_wait_cqe(ring, &cqe))
		return -9999;
	res = cqe->res;
	io_uring_cqe_seen(ring, cqe);
	return res;
}

/*
 * The second reproduction: an O_DIRECT read into a writable view,
 * the view unmapped at once. DONATE is refused while the read is in
 * flight; DONATE WAIT on the submitting thread goes on through the
 * completion's task work and succeeds once the pages are released.
 */
TEST_F(io, odirect_in_flight_blocks_donate)
{
	int rfd = pm_alloc(self->env.dev, 2 * MiB);
	int vfd = pm_view(rfd, 0, 2 * MiB, PINMEM_VIEW_WRITE);
	char *v = pm_map(vfd, 2 * MiB, PROT_READ | PROT_WRITE, 0);
	struct pinmem_ref_range r[2];
	double t0;

	self->nullb = nullb_open(_metadata);
	t0 = pm_now();
	submit_rw(_metadata, &self->ring, self->nullb, v + MiB, false);
	wait_in_flight(_metadata, rfd);
	pm_unmap(v, 2 * MiB);
	close(vfd);
	ASSERT_TRANSITION(EBUSY, pm_donate(rfd));
	ASSERT_LT(pm_now() - t0, 0.9) TH_LOG("too slow to see the I/O in flight");
	ASSERT_EQ(1, pm_refs(rfd, r, 2));
	EXPECT_EQ(0, r[0].offset);
	EXPECT_EQ(IO_BYTES / PG, r[0].refs);
	/* 6.12 pins (BIO_PAGE_PINNED); 6.1 takes plain references. */
	EXPECT_EQ(pm_kernel_is("6.1") ? 0 : IO_BYTES / PG, r[0].pinned);
	ASSERT_TRANSITION(0, pm_donate_wait(rfd, 20000));
	EXPECT_GE(pm_now() - t0, 0.9) TH_LOG("donated before the completion");
	ASSERT_EQ(IO_BYTES, reap(&self->ring));
	close(rfd);
}

/* The O_DIRECT write from a read-only view holds its pages as well. */
TEST_F(io, odirect_write_from_view_blocks_donate)
{
	int rfd = pm_alloc(self->env.dev, 2 * MiB);
	int vfd = pm_view(rfd, 0, 2 * MiB, 0);
	char *v = pm_map(vfd, 2 * MiB, PROT_READ, 0);

	self->nullb = nullb_open(_metadata);
	submit_rw(_metadata, &self->ring, self->nullb, v, true);
	wait_in_flight(_metadata, rfd);
	pm_unmap(v, 2 * MiB);
	ASSERT_TRANSITION(EBUSY, pm_donate(rfd));
	ASSERT_REFS(rfd, 0, 2 * MiB, IO_BYTES / PG,
		    pm_kernel_is("6.1") ? 0 : IO_BYTES / PG);
	ASSERT_EQ(IO_BYTES, reap(&self->ring));
	ASSERT_TRANSITION(0, pm_donate_wait(rfd, 5000));
	close(vfd);
	close(rfd);
}

/* SEAL: no O_DIRECT read may still write into a writable view. */
TEST_F(io, seal_waits_for_odirect_into_writable_view)
{
	int rfd = pm_alloc(self->env.dev, 2 * MiB);
	int vfd = pm_view(rfd, 0, 2 * MiB, PINMEM_VIEW_WRITE);
	char *v = pm_map(vfd, 2 * MiB, PROT_READ | PROT_WRITE, 0);
	double t0;
	int ret;

	self->nullb = nullb_open(_metadata);
	submit_rw(_metadata, &self->ring, self->nullb, v, false);
	wait_in_flight(_metadata, rfd);
	pm_unmap(v, 2 * MiB);
	ASSERT_TRANSITION(EBUSY, pm_seal(rfd));
	ASSERT_EQ(PINMEM_STATE_OPEN, pm_state(rfd));
	ASSERT_EQ(IO_BYTES, reap(&self->ring));
	/* The pages may be released just after the completion is posted. */
	t0 = pm_now();
	while ((ret = pm_seal(rfd)) == EBUSY && pm_now() - t0 < 5)
		usleep(10000);
	ASSERT_EQ(0, ret);
	ASSERT_EQ(PINMEM_STATE_SEALED, pm_state(rfd));
	close(vfd);
	close(rfd);
}

struct later {
	int *pfd;		/* drain this pipe, or */
	void *addr;		/* unmap this */
	size_t len;
	int delay_ms;
};

static void *do_later(void *arg)
{
	struct later *l = arg;
	char buf[16 * PG];

	usleep(l->delay_ms * 1000);
	if (l->pfd)
		pm_drain(l->pfd, buf, sizeof(buf));
	else
		munmap(l->addr, l->len);
	return NULL;
}

/* An io_uring timeout that completes (as task work) in 100 ms. */
static void arm_timeout(struct __test_metadata *_metadata,
			struct io_uring *ring, struct __kernel_timespec *ts)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(ring);

	ts->tv_sec = 0;
	ts->tv_nsec = 100 * 1000 * 1000;
	ASSERT_NE(NULL, sqe);
	io_uring_prep_timeout(sqe, ts, 0, 0);
	ASSERT_EQ(1, io_uring_submit(ring));
}

/*
 * io_uring task work makes signal_pending() true without a signal: the
 * wait must go on (for references and for views alike), not fail EINTR.
 */
TEST_F(io, wait_goes_on_through_task_work)
{
	int rfd = pm_alloc(self->env.dev, 2 * MiB);
	int vfd = pm_view(rfd, 0, 2 * MiB, 0);
	char *v = pm_map(vfd, 2 * MiB, PROT_READ, 0);
	struct __kernel_timespec ts;
	struct later l = { .delay_ms = 600 };
	pthread_t t;
	double t0;
	int p[2];

	/* References: a pipe drained by another thread. */
	pm_splice(p, v, 4);
	pm_unmap(v, 2 * MiB);
	l.pfd = p;
	ASSERT_EQ(0, pthread_create(&t, NULL, do_later, &l));
	arm_timeout(_metadata, &self->ring, &ts);
	t0 = pm_now();
	ASSERT_TRANSITION(0, pm_donate_wait(rfd, 20000));
	EXPECT_GE(pm_now() - t0, 0.5);
	ASSERT_EQ(0, pthread_join(t, NULL));
	ASSERT_EQ(-ETIME, reap(&self->ring)) TH_LOG("the timeout completed");
	/* Views: a mapping unmapped by another thread. */
	ASSERT_TRANSITION(0, pm_reopen(rfd));
	l.pfd = NULL;
	l.addr = pm_map(vfd, 2 * MiB, PROT_READ, 0);
	l.len = 2 * MiB;
	ASSERT_EQ(0, pthread_create(&t, NULL, do_later, &l));
	arm_timeout(_metadata, &self->ring, &ts);
	t0 = pm_now();
	ASSERT_TRANSITION(0, pm_donate_wait(rfd, 20000));
	EXPECT_GE(pm_now() - t0, 0.5);
	ASSERT_EQ(0, pthread_join(t, NULL));
	ASSERT_EQ(-ETIME, reap(&self->ring));
	close(vfd);
	close(rfd);
}

/* The third reproduction: a fixed buffer over a view. */
TEST_F(io, fixed_buffer_over_view)
{
	int rfd = pm_alloc(self->env.dev, 4 * MiB);
	int vfd = pm_view(rfd, 0, 4 * MiB, PINMEM_VIEW_WRITE);
	char *v = pm_map(vfd, 4 * MiB, PROT_READ | PROT_WRITE, 0);
	struct iovec iov = { .iov_base = v, .iov_len = 4 * MiB };
	int ret = io_uring_register_buffers(&self->ring, &iov, 1);

	if (pm_kernel_is("6.1")) {
		/* 6.1 refuses buffers of any file but shmem and hugetlbfs. */
		ASSERT_EQ(-EOPNOTSUPP, ret);
		pm_unmap(v, 4 * MiB);
		ASSERT_TRANSITION(0, pm_donate(rfd));
		goto out;
	}
	ASSERT_EQ(0, ret);
	pm_unmap(v, 4 * MiB);
	ASSERT_TRANSITION(EBUSY, pm_donate(rfd));
	/* io_uring keeps one pin per 2 MiB folio. */
	ASSERT_REFS(rfd, 0, 4 * MiB, 2, 2);
	ASSERT_EQ(0, io_uring_unregister_buffers(&self->ring));
	ASSERT_TRANSITION(0, pm_donate_wait(rfd, 5000));
out:
	close(vfd);
	close(rfd);
}

/* The owner's fixed buffer, before views or after: refused until declared. */
TEST_F(io, owner_fixed_buffer)
{
	int rfd = pm_alloc(self->env.dev, 4 * MiB);
	char *o = pm_map(rfd, 4 * MiB, PROT_READ | PROT_WRITE, 0);
	int vfd = pm_view(rfd, 0, 4 * MiB, 0);
	struct iovec iov = { .iov_base = o, .iov_len = 4 * MiB };

	if (pm_kernel_is("6.1"))
		SKIP(goto out, "6.1 refuses fixed buffers over pinmem mappings");
	/* Registered before any view, undeclared: refused all the same. */
	ASSERT_EQ(0, io_uring_register_buffers(&self->ring, &iov, 1));
	pm_unmap(pm_map(vfd, 4 * MiB, PROT_READ, 0), 4 * MiB);
	ASSERT_TRANSITION(EBUSY, pm_donate(rfd));
	ASSERT_REFS(rfd, 0, 4 * MiB, 2, 2);
	ASSERT_EQ(0, io_uring_unregister_buffers(&self->ring));
	ASSERT_TRANSITION(0, pm_donate_wait(rfd, 5000));
	/* Registered after views, undeclared: refused, and REFS says where. */
	ASSERT_TRANSITION(0, pm_reopen(rfd));
	pm_unmap(pm_map(vfd, 4 * MiB, PROT_READ, 0), 4 * MiB);
	ASSERT_EQ(0, io_uring_register_buffers(&self->ring, &iov, 1));
	ASSERT_TRANSITION(EBUSY, pm_donate(rfd));
	ASSERT_REFS(rfd, 0, 4 * MiB, 2, 2);
	/* Declared: donated. */
	ASSERT_EQ(0, pm_expect(rfd, 0, 4 * MiB, PINMEM_EXPECT_PER_CHUNK));
	ASSERT_TRANSITION(0, pm_donate(rfd));
	ASSERT_EQ(0, io_uring_unregister_buffers(&self->ring));
	ASSERT_EQ(0, pm_expect(rfd, 0, 4 * MiB, PINMEM_EXPECT_PER_CHUNK |
					       PINMEM_EXPECT_REMOVE));
out:
	pm_unmap(o, 4 * MiB);
	close(vfd);
	close(rfd);
}

/*
 * The review's 6.12 case: the owner's fixed buffer, undeclared, is in
 * place when a writable view first maps the chunks, and released later;
 * the view holder then registers its own over the view (one pin per
 * folio: read-write access to the whole chunk). It must not ride on the
 * owner's former pin through DONATE.
 */
TEST_F(io, view_fixed_buffer_after_owner_registration_released)
{
	int rfd = pm_alloc(self->env.dev, 4 * MiB);
	char *o = pm_map(rfd, 4 * MiB, PROT_READ | PROT_WRITE, 0);
	int vfd = pm_view(rfd, 0, 4 * MiB, PINMEM_VIEW_WRITE);
	struct iovec iov = { .iov_base = o, .iov_len = 4 * MiB };
	struct io_uring holder;
	char *v;

	if (pm_kernel_is("6.1"))
		SKIP(goto out, "6.1 refuses fixed buffers over pinmem mappings");
	ASSERT_EQ(0, io_uring_queue_init(4, &holder, 0));
	ASSERT_EQ(0, io_uring_register_buffers(&self->ring, &iov, 1));
	v = pm_map(vfd, 4 * MiB, PROT_READ | PROT_WRITE, 0);
	ASSERT_EQ(0, io_uring_unregister_buffers(&self->ring));
	iov.iov_base = v;
	ASSERT_EQ(0, io_uring_register_buffers(&holder, &iov, 1));
	pm_unmap(v, 4 * MiB);
	ASSERT_TRANSITION(EBUSY, pm_donate(rfd));
	ASSERT_EQ(PINMEM_STATE_OPEN, pm_state(rfd));
	ASSERT_REFS(rfd, 0, 4 * MiB, 2, 2);
	ASSERT_EQ(0, io_uring_unregister_buffers(&holder));
	ASSERT_TRANSITION(0, pm_donate_wait(rfd, 5000));
	io_uring_queue_exit(&holder);
out:
	pm_unmap(o, 4 * MiB);
	close(vfd);
	close(rfd);
}

/*
 * The owner's own O_DIRECT write is in flight when a view first maps the
 * chunk, and completes; a reference the view holder takes afterwards
 * must still block DONATE.
 */
TEST_F(io, owner_odirect_in_flight_when_view_maps_leaves_no_room)
{
	int rfd = pm_alloc(self->env.dev, 2 * MiB);
	char *o = pm_map(rfd, 2 * MiB, PROT_READ | PROT_WRITE, 0);
	int vfd = pm_view(rfd, 0, 2 * MiB, 0);
	char buf[4 * PG];
	double t0;
	char *v;
	int p[2];

	self->nullb = nullb_open(_metadata);
	submit_rw(_metadata, &self->ring, self->nullb, o, true);
	/* REFS sees no chunk before a view maps it: give the I/O its pages. */
	usleep(300 * 1000);
	v = pm_map(vfd, 2 * MiB, PROT_READ, 0);
	wait_in_flight(_metadata, rfd);
	ASSERT_EQ(IO_BYTES, reap(&self->ring));
	t0 = pm_now();
	while (pm_refs(rfd, NULL, 0)) {
		ASSERT_LT(pm_now() - t0, 5) TH_LOG("the I/O kept its pages");
		usleep(1000);
	}
	pm_splice(p, v, 4);
	pm_unmap(v, 2 * MiB);
	close(vfd);
	ASSERT_TRANSITION(EBUSY, pm_donate(rfd));
	ASSERT_REFS(rfd, 0, 2 * MiB, 4, 0);
	ASSERT_EQ(4 * PG, pm_drain(p, buf, sizeof(buf)));
	ASSERT_TRANSITION(0, pm_donate_wait(rfd, 5000));
	pm_unmap(o, 2 * MiB);
	close(rfd);
}

/* An AF_XDP UMEM over len bytes at addr: the socket, or -errno. */
/* Debian's kernels have AF_XDP; the debug kernel's small config does not. */
static int xdp_absent(void)
{
	int s = socket(AF_XDP, SOCK_RAW | SOCK_CLOEXEC, 0);

	if (s >= 0)
		close(s);
	return s < 0 && errno == EAFNOSUPPORT;
}

static int umem_register(void *addr, size_t len)
{
	struct xdp_umem_reg reg = {
		.addr = (uintptr_t)addr, .len = len, .chunk_size = 4096,
	};
	int s = socket(AF_XDP, SOCK_RAW | SOCK_CLOEXEC, 0);

	if (s < 0)
		return -errno;
	if (setsockopt(s, SOL_XDP, XDP_UMEM_REG, &reg, sizeof(reg))) {
		int e = errno;

		close(s);
		return -e;
	}
	return s;
}

/*
 * A FOLL_LONGTERM registration through a view, one pin per page, as
 * cuMemHostRegister takes: an AF_XDP UMEM (in-tree, no device needed,
 * both kernels; its unpin runs from a workqueue after close).
 */
TEST_F(io, longterm_pin_through_view)
{
	int rfd, vfd, s;
	char *v;

	if (xdp_absent())
		SKIP(return, "no AF_XDP in this kernel (CONFIG_XDP_SOCKETS)");
	rfd = pm_alloc(self->env.dev, 4 * MiB);
	vfd = pm_view(rfd, 0, 4 * MiB, PINMEM_VIEW_WRITE);
	v = pm_map(vfd, 4 * MiB, PROT_READ | PROT_WRITE, 0);
	s = umem_register(v + 2 * MiB, 2 * MiB);
	ASSERT_GE(s, 0) TH_LOG("XDP_UMEM_REG: %s", pm_errname(-s));
	pm_unmap(v, 4 * MiB);
	ASSERT_TRANSITION(EBUSY, pm_donate(rfd));
	ASSERT_REFS(rfd, 2 * MiB, 2 * MiB, 512, 512);
	close(s);
	ASSERT_TRANSITION(0, pm_donate_wait(rfd, 5000));
	close(vfd);
	close(rfd);
}

/* The owner's long-term registration, before views or after: declared. */
TEST_F(io, owner_longterm_pin)
{
	int rfd, vfd, s;
	char *o;

	if (xdp_absent())
		SKIP(return, "no AF_XDP in this kernel (CONFIG_XDP_SOCKETS)");
	rfd = pm_alloc(self->env.dev, 2 * MiB);
	o = pm_map(rfd, 2 * MiB, PROT_READ | PROT_WRITE, 0);
	vfd = pm_view(rfd, 0, 2 * MiB, 0);
	s = umem_register(o, 2 * MiB);
	ASSERT_GE(s, 0) TH_LOG("XDP_UMEM_REG: %s", pm_errname(-s));
	pm_unmap(pm_map(vfd, 2 * MiB, PROT_READ, 0), 2 * MiB);
	/* Before the views, undeclared: refused all the same. */
	ASSERT_TRANSITION(EBUSY, pm_donate(rfd));
	ASSERT_REFS(rfd, 0, 2 * MiB, 512, 512);
	close(s);
	/* The UMEM's unpin runs from a workqueue after close. */
	ASSERT_TRANSITION(0, pm_donate_wait(rfd, 5000));
	ASSERT_TRANSITION(0, pm_reopen(rfd));
	/* After the views: refused until declared. */
	pm_unmap(pm_map(vfd, 2 * MiB, PROT_READ, 0), 2 * MiB);
	s = umem_register(o, 2 * MiB);
	ASSERT_GE(s, 0);
	ASSERT_TRANSITION(EBUSY, pm_donate(rfd));
	ASSERT_REFS(rfd, 0, 2 * MiB, 512, 512);
	ASSERT_EQ(0, pm_expect(rfd, 0, 2 * MiB, PINMEM_EXPECT_PER_PAGE));
	ASSERT_TRANSITION(0, pm_donate(rfd));
	close(s);
	ASSERT_EQ(0, pm_expect(rfd, 0, 2 * MiB, PINMEM_EXPECT_PER_PAGE |
					       PINMEM_EXPECT_REMOVE));
	pm_unmap(o, 2 * MiB);
	close(vfd);
	close(rfd);
}

TEST_HARNESS_MAIN
