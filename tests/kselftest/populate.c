// SPDX-License-Identifier: GPL-2.0
/*
 * ALLOC_LAZY and POPULATE (ABI 4): a lazy region is charged whole at
 * ALLOC but holds no chunk; POPULATE allocates the chunks of a range; a
 * chunk not populated is SIGBUS through a mapping and EFAULT through GUP;
 * VIEW and SEAL wait for the whole region (ENODATA); a fault maps the
 * rest of its chunk; freeing a partly populated region frees what it has.
 */
#include <pthread.h>
#include <sys/wait.h>

#include "pinmem_test.h"

#define CHUNK (2 * MiB)

PM_FIXTURE(populate);

/* Bytes of the region's chunks on every node together (NODES). */
static uint64_t populated_bytes(int rfd)
{
	uint64_t bytes[64] = { 0 }, sum = 0;
	struct pinmem_nodes q = { .bytes_ptr = (uintptr_t)bytes,
				  .capacity = 64 };

	if (ioctl(rfd, PINMEM_IOC_NODES, &q))
		return UINT64_MAX;
	for (uint32_t n = 0; n < q.count && n < 64; n++)
		sum += bytes[n];
	return sum;
}

static int alloc_lazy(int dev, uint64_t size, uint32_t flags)
{
	struct pinmem_alloc a = { .size = size,
				  .flags = PINMEM_ALLOC_LAZY | flags };

	if (ioctl(dev, PINMEM_IOC_ALLOC, &a))
		return -errno;
	return a.fd;
}

static int populate(int rfd, uint64_t off, uint64_t len)
{
	struct pinmem_populate p = { .offset = off, .length = len };

	return ioctl(rfd, PINMEM_IOC_POPULATE, &p);
}

static long long meminfo_kib(const char *key)
{
	char line[128];
	long long v = -1;
	size_t n = strlen(key);
	FILE *f = fopen("/proc/meminfo", "re");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, key, n) && line[n] == ':')
			v = atoll(line + n + 1);
	fclose(f);
	return v;
}

TEST_F(populate, lazy_alloc_charges_but_allocates_nothing)
{
	const uint64_t size = 256 * MiB;
	struct pinmem_region_info ri;
	struct pinmem_dev_info di;
	long long before, after;
	int rfd;

	before = meminfo_kib("MemFree");
	rfd = alloc_lazy(self->env.dev, size, 0);
	ASSERT_LE(0, rfd) TH_LOG("ALLOC_LAZY: %s", pm_errname(-rfd));
	after = meminfo_kib("MemFree");
	pm_info(rfd, &ri);
	EXPECT_EQ(0, ri.nr_chunks);
	EXPECT_EQ(PINMEM_INFO_UNPOPULATED, ri.flags & PINMEM_INFO_UNPOPULATED);
	EXPECT_EQ(size, ri.size);
	/* Charged whole: the module's total counts it at ALLOC. */
	pm_dev_info(self->env.dev, &di);
	EXPECT_EQ(self->env.base.total_bytes + size, di.total_bytes);
	EXPECT_EQ(0, populated_bytes(rfd));
	/* The system's view, with room for whatever else runs meanwhile. */
	EXPECT_GT((long long)(size / KiB / 2), before - after)
		TH_LOG("MemFree fell by %lld KiB for a lazy region",
		       before - after);

	ASSERT_OK(populate(rfd, 0, size));
	pm_info(rfd, &ri);
	EXPECT_EQ(size / CHUNK, ri.nr_chunks);
	EXPECT_EQ(0, ri.flags & PINMEM_INFO_UNPOPULATED);
	/* Where the chunks are: real pages (MemFree could be refilled by
	 * reclaim in a guest short of memory, the package test's). */
	EXPECT_EQ(size, populated_bytes(rfd));
	close(rfd);
}

