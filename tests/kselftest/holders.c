// SPDX-License-Identifier: GPL-2.0
/*
 * Whom the kernel's list of holders names: the process that mapped a view
 * fd passed to it over SCM_RIGHTS, the process (not the thread) that
 * mapped, nobody for a process outside the caller's pid namespace, and
 * no address for another user's mapping (judged by the holder's thread
 * group leader, as /proc/PID/maps is). The counts themselves are
 * counting.c's; these tests were part of it and keep its fixture's name,
 * so that they are still counting.* in the TAP.
 */
#include <linux/capability.h>
#include <pthread.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>

#include "pinmem_test.h"

PM_FIXTURE(counting)

/* A view fd passed over SCM_RIGHTS and mapped there names that process. */
TEST_F(counting, view_fd_over_scm_rights)
{
	int rfd = pm_alloc(self->env.dev, 2 * MiB);
	int vfd = pm_view(rfd, 0, 2 * MiB, 0);
	char *o = pm_map(rfd, PG, PROT_READ | PROT_WRITE, 0);
	struct pinmem_holder h[4];
	const struct pinmem_holder *x = NULL;
	int sv[2];
	pid_t pid;
	uint64_t addr = 0;
	char go;

	pm_fill(o, PG, 51);
	ASSERT_OK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv));
	pid = fork();
	ASSERT_GE(pid, 0);
	if (pid == 0) {
		char cbuf[CMSG_SPACE(sizeof(int))], b;
		struct iovec iov = { .iov_base = &b, .iov_len = 1 };
		struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1,
				    .msg_control = cbuf,
				    .msg_controllen = sizeof(cbuf) };
		uint64_t a = 0;
		char *v;
		int fd;

		close(sv[0]);
		/* Not the parent's mappings: only the fd we are sent. */
		munmap(o, PG);
		close(vfd);
		close(rfd);
		if (recvmsg(sv[1], &m, 0) != 1 || !CMSG_FIRSTHDR(&m))
			_exit(2);
		memcpy(&fd, CMSG_DATA(CMSG_FIRSTHDR(&m)), sizeof(int));
		v = mmap(NULL, PG, PROT_READ, MAP_SHARED, fd, 0);
		if (v != MAP_FAILED && pm_check(v, PG, 51) == -1)
			a = (uintptr_t)v;
		if (write(sv[1], &a, sizeof(a)) != sizeof(a) ||
		    read(sv[1], &b, 1) < 0)
			_exit(3);
		_exit(a ? 0 : 4);
	}
	close(sv[1]);
	{
		char cbuf[CMSG_SPACE(sizeof(int))] = { 0 }, b = 'f';
		struct iovec iov = { .iov_base = &b, .iov_len = 1 };
		struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1,
				    .msg_control = cbuf,
				    .msg_controllen = sizeof(cbuf) };
		struct cmsghdr *cm = CMSG_FIRSTHDR(&m);

		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(cm), &vfd, sizeof(int));
		ASSERT_EQ(1, sendmsg(sv[0], &m, 0));
	}
	close(vfd);
	ASSERT_EQ(sizeof(addr), read(sv[0], &addr, sizeof(addr)));
	ASSERT_NE(0, addr) TH_LOG("the child could not map the view");
	pm_expect_counts(rfd, 1, 1, 0);
	ASSERT_EQ(2, pm_holders(rfd, h, 4));
	for (int i = 0; i < 2; i++)
		if (h[i].kind == PINMEM_HOLDER_VIEW)
			x = &h[i];
	ASSERT_NE(NULL, x);
	EXPECT_EQ((uint32_t)pid, x->tgid);
	EXPECT_EQ(addr, x->start);
	go = 'g';
	ASSERT_EQ(1, write(sv[0], &go, 1));
	close(sv[0]);
	ASSERT_EQ(0, pm_wait(pid));
	pm_expect_counts(rfd, 1, 0, 0);
	pm_unmap(o, PG);
	close(rfd);
}
struct thread_map {
	int vfd;
	void *addr;
};

static void *map_in_thread(void *arg)
{
	struct thread_map *m = arg;

	m->addr = mmap(NULL, PG, PROT_READ, MAP_SHARED, m->vfd, 0);
	return NULL;
}

