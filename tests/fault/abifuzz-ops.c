// SPDX-License-Identifier: GPL-2.0
/*
 * The ABI fuzzer's operations: each one runs the call and compares its
 * result with what the model says today's ABI promises, then updates the
 * model. An op whose objects do not exist (yet) does nothing.
 */
#include <sys/prctl.h>

#include "abifuzz-model.h"

static int op_alloc(struct model *m, const struct op *op, char *why,
		    size_t len, int *touched)
{
	struct pinmem_alloc a = { 0 };
	int fi = free_slot_f(m), r, want = 0;

	for (r = 0; r < NR && m->R[r].live; r++)
		;
	if (fi < 0 || r == NR)
		return 0;
	a.size = (1 + op->a % MAXPG) * PGSZ;
	a.flags = op->b & 1 ? PINMEM_ALLOC_FALLBACK : 0;
	/* Each region is charged a whole chunk to the user's RLIMIT_MEMLOCK. */
	if (m->user && (live_regions(m) + 1) * CHUNK > m->user->memlock)
		want = ENOMEM;
	if (expect(want, ioctl(m->dev, PINMEM_IOC_ALLOC, &a) ? errno : 0,
		   "ALLOC", why, len))
		return -1;
	if (want) {
		m->refused++;
		return check_own_list(m, why, len);
	}
	m->R[r] = (struct region){ .live = 1, .id = a.region_id,
				   .pages = a.size / PGSZ,
				   .state = PINMEM_STATE_OPEN };
	m->ids[m->nids++ % NIDS] = a.region_id;
	m->F[fi] = (struct fdobj){ .used = 1, .fd = a.fd, .r = r,
				   .file = ++m->next_file };
	*touched = r;
	return m->user ? check_own_list(m, why, len) : 0;
}

static int op_view(struct model *m, const struct op *op, char *why,
		   size_t len, int *touched)
{
	int fi = PICK(m->F, NF, op->a, !m->F[__k].view), nf = free_slot_f(m);
	struct pinmem_view v = { 0 };
	struct region *reg;
	int want = 0, got;

	if (fi < 0 || nf < 0)
		return 0;
	reg = &m->R[m->F[fi].r];
	v.offset = op->b % reg->pages;
	v.length = 1 + op->c % (reg->pages - v.offset);
	v.flags = op->c & 0x100 ? PINMEM_VIEW_WRITE : 0;
	if ((op->c & 0x3000) == 0x3000) {
		v.length = reg->pages - v.offset + 1;	/* past the end */
		want = EINVAL;
	} else if (v.flags && reg->state != PINMEM_STATE_OPEN) {
		want = EPERM;
	}
	v.offset *= PGSZ;
	v.length *= PGSZ;
	got = ioctl(m->F[fi].fd, PINMEM_IOC_VIEW, &v) ? errno : 0;
	*touched = m->F[fi].r;
	if (expect(want, got, "VIEW", why, len))
		return -1;
	if (got)
		return 0;
	m->F[nf] = (struct fdobj){ .used = 1, .fd = v.fd, .r = m->F[fi].r,
				   .view = 1, .write = !!v.flags,
				   .file = ++m->next_file,
				   .off = v.offset / PGSZ,
				   .pages = v.length / PGSZ };
	return 0;
}

static int op_map(struct model *m, const struct op *op, int view, char *why,
		  size_t len, int *touched)
{
	int fi = PICK(m->F, NF, op->a, m->F[__k].view == view);
	int vi = free_slot_v(m), prot, want = 0, got, maywrite = 1;
	unsigned int pages;
	struct region *reg;
	char *p;

	if (fi < 0 || vi < 0)
		return 0;
	reg = &m->R[m->F[fi].r];
	prot = op->b & 1 ? PROT_READ : PROT_READ | PROT_WRITE;
	pages = view ? m->F[fi].pages : reg->pages;
	if (view) {
		if ((prot & PROT_WRITE) && !m->F[fi].write)
			want = EACCES;
		else if (reg->state == PINMEM_STATE_DONATED)
			want = EBUSY;
		else if (reg->state != PINMEM_STATE_OPEN && (prot & PROT_WRITE))
			want = EPERM;
		maywrite = m->F[fi].write && reg->state == PINMEM_STATE_OPEN;
	}
	p = mmap(NULL, pages * PGSZ, prot, MAP_SHARED, m->F[fi].fd, 0);
	got = p == MAP_FAILED ? errno : 0;
	*touched = m->F[fi].r;
	if (expect(want, got, view ? "mmap view" : "mmap region", why, len))
		return -1;
	if (!got)
		add_vma(m, vi, p, fi, prot, maywrite);
	return 0;
}

