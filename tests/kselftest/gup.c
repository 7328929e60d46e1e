// SPDX-License-Identifier: GPL-2.0
/*
 * Mapped pages are ordinary struct pages, so get_user_pages works on every
 * mapping: O_DIRECT I/O on a real filesystem (the guest's ext4 scratch disk,
 * $PINMEM_SCRATCH), process_vm_readv and vmsplice, whose page references
 * outlive the region.
 */
#include <sys/uio.h>

#include "pinmem_test.h"

#define IO_LEN	(256 * KiB)

FIXTURE(gup) {
	struct pm_env env;
	char path[256];
};

/* A file of IO_LEN bytes holding pattern seed, written through the cache. */
static void make_file(struct __test_metadata *_metadata, const char *path,
		      uint32_t seed)
{
	char *buf = malloc(IO_LEN);
	int fd;

	ASSERT_NE(NULL, buf);
	pm_fill(buf, IO_LEN, seed);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	ASSERT_GE(fd, 0) TH_LOG("create %s: %s", path, pm_errname(errno));
	ASSERT_EQ(IO_LEN, write(fd, buf, IO_LEN));
	ASSERT_OK(fsync(fd));
	close(fd);
	free(buf);
}

FIXTURE_SETUP(gup)
{
	const char *dir = getenv("PINMEM_SCRATCH");

	pm_setup(_metadata, &self->env);
	if (!dir)
		SKIP(return, "PINMEM_SCRATCH is unset: O_DIRECT needs the guest's ext4 scratch disk");
	snprintf(self->path, sizeof(self->path), "%s/gup-%d", dir, getpid());
}

FIXTURE_TEARDOWN(gup)
{
	if (self->path[0])
		unlink(self->path);
	pm_teardown(_metadata, &self->env);
}

static int open_direct(struct __test_metadata *_metadata, const char *path,
		       int flags)
{
	int fd = open(path, flags | O_DIRECT | O_CLOEXEC);

	ASSERT_GE(fd, 0) TH_LOG("open %s O_DIRECT: %s", path, pm_errname(errno));
	return fd;
}

#define SKIP_WITHOUT_SCRATCH() do {					\
	if (_metadata->skip)						\
		return;							\
} while (0)

TEST_F(gup, odirect_read_into_owner_mapping)
{
	int rfd, fd;
	char *o;

	SKIP_WITHOUT_SCRATCH();
	make_file(_metadata, self->path, 61);
	rfd = pm_alloc(self->env.dev, 2 * MiB);
	o = pm_map(rfd, 2 * MiB, PROT_READ | PROT_WRITE, 0);
	fd = open_direct(_metadata, self->path, O_RDONLY);
	ASSERT_EQ(IO_LEN, pread(fd, o + MiB, IO_LEN, 0))
		TH_LOG("O_DIRECT read: %s", pm_errname(errno));
	ASSERT_PATTERN(o + MiB, IO_LEN, 61);
	close(fd);
	pm_unmap(o, 2 * MiB);
	close(rfd);
}

TEST_F(gup, odirect_read_into_rw_view)
{
	int rfd, vfd, fd;
	char *v, *o;

	SKIP_WITHOUT_SCRATCH();
	make_file(_metadata, self->path, 62);
	rfd = pm_alloc(self->env.dev, 2 * MiB);
	vfd = pm_view(rfd, MiB, MiB, PINMEM_VIEW_WRITE);
	v = pm_map(vfd, MiB, PROT_READ | PROT_WRITE, 0);
	fd = open_direct(_metadata, self->path, O_RDONLY);
	ASSERT_EQ(IO_LEN, pread(fd, v, IO_LEN, 0))
		TH_LOG("O_DIRECT read: %s", pm_errname(errno));
	ASSERT_PATTERN(v, IO_LEN, 62);
	o = pm_map(rfd, 2 * MiB, PROT_READ, 0);
	ASSERT_PATTERN(o + MiB, IO_LEN, 62);
	close(fd);
	pm_unmap(o, 2 * MiB);
	pm_unmap(v, MiB);
	close(vfd);
	close(rfd);
}

