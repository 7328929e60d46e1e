// SPDX-License-Identifier: GPL-2.0
/*
 * SEAL: OPEN -> SEALED, refused (EBUSY) while a view mapping may write,
 * like memfd's F_SEAL_WRITE; afterwards no view can write, and the seal
 * only comes off through DONATE then REOPEN.
 */
#include "pinmem_test.h"

PM_FIXTURE(seal)

TEST_F(seal, busy_with_writable_view_mapped)
{
	int rfd = pm_alloc(self->env.dev, 2 * MiB);
	int vfd = pm_view(rfd, 0, 2 * MiB, PINMEM_VIEW_WRITE);
	void *p = pm_map(vfd, PG, PROT_READ | PROT_WRITE, 0);

	ASSERT_TRANSITION(EBUSY, pm_seal(rfd));
	ASSERT_EQ(PINMEM_STATE_OPEN, pm_state(rfd));
	pm_unmap(p, PG);
	close(vfd);
	close(rfd);
}

/* PROT_READ of a read-write view fd could be mprotect()ed to write. */
TEST_F(seal, busy_with_prot_read_of_rw_view)
{
	int rfd = pm_alloc(self->env.dev, 2 * MiB);
	int vfd = pm_view(rfd, 0, 2 * MiB, PINMEM_VIEW_WRITE);
	void *p = pm_map(vfd, PG, PROT_READ, 0);

	pm_expect_counts(rfd, 0, 1, 1);
	ASSERT_TRANSITION(EBUSY, pm_seal(rfd));
	pm_unmap(p, PG);
	close(vfd);
	close(rfd);
}

TEST_F(seal, succeeds_after_munmap)
{
	int rfd = pm_alloc(self->env.dev, 2 * MiB);
	int vfd = pm_view(rfd, 0, 2 * MiB, PINMEM_VIEW_WRITE);
	void *p = pm_map(vfd, PG, PROT_READ | PROT_WRITE, 0);

	ASSERT_TRANSITION(EBUSY, pm_seal(rfd));
	pm_unmap(p, PG);
	ASSERT_TRANSITION(0, pm_seal(rfd));
	ASSERT_EQ(PINMEM_STATE_SEALED, pm_state(rfd));
	/* Sealing again is a no-op. */
	ASSERT_TRANSITION(0, pm_seal(rfd));
	ASSERT_EQ(PINMEM_STATE_SEALED, pm_state(rfd));
	close(vfd);
	close(rfd);
}

/* Read-only views and the owner mapping do not stop the seal. */
TEST_F(seal, readonly_views_and_owner_allow_seal)
{
	int rfd = pm_alloc(self->env.dev, 2 * MiB);
	int vfd = pm_view(rfd, 0, 2 * MiB, 0);
	char *v = pm_map(vfd, PG, PROT_READ, 0);
	char *o = pm_map(rfd, PG, PROT_READ | PROT_WRITE, 0);

	ASSERT_TRANSITION(0, pm_seal(rfd));
	/* The owner mapping is not constrained by the state. */
	o[0] = 42;
	ASSERT_EQ(42, v[0]);
	pm_unmap(o, PG);
	pm_unmap(v, PG);
	close(vfd);
	close(rfd);
}

TEST_F(seal, sealed_refuses_writable_view_mmap)
{
	int rfd = pm_alloc(self->env.dev, 2 * MiB);
	int vfd = pm_view(rfd, 0, 2 * MiB, PINMEM_VIEW_WRITE);

	ASSERT_TRANSITION(0, pm_seal(rfd));
	ASSERT_ERRNO(EPERM, mmap(NULL, PG, PROT_READ | PROT_WRITE, MAP_SHARED,
				 vfd, 0));
	pm_expect_counts(rfd, 0, 0, 0);
	close(vfd);
	close(rfd);
}

/* Read-only mapping of the read-write fd works, but can never write. */
TEST_F(seal, sealed_readonly_mapping_cannot_mprotect_write)
{
	int rfd = pm_alloc(self->env.dev, 2 * MiB);
	int vfd = pm_view(rfd, 0, 2 * MiB, PINMEM_VIEW_WRITE);
	void *p;

	ASSERT_TRANSITION(0, pm_seal(rfd));
	p = pm_map(vfd, PG, PROT_READ, 0);
	pm_expect_counts(rfd, 0, 1, 0);
	ASSERT_ERRNO(EACCES, mprotect(p, PG, PROT_READ | PROT_WRITE));
	pm_unmap(p, PG);
	close(vfd);
	close(rfd);
}

TEST_F(seal, sealed_refuses_rw_view_fd)
{
	int rfd = pm_alloc(self->env.dev, 2 * MiB);
	struct pinmem_view v = { .offset = 0, .length = PG,
				 .flags = PINMEM_VIEW_WRITE };
	int vfd;

	ASSERT_TRANSITION(0, pm_seal(rfd));
	ASSERT_ERRNO(EPERM, ioctl(rfd, PINMEM_IOC_VIEW, &v));
	vfd = pm_view(rfd, 0, PG, 0);
	close(vfd);
	close(rfd);
}

/* The seal is one-way: only DONATE leaves SEALED. */
TEST_F(seal, seal_is_one_way)
{
	int rfd = pm_alloc(self->env.dev, 2 * MiB);

	ASSERT_TRANSITION(EPERM, pm_reopen(rfd));
	ASSERT_TRANSITION(EPERM, pm_publish(rfd));
	ASSERT_TRANSITION(0, pm_seal(rfd));
	ASSERT_TRANSITION(EPERM, pm_reopen(rfd));
	ASSERT_TRANSITION(EPERM, pm_publish(rfd));
	ASSERT_EQ(PINMEM_STATE_SEALED, pm_state(rfd));
	close(rfd);
}

TEST_F(seal, seal_of_donated_is_eperm)
{
	int rfd = pm_alloc(self->env.dev, 2 * MiB);

	ASSERT_TRANSITION(0, pm_donate(rfd));
	ASSERT_TRANSITION(EPERM, pm_seal(rfd));
	ASSERT_EQ(PINMEM_STATE_DONATED, pm_state(rfd));
	close(rfd);
}

/* Writability survives VMA splits and mprotect to read-only. */
TEST_F(seal, busy_until_every_writable_piece_is_gone)
{
	int rfd = pm_alloc(self->env.dev, 2 * MiB);
	int vfd = pm_view(rfd, 0, 2 * MiB, PINMEM_VIEW_WRITE);
	char *p = pm_map(vfd, 3 * PG, PROT_READ | PROT_WRITE, 0);

	pm_unmap(p + PG, PG);
	ASSERT_OK(mprotect(p, PG, PROT_READ));
	ASSERT_OK(mprotect(p + 2 * PG, PG, PROT_NONE));
	pm_expect_counts(rfd, 0, 2, 2);
	ASSERT_TRANSITION(EBUSY, pm_seal(rfd));
	pm_unmap(p, PG);
	ASSERT_TRANSITION(EBUSY, pm_seal(rfd));
	pm_unmap(p + 2 * PG, PG);
	ASSERT_TRANSITION(0, pm_seal(rfd));
	close(vfd);
	close(rfd);
}

TEST_HARNESS_MAIN
