// SPDX-License-Identifier: GPL-2.0
/*
 * The ioctl ABI: version query, argument validation (each bad field is
 * EINVAL), foreign ioctl numbers (ENOTTY on each kind of fd), module
 * limits, fd flags, fully initialised copy-outs.
 */
#include "pinmem_test.h"

/* Not ours at all, and ours with the wrong size. */
#define FOREIGN_IOC	_IOR('x', 0x01, __u64)
#define WRONG_SIZE_IOC	_IOR(PINMEM_IOC_MAGIC, 0x00, __u32)

PM_FIXTURE(abi)

static void check_version(struct __test_metadata *_metadata, int fd,
			  const char *what)
{
	struct pinmem_version v;

	memset(&v, 0xa5, sizeof(v));
	ASSERT_EQ(0, ioctl(fd, PINMEM_IOC_VERSION, &v))
		TH_LOG("VERSION on %s fd: %s", what, pm_errname(errno));
	EXPECT_EQ(PINMEM_ABI_VERSION, v.abi_version) TH_LOG("%s fd", what);
	EXPECT_EQ(PINMEM_ABI_MIN_COMPAT, v.abi_min_compat) TH_LOG("%s fd", what);
	EXPECT_EQ(PINMEM_CHUNK_SIZE, v.chunk_size) TH_LOG("%s fd", what);
}

/* VERSION answers the same on device, region and view fds. */
TEST_F(abi, version_on_every_fd)
{
	int rfd = pm_alloc(self->env.dev, 2 * MiB);
	int vfd = pm_view(rfd, 0, PG, 0);

	check_version(_metadata, self->env.dev, "device");
	check_version(_metadata, rfd, "region");
	check_version(_metadata, vfd, "view");
	close(vfd);
	close(rfd);
}

TEST_F(abi, foreign_ioctl_on_device_is_enotty)
{
	char buf[256] = { 0 };

	ASSERT_ERRNO(ENOTTY, ioctl(self->env.dev, FOREIGN_IOC, buf));
	ASSERT_ERRNO(ENOTTY, ioctl(self->env.dev, WRONG_SIZE_IOC, buf));
	/* Region and view ioctls are foreign to the device fd. */
	ASSERT_ERRNO(ENOTTY, ioctl(self->env.dev, PINMEM_IOC_INFO, buf));
	ASSERT_ERRNO(ENOTTY, ioctl(self->env.dev, PINMEM_IOC_VIEW, buf));
	ASSERT_ERRNO(ENOTTY, ioctl(self->env.dev, PINMEM_IOC_VIEW_INFO, buf));
	ASSERT_ERRNO(ENOTTY, ioctl(self->env.dev, PINMEM_IOC_SEAL, buf));
	ASSERT_ERRNO(ENOTTY, ioctl(self->env.dev, PINMEM_IOC_DONATE, buf));
}

TEST_F(abi, foreign_ioctl_on_region_is_enotty)
{
	int rfd = pm_alloc(self->env.dev, 2 * MiB);
	char buf[256] = { 0 };

	ASSERT_ERRNO(ENOTTY, ioctl(rfd, FOREIGN_IOC, buf));
	ASSERT_ERRNO(ENOTTY, ioctl(rfd, WRONG_SIZE_IOC, buf));
	ASSERT_ERRNO(ENOTTY, ioctl(rfd, PINMEM_IOC_ALLOC, buf));
	ASSERT_ERRNO(ENOTTY, ioctl(rfd, PINMEM_IOC_LIST, buf));
	ASSERT_ERRNO(ENOTTY, ioctl(rfd, PINMEM_IOC_DEV_INFO, buf));
	ASSERT_ERRNO(ENOTTY, ioctl(rfd, PINMEM_IOC_VIEW_INFO, buf));
	close(rfd);
}