static int op_unmap(struct model *m, const struct op *op, int head,
		    char *why, size_t len, int *touched)
{
	int vi = PICK(m->V, NV, op->a, !head || m->V[__k].pages >= 2);
	struct vma *v;

	if (vi < 0)
		return 0;
	v = &m->V[vi];
	*touched = v->r;
	if (expect(0, munmap(v->addr, head ? PGSZ : v->pages * PGSZ) ?
		   errno : 0, "munmap", why, len))
		return -1;
	if (!head) {
		v->used = 0;
		return 0;
	}
	v->addr += PGSZ;
	v->pages--;
	v->base++;
	return 0;
}

static int op_mremap(struct model *m, const struct op *op, int grow,
		     char *why, size_t len, int *touched)
{
	int vi = PICK(m->V, NV, op->a, grow || m->V[__k].pages >= 2);
	size_t old, new;
	struct vma *v;
	void *p;

	if (vi < 0)
		return 0;
	v = &m->V[vi];
	*touched = v->r;
	old = v->pages * PGSZ;
	new = grow ? old + PGSZ : v->pages / 2 * PGSZ;
	p = mremap(v->addr, old, new, grow ? MREMAP_MAYMOVE : 0);
	/* VM_DONTEXPAND: growth is refused. */
	if (expect(grow ? EFAULT : 0, p == MAP_FAILED ? errno : 0,
		   grow ? "mremap grow" : "mremap shrink", why, len))
		return -1;
	if (!grow)
		v->pages /= 2;
	return 0;
}

/* mprotect of the second page to read-only: one VMA becomes three. */
static int op_split(struct model *m, const struct op *op, char *why,
		    size_t len, int *touched)
{
	int vi = PICK(m->V, NV, op->a,
		      m->V[__k].pages >= 3 && (m->V[__k].prot & PROT_WRITE));
	int v1, v2;
	struct vma *v;

	if (vi < 0 || (v1 = free_slot_v(m)) < 0)
		return 0;
	m->V[v1].used = 1;
	v2 = free_slot_v(m);
	m->V[v1].used = 0;
	if (v2 < 0)
		return 0;
	v = &m->V[vi];
	*touched = v->r;
	if (expect(0, mprotect(v->addr + PGSZ, PGSZ, PROT_READ) ? errno : 0,
		   "mprotect", why, len))
		return -1;
	m->V[v1] = *v;
	m->V[v1].addr += PGSZ;
	m->V[v1].base += 1;
	m->V[v1].pages = 1;
	m->V[v1].prot = PROT_READ;
	m->V[v2] = *v;
	m->V[v2].addr += 2 * PGSZ;
	m->V[v2].base += 2;
	m->V[v2].pages -= 2;
	v->pages = 1;
	return 0;
}

static int op_madvise(struct model *m, const struct op *op, int fork_flag,
		      char *why, size_t len, int *touched)
{
	int vi = PICK(m->V, NV, op->a, 1), advice;
	struct vma *v;

	if (vi < 0)
		return 0;
	v = &m->V[vi];
	*touched = v->r;
	advice = !fork_flag ? MADV_DONTNEED :
		 v->dontfork ? MADV_DOFORK : MADV_DONTFORK;
	if (expect(0, madvise(v->addr, v->pages * PGSZ, advice) ? errno : 0,
		   "madvise", why, len))
		return -1;
	if (fork_flag)
		v->dontfork = !v->dontfork;
	return 0;
}

/* Whether every inherited mapping reads what the model says. */
static int data_ok(struct model *m)
{
	for (int i = 0; i < NV; i++) {
		struct vma *v = &m->V[i];

		if (!v->used || v->dontfork)
			continue;
		for (unsigned int p = 0; p < v->pages; p++)
			if (*(volatile uint64_t *)(v->addr + p * PGSZ) !=
			    m->R[v->r].data[v->base + p])
				return 0;
	}
	return 1;
}

