// SPDX-License-Identifier: GPL-2.0
/*
 * Copy-on-write view mappings (ABI 7): MAP_PRIVATE of a view fd of a
 * SEALED region reads the region's bytes; a write, however it is made
 * (a store, mprotect then a store, process_vm_writev, /proc/PID/mem),
 * changes only the writer's copy, never the region, the owner's mapping
 * or any other view. Such a mapping is a view mapping for DONATE as long
 * as it exists, even once every page of it has been copied. An unsealed
 * region refuses MAP_PRIVATE, and so does a region fd.
 */
#include <sys/uio.h>

#include "pinmem_test.h"

#define COW_LEN		(4 * MiB)	/* two chunks */
#define COW_SEED	7

PM_FIXTURE(cow)

/* A sealed region of COW_LEN holding pattern COW_SEED; *o: the owner's. */
static int cow_region(struct __test_metadata *_metadata, struct pm_env *env,
		      char **o)
{
	int rfd = pm_alloc_at(_metadata, __LINE__, env->dev, COW_LEN, 0, NULL);

	*o = pm_map_at(_metadata, __LINE__, rfd, COW_LEN,
		       PROT_READ | PROT_WRITE, 0);
	pm_fill(*o, COW_LEN, COW_SEED);
	ASSERT_TRANSITION(0, pm_seal(rfd));
	return rfd;
}

/* A private mapping that must succeed. */
static void *cow_map_at(struct __test_metadata *_metadata, int line, int fd,
			size_t len, int prot, off_t off)
{
	void *p = mmap(NULL, len, prot, MAP_PRIVATE, fd, off);

	ASSERT_NE(MAP_FAILED, p)
		TH_LOG("line %d: MAP_PRIVATE of fd %d length %zu prot %d: %s",
		       line, fd, len, prot, pm_errname(errno));
	return p;
}
#define cow_map(fd, len, prot, off) \
	cow_map_at(_metadata, __LINE__, fd, len, prot, off)

/* The region's bytes, through the owner's mapping, are still the pattern. */
#define ASSERT_REGION_INTACT(o) ASSERT_PATTERN(o, COW_LEN, COW_SEED)

TEST_F(cow, private_view_reads_the_region)
{
	char *o;
	int rfd = cow_region(_metadata, &self->env, &o);
	int vfd = pm_view(rfd, MiB, 2 * MiB, 0);
	char *p = cow_map(vfd, 2 * MiB, PROT_READ | PROT_WRITE, 0);
	char *q = cow_map(vfd, PG, PROT_READ, 3 * PG);
	struct pinmem_holder h[3];
	const struct pinmem_holder *hp;

	ASSERT_EQ(0, memcmp(p, o + MiB, 2 * MiB));
	ASSERT_EQ(0, memcmp(q, o + MiB + 3 * PG, PG));
	/* Views, never writable ones, whatever their protection. */
	pm_expect_counts(rfd, 1, 2, 0);
	ASSERT_EQ(3, pm_holders(rfd, h, 3));
	hp = pm_find_holder(h, 3, p);
	ASSERT_NE(NULL, hp);
	EXPECT_EQ(PINMEM_HOLDER_VIEW, hp->kind);
	EXPECT_EQ(PINMEM_HOLDER_PRIVATE, hp->flags);
	EXPECT_EQ(PROT_READ | PROT_WRITE, hp->prot);
	EXPECT_EQ(MiB, hp->offset);
	hp = pm_find_holder(h, 3, o);
	ASSERT_NE(NULL, hp);
	EXPECT_EQ(PINMEM_HOLDER_MAYWRITE, hp->flags)
		TH_LOG("the owner's shared mapping is no private one");
	pm_unmap(q, PG);
	pm_unmap(p, 2 * MiB);
	pm_unmap(o, COW_LEN);
	close(vfd);
	close(rfd);
}

/* A write changes the writer's copy only. */
TEST_F(cow, write_changes_only_the_writers_copy)
{
	char *o;
	int rfd = cow_region(_metadata, &self->env, &o);
	int vfd = pm_view(rfd, 0, COW_LEN, 0);
	char *p = cow_map(vfd, COW_LEN, PROT_READ | PROT_WRITE, 0);
	char *other = cow_map(vfd, COW_LEN, PROT_READ | PROT_WRITE, 0);
	char *shared = pm_map(vfd, COW_LEN, PROT_READ, 0);

	pm_fill(p, PG, 1);				/* first page */
	pm_fill(p + 3 * MiB + 5 * PG, PG, 2);		/* second chunk */
	p[COW_LEN - 1] ^= 0xff;				/* last byte */
	ASSERT_PATTERN(p, PG, 1);
	ASSERT_PATTERN(p + 3 * MiB + 5 * PG, PG, 2);
	ASSERT_EQ((char)(o[COW_LEN - 1] ^ 0xff), p[COW_LEN - 1]);
	/* Pages it did not write still read the region. */
	ASSERT_EQ(0, memcmp(p + PG, o + PG, 3 * MiB + 4 * PG));
	ASSERT_REGION_INTACT(o);
	ASSERT_PATTERN(shared, COW_LEN, COW_SEED);
	ASSERT_PATTERN(other, COW_LEN, COW_SEED);
	pm_expect_counts(rfd, 1, 3, 0);
	pm_unmap(shared, COW_LEN);
	pm_unmap(other, COW_LEN);
	pm_unmap(p, COW_LEN);
	pm_unmap(o, COW_LEN);
	close(vfd);
	close(rfd);
}

