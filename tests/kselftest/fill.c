// SPDX-License-Identifier: GPL-2.0
/*
 * FILL (ABI 5): the kernel reads a file into chunks of an ALLOC_LAZY
 * region before any mapping can see them. What was read is there, what
 * was not is zero (even in memory just freed with other data in it), the
 * chunks outside the range stay unpopulated, a failed FILL populates
 * nothing, of two FILLs of one range exactly one wins, and a FILL claims
 * its chunks before it allocates: an overlapping FILL or POPULATE fails
 * at once, so FILLs never hold more memory than the region's charge.
 */
#include <libgen.h>
#include <pthread.h>

#include "pinmem_test.h"

#define CHUNK (2 * MiB)

FIXTURE(fill) {
	struct pm_env env;
	char path[256];
};

FIXTURE_SETUP(fill)
{
	const char *dir = getenv("PINMEM_SCRATCH");

	pm_setup(_metadata, &self->env);
	snprintf(self->path, sizeof(self->path), "%s/fill-%d",
		 dir ? dir : "/tmp", getpid());
}

FIXTURE_TEARDOWN(fill)
{
	unlink(self->path);
	pm_teardown(_metadata, &self->env);
}

/* The byte a test file holds at position pos: never 0, so zeroes show. */
static unsigned char file_byte(uint64_t pos)
{
	return (unsigned char)(pos * 131 + (pos >> 12) * 7) | 1;
}

static void write_file(struct __test_metadata *_metadata, const char *path,
		       uint64_t size)
{
	static unsigned char buf[64 * KiB];
	uint64_t pos = 0;
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

	ASSERT_LE(0, fd) TH_LOG("create %s: %s", path, pm_errname(errno));
	while (pos < size) {
		size_t n = size - pos < sizeof(buf) ? size - pos : sizeof(buf);

		for (size_t i = 0; i < n; i++)
			buf[i] = file_byte(pos + i);
		ASSERT_EQ((ssize_t)n, write(fd, buf, n));
		pos += n;
	}
	ASSERT_OK(fsync(fd));
	close(fd);
}

static int alloc_lazy(int dev, uint64_t size)
{
	struct pinmem_alloc a = { .size = size, .flags = PINMEM_ALLOC_LAZY };

	if (ioctl(dev, PINMEM_IOC_ALLOC, &a))
		return -errno;
	return a.fd;
}

/* FILL; returns the bytes read, or -errno. */
static long long fill(int rfd, int fd, uint64_t file_off, uint64_t off,
		      uint64_t len)
{
	struct pinmem_fill f = { .fd = fd, .file_offset = file_off,
				 .offset = off, .length = len };

	if (ioctl(rfd, PINMEM_IOC_FILL, &f))
		return -errno;
	return (long long)f.bytes;
}

static uint64_t nr_chunks(struct __test_metadata *_metadata, int rfd)
{
	struct pinmem_region_info ri;

	pm_info(rfd, &ri);
	return ri.nr_chunks;
}

/* The first byte of p[0..end) that is not the file's (from file_off on,
 * len bytes) then zero, or -1. */
static long long first_wrong(const char *p, uint64_t file_off, uint64_t len,
			     uint64_t end)
{
	for (uint64_t i = 0; i < end; i++) {
		unsigned char want = i < len ? file_byte(file_off + i) : 0;

		if ((unsigned char)p[i] != want)
			return (long long)i;
	}
	return -1;
}

#define ASSERT_FILE_THEN_ZERO(p, file_off, len, end)			\
	ASSERT_EQ(-1, first_wrong(p, file_off, len, end))		\
		TH_LOG("wrong byte (file bytes: %llu, then zero to %llu)", \
		       (unsigned long long)(len), (unsigned long long)(end))

TEST_F(fill, reads_the_file_and_zeroes_past_its_end)
{
	const uint64_t fsize = 2 * CHUNK + 5000, size = 4 * CHUNK;
	int rfd = alloc_lazy(self->env.dev, size), fd;
	char *p;

	ASSERT_LE(0, rfd);
	write_file(_metadata, self->path, fsize);
	fd = open(self->path, O_RDONLY | O_CLOEXEC);
	ASSERT_LE(0, fd);
	ASSERT_EQ((long long)fsize, fill(rfd, fd, 0, 0, 3 * CHUNK));
	EXPECT_EQ(3, nr_chunks(_metadata, rfd));
	p = pm_map(rfd, size, PROT_READ, 0);
	ASSERT_FILE_THEN_ZERO(p, 0, fsize, 3 * CHUNK);
	EXPECT_EQ(1, pm_read_is_sigbus(p + 3 * CHUNK));	/* not in the range */
	pm_unmap(p, size);
	close(fd);
	close(rfd);
}