static int op_fork(struct model *m, int linger, char *why, size_t len)
{
	pid_t pid, parent = getpid();
	int ci = -1, st;

	for (int i = 0; i < NC && linger; i++)
		if (!m->C[i].pid)
			ci = i;
	if (linger && ci < 0)
		return 0;
	pid = fork();
	if (pid < 0)
		FAIL("fork: %s", strerror(errno));
	if (pid == 0) {
		if (!linger)
			_exit(!data_ok(m));
		/* A worker that dies must not leave it holding the suite's stdout. */
		if (prctl(PR_SET_PDEATHSIG, SIGKILL) || getppid() != parent)
			_exit(1);
		for (;;)
			pause();
	}
	if (!linger) {
		if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) ||
		    WEXITSTATUS(st))
			FAIL("forked child: data differs from the model");
		return 0;
	}
	m->C[ci].pid = pid;
	memcpy(m->C[ci].f, m->F, sizeof(m->F));
	memcpy(m->C[ci].v, m->V, sizeof(m->V));
	for (int i = 0; i < NV; i++)
		if (m->C[ci].v[i].dontfork)
			m->C[ci].v[i].used = 0;
	return 0;
}

static void reap(struct model *m, int ci)
{
	kill(m->C[ci].pid, SIGKILL);
	waitpid(m->C[ci].pid, NULL, 0);
	memset(&m->C[ci], 0, sizeof(m->C[ci]));
}

static int op_reap(struct model *m, const struct op *op)
{
	int n = 0;

	for (int i = 0; i < NC; i++)
		n += !!m->C[i].pid;
	for (int i = 0, want = n ? op->a % n : -1; i < NC; i++)
		if (m->C[i].pid && !want--)
			reap(m, i);
	return 0;
}

static int op_pass_fd(struct model *m, const struct op *op, char *why,
		      size_t len, int *touched)
{
	int fi = PICK(m->F, NF, op->a, 1), nf = free_slot_f(m);
	char cbuf[CMSG_SPACE(sizeof(int))], byte = 'x';
	struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1,
			      .msg_control = cbuf,
			      .msg_controllen = sizeof(cbuf) };
	struct cmsghdr *c = CMSG_FIRSTHDR(&msg);

	if (fi < 0 || nf < 0)
		return 0;
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &m->F[fi].fd, sizeof(int));
	if (sendmsg(m->sock[0], &msg, 0) != 1)
		FAIL("sendmsg SCM_RIGHTS: %s", strerror(errno));
	memset(cbuf, 0, sizeof(cbuf));
	if (recvmsg(m->sock[1], &msg, MSG_CMSG_CLOEXEC) != 1 ||
	    !(c = CMSG_FIRSTHDR(&msg)) || c->cmsg_type != SCM_RIGHTS)
		FAIL("recvmsg SCM_RIGHTS: %s", strerror(errno));
	m->F[nf] = m->F[fi];
	memcpy(&m->F[nf].fd, CMSG_DATA(c), sizeof(int));
	*touched = m->F[fi].r;
	return 0;
}

static int op_close(struct model *m, const struct op *op, char *why,
		    size_t len, int *touched)
{
	int fi = PICK(m->F, NF, op->a, 1);

	if (fi < 0)
		return 0;
	*touched = m->F[fi].r;
	if (expect(0, close(m->F[fi].fd) ? errno : 0, "close", why, len))
		return -1;
	m->F[fi].used = 0;
	return 0;
}
static int transition(int fd, unsigned long cmd, uint32_t flags, uint32_t ms)
{
	struct pinmem_transition t = { .flags = flags, .timeout_ms = ms };

	return ioctl(fd, cmd, &t) ? errno : 0;
}