/* mprotect may add write to a private view: it writes its own copies. */
TEST_F(cow, mprotect_write_copies)
{
	char *o;
	int rfd = cow_region(_metadata, &self->env, &o);
	int vfd = pm_view(rfd, 0, COW_LEN, 0);
	char *p = cow_map(vfd, COW_LEN, PROT_READ, 0);

	ASSERT_OK(mprotect(p, 2 * PG, PROT_READ | PROT_WRITE));
	pm_fill(p + PG, PG, 3);
	ASSERT_PATTERN(p + PG, PG, 3);
	ASSERT_REGION_INTACT(o);
	/* The split VMA is two view mappings, neither writable. */
	pm_expect_counts(rfd, 1, 2, 0);
	pm_unmap(p, COW_LEN);
	pm_unmap(o, COW_LEN);
	close(vfd);
	close(rfd);
}

/* Writes by GUP (process_vm_writev) and FOLL_FORCE (/proc/PID/mem) copy. */
TEST_F(cow, gup_and_force_writes_copy)
{
	char *o;
	int rfd = cow_region(_metadata, &self->env, &o);
	int vfd = pm_view(rfd, 0, COW_LEN, 0);
	char *p = cow_map(vfd, COW_LEN, PROT_READ | PROT_WRITE, 0);
	char *r = cow_map(vfd, COW_LEN, PROT_READ, 0);
	char buf[PG];
	struct iovec local = { .iov_base = buf, .iov_len = PG };
	struct iovec remote = { .iov_base = p + 2 * PG, .iov_len = PG };
	int mem;

	pm_fill(buf, PG, 4);
	ASSERT_EQ((ssize_t)PG, process_vm_writev(getpid(), &local, 1,
						 &remote, 1, 0))
		TH_LOG("process_vm_writev: %s", pm_errname(errno));
	ASSERT_PATTERN(p + 2 * PG, PG, 4);
	mem = open("/proc/self/mem", O_RDWR | O_CLOEXEC);
	ASSERT_GE(mem, 0);
	pm_fill(buf, PG, 5);
	ASSERT_EQ((ssize_t)PG, pwrite(mem, buf, PG, (uintptr_t)(r + MiB)))
		TH_LOG("write to a PROT_READ private view: %s",
		       pm_errname(errno));
	close(mem);
	ASSERT_PATTERN(r + MiB, PG, 5);
	ASSERT_REGION_INTACT(o);
	pm_unmap(r, COW_LEN);
	pm_unmap(p, COW_LEN);
	pm_unmap(o, COW_LEN);
	close(vfd);
	close(rfd);
}

TEST_F(cow, donate_refused_while_mapped_allowed_after_munmap)
{
	char *o;
	int rfd = cow_region(_metadata, &self->env, &o);
	int vfd = pm_view(rfd, 0, COW_LEN, 0);
	char *p = cow_map(vfd, PG, PROT_READ, 0);

	ASSERT_TRANSITION(EBUSY, pm_donate(rfd));
	ASSERT_EQ(PINMEM_STATE_SEALED, pm_state(rfd));
	pm_unmap(p, PG);
	ASSERT_TRANSITION(0, pm_donate(rfd));
	/* DONATED: no view mapping, private ones included. */
	ASSERT_ERRNO(EBUSY, mmap(NULL, PG, PROT_READ, MAP_PRIVATE, vfd, 0));
	pm_expect_counts(rfd, 1, 0, 0);
	pm_unmap(o, COW_LEN);
	close(vfd);
	close(rfd);
}

/*
 * The rule: a private view counts until it is unmapped, not until its
 * pages are copied. Copied pages come back from the region on
 * MADV_DONTNEED (or any zap), so a fully copied mapping still holds it.
 */