/* The holder is the process (tgid), whichever thread mapped it. */
TEST_F(counting, holder_is_the_process_not_the_thread)
{
	int rfd = pm_alloc(self->env.dev, 2 * MiB);
	struct thread_map m = { .vfd = pm_view(rfd, 0, 2 * MiB, 0) };
	struct pinmem_holder h[2];
	pthread_t t;

	ASSERT_EQ(0, pthread_create(&t, NULL, map_in_thread, &m));
	ASSERT_EQ(0, pthread_join(t, NULL));
	ASSERT_NE(MAP_FAILED, m.addr);
	ASSERT_EQ(1, pm_holders(rfd, h, 2));
	EXPECT_EQ((uint32_t)getpid(), h[0].tgid);
	EXPECT_EQ((uintptr_t)m.addr, h[0].start);
	pm_unmap(m.addr, PG);
	close(m.vfd);
	close(rfd);
}

/* Drop CAP_SYS_PTRACE from this process's effective and permitted sets. */
static int pm_drop_ptrace(void)
{
	struct __user_cap_header_struct hdr = {
		.version = _LINUX_CAPABILITY_VERSION_3,
	};
	struct __user_cap_data_struct data[2];

	if (syscall(SYS_capget, &hdr, data))
		return -1;
	data[0].effective &= ~(1U << CAP_SYS_PTRACE);
	data[0].permitted &= ~(1U << CAP_SYS_PTRACE);
	return syscall(SYS_capset, &hdr, data) ? -1 : 0;
}

/*
 * HOLDERS from inside a new pid namespace, where the mapping process is
 * not visible: its tgid is 0 and its name is not given away either, nor
 * its address, although the caller is the same user (another container
 * of one uid). CAP_SYS_PTRACE (the host's root) still sees the address.
 */
TEST_F(counting, holder_outside_pid_namespace_is_anonymous)
{
	int rfd = pm_alloc(self->env.dev, 2 * MiB);
	char *p = pm_map(rfd, 2 * MiB, PROT_READ, 0);
	struct {
		uint32_t count;
		struct pinmem_holder h;
	} out, capped;
	int fds[2];
	pid_t pid;

	/* Only this process's mapping: the children do not inherit it. */
	ASSERT_OK(madvise(p, 2 * MiB, MADV_DONTFORK));
	ASSERT_OK(pipe2(fds, O_CLOEXEC));
	pid = fork();
	ASSERT_GE(pid, 0);
	if (pid == 0) {
		struct pinmem_holders q = {
			.holders_ptr = (uintptr_t)&out.h,
			.capacity = 1,
		};
		pid_t inner;

		if (unshare(CLONE_NEWPID))
			_exit(10);
		inner = fork();
		if (inner < 0)
			_exit(11);
		if (inner == 0) {
			memset(&out, 0xa5, sizeof(out));
			if (ioctl(rfd, PINMEM_IOC_HOLDERS, &q))
				_exit(12);
			out.count = q.count;
			if (write(fds[1], &out, sizeof(out)) != sizeof(out))
				_exit(13);
			if (pm_drop_ptrace())
				_exit(14);
			memset(&out, 0xa5, sizeof(out));
			if (ioctl(rfd, PINMEM_IOC_HOLDERS, &q))
				_exit(15);
			out.count = q.count;
			if (write(fds[1], &out, sizeof(out)) != sizeof(out))
				_exit(16);
			_exit(0);
		}
		_exit(pm_wait(inner));
	}
	close(fds[1]);
	ASSERT_EQ(0, pm_wait(pid)) TH_LOG("child in the new pid namespace");
	ASSERT_EQ(sizeof(capped), read(fds[0], &capped, sizeof(capped)));
	ASSERT_EQ(sizeof(out), read(fds[0], &out, sizeof(out)));
	close(fds[0]);
	ASSERT_EQ(1, capped.count);
	EXPECT_EQ((uintptr_t)p, capped.h.start) TH_LOG("with CAP_SYS_PTRACE");
	EXPECT_EQ(0, capped.h.flags & PINMEM_HOLDER_ADDR_HIDDEN);
	EXPECT_EQ(0, capped.h.tgid);
	ASSERT_EQ(1, out.count);
	EXPECT_EQ(0, out.h.start) TH_LOG("same user, no CAP_SYS_PTRACE");
	EXPECT_NE(0, out.h.flags & PINMEM_HOLDER_ADDR_HIDDEN);
	EXPECT_EQ(2 * MiB, out.h.length);
	EXPECT_EQ(0, out.h.tgid) TH_LOG("tgid of a process not in the namespace");
	for (size_t i = 0; i < sizeof(out.h.comm); i++) {
		EXPECT_EQ(0, out.h.comm[i]) TH_LOG("comm byte %zu", i);
	}
	/* Seen from here, the same mapping is named. */
	ASSERT_EQ(1, pm_holders(rfd, &out.h, 1));
	EXPECT_EQ((uint32_t)getpid(), out.h.tgid);
	EXPECT_NE(0, out.h.comm[0]);
	pm_unmap(p, 2 * MiB);
	close(rfd);
}

