// SPDX-License-Identifier: GPL-2.0
/*
 * The ABI fuzzer's reference model: one worker's regions, fds (each a file
 * identity, shared by SCM_RIGHTS copies), mappings and lingering children,
 * and for each operation the outcome today's ABI promises. Counts follow
 * from the objects: a region's owner/view/writable mappings are the VMAs
 * of this process and of its lingering children; its view_fds are the
 * distinct view files anything still holds; it lives while anything
 * refers to it.
 */
#include "abifuzz-model.h"

struct model *model_new(int dev, const struct fuzz_user *user)
{
	struct model *m = calloc(1, sizeof(*m));

	if (!m)
		return NULL;
	m->dev = dev;
	m->user = user && user->uid ? user : NULL;
	if (socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, m->sock)) {
		free(m);
		return NULL;
	}
	return m;
}

int free_slot_f(struct model *m)
{
	for (int i = 0; i < NF; i++)
		if (!m->F[i].used)
			return i;
	return -1;
}

int free_slot_v(struct model *m)
{
	for (int i = 0; i < NV; i++)
		if (!m->V[i].used)
			return i;
	return -1;
}

/* Add what one process (f, v) holds of region r; view files into files. */
static void count_one(struct counts *c, const struct fdobj *f,
		      const struct vma *v, int r, int *files, int *nfiles)
{
	for (int i = 0; i < NF; i++) {
		if (!f[i].used || f[i].r != r)
			continue;
		c->refs++;
		if (f[i].view)
			files[(*nfiles)++] = f[i].file;
	}
	for (int i = 0; i < NV; i++) {
		if (!v[i].used || v[i].r != r)
			continue;
		c->refs++;
		if (!v[i].view) {
			c->owner++;
			continue;
		}
		files[(*nfiles)++] = v[i].file;
		c->views++;
		c->writable += v[i].maywrite;
	}
}

struct counts counts_of(struct model *m, int r)
{
	int files[(NF + NV) * (NC + 1)], n = 0;
	struct counts c = { 0 };

	count_one(&c, m->F, m->V, r, files, &n);
	for (int i = 0; i < NC; i++)
		if (m->C[i].pid)
			count_one(&c, m->C[i].f, m->C[i].v, r, files, &n);
	for (int i = 0; i < n; i++) {
		int seen = 0;

		for (int j = 0; j < i && !seen; j++)
			seen = files[j] == files[i];
		c.view_fds += !seen;
	}
	return c;
}

int live_regions(const struct model *m)
{
	int n = 0;

	for (int r = 0; r < NR; r++)
		n += m->R[r].live;
	return n;
}

/* A region nothing refers to is gone. */
void settle(struct model *m)
{
	for (int r = 0; r < NR; r++)
		if (m->R[r].live && !counts_of(m, r).refs)
			m->R[r].live = 0;
}

/* INFO through any fd of the region, against the model. */
int check_region(struct model *m, int r, char *why, size_t len)
{
	struct pinmem_region_info ri;
	struct counts c;
	int fi;

	if (r < 0 || !m->R[r].live)
		return 0;
	fi = PICK(m->F, NF, 0, m->F[__k].r == r);
	if (fi < 0)
		return 0;
	if (ioctl(m->F[fi].fd, PINMEM_IOC_INFO, &ri))
		FAIL("INFO: %s", strerror(errno));
	c = counts_of(m, r);
	if (ri.region_id != m->R[r].id || ri.state != m->R[r].state ||
	    ri.owner_mappings != c.owner || ri.view_mappings != c.views ||
	    ri.writable_view_mappings != c.writable ||
	    ri.view_fds != c.view_fds)
		FAIL("region %llu: kernel id %llu state %u owner %llu views %llu "
		     "writable %llu view_fds %llu; model state %u owner %llu "
		     "views %llu writable %llu view_fds %llu",
		     (unsigned long long)m->R[r].id,
		     (unsigned long long)ri.region_id, ri.state,
		     (unsigned long long)ri.owner_mappings,
		     (unsigned long long)ri.view_mappings,
		     (unsigned long long)ri.writable_view_mappings,
		     (unsigned long long)ri.view_fds, m->R[r].state,
		     (unsigned long long)c.owner, (unsigned long long)c.views,
		     (unsigned long long)c.writable,
		     (unsigned long long)c.view_fds);
	return 0;
}

/* Compare a call's result (0 or an errno) with the expected one. */
int expect(int want, int got, const char *what, char *why, size_t len)
{
	if (want != got)
		FAIL("%s: expected %s, got %s", what,
		     want ? strerror(want) : "success",
		     got ? strerror(got) : "success");
	return 0;
}

void add_vma(struct model *m, int vi, char *addr, int fi, int prot,
		    int maywrite)
{
	struct fdobj *f = &m->F[fi];

	m->V[vi] = (struct vma){
		.used = 1, .r = f->r, .view = f->view, .maywrite = maywrite,
		.prot = prot, .file = f->file, .addr = addr,
		.pages = f->view ? f->pages : m->R[f->r].pages,
		.base = f->view ? f->off : 0,
	};
}


/* Release everything; no region of this run may be left in LIST. */
int model_finish(struct model *m, char *why, size_t len)
{
	static struct pinmem_region_info l[512];
	struct pinmem_list q = { .regions_ptr = (uintptr_t)l, .capacity = 512 };
	int n = m->nids < NIDS ? m->nids : NIDS;

	for (int i = 0; i < NC; i++)
		if (m->C[i].pid) {
			kill(m->C[i].pid, SIGKILL);
			waitpid(m->C[i].pid, NULL, 0);
			m->C[i].pid = 0;
		}
	for (int i = 0; i < NV; i++)
		if (m->V[i].used && munmap(m->V[i].addr, m->V[i].pages * PGSZ))
			FAIL("final munmap: %s", strerror(errno));
	for (int i = 0; i < NF; i++)
		if (m->F[i].used && close(m->F[i].fd))
			FAIL("final close: %s", strerror(errno));
	memset(m->V, 0, sizeof(m->V));
	memset(m->F, 0, sizeof(m->F));
	for (int tries = 0; tries < 100; tries++) {
		int left = 0;

		if (ioctl(m->dev, PINMEM_IOC_LIST, &q))
			FAIL("LIST: %s", strerror(errno));
		for (uint32_t j = 0; j < q.count && j < 512; j++)
			for (int i = 0; i < n; i++)
				left += l[j].region_id == m->ids[i];
		if (!left)
			return 0;
		usleep(10000);
	}
	FAIL("regions of this run still listed after everything was released");
}

void model_free(struct model *m)
{
	close(m->sock[0]);
	close(m->sock[1]);
	free(m);
}