TEST_F(cow, donate_refused_after_every_page_copied)
{
	char *o;
	int rfd = cow_region(_metadata, &self->env, &o);
	int vfd = pm_view(rfd, 0, COW_LEN, 0);
	char *p = cow_map(vfd, COW_LEN, PROT_READ | PROT_WRITE, 0);

	for (size_t off = 0; off < COW_LEN; off += PG)
		p[off] = 1;
	ASSERT_TRANSITION(EBUSY, pm_donate(rfd));
	ASSERT_OK(madvise(p, COW_LEN, MADV_DONTNEED));
	ASSERT_PATTERN(p, COW_LEN, COW_SEED);
	ASSERT_REGION_INTACT(o);
	pm_unmap(p, COW_LEN);
	ASSERT_TRANSITION(0, pm_donate(rfd));
	pm_unmap(o, COW_LEN);
	close(vfd);
	close(rfd);
}

/*
 * fork: the child inherits the mapping (a view of its own, counted), with
 * the parent's copies as they were; its writes reach neither the parent
 * nor the region.
 */
TEST_F(cow, fork_of_a_private_view)
{
	char *o;
	int rfd = cow_region(_metadata, &self->env, &o);
	int vfd = pm_view(rfd, 0, COW_LEN, 0);
	char *p = cow_map(vfd, COW_LEN, PROT_READ | PROT_WRITE, 0);
	int go[2], done[2];
	char c = 0;
	pid_t pid;

	pm_fill(p, PG, 6);
	ASSERT_OK(pipe(go));
	ASSERT_OK(pipe(done));
	pid = fork();
	ASSERT_GE(pid, 0);
	if (pid == 0) {
		int bad;

		/* If the parent fails, read(go) sees EOF: no child left over. */
		close(go[1]);
		close(done[0]);
		bad = pm_check(p, PG, 6) != -1 ||
		      memcmp(p + PG, o + PG, COW_LEN - PG);
		pm_fill(p + PG, PG, 8);
		pm_fill(p, PG, 9);
		bad |= pm_check(p + PG, PG, 8) != -1;
		if (write(done[1], "x", 1) != 1 || read(go[0], &c, 1) != 1)
			bad = 1;
		_exit(bad);
	}
	close(go[0]);
	close(done[1]);
	ASSERT_EQ(1, read(done[0], &c, 1));
	/* The child has the owner's mapping too. */
	pm_expect_counts(rfd, 2, 2, 0);
	ASSERT_PATTERN(p, PG, 6);
	ASSERT_EQ(0, memcmp(p + PG, o + PG, COW_LEN - PG))
		TH_LOG("the child's write reached the parent");
	ASSERT_REGION_INTACT(o);
	ASSERT_TRANSITION(EBUSY, pm_donate(rfd));
	ASSERT_EQ(1, write(go[1], "x", 1));
	ASSERT_EQ(0, pm_wait(pid)) TH_LOG("the child saw wrong bytes");
	pm_expect_counts(rfd, 1, 1, 0);
	ASSERT_PATTERN(p, PG, 6);
	close(go[1]);
	close(done[0]);
	pm_unmap(p, COW_LEN);
	ASSERT_TRANSITION(0, pm_donate(rfd));
	pm_unmap(o, COW_LEN);
	close(vfd);
	close(rfd);
}

/*
 * Refused: MAP_PRIVATE of a view while the region is OPEN (EPERM: pages
 * not yet copied would change under it), of a region fd (EINVAL: the
 * owner maps shared), and a shared writable view of a sealed region
 * (EPERM, as ever). None leaves a count.
 */
TEST_F(cow, refusals)
{
	int rfd = pm_alloc(self->env.dev, 2 * MiB);
	int vro = pm_view(rfd, 0, 2 * MiB, 0);
	int vrw = pm_view(rfd, 0, 2 * MiB, PINMEM_VIEW_WRITE);

	ASSERT_ERRNO(EPERM, mmap(NULL, PG, PROT_READ, MAP_PRIVATE, vro, 0));
	ASSERT_ERRNO(EPERM, mmap(NULL, PG, PROT_READ | PROT_WRITE,
				 MAP_PRIVATE, vrw, 0));
	ASSERT_ERRNO(EINVAL, mmap(NULL, PG, PROT_READ, MAP_PRIVATE, rfd, 0));
	ASSERT_TRANSITION(0, pm_seal(rfd));
	ASSERT_ERRNO(EINVAL, mmap(NULL, PG, PROT_READ, MAP_PRIVATE, rfd, 0));
	ASSERT_ERRNO(EPERM, mmap(NULL, PG, PROT_READ | PROT_WRITE, MAP_SHARED,
				 vrw, 0));
	ASSERT_ERRNO(EINVAL, mmap(NULL, 2 * MiB + PG, PROT_READ, MAP_PRIVATE,
				  vro, 0));
	pm_expect_counts(rfd, 0, 0, 0);
	ASSERT_EQ(0, pm_holders(rfd, NULL, 0));
	close(vrw);
	close(vro);
	close(rfd);
}

TEST_HARNESS_MAIN
