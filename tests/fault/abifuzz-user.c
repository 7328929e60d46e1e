// SPDX-License-Identifier: GPL-2.0
/*
 * The ABI fuzzer as unprivileged users (abifuzz -u UID): each worker runs
 * as its own uid (UID + worker), a member of the device's group, with a
 * low RLIMIT_MEMLOCK. What it checks beyond the model:
 *  - ALLOC is refused with ENOMEM exactly when the worker's live regions
 *    (a whole chunk each) and the new one would pass the limit;
 *  - LIST shows this worker's live regions and nothing else, and their
 *    charge never passes the limit;
 *  - by-id queries (HOLDERS, REFS, NODES) of any region not its own, the
 *    other workers' and the regions of root and of another user made
 *    before the fuzz, are ENOENT;
 *  - once everything is released the whole limit can be allocated again,
 *    and not one chunk more (every charge was given back);
 *  - the regions of root and of the other user are unchanged at the end:
 *    state, counts and data.
 */
#include <grp.h>
#include <sys/resource.h>

#include "abifuzz-model.h"

#define VICTIM_PAGES	4
#define VICTIM_WORD(i)	(0x5a5a000000000000ULL | (i))

int check_own_list(struct model *m, char *why, size_t len)
{
	static struct pinmem_region_info l[NR + 8];
	struct pinmem_list q = { .regions_ptr = (uintptr_t)l,
				 .capacity = NR + 8 };
	uint64_t charged = 0;
	uint32_t j;
	int r;

	if (ioctl(m->dev, PINMEM_IOC_LIST, &q))
		FAIL("LIST: %s", strerror(errno));
	if (q.count != (uint32_t)live_regions(m))
		FAIL("LIST: %u regions, the worker holds %d", q.count,
		     live_regions(m));
	for (j = 0; j < q.count && j < NR + 8; j++) {
		for (r = 0; r < NR; r++)
			if (m->R[r].live && m->R[r].id == l[j].region_id)
				break;
		if (r == NR || l[j].owner_uid != getuid())
			FAIL("LIST: region %llu of uid %u is not this worker's (uid %u)",
			     (unsigned long long)l[j].region_id,
			     l[j].owner_uid, getuid());
		if (l[j].state != m->R[r].state ||
		    l[j].owner_mappings != counts_of(m, r).owner)
			FAIL("LIST: region %llu state %u owner %llu, model %u %llu",
			     (unsigned long long)l[j].region_id, l[j].state,
			     (unsigned long long)l[j].owner_mappings,
			     m->R[r].state,
			     (unsigned long long)counts_of(m, r).owner);
		charged += (l[j].size + CHUNK - 1) / CHUNK * CHUNK;
	}
	if (charged > m->user->memlock)
		FAIL("LIST: %llu bytes charged, RLIMIT_MEMLOCK %llu",
		     (unsigned long long)charged,
		     (unsigned long long)m->user->memlock);
	return 0;
}

/* The id a by-id query asks about: foreign, one of ours, or near ours. */
static uint64_t pick_id(struct model *m, const struct op *op)
{
	uint64_t last = m->nids ? m->ids[(m->nids - 1) % NIDS] : 1;

	switch (op->b % 3) {
	case 0:
		if (m->user->nforeign)
			return m->user->foreign[op->c % m->user->nforeign];
		/* fall through */
	case 1:
		if (m->nids)
			return m->ids[op->c % (m->nids < NIDS ? m->nids : NIDS)];
		/* fall through */
	default:	/* id 0 is no region's: a device-fd query needs one */
		return last + op->c % 16 > 8 ? last + op->c % 16 - 8 : last + 1;
	}
}

/* A by-id query: ENOENT unless the id is one of this worker's live regions. */
int op_foreign(struct model *m, const struct op *op, char *why, size_t len)
{
	struct pinmem_holder h[2 * NV * (NC + 1)];
	struct pinmem_ref_range rr[4];
	struct pinmem_holders hq = { .holders_ptr = (uintptr_t)h,
				     .capacity = 2 * NV * (NC + 1) };
	struct pinmem_refs fq = { .ranges_ptr = (uintptr_t)rr, .capacity = 4 };
	uint64_t nodes[64];
	struct pinmem_nodes nq = { .bytes_ptr = (uintptr_t)nodes,
				   .capacity = 64 };
	int want = ENOENT, got;
	const char *what;
	uint64_t id;

	if (!m->user)
		return 0;
	id = pick_id(m, op);
	for (int r = 0; r < NR; r++)
		if (m->R[r].live && m->R[r].id == id)
			want = 0;
	switch (op->a % 3) {
	case 0:
		hq.region_id = id;
		what = "HOLDERS by id";
		got = ioctl(m->dev, PINMEM_IOC_HOLDERS, &hq) ? errno : 0;
		break;
	case 1:
		fq.region_id = id;
		what = "REFS by id";
		got = ioctl(m->dev, PINMEM_IOC_REFS, &fq) ? errno : 0;
		break;
	default:
		nq.region_id = id;
		what = "NODES by id";
		got = ioctl(m->dev, PINMEM_IOC_NODES, &nq) ? errno : 0;
		break;
	}
	m->probes++;
	if (want != got)
		FAIL("%s %llu (%s): expected %s, got %s", what,
		     (unsigned long long)id, want ? "not this worker's" : "its own",
		     want ? strerror(want) : "success",
		     got ? strerror(got) : "success");
	return 0;
}