TEST_F(populate, unpopulated_chunk_is_sigbus_and_efault)
{
	const uint64_t size = 4 * CHUNK;
	int rfd = alloc_lazy(self->env.dev, size, 0);
	int pfd[2];
	char *p;

	ASSERT_LE(0, rfd);
	p = pm_map(rfd, size, PROT_READ | PROT_WRITE, 0);
	EXPECT_EQ(1, pm_read_is_sigbus(p + CHUNK + 100));
	/* GUP, as O_DIRECT or a registration would take it. */
	ASSERT_OK(pipe(pfd));
	ASSERT_ERRNO(EFAULT, vmsplice(pfd[1], &(struct iovec){ p, PG }, 1, 0));
	ASSERT_ERRNO(EFAULT, write(pfd[1], p + 3 * CHUNK, PG));

	ASSERT_OK(populate(rfd, CHUNK, PG));	/* chunk 1 only */
	EXPECT_EQ(0, pm_read_is_sigbus(p + CHUNK + 100));
	EXPECT_EQ(1, pm_read_is_sigbus(p + 100));
	EXPECT_EQ(1, pm_read_is_sigbus(p + 2 * CHUNK));
	ASSERT_EQ(PG, write(pfd[1], p + CHUNK, PG));
	close(pfd[0]);
	close(pfd[1]);
	pm_unmap(p, size);
	close(rfd);
}

TEST_F(populate, view_and_seal_wait_for_the_whole_region)
{
	const uint64_t size = 8 * CHUNK;
	struct pinmem_view v = { .offset = 0, .length = CHUNK };
	struct pinmem_region_info ri;
	int rfd = alloc_lazy(self->env.dev, size, 0);
	uint64_t i;
	char *p;

	ASSERT_LE(0, rfd);
	ASSERT_OK(populate(rfd, 2 * CHUNK, 3 * CHUNK));
	pm_info(rfd, &ri);
	EXPECT_EQ(3, ri.nr_chunks);
	ASSERT_ERRNO(ENODATA, ioctl(rfd, PINMEM_IOC_VIEW, &v));
	ASSERT_TRANSITION(ENODATA, pm_seal(rfd));
	EXPECT_EQ(PINMEM_STATE_OPEN, pm_state(rfd));

	/* What was written survives populating the rest. */
	p = pm_map(rfd, size, PROT_READ | PROT_WRITE, 0);
	pm_fill(p + 2 * CHUNK, 3 * CHUNK, 11);
	ASSERT_OK(populate(rfd, 0, size));
	ASSERT_PATTERN(p + 2 * CHUNK, 3 * CHUNK, 11);
	for (i = 0; i < 2 * CHUNK; i += PG)
		ASSERT_EQ(0, p[i]) TH_LOG("byte %llu", (unsigned long long)i);
	pm_info(rfd, &ri);
	EXPECT_EQ(8, ri.nr_chunks);
	close(pm_view(rfd, 0, CHUNK, 0));
	pm_unmap(p, size);
	ASSERT_OK(pm_seal(rfd));
	ASSERT_OK(populate(rfd, 0, PG));	/* whole: nothing to do */
	close(rfd);
}

TEST_F(populate, arguments)
{
	const uint64_t size = 2 * CHUNK;
	struct pinmem_populate bad = { .offset = 0, .length = PG,
				       .reserved = { 1, 0 } };
	struct pinmem_populate ok = { .offset = 0, .length = PG };
	int rfd, whole, vfd;

	EXPECT_EQ(-EINVAL, alloc_lazy(self->env.dev, size,
				      PINMEM_ALLOC_FALLBACK));
	rfd = alloc_lazy(self->env.dev, size, 0);
	ASSERT_LE(0, rfd);
	ASSERT_ERRNO(EINVAL, populate(rfd, 1, PG));
	ASSERT_ERRNO(EINVAL, populate(rfd, 0, 100));
	ASSERT_ERRNO(EINVAL, populate(rfd, 0, 0));
	ASSERT_ERRNO(EINVAL, populate(rfd, PG, size));
	ASSERT_ERRNO(EINVAL, populate(rfd, size + PG, PG));
	ASSERT_ERRNO(EINVAL, ioctl(rfd, PINMEM_IOC_POPULATE, &bad));
	ASSERT_ERRNO(ENOTTY, ioctl(self->env.dev, PINMEM_IOC_POPULATE, &ok));
	ASSERT_OK(populate(rfd, size - PG, PG));	/* the last chunk */
	close(rfd);

	/* A region allocated whole: nothing to do; views cannot populate. */
	whole = pm_alloc(self->env.dev, size);
	ASSERT_OK(populate(whole, 0, size));
	vfd = pm_view(whole, 0, size, 0);
	ASSERT_ERRNO(ENOTTY, ioctl(vfd, PINMEM_IOC_POPULATE, &ok));
	close(vfd);
	close(whole);
}