/* Region-only ioctls (VIEW and the transitions) are foreign to a view fd. */
TEST_F(abi, region_ioctls_on_view_are_enotty)
{
	int rfd = pm_alloc(self->env.dev, 2 * MiB);
	int vfd = pm_view(rfd, 0, PG, PINMEM_VIEW_WRITE);
	struct pinmem_view v = { .offset = 0, .length = PG };
	struct pinmem_transition t = { 0 };
	char buf[256] = { 0 };

	ASSERT_ERRNO(ENOTTY, ioctl(vfd, FOREIGN_IOC, buf));
	ASSERT_ERRNO(ENOTTY, ioctl(vfd, PINMEM_IOC_ALLOC, buf));
	ASSERT_ERRNO(ENOTTY, ioctl(vfd, PINMEM_IOC_LIST, buf));
	ASSERT_ERRNO(ENOTTY, ioctl(vfd, PINMEM_IOC_VIEW, &v));
	ASSERT_ERRNO(ENOTTY, ioctl(vfd, PINMEM_IOC_SEAL, &t));
	ASSERT_ERRNO(ENOTTY, ioctl(vfd, PINMEM_IOC_DONATE, &t));
	ASSERT_ERRNO(ENOTTY, ioctl(vfd, PINMEM_IOC_PUBLISH, &t));
	ASSERT_ERRNO(ENOTTY, ioctl(vfd, PINMEM_IOC_REOPEN, &t));
	/* ...and none of them did anything. */
	ASSERT_EQ(PINMEM_STATE_OPEN, pm_state(rfd));
	close(vfd);
	close(rfd);
}

TEST_F(abi, alloc_rejects_bad_arguments)
{
	struct pinmem_dev_info di;
	int dev = self->env.dev;

	pm_dev_info(dev, &di);
	EXPECT_EQ(EINVAL, pm_try_alloc(dev, 0, 0)) TH_LOG("size 0");
	EXPECT_EQ(EINVAL, pm_try_alloc(dev, 2 * MiB, ~PINMEM_ALLOC_FLAGS))
		TH_LOG("unknown flags");
	EXPECT_EQ(EINVAL, pm_try_alloc(dev, 2 * MiB, 1U << 31))
		TH_LOG("unknown flag bit 31");
	EXPECT_EQ(EINVAL, pm_try_alloc(dev, di.max_region_bytes + PG, 0))
		TH_LOG("size above max_region_bytes %llu",
		       (unsigned long long)di.max_region_bytes);
	/* Rounding up to a page would overflow. */
	EXPECT_EQ(EINVAL, pm_try_alloc(dev, UINT64_MAX, 0)) TH_LOG("size ~0");
	EXPECT_EQ(EINVAL, pm_try_alloc(dev, UINT64_MAX - PG + 2, 0))
		TH_LOG("size rounding past 2^64");
	{
		struct pinmem_alloc a = { .size = 2 * MiB, .reserved = 1 };

		ASSERT_ERRNO(EINVAL, ioctl(dev, PINMEM_IOC_ALLOC, &a));
	}
	ASSERT_ERRNO(EFAULT, ioctl(dev, PINMEM_IOC_ALLOC, NULL));
}

TEST_F(abi, view_rejects_bad_arguments)
{
	int rfd = pm_alloc(self->env.dev, 4 * MiB);
	struct {
		const char *what;
		struct pinmem_view v;
	} bad[] = {
		{ "length 0", { .offset = 0, .length = 0 } },
		{ "unknown flags", { .length = PG, .flags = ~PINMEM_VIEW_FLAGS } },
		{ "reserved", { .length = PG, .reserved = 1 } },
		{ "unaligned offset", { .offset = 100, .length = PG } },
		{ "unaligned length", { .offset = 0, .length = PG + 1 } },
		{ "longer than the region", { .offset = 0, .length = 4 * MiB + PG } },
		{ "ends past the region", { .offset = 4 * MiB - PG, .length = 2 * PG } },
		{ "starts at the end", { .offset = 4 * MiB, .length = PG } },
		{ "offset+length overflows",
		  { .offset = UINT64_MAX - PG + 1, .length = 2 * PG } },
		{ "length near 2^64", { .offset = PG, .length = UINT64_MAX - PG + 1 } },
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct pinmem_view v = bad[i].v;

		v.fd = -1;
		errno = 0;
		EXPECT_EQ(-1, ioctl(rfd, PINMEM_IOC_VIEW, &v))
			TH_LOG("VIEW with %s succeeded", bad[i].what);
		EXPECT_EQ(EINVAL, errno)
			TH_LOG("VIEW with %s: got %s", bad[i].what,
			       pm_errname(errno));
	}
	close(rfd);
}

