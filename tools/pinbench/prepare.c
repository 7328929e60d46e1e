// SPDX-License-Identifier: GPL-2.0
/*
 * pinbench prepare: what making SIZE bytes of locked, written-once memory
 * costs in user space, by each way a loader without the module has, before
 * any byte of a file is read: the ceiling of a portable-backend load.
 *
 *   memfd 4k      memfd, MADV_POPULATE_WRITE through a shared mapping,
 *                 mlock (the portable backend's region, shmem THP off)
 *   anon 4k       anonymous private mapping, MADV_POPULATE_WRITE, mlock
 *   anon THP      the same, 2 MiB aligned, MADV_HUGEPAGE first
 *                 (transparent_hugepage/enabled = madvise or always)
 *   locked, written  one write pass (memset) over an anon THP mapping kept
 *                 locked from the first run: a pool of pre-pinned memory
 *                 costs nothing to prepare again; this is the floor, the
 *                 memory bandwidth a copy into it pays anyway
 *
 * Each method's mapping is unmapped (its memory freed) before the next
 * one's clock starts; methods alternate; medians in GB/s of memory made.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "bench.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

#define HUGE_2M (2ULL << 20)

enum how { MEMFD_4K, ANON_4K, ANON_THP, ANON_REUSE, NHOW };

static const char *const names[NHOW] = {
	"memfd 4k (portable region)", "anon 4k", "anon THP (madvise)",
	"locked, written (pool floor)",
};

/* A 2 MiB aligned anonymous mapping of size, or NULL. */
static char *anon_aligned(uint64_t size)
{
	char *p = mmap(NULL, size + HUGE_2M, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	uintptr_t a;

	if (p == MAP_FAILED)
		return NULL;
	a = ((uintptr_t)p + HUGE_2M - 1) & ~(uintptr_t)(HUGE_2M - 1);
	if (a > (uintptr_t)p)
		munmap(p, a - (uintptr_t)p);
	munmap((char *)a + size, (uintptr_t)p + HUGE_2M - a);
	return (char *)a;
}

/* Make size bytes present, zeroed and locked the way how says: 0 or -errno. */
static int make(enum how how, uint64_t size, char **out)
{
	char *p = NULL;
	int fd;

	if (how == MEMFD_4K) {
		fd = memfd_create("pinbench-prepare", MFD_CLOEXEC);
		if (fd < 0 || ftruncate(fd, (off_t)size))
			return -errno;
		p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		close(fd);
		if (p == MAP_FAILED)
			return -errno;
	} else {
		p = anon_aligned(size);
		if (!p)
			return -errno;
		if (how == ANON_THP)
			madvise(p, size, MADV_HUGEPAGE);
	}
	*out = p;
	if (madvise(p, size, MADV_POPULATE_WRITE) || mlock(p, size))
		return -errno;
	return 0;
}

int bench_prepare(struct cfg *c, uint64_t size)
{
	struct series s[NHOW];
	char *keep = NULL, *p = NULL;
	int run, h, ret;

	size = (size + HUGE_2M - 1) & ~(HUGE_2M - 1);
	memset(s, 0, sizeof(s));
	for (h = 0; h < NHOW; h++)
		s[h].name = names[h];
	for (run = 0; run < c->runs; run++) {
		for (h = 0; h < ANON_REUSE; h++) {
			uint64_t t0 = now_ns();

			ret = make((enum how)h, size, &p);
			if (ret) {
				fprintf(stderr, "pinbench: prepare: %s: %s\n",
					names[h], strerror(-ret));
				return 1;
			}
			add(&s[h], size / ((now_ns() - t0) / 1e9) / 1e9);
			if (h == ANON_THP && !keep)
				keep = p;
			else
				munmap(p, size);
		}
		/* The pool: locked pages written over once more. */
		uint64_t t0 = now_ns();

		memset(keep, run, size);
		add(&s[ANON_REUSE], size / ((now_ns() - t0) / 1e9) / 1e9);
	}
	printf("prepare %llu bytes of locked memory, %d runs, medians (GB/s of memory made)\n",
	       (unsigned long long)size, c->runs);
	for (h = 0; h < NHOW; h++)
		printf("  %-28s %7.2f GB/s  (%.3f s per GiB)\n", s[h].name,
		       median(&s[h]), (1ULL << 30) / (median(&s[h]) * 1e9));
	munmap(keep, size);
	return 0;
}
