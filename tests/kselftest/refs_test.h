/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Helpers for the reference tests (refs.c, refs_io.c): REFS and EXPECT,
 * and a pipe that holds pages of a mapping through vmsplice.
 */
#ifndef PINMEM_REFS_TEST_H
#define PINMEM_REFS_TEST_H

#include <sys/uio.h>
#include <sys/utsname.h>

#include "pinmem_test.h"

/* REFS through fd (region_id 0 unless fd is the device): the count. */
static inline uint32_t pm_refs_at(struct __test_metadata *_metadata, int line,
				  int fd, uint64_t region_id,
				  struct pinmem_ref_range *r, uint32_t cap)
{
	struct pinmem_refs q = {
		.region_id = region_id,
		.ranges_ptr = (uintptr_t)r,
		.capacity = cap,
	};

	if (cap)
		memset(r, 0xa5, cap * sizeof(*r));
	ASSERT_EQ(0, ioctl(fd, PINMEM_IOC_REFS, &q))
		TH_LOG("line %d: REFS: %s", line, pm_errname(errno));
	return q.count;
}
#define pm_refs(fd, r, cap) pm_refs_at(_metadata, __LINE__, fd, 0, r, cap)

/* Assert one run of references: offset, length, refs and pinned. */
#define ASSERT_REFS(fd, off, len, nrefs, npinned) do {			\
	struct pinmem_ref_range __r[4];					\
	uint32_t __n = pm_refs(fd, __r, 4);				\
	ASSERT_EQ(1, __n) TH_LOG("REFS: %u runs, expected one", __n);	\
	EXPECT_EQ((uint64_t)(off), __r[0].offset);			\
	EXPECT_EQ((uint64_t)(len), __r[0].length);			\
	EXPECT_EQ((uint64_t)(nrefs), __r[0].refs);			\
	EXPECT_EQ((uint64_t)(npinned), __r[0].pinned);			\
	EXPECT_EQ(0, __r[0].reserved);					\
} while (0)

static inline int pm_expect(int rfd, uint64_t off, uint64_t len,
			    uint32_t flags)
{
	struct pinmem_expect e = { .offset = off, .length = len,
				   .flags = flags };

	return ioctl(rfd, PINMEM_IOC_EXPECT, &e) ? errno : 0;
}

/* vmsplice n pages at p into a new pipe (nobody reads it); p[0], p[1]. */
static inline void pm_splice_at(struct __test_metadata *_metadata, int line,
				int pfd[2], void *p, size_t n)
{
	struct iovec iov = { .iov_base = p, .iov_len = n * PG };

	ASSERT_OK(pipe2(pfd, O_CLOEXEC));
	ASSERT_EQ((ssize_t)(n * PG), vmsplice(pfd[1], &iov, 1, 0))
		TH_LOG("line %d: vmsplice: %s", line, pm_errname(errno));
}
#define pm_splice(pfd, p, n) pm_splice_at(_metadata, __LINE__, pfd, p, n)

/* Read what the pipe holds; returns the bytes read. */
static inline size_t pm_drain(int pfd[2], void *buf, size_t cap)
{
	ssize_t r, got = 0;

	close(pfd[1]);
	while ((size_t)got < cap && (r = read(pfd[0], (char *)buf + got,
					      cap - got)) > 0)
		got += r;
	close(pfd[0]);
	return got;
}

/*
 * Whether the running kernel is of the series label ("6.1", "6.12"): its
 * release starts with label and a dot. From uname, not the rig's label,
 * which names a built tree (the debug kernel) by its whole release.
 */
static inline int pm_kernel_is(const char *label)
{
	struct utsname u;
	size_t n = strlen(label);

	return !uname(&u) && !strncmp(u.release, label, n) &&
	       u.release[n] == '.';
}

#endif /* PINMEM_REFS_TEST_H */