TEST_F(fill, file_offset_and_region_offset)
{
	const uint64_t size = 3 * CHUNK - PG, foff = 3 * PG + 17;
	int rfd = alloc_lazy(self->env.dev, size), fd;
	char *p;

	ASSERT_LE(0, rfd);
	write_file(_metadata, self->path, 4 * CHUNK);
	fd = open(self->path, O_RDONLY | O_CLOEXEC);
	ASSERT_LE(0, fd);
	ASSERT_EQ((long long)CHUNK, fill(rfd, fd, foff, CHUNK, CHUNK));
	/* The last chunk, to the region's end: not a whole chunk. */
	EXPECT_EQ(-EINVAL, fill(rfd, fd, 0, 2 * CHUNK, CHUNK - 2 * PG));
	ASSERT_EQ((long long)(CHUNK - PG),
		  fill(rfd, fd, 0, 2 * CHUNK, CHUNK - PG));
	p = pm_map(rfd, size, PROT_READ, 0);
	EXPECT_EQ(1, pm_read_is_sigbus(p));
	ASSERT_FILE_THEN_ZERO(p + CHUNK, foff, CHUNK, CHUNK);
	ASSERT_FILE_THEN_ZERO(p + 2 * CHUNK, 0, CHUNK - PG, CHUNK - PG);
	pm_unmap(p, size);
	close(fd);
	close(rfd);
}

/*
 * Memory just freed with data in it, taken again by a FILL of a short
 * file: every byte past the file's end must read zero. Where the kernel
 * zeroes every allocation (init_on_alloc=1, Debian's default) this holds
 * without FILL's own zeroing; the debug-kernel lane boots with
 * init_on_alloc=0, where it does not (shown once: FILL without its zeroing
 * failed here at byte 2097152).
 */
TEST_F(fill, recycled_memory_never_shows)
{
	const uint64_t dirty = 64 * MiB, size = 8 * CHUNK;
	int rfd, fd, old = pm_alloc(self->env.dev, dirty);
	char *p = pm_map(old, dirty, PROT_READ | PROT_WRITE, 0);

	memset(p, 0xa5, dirty);
	pm_unmap(p, dirty);
	close(old);
	write_file(_metadata, self->path, 100);
	fd = open(self->path, O_RDONLY | O_CLOEXEC);
	ASSERT_LE(0, fd);
	rfd = alloc_lazy(self->env.dev, size);
	ASSERT_LE(0, rfd);
	ASSERT_EQ(100, fill(rfd, fd, 0, 0, size));
	p = pm_map(rfd, size, PROT_READ, 0);
	ASSERT_FILE_THEN_ZERO(p, 0, 100, size);
	pm_unmap(p, size);
	/* At or past the end of the file: nothing read, all zero. */
	close(rfd);
	rfd = alloc_lazy(self->env.dev, size);
	ASSERT_LE(0, rfd);
	ASSERT_EQ(0, fill(rfd, fd, 4 * MiB, 0, size));
	EXPECT_EQ(8, nr_chunks(_metadata, rfd));
	p = pm_map(rfd, size, PROT_READ, 0);
	ASSERT_FILE_THEN_ZERO(p, 0, 0, size);
	pm_unmap(p, size);
	close(rfd);
	close(fd);
}

TEST_F(fill, direct_io_reads_and_keeps_its_alignment_rules)
{
	const uint64_t size = 4 * CHUNK;
	int rfd, fd;
	char *p;

	if (!getenv("PINMEM_SCRATCH"))
		SKIP(return, "PINMEM_SCRATCH is unset: O_DIRECT needs the guest's ext4 scratch disk");
	write_file(_metadata, self->path, 5 * CHUNK);
	fd = open(self->path, O_RDONLY | O_DIRECT | O_CLOEXEC);
	ASSERT_LE(0, fd) TH_LOG("open O_DIRECT: %s", pm_errname(errno));
	rfd = alloc_lazy(self->env.dev, size);
	ASSERT_LE(0, rfd);
	/* Not a multiple of the logical block: EINVAL, nothing populated. */
	EXPECT_EQ(-EINVAL, fill(rfd, fd, 100, 0, size));
	EXPECT_EQ(0, nr_chunks(_metadata, rfd));
	ASSERT_EQ((long long)size, fill(rfd, fd, PG, 0, size));
	p = pm_map(rfd, size, PROT_READ, 0);
	ASSERT_FILE_THEN_ZERO(p, PG, size, size);
	pm_unmap(p, size);
	/* Filled whole: SEAL and VIEW need no POPULATE. */
	ASSERT_OK(pm_seal(rfd));
	close(pm_view(rfd, 0, CHUNK, 0));
	close(fd);
	close(rfd);
}

