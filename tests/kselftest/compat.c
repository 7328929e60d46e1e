// SPDX-License-Identifier: GPL-2.0
/*
 * Growth of the ABI, and libraries built against older headers. The ioctl
 * number carries the size of the caller's struct: a library of ABI 1
 * passes its structs as ABI 1 published them and is served; a struct
 * larger than the module's is served when the bytes the module does not
 * know are zero, and refused with E2BIG (changing nothing) when they are
 * not; a size below the first published one is no ioctl of ours (ENOTTY).
 * The records of LIST, HOLDERS and REFS are written at the caller's
 * record_size.
 *
 * The abi1_* layouts are those of the header of ABI 1, copied as they
 * were published: they must never change.
 */
#include "refs_test.h"

struct abi1_version {
	__u32 abi_version;
	__u32 abi_min_compat;
	__u64 chunk_size;
};

struct abi1_dev_info {
	__u64 max_total_bytes;
	__u64 max_region_bytes;
	__u64 total_bytes;
	__u64 nr_regions;
	__u64 nr_mappings;
	__u64 nr_view_fds;
	__u64 reserved[2];
};

struct abi1_alloc {
	__u64 size;
	__u32 flags;
	__s32 fd;
	__u64 region_id;
	__u64 reserved;
};

struct abi1_region_info {
	__u64 region_id;
	__u64 size;
	__u32 state;
	__u32 flags;
	__u32 chunk_order;
	__u32 min_order;
	__u64 nr_chunks;
	__u64 nr_fallback_chunks;
	__u64 owner_mappings;
	__u64 view_mappings;
	__u64 writable_view_mappings;
	__u64 view_fds;
	__u32 owner_uid;
	__u32 owner_tgid;
	__u64 reserved[2];
};

struct abi1_view {
	__u64 offset;
	__u64 length;
	__u32 flags;
	__s32 fd;
	__u64 reserved;
};

struct abi1_view_info {
	__u64 region_id;
	__u64 offset;
	__u64 length;
	__u32 flags;
	__u32 pad;
	__u64 reserved[2];
};

struct abi1_holder {
	__u32 tgid;
	__u32 kind;
	__u64 start;
	__u64 length;
	__u64 offset;
	__u32 prot;
	__u32 flags;
	char comm[16];
};

struct abi1_holders {
	__u64 region_id;
	__u64 holders_ptr;
	__u32 capacity;
	__u32 count;
	__u64 reserved;
};

struct abi1_list {
	__u64 regions_ptr;
	__u32 capacity;
	__u32 count;
	__u64 reserved;
};

struct abi1_transition {
	__u32 flags;
	__u32 timeout_ms;
	__u64 reserved;
};

#define M PINMEM_IOC_MAGIC
#define ABI1_VERSION	_IOR(M, 0x00, struct abi1_version)
#define ABI1_DEV_INFO	_IOR(M, 0x01, struct abi1_dev_info)
#define ABI1_ALLOC	_IOWR(M, 0x02, struct abi1_alloc)
#define ABI1_LIST	_IOWR(M, 0x03, struct abi1_list)
#define ABI1_HOLDERS	_IOWR(M, 0x04, struct abi1_holders)
#define ABI1_INFO	_IOR(M, 0x10, struct abi1_region_info)
#define ABI1_VIEW	_IOWR(M, 0x11, struct abi1_view)
#define ABI1_VIEW_INFO	_IOR(M, 0x12, struct abi1_view_info)
#define ABI1_SEAL	_IOW(M, 0x20, struct abi1_transition)
#define ABI1_DONATE	_IOW(M, 0x21, struct abi1_transition)
#define ABI1_PUBLISH	_IOW(M, 0x22, struct abi1_transition)
#define ABI1_REOPEN	_IOW(M, 0x23, struct abi1_transition)

/* An ioctl number of ours with another size. */
#define RESIZED(cmd, size) \
	(((cmd) & ~(_IOC_SIZEMASK << _IOC_SIZESHIFT)) | \
	 ((unsigned long)(size) << _IOC_SIZESHIFT))