/* A fault maps the rest of its chunk: one fault, not 512. */
TEST_F(populate, fault_maps_the_rest_of_the_chunk)
{
	const uint64_t size = 2 * CHUNK;
	unsigned char vec[2 * CHUNK / PG];
	int rfd = alloc_lazy(self->env.dev, size, 0);
	unsigned int present = 0, i;
	char *p;

	ASSERT_LE(0, rfd);
	p = pm_map(rfd, size, PROT_READ, 0);
	ASSERT_OK(populate(rfd, 0, size));
	(void)*(volatile char *)(p + 5 * PG);
	ASSERT_OK(mincore(p, size, vec));
	for (i = 0; i < size / PG; i++)
		present += vec[i] & 1;
	EXPECT_EQ(CHUNK / PG - 5, present)
		TH_LOG("pages present after one fault at page 5");
	for (i = 0; i < 5; i++)
		EXPECT_EQ(0, vec[i] & 1);
	pm_unmap(p, size);
	close(rfd);
}

TEST_F(populate, nodes_count_populated_chunks)
{
	int rfd = alloc_lazy(self->env.dev, 8 * CHUNK, 0);

	ASSERT_LE(0, rfd);
	ASSERT_OK(populate(rfd, 5 * CHUNK, CHUNK + PG));
	EXPECT_EQ(2 * CHUNK, populated_bytes(rfd));
	close(rfd);
}

struct populate_arg {
	int rfd;
	uint64_t size;
	int ret;
};

static void *populate_thread(void *arg)
{
	struct populate_arg *a = arg;

	a->ret = populate(a->rfd, 0, a->size) ? errno : 0;
	return NULL;
}

/*
 * Two POPULATEs of one range: each chunk allocated once. A chunk
 * allocated twice would be lost (one entry holds one): MemFree would not
 * come back by that much after the close.
 */
TEST_F(populate, concurrent_populates_allocate_each_chunk_once)
{
	const uint64_t size = 256 * MiB;
	struct populate_arg a[2];
	struct pinmem_region_info ri;
	pthread_t t[2];
	long long before = meminfo_kib("MemFree"), used;
	int rfd = alloc_lazy(self->env.dev, size, 0);

	ASSERT_LE(0, rfd);
	for (int i = 0; i < 2; i++) {
		a[i] = (struct populate_arg){ .rfd = rfd, .size = size };
		ASSERT_OK(pthread_create(&t[i], NULL, populate_thread, &a[i]));
	}
	for (int i = 0; i < 2; i++) {
		pthread_join(t[i], NULL);
		EXPECT_EQ(0, a[i].ret) TH_LOG("%s", pm_errname(a[i].ret));
	}
	pm_info(rfd, &ri);
	EXPECT_EQ(size / CHUNK, ri.nr_chunks);
	EXPECT_EQ(size, populated_bytes(rfd));
	used = before - meminfo_kib("MemFree");
	EXPECT_GT((long long)(size / KiB * 3 / 2), used)
		TH_LOG("MemFree fell by %lld KiB for %llu MiB", used,
		       (unsigned long long)(size / MiB));
	close(rfd);
	EXPECT_GT((long long)(size / KiB / 2), before - meminfo_kib("MemFree"))
		TH_LOG("not all of it came back after close");
}

TEST_HARNESS_MAIN