static int op_state(struct model *m, const struct op *op, char *why,
		    size_t len, int *touched)
{
	int fi = PICK(m->F, NF, op->a, !m->F[__k].view), want = 0;
	static const char *const names[] = { "SEAL", "DONATE", "PUBLISH",
					     "REOPEN" };
	static const unsigned long cmds[] = { PINMEM_IOC_SEAL,
		PINMEM_IOC_DONATE, PINMEM_IOC_PUBLISH, PINMEM_IOC_REOPEN };
	int k = op->kind == OP_SEAL ? 0 : op->kind == OP_DONATE ? 1 :
		op->kind == OP_PUBLISH ? 2 : 3;
	uint32_t st, next;
	struct counts c;

	if (fi < 0)
		return 0;
	*touched = m->F[fi].r;
	st = m->R[*touched].state;
	c = counts_of(m, *touched);
	next = st;
	switch (k) {
	case 0:
		if (st == PINMEM_STATE_DONATED)
			want = EPERM;
		else if (st == PINMEM_STATE_OPEN && c.writable)
			want = EBUSY;
		else
			next = PINMEM_STATE_SEALED;
		break;
	case 1:
		if (st != PINMEM_STATE_DONATED && c.views)
			want = EBUSY;
		else
			next = PINMEM_STATE_DONATED;
		break;
	default:
		if (st != PINMEM_STATE_DONATED)
			want = EPERM;
		else
			next = k == 2 ? PINMEM_STATE_SEALED : PINMEM_STATE_OPEN;
		break;
	}
	if (expect(want, transition(m->F[fi].fd, cmds[k], 0, 0), names[k],
		   why, len))
		return -1;
	m->R[*touched].state = next;
	return 0;
}

/* Whether this process itself maps a view of region r. */
static int own_views(struct model *m, int r)
{
	return PICK(m->V, NV, 0, m->V[__k].r == r && m->V[__k].view) >= 0;
}

/*
 * DONATE WAIT: with views only in lingering children, a helper kills them
 * after 20 ms and the wait must end in success; with views of our own it
 * must time out.
 */
static int op_donate_wait(struct model *m, const struct op *op, char *why,
			  size_t len, int *touched)
{
	int fi = PICK(m->F, NF, op->a, !m->F[__k].view), r, got, want = 0;
	pid_t killer = 0;
	struct counts c;

	if (fi < 0)
		return 0;
	r = *touched = m->F[fi].r;
	c = counts_of(m, r);
	if (m->R[r].state != PINMEM_STATE_DONATED && c.views) {
		if (own_views(m, r)) {
			want = ETIMEDOUT;
		} else {
			killer = fork();
			if (killer == 0) {
				usleep(20000);
				for (int i = 0; i < NC; i++)
					if (m->C[i].pid)
						kill(m->C[i].pid, SIGKILL);
				_exit(0);
			}
		}
	}
	got = transition(m->F[fi].fd, PINMEM_IOC_DONATE, PINMEM_DONATE_WAIT,
			  want ? 10 : 10000);
	if (killer > 0) {
		waitpid(killer, NULL, 0);
		for (int i = 0; i < NC; i++)
			if (m->C[i].pid)
				reap(m, i);
	}
	if (expect(want, got, "DONATE WAIT", why, len))
		return -1;
	if (!want)
		m->R[r].state = PINMEM_STATE_DONATED;
	return 0;
}

static int op_holders(struct model *m, const struct op *op, char *why,
		      size_t len, int *touched)
{
	static struct pinmem_holder h[2 * NV * (NC + 1)];
	struct pinmem_holders q = { .holders_ptr = (uintptr_t)h,
				    .capacity = 2 * NV * (NC + 1) };
	int live = 0, r = -1;
	struct counts c;

	for (int i = 0; i < NR; i++)
		if (m->R[i].live && live++ == (int)(op->a % NR))
			r = i;
	if (r < 0)
		return 0;
	*touched = r;
	q.region_id = m->R[r].id;
	if (expect(0, ioctl(m->dev, PINMEM_IOC_HOLDERS, &q) ? errno : 0,
		   "HOLDERS", why, len))
		return -1;
	c = counts_of(m, r);
	if (q.count != c.owner + c.views)
		FAIL("HOLDERS of region %llu: %u, model %llu",
		     (unsigned long long)q.region_id, q.count,
		     (unsigned long long)(c.owner + c.views));
	for (int i = 0; i < NV; i++) {
		int found = 0;

		if (!m->V[i].used || m->V[i].r != r)
			continue;
		for (uint32_t j = 0; j < q.count; j++)
			found |= h[j].start == (uintptr_t)m->V[i].addr &&
				 h[j].length == m->V[i].pages * PGSZ &&
				 h[j].kind == (m->V[i].view ?
					PINMEM_HOLDER_VIEW : PINMEM_HOLDER_OWNER);
		if (!found)
			FAIL("HOLDERS: no record for the mapping at %p (%u pages)",
			     (void *)m->V[i].addr, m->V[i].pages);
	}
	return 0;
}