/* A struct with room past the module's, for the sizes of newer callers. */
union big_arg {
	struct pinmem_alloc alloc;
	struct pinmem_view view;
	struct pinmem_transition transition;
	struct pinmem_fill fill;
	unsigned char bytes[256];
};

PM_FIXTURE(compat)

/* The sizes published first are ABI 1's (and, for later ioctls, theirs). */
TEST_F(compat, first_published_sizes_are_abi1s)
{
	EXPECT_EQ(sizeof(struct abi1_version), PINMEM_VERSION_SIZE_VER0);
	EXPECT_EQ(sizeof(struct abi1_dev_info), PINMEM_DEV_INFO_SIZE_VER0);
	EXPECT_EQ(sizeof(struct abi1_alloc), PINMEM_ALLOC_SIZE_VER0);
	EXPECT_EQ(sizeof(struct abi1_region_info), PINMEM_REGION_INFO_SIZE_VER0);
	EXPECT_EQ(sizeof(struct abi1_view), PINMEM_VIEW_SIZE_VER0);
	EXPECT_EQ(sizeof(struct abi1_view_info), PINMEM_VIEW_INFO_SIZE_VER0);
	EXPECT_EQ(sizeof(struct abi1_holder), PINMEM_HOLDER_SIZE_VER0);
	EXPECT_EQ(sizeof(struct abi1_holders), PINMEM_HOLDERS_SIZE_VER0);
	EXPECT_EQ(sizeof(struct abi1_list), PINMEM_LIST_SIZE_VER0);
	EXPECT_EQ(sizeof(struct abi1_transition), PINMEM_TRANSITION_SIZE_VER0);
	EXPECT_LE(PINMEM_REGION_INFO_SIZE_VER0, sizeof(struct pinmem_region_info));
	EXPECT_LE(PINMEM_ALLOC_SIZE_VER0, sizeof(struct pinmem_alloc));
}

/*
 * What a library of ABI 1 does, with ABI 1's structs: check the version,
 * allocate, look, hand out a view, list and name holders, and walk the
 * states. Everything answers as it did.
 */