TEST_F(gup, odirect_write_from_readonly_view)
{
	int rfd, vfd, fd;
	char *v, *o, *buf;

	SKIP_WITHOUT_SCRATCH();
	rfd = pm_alloc(self->env.dev, 2 * MiB);
	o = pm_map(rfd, 2 * MiB, PROT_READ | PROT_WRITE, 0);
	pm_fill(o, IO_LEN, 63);
	vfd = pm_view(rfd, 0, MiB, 0);
	v = pm_map(vfd, MiB, PROT_READ, 0);
	fd = open_direct(_metadata, self->path, O_WRONLY | O_CREAT | O_TRUNC);
	ASSERT_EQ(IO_LEN, write(fd, v, IO_LEN))
		TH_LOG("O_DIRECT write: %s", pm_errname(errno));
	ASSERT_OK(fsync(fd));
	close(fd);
	/* Read back, through the cache, into ordinary memory. */
	buf = malloc(IO_LEN);
	ASSERT_NE(NULL, buf);
	fd = open(self->path, O_RDONLY | O_CLOEXEC);
	ASSERT_GE(fd, 0);
	ASSERT_EQ(IO_LEN, read(fd, buf, IO_LEN));
	ASSERT_PATTERN(buf, IO_LEN, 63);
	close(fd);
	free(buf);
	pm_unmap(v, MiB);
	pm_unmap(o, 2 * MiB);
	close(vfd);
	close(rfd);
}

/* A child reads the parent's view mapping with process_vm_readv. */
PM_FIXTURE(vm)

TEST_F(vm, process_vm_readv_of_view)
{
	int rfd = pm_alloc(self->env.dev, 2 * MiB);
	char *o = pm_map(rfd, 2 * MiB, PROT_READ | PROT_WRITE, 0);
	int vfd = pm_view(rfd, 0, 2 * MiB, 0);
	char *v = pm_map(vfd, 2 * MiB, PROT_READ, 0);
	pid_t pid;

	pm_fill(o, MiB, 64);
	pm_fill(o + MiB, MiB, 65);
	pid = fork();
	ASSERT_GE(pid, 0);
	if (pid == 0) {
		char *buf = malloc(MiB);
		struct iovec local = { .iov_base = buf, .iov_len = MiB };
		struct iovec remote = { .iov_base = v + MiB, .iov_len = MiB };

		if (!buf)
			_exit(2);
		/* Read the parent's pages, not our inherited copy. */
		munmap(v, 2 * MiB);
		munmap(o, 2 * MiB);
		if (process_vm_readv(getppid(), &local, 1, &remote, 1, 0) != MiB)
			_exit(3);
		_exit(pm_check(buf, MiB, 65) == -1 ? 0 : 4);
	}
	ASSERT_EQ(0, pm_wait(pid))
		TH_LOG("child: 3 = process_vm_readv failed, 4 = wrong bytes");
	pm_unmap(v, 2 * MiB);
	pm_unmap(o, 2 * MiB);
	close(vfd);
	close(rfd);
}

/*
 * Pages held by get_user_pages outlive their region: vmsplice() leaves
 * references to two of them (the head page of the first 2 MiB chunk, a
 * tail page of the second) in a pipe. Unmapping and closing free the
 * region, new regions take memory, yet the pipe still reads the bytes.
 */
TEST_F(vm, pinned_pages_outlive_the_region)
{
	int rfd = pm_alloc(self->env.dev, 4 * MiB);
	char *o = pm_map(rfd, 4 * MiB, PROT_READ | PROT_WRITE, 0);
	struct iovec iov[2] = {
		{ .iov_base = o, .iov_len = PG },
		{ .iov_base = o + 3 * MiB, .iov_len = PG },
	};
	struct pinmem_dev_info di;
	static char buf[2 * PG];
	int p[2], again;
	char *a;

	pm_fill(o, PG, 70);
	pm_fill(o + 3 * MiB, PG, 71);
	ASSERT_OK(pipe2(p, O_CLOEXEC));
	ASSERT_EQ(2 * PG, vmsplice(p[1], iov, 2, 0))
		TH_LOG("vmsplice: %s", pm_errname(errno));
	pm_unmap(o, 4 * MiB);
	close(rfd);
	pm_dev_info(self->env.dev, &di);
	ASSERT_EQ(self->env.base.nr_regions, di.nr_regions)
		TH_LOG("the region should be gone");
	again = pm_alloc(self->env.dev, 4 * MiB);
	a = pm_map(again, 4 * MiB, PROT_READ | PROT_WRITE, 0);
	pm_fill(a, 4 * MiB, 72);
	ASSERT_EQ(2 * PG, read(p[0], buf, sizeof(buf)));
	ASSERT_PATTERN(buf, PG, 70);
	ASSERT_PATTERN(buf + PG, PG, 71);
	close(p[0]);
	close(p[1]);
	pm_unmap(a, 4 * MiB);
	close(again);
}

TEST_HARNESS_MAIN