/* Become uid (a member of gid only), limited to memlock; then open the device. */
int user_become(const struct fuzz_user *u, uid_t uid)
{
	struct rlimit rl = { u->memlock, u->memlock };
	int dev;

	if (setrlimit(RLIMIT_MEMLOCK, &rl) || setgroups(1, &u->gid) ||
	    setresgid(u->gid, u->gid, u->gid) || setresuid(uid, uid, uid)) {
		printf("# worker: cannot become uid %u: %s\n", uid,
		       strerror(errno));
		return -1;
	}
	dev = open(PINMEM_DEVICE_PATH, O_RDWR | O_CLOEXEC);
	if (dev < 0)
		printf("# uid %u (group %u): open %s: %s\n", uid, u->gid,
		       PINMEM_DEVICE_PATH, strerror(errno));
	return dev;
}

/*
 * After the run, everything released: the whole limit can be allocated
 * again, one chunk per region, and the next region is ENOMEM.
 */
int user_memlock_back(int dev, const struct fuzz_user *u)
{
	unsigned int want = u->memlock / CHUNK, n;
	int fds[64], ret = 0, err = 0;

	if (want >= 64)
		want = 63;
	for (n = 0; n <= want; n++) {
		struct pinmem_alloc a = { .size = PGSZ };

		if (ioctl(dev, PINMEM_IOC_ALLOC, &a)) {
			err = errno;
			break;
		}
		fds[n] = a.fd;
	}
	if (n != want || err != ENOMEM) {
		printf("# uid %u: after the run %u regions of one chunk under RLIMIT_MEMLOCK %llu, then %s; want %u, then ENOMEM\n",
		       getuid(), n, (unsigned long long)u->memlock,
		       err ? strerror(err) : "no refusal", want);
		ret = -1;
	}
	while (n--)
		close(fds[n]);
	return ret;
}

struct victim {
	int fd;
	uint64_t id;
	volatile uint64_t *map;
};

static struct victim victims[NFOREIGN];
static int nvictims;

/* A region of uid (0: root's), mapped by this process, a pattern in it. */
static int victim_make(int dev, uid_t uid, struct fuzz_user *u)
{
	struct pinmem_alloc a = { .size = VICTIM_PAGES * PGSZ };
	struct victim *v = &victims[nvictims];
	int ret;

	if (uid && setresuid(uid, uid, 0))
		return -1;
	ret = ioctl(dev, PINMEM_IOC_ALLOC, &a);
	if (uid && setresuid(0, 0, 0))
		return -1;
	if (ret) {
		printf("# ALLOC of a region of uid %u: %s\n", uid,
		       strerror(errno));
		return -1;
	}
	v->fd = a.fd;
	v->id = a.region_id;
	v->map = mmap(NULL, VICTIM_PAGES * PGSZ, PROT_READ | PROT_WRITE,
		      MAP_SHARED, a.fd, 0);
	if (v->map == MAP_FAILED)
		return -1;
	for (unsigned int i = 0; i < VICTIM_PAGES * PGSZ / 8; i++)
		v->map[i] = VICTIM_WORD(i);
	u->foreign[u->nforeign++] = v->id;
	nvictims++;
	return 0;
}

/* Root's region, and one of the user after the last worker's. */
int user_victims_make(int dev, struct fuzz_user *u, int nworkers)
{
	if (victim_make(dev, 0, u) || victim_make(dev, u->uid + nworkers, u)) {
		printf("# cannot make the other users' regions: %s\n",
		       strerror(errno));
		return -1;
	}
	printf("# regions of other users: %llu (root), %llu (uid %u)\n",
	       (unsigned long long)victims[0].id,
	       (unsigned long long)victims[1].id, u->uid + nworkers);
	return 0;
}

/* Unchanged: OPEN, only our owner mapping, no view, the pattern whole. */
int user_victims_check(void)
{
	int bad = 0;

	for (int k = 0; k < nvictims; k++) {
		struct victim *v = &victims[k];
		struct pinmem_region_info ri;
		unsigned int i, n = VICTIM_PAGES * PGSZ / 8;

		if (ioctl(v->fd, PINMEM_IOC_INFO, &ri)) {
			printf("# INFO of region %llu: %s\n",
			       (unsigned long long)v->id, strerror(errno));
			bad = 1;
			continue;
		}
		for (i = 0; i < n && v->map[i] == VICTIM_WORD(i); i++)
			;
		if (ri.state != PINMEM_STATE_OPEN || ri.owner_mappings != 1 ||
		    ri.view_mappings || ri.view_fds || i != n) {
			printf("# region %llu of another user changed: state %u owner %llu views %llu view fds %llu, pattern %s\n",
			       (unsigned long long)v->id, ri.state,
			       (unsigned long long)ri.owner_mappings,
			       (unsigned long long)ri.view_mappings,
			       (unsigned long long)ri.view_fds,
			       i == n ? "whole" : "changed");
			bad = 1;
		}
		munmap((void *)v->map, VICTIM_PAGES * PGSZ);
		close(v->fd);
	}
	return bad;
}