TEST_F(compat, abi1_library_is_served)
{
	struct abi1_version v;
	struct abi1_dev_info di;
	struct abi1_alloc a = { .size = 4 * MiB };
	struct abi1_region_info ri, rl[64];
	struct abi1_view vw = { .offset = 2 * MiB, .length = PG };
	struct abi1_view_info vi;
	struct abi1_holder h[4];
	struct abi1_holders hq = { .holders_ptr = (uintptr_t)h, .capacity = 4 };
	struct abi1_list lq = { .regions_ptr = (uintptr_t)rl, .capacity = 64 };
	struct abi1_transition t = { 0 };
	int dev = self->env.dev, seen = 0;
	void *p;

	memset(&v, 0xa5, sizeof(v));
	ASSERT_OK(ioctl(dev, ABI1_VERSION, &v));
	ASSERT_LE(v.abi_min_compat, 1) TH_LOG("the module no longer serves ABI 1");
	ASSERT_GE(v.abi_version, 1);
	EXPECT_EQ(2 * MiB, v.chunk_size);
	ASSERT_OK(ioctl(dev, ABI1_DEV_INFO, &di));
	EXPECT_EQ(self->env.base.nr_regions, di.nr_regions);

	ASSERT_OK(ioctl(dev, ABI1_ALLOC, &a));
	ASSERT_GE(a.fd, 0);
	memset(&ri, 0xa5, sizeof(ri));
	ASSERT_OK(ioctl(a.fd, ABI1_INFO, &ri));
	EXPECT_EQ(a.region_id, ri.region_id);
	EXPECT_EQ(4 * MiB, ri.size);
	EXPECT_EQ(PINMEM_STATE_OPEN, ri.state);
	EXPECT_EQ(2, ri.nr_chunks);
	/* ABI 1's reserved words: zero for a region nobody referenced. */
	EXPECT_EQ(0, ri.reserved[0]);
	EXPECT_EQ(0, ri.reserved[1]);

	ASSERT_OK(ioctl(a.fd, ABI1_VIEW, &vw));
	ASSERT_GE(vw.fd, 0);
	memset(&vi, 0xa5, sizeof(vi));
	ASSERT_OK(ioctl(vw.fd, ABI1_VIEW_INFO, &vi));
	EXPECT_EQ(a.region_id, vi.region_id);
	EXPECT_EQ(2 * MiB, vi.offset);
	EXPECT_EQ(PG, vi.length);
	EXPECT_EQ(0, vi.pad);
	p = pm_map(vw.fd, PG, PROT_READ, 0);

	ASSERT_OK(ioctl(a.fd, ABI1_HOLDERS, &hq));
	ASSERT_EQ(1, hq.count);
	EXPECT_EQ(PINMEM_HOLDER_VIEW, h[0].kind);
	EXPECT_EQ((uintptr_t)p, h[0].start);
	EXPECT_EQ(2 * MiB, h[0].offset);
	EXPECT_EQ(getpid(), (pid_t)h[0].tgid);
	ASSERT_OK(ioctl(dev, ABI1_LIST, &lq));
	ASSERT_LE(lq.count, 64);
	for (uint32_t i = 0; i < lq.count; i++) {
		if (rl[i].region_id != a.region_id)
			continue;
		EXPECT_EQ(4 * MiB, rl[i].size);
		EXPECT_EQ(1, rl[i].view_mappings);
		seen++;
	}
	EXPECT_EQ(1, seen) TH_LOG("LIST at ABI 1's record size lost the region");

	ASSERT_OK(ioctl(a.fd, ABI1_SEAL, &t));
	ASSERT_ERRNO(EBUSY, ioctl(a.fd, ABI1_DONATE, &t));
	pm_unmap(p, PG);
	ASSERT_OK(ioctl(a.fd, ABI1_DONATE, &t));
	ASSERT_OK(ioctl(a.fd, ABI1_PUBLISH, &t));
	EXPECT_EQ(PINMEM_STATE_SEALED, pm_state(a.fd));
	ASSERT_OK(ioctl(a.fd, ABI1_DONATE, &t));
	ASSERT_OK(ioctl(a.fd, ABI1_REOPEN, &t));
	EXPECT_EQ(PINMEM_STATE_OPEN, pm_state(a.fd));
	close(vw.fd);
	close(a.fd);
}

/* Every ioctl, on an fd it is served on, with the size it was published at. */
struct ioc_case {
	const char *name;
	unsigned long cmd;
	size_t size_ver0;
	char fd;			/* d(evice), r(egion), v(iew) */
};

static const struct ioc_case iocs[] = {
	{ "VERSION", PINMEM_IOC_VERSION, PINMEM_VERSION_SIZE_VER0, 'v' },
	{ "DEV_INFO", PINMEM_IOC_DEV_INFO, PINMEM_DEV_INFO_SIZE_VER0, 'd' },
	{ "ALLOC", PINMEM_IOC_ALLOC, PINMEM_ALLOC_SIZE_VER0, 'd' },
	{ "LIST", PINMEM_IOC_LIST, PINMEM_LIST_SIZE_VER0, 'd' },
	{ "HOLDERS", PINMEM_IOC_HOLDERS, PINMEM_HOLDERS_SIZE_VER0, 'r' },
	{ "INFO", PINMEM_IOC_INFO, PINMEM_REGION_INFO_SIZE_VER0, 'v' },
	{ "VIEW", PINMEM_IOC_VIEW, PINMEM_VIEW_SIZE_VER0, 'r' },
	{ "VIEW_INFO", PINMEM_IOC_VIEW_INFO, PINMEM_VIEW_INFO_SIZE_VER0, 'v' },
	{ "POPULATE", PINMEM_IOC_POPULATE, PINMEM_POPULATE_SIZE_VER0, 'r' },
	{ "FILL", PINMEM_IOC_FILL, PINMEM_FILL_SIZE_VER0, 'r' },
	{ "SEAL", PINMEM_IOC_SEAL, PINMEM_TRANSITION_SIZE_VER0, 'r' },
	{ "DONATE", PINMEM_IOC_DONATE, PINMEM_TRANSITION_SIZE_VER0, 'r' },
	{ "PUBLISH", PINMEM_IOC_PUBLISH, PINMEM_TRANSITION_SIZE_VER0, 'r' },
	{ "REOPEN", PINMEM_IOC_REOPEN, PINMEM_TRANSITION_SIZE_VER0, 'r' },
	{ "EXPECT", PINMEM_IOC_EXPECT, PINMEM_EXPECT_SIZE_VER0, 'r' },
	{ "REFS", PINMEM_IOC_REFS, PINMEM_REFS_SIZE_VER0, 'v' },
	{ "NODES", PINMEM_IOC_NODES, PINMEM_NODES_SIZE_VER0, 'd' },
};