/*
 * Each transition refuses unknown flags, reserved bits and a timeout
 * without WAIT, and does not change the state when it does.
 */
TEST_F(abi, transitions_reject_bad_arguments)
{
	int rfd = pm_alloc(self->env.dev, 2 * MiB);
	const unsigned long cmds[] = { PINMEM_IOC_SEAL, PINMEM_IOC_DONATE,
				       PINMEM_IOC_PUBLISH, PINMEM_IOC_REOPEN };
	const char *names[] = { "SEAL", "DONATE", "PUBLISH", "REOPEN" };

	for (int i = 0; i < 4; i++) {
		struct pinmem_transition t;

		t = (struct pinmem_transition){ .flags = 1U << 30 };
		EXPECT_EQ(-1, ioctl(rfd, cmds[i], &t)) TH_LOG("%s", names[i]);
		EXPECT_EQ(EINVAL, errno) TH_LOG("%s unknown flags: %s",
						names[i], pm_errname(errno));
		t = (struct pinmem_transition){ .reserved = 1 };
		EXPECT_EQ(-1, ioctl(rfd, cmds[i], &t)) TH_LOG("%s", names[i]);
		EXPECT_EQ(EINVAL, errno) TH_LOG("%s reserved: %s",
						names[i], pm_errname(errno));
		t = (struct pinmem_transition){ .timeout_ms = 10 };
		EXPECT_EQ(-1, ioctl(rfd, cmds[i], &t)) TH_LOG("%s", names[i]);
		EXPECT_EQ(EINVAL, errno) TH_LOG("%s timeout without WAIT: %s",
						names[i], pm_errname(errno));
	}
	/* WAIT is a DONATE flag only. */
	ASSERT_EQ(EINVAL, pm_transition(rfd, PINMEM_IOC_SEAL,
					PINMEM_DONATE_WAIT, 0));
	ASSERT_EQ(EINVAL, pm_transition(rfd, PINMEM_IOC_PUBLISH,
					PINMEM_DONATE_WAIT, 0));
	ASSERT_EQ(PINMEM_STATE_OPEN, pm_state(rfd));
	close(rfd);
}

TEST_F(abi, holders_and_list_reject_reserved)
{
	uint64_t id;
	int rfd = pm_alloc_id(self->env.dev, 2 * MiB, &id);
	struct pinmem_holder h[4];
	struct pinmem_region_info ri[4];
	struct pinmem_holders hq = { .holders_ptr = (uintptr_t)h,
				     .capacity = 4, .reserved = 1 };
	struct pinmem_list lq = { .regions_ptr = (uintptr_t)ri,
				  .capacity = 4, .reserved = 1 };

	ASSERT_ERRNO(EINVAL, ioctl(rfd, PINMEM_IOC_HOLDERS, &hq));
	hq.region_id = id;
	ASSERT_ERRNO(EINVAL, ioctl(self->env.dev, PINMEM_IOC_HOLDERS, &hq));
	ASSERT_ERRNO(EINVAL, ioctl(self->env.dev, PINMEM_IOC_LIST, &lq));
	close(rfd);
}

/* HOLDERS on the device fd: by id; an id that does not exist is ENOENT. */
TEST_F(abi, holders_by_id_on_device)
{
	uint64_t id;
	int rfd = pm_alloc_id(self->env.dev, 2 * MiB, &id);
	void *p = pm_map(rfd, PG, PROT_READ | PROT_WRITE, 0);
	struct pinmem_holder h[2];
	struct pinmem_holders q = { .region_id = id,
				    .holders_ptr = (uintptr_t)h,
				    .capacity = 2 };

	ASSERT_OK(ioctl(self->env.dev, PINMEM_IOC_HOLDERS, &q));
	ASSERT_EQ(1, q.count);
	EXPECT_EQ((uintptr_t)p, h[0].start);
	EXPECT_EQ(PINMEM_HOLDER_OWNER, h[0].kind);
	EXPECT_EQ(getpid(), (pid_t)h[0].tgid);
	q.region_id = id + 1000000;
	ASSERT_ERRNO(ENOENT, ioctl(self->env.dev, PINMEM_IOC_HOLDERS, &q));
	pm_unmap(p, PG);
	close(rfd);
}