/* What a process of user uid sees of the view fd's holders. */
struct pm_seen {
	uint32_t count;
	uint32_t pid;		/* the looking process */
	uint64_t mine;		/* its own view mapping */
	struct pinmem_holder h[4];
};

static int pm_seen_as(int vfd, uid_t uid, int out_fd)
{
	struct pm_seen seen = { .pid = (uint32_t)getpid() };
	struct pinmem_holders q = {
		.holders_ptr = (uintptr_t)seen.h,
		.capacity = 4,
	};
	void *v;

	if (setresgid(uid, uid, uid) || setresuid(uid, uid, uid))
		return 20;
	v = mmap(NULL, 2 * MiB, PROT_READ, MAP_SHARED, vfd, 0);
	if (v == MAP_FAILED)
		return 21;
	if (ioctl(vfd, PINMEM_IOC_HOLDERS, &q))
		return 22;
	seen.count = q.count;
	seen.mine = (uintptr_t)v;
	if (write(out_fd, &seen, sizeof(seen)) != sizeof(seen))
		return 23;
	return 0;
}

/* What a child of user uid sees through vfd (pm_seen_as()), via res. */
static void pm_look_as(struct __test_metadata *_metadata, int vfd, uid_t uid,
		       int res[2], struct pm_seen *seen)
{
	pid_t pid = fork();

	ASSERT_GE(pid, 0);
	if (pid == 0)
		_exit(pm_seen_as(vfd, uid, res[1]));
	ASSERT_EQ(0, pm_wait(pid));
	ASSERT_EQ(sizeof(*seen), read(res[0], seen, sizeof(*seen)));
}

/* The record of process pid (processes here hold one mapping each). */
static const struct pinmem_holder *pm_holder_of(const struct pinmem_holder *h,
						uint32_t n, pid_t pid)
{
	for (uint32_t i = 0; i < n; i++)
		if (h[i].tgid == (uint32_t)pid)
			return &h[i];
	return NULL;
}

#define PM_HIDDEN(x)	((x)->flags & PINMEM_HOLDER_ADDR_HIDDEN)