/* The type of the file system dir is on: the longest mount point above it. */
static const char *fs_type_of(const char *dir, char *type, size_t len)
{
	char mnt[4096], fstype[64];
	size_t best = 0, m;
	FILE *f = fopen("/proc/self/mounts", "re");

	snprintf(type, len, "?");
	if (!f)
		return type;
	while (fscanf(f, "%*s %4095s %63s %*[^\n]", mnt, fstype) == 2) {
		m = strlen(mnt);
		if (m >= best && !strncmp(dir, mnt, m) &&
		    (dir[m] == '/' || !dir[m] || m == 1)) {
			best = m;
			snprintf(type, len, "%s", fstype);
		}
	}
	fclose(f);
	return type;
}

/*
 * A read_iter that leaves the iterator past what it returned: netfs (9p
 * here, the guest's view of the checkout) advances it by the whole
 * request on a short read. FILL must take only the count: before it did,
 * a short 9p read into a FILL oopsed the 6.12 guest (a page pointer read
 * past the bvec array).
 */
TEST_F(fill, short_read_on_a_network_file_system)
{
	const uint64_t fsize = 3 * PG + 100, size = 2 * CHUNK;
	char exe[4096], path[4200], type[64], *dir;
	ssize_t n;
	int rfd, fd, direct;
	char *p;

	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	ASSERT_LT(0, n);
	exe[n] = 0;
	dir = dirname(exe);
	/* 9p's statfs passes the host's f_type on: ask the mount table. */
	if (strcmp(fs_type_of(dir, type, sizeof(type)), "9p"))
		SKIP(return, "%s is on %s, not 9p (the guest's checkout is)",
		     dir, type);
	snprintf(path, sizeof(path), "%s/fill-9p-%d", dir, getpid());
	write_file(_metadata, path, fsize);
	for (direct = 0; direct < 2; direct++) {
		fd = open(path, O_RDONLY | O_CLOEXEC | (direct ? O_DIRECT : 0));
		if (fd < 0 && direct)
			break;		/* no O_DIRECT on this mount */
		ASSERT_LE(0, fd);
		rfd = alloc_lazy(self->env.dev, size);
		ASSERT_LE(0, rfd);
		EXPECT_EQ((long long)fsize, fill(rfd, fd, 0, 0, size))
			TH_LOG("%s", direct ? "O_DIRECT" : "buffered");
		p = pm_map(rfd, size, PROT_READ, 0);
		ASSERT_FILE_THEN_ZERO(p, 0, fsize, size);
		pm_unmap(p, size);
		close(rfd);
		close(fd);
	}
	unlink(path);
}