/*
 * At the first published size every ioctl is ours: it answers (all zero,
 * most refuse the arguments) but never ENOTTY. Below it, ENOTTY; a
 * struct that writes to the module with a non-zero byte past the
 * module's size, E2BIG, before it does anything: the region stays OPEN
 * and no region or view appears.
 */
TEST_F(compat, sizes_below_first_are_enotty_unknown_bytes_e2big)
{
	int rfd = pm_alloc(self->env.dev, 2 * MiB);
	int vfd = pm_view(rfd, 0, PG, 0);
	struct pinmem_dev_info di;
	union big_arg arg;

	for (size_t i = 0; i < sizeof(iocs) / sizeof(iocs[0]); i++) {
		const struct ioc_case *c = &iocs[i];
		int fd = c->fd == 'd' ? self->env.dev : c->fd == 'r' ? rfd : vfd;
		size_t known = _IOC_SIZE(c->cmd);
		int e;

		memset(&arg, 0, sizeof(arg));
		e = ioctl(fd, RESIZED(c->cmd, c->size_ver0), &arg) ? errno : 0;
		EXPECT_NE(ENOTTY, e)
			TH_LOG("%s at %zu bytes: ENOTTY", c->name, c->size_ver0);
		e = ioctl(fd, RESIZED(c->cmd, c->size_ver0 - 8), &arg) ? errno : 0;
		EXPECT_EQ(ENOTTY, e)
			TH_LOG("%s at %zu bytes: %s, not ENOTTY", c->name,
			       c->size_ver0 - 8, pm_errname(e));
		if (!(_IOC_DIR(c->cmd) & _IOC_WRITE))
			continue;
		memset(&arg, 0, sizeof(arg));
		arg.bytes[known + 3] = 1;
		e = ioctl(fd, RESIZED(c->cmd, known + 8), &arg) ? errno : 0;
		EXPECT_EQ(E2BIG, e)
			TH_LOG("%s with a non-zero unknown byte: %s, not E2BIG",
			       c->name, pm_errname(e));
	}
	/*
	 * The all-zero calls at the first sizes made what transitions they
	 * could: SEAL, DONATE, PUBLISH (REOPEN from SEALED is EPERM).
	 */
	EXPECT_EQ(PINMEM_STATE_SEALED, pm_state(rfd));
	pm_dev_info(self->env.dev, &di);
	EXPECT_EQ(self->env.base.nr_regions + 1, di.nr_regions);
	EXPECT_EQ(self->env.base.nr_view_fds + 1, di.nr_view_fds);
	close(vfd);
	close(rfd);
}