/* LIST reports our region, with count beyond capacity meaning "cut short". */
TEST_F(abi, list_reports_regions)
{
	uint64_t id1, id2;
	int r1 = pm_alloc_id(self->env.dev, 2 * MiB, &id1);
	int r2 = pm_alloc_id(self->env.dev, 4 * MiB, &id2);
	struct pinmem_region_info ri[64];
	struct pinmem_list q = { .regions_ptr = (uintptr_t)ri, .capacity = 64 };
	int seen = 0;

	ASSERT_LT(id1, id2) TH_LOG("region ids must increase");
	ASSERT_OK(ioctl(self->env.dev, PINMEM_IOC_LIST, &q));
	ASSERT_EQ(self->env.base.nr_regions + 2, q.count);
	ASSERT_LE(q.count, 64);
	for (uint32_t i = 0; i < q.count; i++) {
		if (i) {
			EXPECT_LT(ri[i - 1].region_id, ri[i].region_id)
				TH_LOG("LIST must be ordered by id");
		}
		if (ri[i].region_id == id2) {
			EXPECT_EQ(4 * MiB, ri[i].size);
			EXPECT_EQ(PINMEM_STATE_OPEN, ri[i].state);
			seen++;
		}
		if (ri[i].region_id == id1)
			seen++;
	}
	EXPECT_EQ(2, seen);
	/* capacity 0: just the count. */
	q.capacity = 0;
	q.regions_ptr = 0;
	ASSERT_OK(ioctl(self->env.dev, PINMEM_IOC_LIST, &q));
	ASSERT_EQ(self->env.base.nr_regions + 2, q.count);
	close(r2);
	close(r1);
}

TEST_F(abi, region_ids_are_never_reused)
{
	uint64_t a, b;

	close(pm_alloc_id(self->env.dev, 2 * MiB, &a));
	close(pm_alloc_id(self->env.dev, 2 * MiB, &b));
	ASSERT_GT(b, a);
}

TEST_F(abi, region_fd_is_cloexec_rdwr)
{
	int rfd = pm_alloc(self->env.dev, 2 * MiB);
	int vro = pm_view(rfd, 0, PG, 0);
	int vrw = pm_view(rfd, 0, PG, PINMEM_VIEW_WRITE);

	EXPECT_EQ(FD_CLOEXEC, fcntl(rfd, F_GETFD) & FD_CLOEXEC);
	EXPECT_EQ(O_RDWR, fcntl(rfd, F_GETFL) & O_ACCMODE);
	EXPECT_EQ(FD_CLOEXEC, fcntl(vro, F_GETFD) & FD_CLOEXEC);
	EXPECT_EQ(O_RDONLY, fcntl(vro, F_GETFL) & O_ACCMODE);
	EXPECT_EQ(FD_CLOEXEC, fcntl(vrw, F_GETFD) & FD_CLOEXEC);
	EXPECT_EQ(O_RDWR, fcntl(vrw, F_GETFL) & O_ACCMODE);
	close(vrw);
	close(vro);
	close(rfd);
}