TEST_F(fill, arguments)
{
	const uint64_t size = 4 * CHUNK;
	struct pinmem_fill bad;
	int rfd, fd, wfd, whole, vfd, pfd[2];

	write_file(_metadata, self->path, size);
	fd = open(self->path, O_RDONLY | O_CLOEXEC);
	wfd = open(self->path, O_WRONLY | O_CLOEXEC);
	ASSERT_LE(0, fd);
	ASSERT_LE(0, wfd);
	ASSERT_OK(pipe(pfd));
	rfd = alloc_lazy(self->env.dev, size);
	ASSERT_LE(0, rfd);
	EXPECT_EQ(-EINVAL, fill(rfd, fd, 0, PG, CHUNK));	/* offset */
	EXPECT_EQ(-EINVAL, fill(rfd, fd, 0, 0, CHUNK + PG));	/* length */
	EXPECT_EQ(-EINVAL, fill(rfd, fd, 0, 0, 0));
	EXPECT_EQ(-EINVAL, fill(rfd, fd, 0, CHUNK, size));	/* past end */
	EXPECT_EQ(-EINVAL, fill(rfd, fd, 0, size, CHUNK));
	EXPECT_EQ(-EINVAL, fill(rfd, fd, INT64_MAX, 0, CHUNK));
	EXPECT_EQ(-EBADF, fill(rfd, -1, 0, 0, CHUNK));
	EXPECT_EQ(-EBADF, fill(rfd, wfd, 0, 0, CHUNK));
	EXPECT_EQ(-EINVAL, fill(rfd, pfd[0], 0, 0, CHUNK));	/* a pipe */
	EXPECT_EQ(-EINVAL, fill(rfd, rfd, 0, 0, CHUNK));	/* pinmem */
	bad = (struct pinmem_fill){ .fd = fd, .length = CHUNK, .flags = 1 };
	ASSERT_ERRNO(EINVAL, ioctl(rfd, PINMEM_IOC_FILL, &bad));
	bad.flags = 0;
	bad.reserved[1] = 1;
	ASSERT_ERRNO(EINVAL, ioctl(rfd, PINMEM_IOC_FILL, &bad));
	ASSERT_ERRNO(ENOTTY, ioctl(self->env.dev, PINMEM_IOC_FILL, &bad));
	EXPECT_EQ(0, nr_chunks(_metadata, rfd));

	/* A chunk already there: EEXIST, and nothing else populated. */
	struct pinmem_populate pop = { .offset = CHUNK, .length = PG };

	ASSERT_OK(ioctl(rfd, PINMEM_IOC_POPULATE, &pop));
	EXPECT_EQ(-EEXIST, fill(rfd, fd, 0, 0, 2 * CHUNK));
	EXPECT_EQ(1, nr_chunks(_metadata, rfd));
	EXPECT_EQ((long long)CHUNK, fill(rfd, fd, 0, 0, CHUNK));
	EXPECT_EQ(-EEXIST, fill(rfd, fd, 0, 0, CHUNK));

	/* bytes cannot be written back: EFAULT, and nothing populated. */
	struct pinmem_fill *ro = mmap(NULL, PG, PROT_READ | PROT_WRITE,
				      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	ASSERT_NE(MAP_FAILED, ro);
	*ro = (struct pinmem_fill){ .fd = fd, .offset = 2 * CHUNK,
				    .length = CHUNK };
	ASSERT_OK(mprotect(ro, PG, PROT_READ));
	ASSERT_ERRNO(EFAULT, ioctl(rfd, PINMEM_IOC_FILL, ro));
	EXPECT_EQ(2, nr_chunks(_metadata, rfd));
	EXPECT_EQ((long long)CHUNK, fill(rfd, fd, 0, 2 * CHUNK, CHUNK));
	munmap(ro, PG);
	close(rfd);

	/* A region allocated whole has every chunk; views cannot fill. */
	whole = pm_alloc(self->env.dev, size);
	EXPECT_EQ(-EEXIST, fill(whole, fd, 0, 0, CHUNK));
	vfd = pm_view(whole, 0, size, 0);
	bad.reserved[1] = 0;
	ASSERT_ERRNO(ENOTTY, ioctl(vfd, PINMEM_IOC_FILL, &bad));
	close(vfd);
	close(whole);
	close(pfd[0]);
	close(pfd[1]);
	close(wfd);
	close(fd);
}

struct fill_arg {
	int rfd, fd;
	uint64_t size;
	long long ret;
	int done;
};

static void *fill_thread(void *arg)
{
	struct fill_arg *a = arg;

	a->ret = fill(a->rfd, a->fd, 0, 0, a->size);
	__atomic_store_n(&a->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

/*
 * Free memory in KiB, counting the pages parked on per-CPU free lists,
 * which MemFree leaves out: 6.12 lets those lists grow by a good part of
 * a zone after large frees (measured: up to 150 MiB in the guest).
 */
static long long free_kib(void)
{
	char line[256];
	long long pages = 0, n;
	FILE *f = fopen("/proc/zoneinfo", "re");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, " pages free %lld", &n) == 1 ||
		    sscanf(line, " count: %lld", &n) == 1)
			pages += n;
	fclose(f);
	return pages * (long long)(PG / KiB);
}

/*
 * Two FILLs of one range: one publishes, the other fails (EBUSY or
 * EEXIST) holding nothing (free memory comes back after the close).
 */
/* Minutes on the debug kernel (KASAN, under TCG). */
TEST_F_TIMEOUT(fill, of_two_fills_of_a_range_one_wins, 300)
{
	const uint64_t size = 256 * MiB;
	struct fill_arg a[2];
	pthread_t t[2];
	long long before, wins = 0, lost = 0;
	int rfd, fd;
	char *p;

	write_file(_metadata, self->path, size);
	fd = open(self->path, O_RDONLY | O_CLOEXEC);
	ASSERT_LE(0, fd);
	before = free_kib();
	rfd = alloc_lazy(self->env.dev, size);
	ASSERT_LE(0, rfd);
	for (int i = 0; i < 2; i++) {
		a[i] = (struct fill_arg){ .rfd = rfd, .fd = fd, .size = size };
		ASSERT_OK(pthread_create(&t[i], NULL, fill_thread, &a[i]));
	}
	for (int i = 0; i < 2; i++) {
		pthread_join(t[i], NULL);
		wins += a[i].ret == (long long)size;
		/* EBUSY while the winner reads, EEXIST once it published. */
		lost += a[i].ret == -EBUSY || a[i].ret == -EEXIST;
	}
	EXPECT_EQ(1, wins) TH_LOG("returned %lld and %lld", a[0].ret, a[1].ret);
	EXPECT_EQ(1, lost);
	EXPECT_EQ(size / CHUNK, nr_chunks(_metadata, rfd));
	p = pm_map(rfd, size, PROT_READ, 0);
	/* The winner's bytes: a byte a page, and the last chunk whole. */
	for (uint64_t i = 0; i < size; i += PG) {
		ASSERT_EQ(file_byte(i), (unsigned char)p[i])
			TH_LOG("byte %llu", (unsigned long long)i);
	}
	ASSERT_FILE_THEN_ZERO(p + size - CHUNK, size - CHUNK, CHUNK, CHUNK);
	pm_unmap(p, size);
	close(rfd);
	close(fd);
	EXPECT_GT((long long)(size / KiB / 2), before - free_kib())
		TH_LOG("free before %lld KiB, after %lld KiB", before,
		       free_kib());
}

/* Every I/O on /dev/nullb0 completes after this long (timer mode). */
#define NULLB_DELAY_NS	1000000000ULL

/*
 * While a FILL reads from a slow device (null_blk, one second an I/O),
 * FILLs and POPULATEs that overlap its range fail at once with EBUSY and
 * hold no memory: with eight more FILLs of the range started, the free
 * memory falls by about one copy, not nine (before the claim, each held
 * a full copy for as long as its read blocked, charged once). Disjoint
 * ranges are not affected; after the FILL its chunks are there (EEXIST).
 */
TEST_F_TIMEOUT(fill, overlapping_fill_or_populate_fails_at_once, 300)
{
	const uint64_t size = 32 * MiB;
	struct pinmem_populate pop = { .offset = size - PG, .length = 2 * PG };
	struct pinmem_populate apart = { .offset = size, .length = PG };
	struct fill_arg a, more[8];
	pthread_t t, tm[8];
	long long before, during;
	int fd, rfd, busy = 0;
	double t0;

	fd = pm_nullb_open(_metadata, NULLB_DELAY_NS, O_RDONLY | O_DIRECT);
	rfd = alloc_lazy(self->env.dev, 2 * size);
	ASSERT_LE(0, rfd);
	before = free_kib();
	a = (struct fill_arg){ .rfd = rfd, .fd = fd, .size = size };
	t0 = pm_now();
	ASSERT_OK(pthread_create(&t, NULL, fill_thread, &a));
	usleep(200 * 1000);
	for (int i = 0; i < 8; i++) {
		more[i] = a;
		ASSERT_OK(pthread_create(&tm[i], NULL, fill_thread, &more[i]));
	}
	ASSERT_ERRNO(EBUSY, ioctl(rfd, PINMEM_IOC_POPULATE, &pop));
	EXPECT_EQ(-EBUSY, fill(rfd, fd, 0, size - 2 * CHUNK, 4 * CHUNK));
	usleep(300 * 1000);
	during = free_kib();
	ASSERT_OK(ioctl(rfd, PINMEM_IOC_POPULATE, &apart));
	ASSERT_FALSE(__atomic_load_n(&a.done, __ATOMIC_ACQUIRE))
		TH_LOG("the first FILL ended within %.2f s", pm_now() - t0);
	for (int i = 0; i < 8; i++) {
		pthread_join(tm[i], NULL);
		busy += more[i].ret == -EBUSY;
	}
	pthread_join(t, NULL);
	ASSERT_EQ((long long)size, a.ret);
	EXPECT_EQ(8, busy);
	EXPECT_GT((long long)(2 * size / KiB), before - during)
		TH_LOG("free fell by %lld KiB with FILLs of a %llu KiB range",
		       before - during, (unsigned long long)(size / KiB));
	EXPECT_EQ(-EEXIST, fill(rfd, fd, 0, 0, size));
	EXPECT_EQ(size / CHUNK + 1, nr_chunks(_metadata, rfd));
	close(rfd);
	close(fd);
	if (system("rmmod null_blk"))
		TH_LOG("rmmod null_blk failed");
}

TEST_HARNESS_MAIN