TEST_F(counting, holder_address_withheld_from_other_users)
{
	int rfd = pm_alloc(self->env.dev, 2 * MiB);
	int vfd = pm_view(rfd, 0, 2 * MiB, 0);
	char *own = pm_map(rfd, 2 * MiB, PROT_READ, 0);
	int ready[2], done[2], res[2];
	struct pinmem_holder h[4];
	const struct pinmem_holder *r;
	struct pm_seen seen;
	pid_t holder = 0, undumpable = 0, pid;
	void *hv, *nv;
	char c = 0;

	ASSERT_OK(pipe2(ready, O_CLOEXEC));
	ASSERT_OK(pipe2(done, O_CLOEXEC));
	ASSERT_OK(pipe2(res, O_CLOEXEC));
	/* Each process holds only the mappings it made. */
	ASSERT_OK(madvise(own, 2 * MiB, MADV_DONTFORK));
	/*
	 * The holders: user 65534, one view mapping each, kept until told;
	 * the second is not dumpable, which hides its maps file from its own
	 * user too (and so its addresses).
	 */
	for (int i = 0; i < 2; i++) {
		pid = fork();
		ASSERT_GE(pid, 0);
		if (pid == 0) {
			if (setresgid(65534, 65534, 65534) ||
			    setresuid(65534, 65534, 65534))
				_exit(10);
			/* A uid change leaves it undumpable: set it back. */
			if (prctl(PR_SET_DUMPABLE, !i))
				_exit(13);
			hv = mmap(NULL, 2 * MiB, PROT_READ, MAP_SHARED, vfd, 0);
			if (hv == MAP_FAILED)
				_exit(11);
			if (write(ready[1], &hv, sizeof(hv)) != sizeof(hv) ||
			    read(done[0], &c, 1) != 1)
				_exit(12);
			_exit(0);
		}
		if (i)
			undumpable = pid;
		else
			holder = pid;
		ASSERT_EQ(sizeof(hv), read(ready[0], i ? &nv : &hv,
					   sizeof(hv)));
	}

	/* Another user: every address but its own withheld, the rest shown. */
	pm_look_as(_metadata, vfd, 65533, res, &seen);
	ASSERT_EQ(4, seen.count);
	r = pm_holder_of(seen.h, 4, (pid_t)seen.pid);
	ASSERT_NE(NULL, r);
	EXPECT_EQ(seen.mine, r->start) TH_LOG("its own mapping");
	EXPECT_EQ(0, PM_HIDDEN(r));
	r = pm_holder_of(seen.h, 4, holder);
	ASSERT_NE(NULL, r);
	EXPECT_EQ(0, r->start) TH_LOG("user 65534's view, seen by 65533");
	EXPECT_NE(0, PM_HIDDEN(r));
	EXPECT_EQ(2 * MiB, r->length);
	EXPECT_EQ(PINMEM_HOLDER_VIEW, r->kind);
	EXPECT_NE(0, r->comm[0]);
	r = pm_holder_of(seen.h, 4, getpid());
	ASSERT_NE(NULL, r);
	EXPECT_EQ(0, r->start) TH_LOG("root's owner mapping, seen by 65533");
	EXPECT_NE(0, PM_HIDDEN(r));
	EXPECT_EQ(PINMEM_HOLDER_OWNER, r->kind);

	/* The holder's own user sees the holder's address, not root's. */
	pm_look_as(_metadata, vfd, 65534, res, &seen);
	ASSERT_EQ(4, seen.count);
	r = pm_holder_of(seen.h, 4, holder);
	ASSERT_NE(NULL, r);
	EXPECT_EQ((uintptr_t)hv, r->start) TH_LOG("same user's view");
	EXPECT_EQ(0, PM_HIDDEN(r));
	r = pm_holder_of(seen.h, 4, undumpable);
	ASSERT_NE(NULL, r);
	EXPECT_EQ(0, r->start) TH_LOG("same user's view, not dumpable");
	EXPECT_NE(0, PM_HIDDEN(r));
	r = pm_holder_of(seen.h, 4, getpid());
	ASSERT_NE(NULL, r);
	EXPECT_EQ(0, r->start) TH_LOG("root's owner mapping, seen by 65534");
	EXPECT_NE(0, PM_HIDDEN(r));

	/* Root (CAP_SYS_PTRACE) sees every address. */
	ASSERT_EQ(3, pm_holders(vfd, h, 4));
	r = pm_holder_of(h, 3, holder);
	ASSERT_NE(NULL, r);
	EXPECT_EQ((uintptr_t)hv, r->start);
	EXPECT_EQ(0, PM_HIDDEN(r));
	r = pm_holder_of(h, 3, undumpable);
	ASSERT_NE(NULL, r);
	EXPECT_EQ((uintptr_t)nv, r->start);
	r = pm_holder_of(h, 3, getpid());
	ASSERT_NE(NULL, r);
	EXPECT_EQ((uintptr_t)own, r->start);
	EXPECT_EQ(0, PM_HIDDEN(r));

	ASSERT_EQ(2, write(done[1], "xx", 2));
	ASSERT_EQ(0, pm_wait(holder));
	ASSERT_EQ(0, pm_wait(undumpable));
	for (int i = 0; i < 2; i++) {
		close(ready[i]);
		close(done[i]);
		close(res[i]);
	}
	pm_unmap(own, 2 * MiB);
	close(vfd);
	close(rfd);
}