/* E2BIG changes nothing: ALLOC, VIEW and DONATE with a valid known part. */
TEST_F(compat, e2big_has_no_effect)
{
	int rfd = pm_alloc(self->env.dev, 2 * MiB);
	struct pinmem_dev_info di;
	union big_arg arg;

	memset(&arg, 0, sizeof(arg));
	arg.alloc.size = 2 * MiB;
	arg.alloc.fd = -1;
	arg.bytes[sizeof(arg.alloc) + 7] = 0x80;
	ASSERT_ERRNO(E2BIG, ioctl(self->env.dev,
				  RESIZED(PINMEM_IOC_ALLOC, sizeof(arg.alloc) + 8),
				  &arg));
	EXPECT_EQ(-1, arg.alloc.fd);
	memset(&arg, 0, sizeof(arg));
	arg.view.length = PG;
	arg.view.fd = -1;
	arg.bytes[sizeof(arg.view) + 64] = 1;
	ASSERT_ERRNO(E2BIG, ioctl(rfd, RESIZED(PINMEM_IOC_VIEW,
					       sizeof(arg.view) + 128), &arg));
	EXPECT_EQ(-1, arg.view.fd);
	memset(&arg, 0, sizeof(arg));
	arg.bytes[sizeof(arg.transition)] = 1;
	ASSERT_ERRNO(E2BIG, ioctl(rfd, RESIZED(PINMEM_IOC_DONATE,
					       sizeof(arg.transition) + 8), &arg));
	EXPECT_EQ(PINMEM_STATE_OPEN, pm_state(rfd));
	pm_dev_info(self->env.dev, &di);
	EXPECT_EQ(self->env.base.nr_regions + 1, di.nr_regions);
	EXPECT_EQ(self->env.base.nr_view_fds, di.nr_view_fds);
	close(rfd);
}

/*
 * A newer caller's larger struct with zero bytes past the module's: served
 * as if it were the module's size, and of what goes out only the module's
 * bytes are written (the rest keeps what the caller put there).
 */
TEST_F(compat, larger_struct_with_zero_tail_is_served)
{
	struct {
		struct pinmem_version v;
		unsigned char tail[24];
	} big;
	struct pinmem_view_info vi;
	union big_arg arg;
	int rfd, vfd;

	memset(&big, 0xa5, sizeof(big));
	ASSERT_OK(ioctl(self->env.dev, RESIZED(PINMEM_IOC_VERSION, sizeof(big)),
			&big));
	EXPECT_EQ(PINMEM_ABI_VERSION, big.v.abi_version);
	EXPECT_EQ(PINMEM_CHUNK_SIZE, big.v.chunk_size);
	for (size_t i = 0; i < sizeof(big.tail); i++) {
		ASSERT_EQ(0xa5, big.tail[i])
			TH_LOG("VERSION wrote byte %zu past its struct",
			       sizeof(big.v) + i);
	}

	memset(&arg, 0, sizeof(arg));
	arg.alloc.size = 2 * MiB;
	ASSERT_OK(ioctl(self->env.dev, RESIZED(PINMEM_IOC_ALLOC, sizeof(arg)),
			&arg));
	rfd = arg.alloc.fd;
	ASSERT_GE(rfd, 0);
	EXPECT_NE(0, arg.alloc.region_id);
	for (size_t i = sizeof(arg.alloc); i < sizeof(arg); i++) {
		ASSERT_EQ(0, arg.bytes[i]) TH_LOG("ALLOC wrote byte %zu", i);
	}

	memset(&arg, 0, sizeof(arg));
	arg.view.offset = PG;
	arg.view.length = 2 * PG;
	ASSERT_OK(ioctl(rfd, RESIZED(PINMEM_IOC_VIEW, sizeof(arg)), &arg));
	vfd = arg.view.fd;
	ASSERT_GE(vfd, 0);
	ASSERT_OK(ioctl(vfd, PINMEM_IOC_VIEW_INFO, &vi));
	EXPECT_EQ(PG, vi.offset);
	EXPECT_EQ(2 * PG, vi.length);
	close(vfd);
	close(rfd);
}

/*
 * n records of rs bytes at buf: each begins with the size bytes of
 * want[i] and keeps 0xa5 in the rest. The index of the first that does
 * not, or -1.
 */
static int strided_mismatch(const unsigned char *buf, size_t rs,
			    const void *want, size_t size, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		const unsigned char *r = buf + i * rs;

		if (memcmp(r, (const unsigned char *)want + i * size, size))
			return i;
		for (size_t b = size; b < rs; b++)
			if (r[b] != 0xa5)
				return i;
	}
	return -1;
}

#define GAP 24		/* bytes a newer caller's records have past ours */

/*
 * Records at the caller's record_size: HOLDERS, LIST and REFS write the
 * module's bytes of each record record_size apart and leave the rest of
 * a larger record as it was; 0 is the first published size; a smaller
 * one is EINVAL.
 */