/* Copy-outs are whole: reserved and padding come back zero. */
TEST_F(abi, copyouts_zero_reserved)
{
	int rfd = pm_alloc(self->env.dev, 2 * MiB);
	int vfd = pm_view(rfd, PG, PG, 0);
	struct pinmem_region_info ri;
	struct pinmem_view_info vi;
	struct pinmem_dev_info di;
	struct pinmem_holder h;
	void *p = pm_map(vfd, PG, PROT_READ, 0);

	pm_dev_info(self->env.dev, &di);
	EXPECT_EQ(0, di.reserved[0]);
	EXPECT_EQ(0, di.reserved[1]);
	pm_info(rfd, &ri);
	EXPECT_EQ(0, ri.expected_refs);
	EXPECT_EQ(0, ri.outside_refs);
	EXPECT_EQ(0, ri.flags);
	memset(&vi, 0xa5, sizeof(vi));
	ASSERT_OK(ioctl(vfd, PINMEM_IOC_VIEW_INFO, &vi));
	EXPECT_EQ(0, vi.pad);
	EXPECT_EQ(0, vi.reserved[0]);
	EXPECT_EQ(0, vi.reserved[1]);
	ASSERT_EQ(1, pm_holders(rfd, &h, 1));
	EXPECT_NE(NULL, memchr(h.comm, 0, sizeof(h.comm)))
		TH_LOG("holder comm is not NUL-terminated");
	/* Bytes after the NUL are zero too, not kernel stack. */
	for (size_t i = strnlen(h.comm, sizeof(h.comm)); i < sizeof(h.comm); i++) {
		EXPECT_EQ(0, h.comm[i]) TH_LOG("comm byte %zu", i);
	}
	pm_unmap(p, PG);
	close(vfd);
	close(rfd);
}

/* The limits: restores the parameters it changes in every outcome. */
FIXTURE(limits) {
	struct pm_env env;
	unsigned long long max_region, max_total;
	int saved;
};

FIXTURE_SETUP(limits)
{
	pm_setup(_metadata, &self->env);
	ASSERT_OK(pm_param_get("max_region_bytes", &self->max_region));
	ASSERT_OK(pm_param_get("max_total_bytes", &self->max_total));
	self->saved = 1;
}

FIXTURE_TEARDOWN(limits)
{
	if (self->saved) {
		EXPECT_OK(pm_param_set("max_region_bytes", self->max_region));
		EXPECT_OK(pm_param_set("max_total_bytes", self->max_total));
	}
	pm_teardown(_metadata, &self->env);
}

TEST_F(limits, params_show_in_dev_info)
{
	struct pinmem_dev_info di;

	pm_dev_info(self->env.dev, &di);
	EXPECT_EQ(self->max_region, di.max_region_bytes);
	EXPECT_EQ(self->max_total, di.max_total_bytes);
	ASSERT_OK(pm_param_set("max_region_bytes", 6 * MiB));
	ASSERT_OK(pm_param_set("max_total_bytes", 10 * MiB));
	pm_dev_info(self->env.dev, &di);
	EXPECT_EQ(6 * MiB, di.max_region_bytes);
	EXPECT_EQ(10 * MiB, di.max_total_bytes);
}

TEST_F(limits, max_region_bytes_is_einval)
{
	int rfd;

	ASSERT_OK(pm_param_set("max_region_bytes", 4 * MiB));
	ASSERT_EQ(EINVAL, pm_try_alloc(self->env.dev, 4 * MiB + PG, 0));
	ASSERT_EQ(EINVAL, pm_try_alloc(self->env.dev, 8 * MiB, 0));
	rfd = pm_alloc(self->env.dev, 4 * MiB);
	close(rfd);
}

TEST_F(limits, max_total_bytes_is_enospc)
{
	struct pinmem_dev_info di;
	int r1, r2;

	ASSERT_OK(pm_param_set("max_total_bytes",
			       self->env.base.total_bytes + 8 * MiB));
	r1 = pm_alloc(self->env.dev, 4 * MiB);
	ASSERT_EQ(ENOSPC, pm_try_alloc(self->env.dev, 6 * MiB, 0));
	/* 3 MiB takes two chunks: 4 MiB charged, nothing left. */
	r2 = pm_alloc(self->env.dev, 3 * MiB);
	pm_dev_info(self->env.dev, &di);
	ASSERT_EQ(self->env.base.total_bytes + 8 * MiB, di.total_bytes);
	ASSERT_EQ(ENOSPC, pm_try_alloc(self->env.dev, PG, 0));
	close(r1);
	/* Freeing gives the room back. */
	r1 = pm_alloc(self->env.dev, 4 * MiB);
	close(r1);
	close(r2);
}

TEST_HARNESS_MAIN