/* The holder whose thread group leader is gone (pm_leader_gone()). */
struct pm_leader_gone {
	int vfd;
	int ready_fd;		/* the mapping's address goes out here */
	int done_fd;		/* the test's word to end */
	int step[2];		/* the other thread's creds are set */
};

/* The other thread: user 65534 by raw syscall (its own creds only). */
static void *pm_other_thread(void *arg)
{
	struct pm_leader_gone *g = arg;
	char c = 0;

	if (syscall(SYS_setresgid, 65534, 65534, 65534) ||
	    syscall(SYS_setresuid, 65534, 65534, 65534))
		_exit(30);
	if (write(g->step[1], &c, 1) != 1)
		_exit(31);
	/* The process lives on in this thread until the test is done. */
	if (read(g->done_fd, &c, 1) < 0)
		_exit(32);
	_exit(0);
}

/*
 * The leader: user 65533 by raw syscall, the process dumpable, one view
 * mapping; then it exits alone, leaving the other thread (user 65534)
 * as the only one using the mm.
 */
static int pm_leader_gone(struct pm_leader_gone *g)
{
	pthread_t t;
	void *v;
	char c;

	if (pipe2(g->step, O_CLOEXEC) ||
	    pthread_create(&t, NULL, pm_other_thread, g) ||
	    read(g->step[0], &c, 1) != 1)
		return 40;
	if (syscall(SYS_setresgid, 65533, 65533, 65533) ||
	    syscall(SYS_setresuid, 65533, 65533, 65533))
		return 41;
	if (prctl(PR_SET_DUMPABLE, 1))
		return 42;
	v = mmap(NULL, PG, PROT_READ, MAP_SHARED, g->vfd, 0);
	if (v == MAP_FAILED ||
	    write(g->ready_fd, &v, sizeof(v)) != sizeof(v))
		return 43;
	pthread_exit(NULL);
}

/* The state letter of process pid (its thread group leader). */
static char pm_proc_state(pid_t pid)
{
	char path[64], buf[256], *p;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	p = strrchr(buf, ')');
	return p && p[1] == ' ' ? p[2] : 0;
}

/*
 * Whose credentials decide if a holder's address is shown: its thread
 * group leader's, the task /proc/PID/maps is judged by, never those of
 * whichever thread of it a search meets first. Here the leader (user
 * 65533) has exited and the one thread left is user 65534, by a raw
 * setresuid of its own: user 65534 must not see the address.
 */
TEST_F(counting, holder_address_judged_by_the_leader)
{
	int rfd = pm_alloc(self->env.dev, 2 * MiB);
	int vfd = pm_view(rfd, 0, 2 * MiB, 0);
	int ready[2], done[2], res[2];
	struct pm_leader_gone g = { .vfd = vfd };
	const struct pinmem_holder *r;
	struct pinmem_holder h[4];
	struct pm_seen seen;
	pid_t holder;
	void *hv = NULL;
	char state = 0;

	ASSERT_OK(pipe2(ready, O_CLOEXEC));
	ASSERT_OK(pipe2(done, O_CLOEXEC));
	ASSERT_OK(pipe2(res, O_CLOEXEC));
	g.ready_fd = ready[1];
	g.done_fd = done[0];
	holder = fork();
	ASSERT_GE(holder, 0);
	if (holder == 0)
		_exit(pm_leader_gone(&g));
	ASSERT_EQ(sizeof(hv), read(ready[0], &hv, sizeof(hv)));
	for (int i = 0; i < 10000 && state != 'Z'; i++) {
		state = pm_proc_state(holder);
		if (state != 'Z')
			usleep(1000);
	}
	ASSERT_EQ('Z', state) TH_LOG("the holder's leader did not exit");

	pm_look_as(_metadata, vfd, 65534, res, &seen);
	ASSERT_EQ(2, seen.count);
	r = pm_holder_of(seen.h, 2, holder);
	ASSERT_NE(NULL, r);
	EXPECT_EQ(0, r->start)
		TH_LOG("user 65534 sees the address of a process whose leader is 65533");
	EXPECT_NE(0, PM_HIDDEN(r));
	/* Root sees it. */
	ASSERT_EQ(1, pm_holders(vfd, h, 4));
	EXPECT_EQ((uintptr_t)hv, h[0].start);
	EXPECT_EQ((uint32_t)holder, h[0].tgid);

	ASSERT_EQ(1, write(done[1], "x", 1));
	ASSERT_EQ(0, pm_wait(holder));
	for (int i = 0; i < 2; i++) {
		close(ready[i]);
		close(done[i]);
		close(res[i]);
	}
	close(vfd);
	close(rfd);
}