static int op_list(struct model *m, char *why, size_t len)
{
	static struct pinmem_region_info l[512];
	struct pinmem_list q = { .regions_ptr = (uintptr_t)l, .capacity = 512 };

	if (m->user)
		return check_own_list(m, why, len);
	if (expect(0, ioctl(m->dev, PINMEM_IOC_LIST, &q) ? errno : 0, "LIST",
		   why, len))
		return -1;
	for (int r = 0; r < NR; r++) {
		uint32_t j;

		if (!m->R[r].live)
			continue;
		for (j = 0; j < q.count && j < 512; j++)
			if (l[j].region_id == m->R[r].id)
				break;
		if (j == q.count || j == 512)
			FAIL("LIST: region %llu missing",
			     (unsigned long long)m->R[r].id);
		if (l[j].state != m->R[r].state ||
		    l[j].owner_mappings != counts_of(m, r).owner)
			FAIL("LIST: region %llu state %u owner %llu, model %u %llu",
			     (unsigned long long)m->R[r].id, l[j].state,
			     (unsigned long long)l[j].owner_mappings,
			     m->R[r].state,
			     (unsigned long long)counts_of(m, r).owner);
	}
	return 0;
}

static int op_rw(struct model *m, const struct op *op, int write, char *why,
		 size_t len, int *touched)
{
	int vi = PICK(m->V, NV, op->a, !write || (m->V[__k].prot & PROT_WRITE));
	volatile uint64_t *w;
	unsigned int p;
	struct vma *v;

	if (vi < 0)
		return 0;
	v = &m->V[vi];
	*touched = v->r;
	p = op->b % v->pages;
	w = (volatile uint64_t *)(v->addr + p * PGSZ);
	if (write) {
		*w = ((uint64_t)op->c << 32) | op->b | 1;
		m->R[v->r].data[v->base + p] = *w;
	} else if (*w != m->R[v->r].data[v->base + p]) {
		FAIL("read at page %u of region %llu: %#llx, model %#llx",
		     v->base + p, (unsigned long long)m->R[v->r].id,
		     (unsigned long long)*w,
		     (unsigned long long)m->R[v->r].data[v->base + p]);
	}
	return 0;
}

int model_step(struct model *m, const struct op *op, char *why, size_t len)
{
	int t = -1, ret;

	switch (op->kind) {
	case OP_ALLOC: ret = op_alloc(m, op, why, len, &t); break;
	case OP_VIEW: ret = op_view(m, op, why, len, &t); break;
	case OP_MAP_OWNER: ret = op_map(m, op, 0, why, len, &t); break;
	case OP_MAP_VIEW: ret = op_map(m, op, 1, why, len, &t); break;
	case OP_UNMAP: ret = op_unmap(m, op, 0, why, len, &t); break;
	case OP_UNMAP_HEAD: ret = op_unmap(m, op, 1, why, len, &t); break;
	case OP_MREMAP_SHRINK: ret = op_mremap(m, op, 0, why, len, &t); break;
	case OP_MREMAP_GROW: ret = op_mremap(m, op, 1, why, len, &t); break;
	case OP_SPLIT: ret = op_split(m, op, why, len, &t); break;
	case OP_MADV_DONTNEED: ret = op_madvise(m, op, 0, why, len, &t); break;
	case OP_MADV_DONTFORK: ret = op_madvise(m, op, 1, why, len, &t); break;
	case OP_FORK_EXIT: ret = op_fork(m, 0, why, len); break;
	case OP_FORK_LINGER: ret = op_fork(m, 1, why, len); break;
	case OP_REAP: ret = op_reap(m, op); break;
	case OP_PASS_FD: ret = op_pass_fd(m, op, why, len, &t); break;
	case OP_CLOSE: ret = op_close(m, op, why, len, &t); break;
	case OP_DONATE_WAIT: ret = op_donate_wait(m, op, why, len, &t); break;
	case OP_HOLDERS: ret = op_holders(m, op, why, len, &t); break;
	case OP_LIST: ret = op_list(m, why, len); break;
	case OP_WRITE: ret = op_rw(m, op, 1, why, len, &t); break;
	case OP_READ: ret = op_rw(m, op, 0, why, len, &t); break;
	case OP_FOREIGN: ret = op_foreign(m, op, why, len); break;
	default: ret = op_state(m, op, why, len, &t); break;
	}
	if (ret)
		return ret;
	settle(m);
	return check_region(m, t, why, len);
}