TEST_F(compat, records_at_callers_size)
{
	static unsigned char buf[64 * (sizeof(struct pinmem_region_info) + GAP)];
	int rfd = pm_alloc(self->env.dev, 4 * MiB);
	char *o = pm_map(rfd, 4 * MiB, PROT_READ | PROT_WRITE, 0);
	int vfd = pm_view(rfd, 2 * MiB, 2 * MiB, 0);
	char *v = pm_map(vfd, 2 * MiB, PROT_READ, 0);
	struct pinmem_region_info rk[64];
	struct pinmem_ref_range fk[2];
	struct pinmem_holder hk[2];
	struct pinmem_holders hq = { .holders_ptr = (uintptr_t)hk,
				     .capacity = 2 };
	struct pinmem_list lq = { .regions_ptr = (uintptr_t)rk,
				  .capacity = 64 };
	struct pinmem_refs fq = { .ranges_ptr = (uintptr_t)fk, .capacity = 2 };
	uint32_t n;
	int p[2];

	/* HOLDERS: 0 and sizeof are one size; GAP more is strided. */
	ASSERT_OK(ioctl(rfd, PINMEM_IOC_HOLDERS, &hq));
	ASSERT_EQ(2, hq.count);
	hq.record_size = sizeof(struct pinmem_holder);
	hq.holders_ptr = (uintptr_t)buf;
	ASSERT_OK(ioctl(rfd, PINMEM_IOC_HOLDERS, &hq));
	EXPECT_EQ(0, memcmp(buf, hk, sizeof(hk)));
	memset(buf, 0xa5, sizeof(buf));
	hq.record_size = sizeof(struct pinmem_holder) + GAP;
	ASSERT_OK(ioctl(rfd, PINMEM_IOC_HOLDERS, &hq));
	ASSERT_EQ(2, hq.count);
	EXPECT_EQ(-1, strided_mismatch(buf, hq.record_size, hk, sizeof(hk[0]), 2));
	hq.record_size = PINMEM_HOLDER_SIZE_VER0 - 8;
	ASSERT_ERRNO(EINVAL, ioctl(rfd, PINMEM_IOC_HOLDERS, &hq));

	/* LIST */
	ASSERT_OK(ioctl(self->env.dev, PINMEM_IOC_LIST, &lq));
	n = lq.count;
	ASSERT_LE(n, 64);
	memset(buf, 0xa5, sizeof(buf));
	lq.regions_ptr = (uintptr_t)buf;
	lq.record_size = sizeof(struct pinmem_region_info) + GAP;
	ASSERT_OK(ioctl(self->env.dev, PINMEM_IOC_LIST, &lq));
	ASSERT_EQ(n, lq.count);
	EXPECT_EQ(-1, strided_mismatch(buf, lq.record_size, rk, sizeof(rk[0]), n));
	lq.record_size = 1;
	ASSERT_ERRNO(EINVAL, ioctl(self->env.dev, PINMEM_IOC_LIST, &lq));

	/* REFS: a pipe holds a page of the view after its unmapping. */
	pm_splice(p, v, 1);
	pm_unmap(v, 2 * MiB);
	ASSERT_OK(ioctl(rfd, PINMEM_IOC_REFS, &fq));
	ASSERT_EQ(1, fq.count);
	memset(buf, 0xa5, sizeof(buf));
	fq.ranges_ptr = (uintptr_t)buf;
	fq.record_size = sizeof(struct pinmem_ref_range) + GAP;
	ASSERT_OK(ioctl(rfd, PINMEM_IOC_REFS, &fq));
	ASSERT_EQ(1, fq.count);
	EXPECT_EQ(-1, strided_mismatch(buf, fq.record_size, fk, sizeof(fk[0]), 1));
	fq.record_size = PINMEM_REF_RANGE_SIZE_VER0 - 1;
	ASSERT_ERRNO(EINVAL, ioctl(rfd, PINMEM_IOC_REFS, &fq));
	pm_drain(p, buf, PG);

	pm_unmap(o, 4 * MiB);
	close(vfd);
	close(rfd);
}

TEST_HARNESS_MAIN