#define MAPPER_MAX	4000

struct mapper {
	int vfd;
	int stop;
	int made;
	void *maps[MAPPER_MAX];
};

/* Adds one-page view mappings, without end, up to MAPPER_MAX of them. */
static void *map_more(void *arg)
{
	struct mapper *m = arg;
	void *p;

	while (!__atomic_load_n(&m->stop, __ATOMIC_ACQUIRE) &&
	       m->made < MAPPER_MAX) {
		p = mmap(NULL, PG, PROT_READ, MAP_SHARED, m->vfd,
			 (off_t)(m->made % 512) * PG);
		if (p == MAP_FAILED)
			break;
		m->maps[m->made] = p;
		__atomic_store_n(&m->made, m->made + 1, __ATOMIC_RELEASE);
	}
	return NULL;
}

/*
 * A holder that keeps adding mappings must not make the owner's HOLDERS
 * fail (it used to give EAGAIN after four tries): every call answers, and
 * the answer is whole or says it is not. Every mapping made before the
 * call is counted; min(count, capacity) records are filled, each a real
 * one, and not one more; a capacity below the mappings gives count >
 * capacity (odd calls ask for 16 records).
 */
TEST_F(counting, holders_answer_while_mappings_keep_coming)
{
	int rfd = pm_alloc(self->env.dev, 2 * MiB);
	static struct mapper m;
	struct pinmem_holders q;
	struct pinmem_holder *h = calloc(8192 + 1, sizeof(*h));
	uint32_t cap, filled;
	pthread_t t;
	int calls, before;

	ASSERT_NE(NULL, h);
	m.vfd = pm_view(rfd, 0, 2 * MiB, 0);
	ASSERT_EQ(0, pthread_create(&t, NULL, map_more, &m));
	/* The first call must find mappings to count (10 s at most). */
	for (int i = 0; i < 10000 &&
	     __atomic_load_n(&m.made, __ATOMIC_ACQUIRE) < 17; i++)
		usleep(1000);
	ASSERT_LT(16, __atomic_load_n(&m.made, __ATOMIC_ACQUIRE));
	for (calls = 0; calls < 200 &&
	     __atomic_load_n(&m.made, __ATOMIC_ACQUIRE) < MAPPER_MAX; calls++) {
		cap = calls % 2 ? 16 : 8192;
		q = (struct pinmem_holders){ .capacity = cap,
					     .holders_ptr = (uintptr_t)h };
		memset(h, 0xa5, (8192 + 1) * sizeof(*h));
		before = __atomic_load_n(&m.made, __ATOMIC_ACQUIRE);
		ASSERT_EQ(0, ioctl(rfd, PINMEM_IOC_HOLDERS, &q))
			TH_LOG("call %d, %d mappings: %s", calls, before,
			       pm_errname(errno));
		ASSERT_LE(before, q.count) TH_LOG("call %d", calls);
		if (cap == 16)
			ASSERT_LT(cap, q.count);
		filled = q.count < cap ? q.count : cap;
		for (uint32_t i = 0; i < filled; i++) {
			ASSERT_EQ(PG, h[i].length)
				TH_LOG("call %d: record %u of %u", calls, i,
				       q.count);
			ASSERT_EQ(PINMEM_HOLDER_VIEW, h[i].kind);
		}
		ASSERT_EQ(0xa5a5a5a5u, h[filled].kind)
			TH_LOG("call %d: record %u written, count %u",
			       calls, filled, q.count);
	}
	__atomic_store_n(&m.stop, 1, __ATOMIC_RELEASE);
	ASSERT_EQ(0, pthread_join(t, NULL));
	TH_LOG("%d calls while %d mappings were added", calls, m.made);
	for (int i = 0; i < m.made; i++)
		pm_unmap(m.maps[i], PG);
	free(h);
	close(m.vfd);
	close(rfd);
}

TEST_HARNESS_MAIN
