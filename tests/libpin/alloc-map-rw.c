// SPDX-License-Identifier: MIT
/*
 * A region is zeroed; bytes written through the owner mapping are read
 * through a read-only view, and bytes written through a read-write view
 * show in the owner mapping.
 */
#include <sys/mman.h>

#include "test.h"

int main(void)
{
	struct pin_dev *dev = t_open(0);
	struct pin_region *r;
	struct pin_view *ro, *rw;
	unsigned char *own, *vr, *vw;
	void *again;
	size_t i;

	CHECK_OK(pin_region_create(dev, MiB(4), NULL, &r), pin_dev_error(dev));
	EXPECT_TRUE(pin_region_size(r) >= MiB(4));
	EXPECT_TRUE(pin_region_id(r) != 0);
	EXPECT_TRUE(pin_region_fd(r) >= 0);
	CHECK_OK(pin_region_map(r, (void **)&own), pin_region_error(r));
	CHECK_OK(pin_region_map(r, &again), pin_region_error(r));
	EXPECT_TRUE(again == own);
	for (i = 0; i < MiB(4); i++)
		if (own[i])
			FAIL("byte %zu of a new region is 0x%02x", i, own[i]);
	t_fill(own, MiB(4), 7);

	/* Read-only view of the second MiB. */
	CHECK_OK(pin_view_create(r, MiB(1), MiB(1), 0, &ro),
		 pin_region_error(r));
	EXPECT_EQ(pin_view_offset(ro), MiB(1));
	EXPECT_EQ(pin_view_length(ro), MiB(1));
	EXPECT_EQ(pin_view_writable(ro), 0);
	CHECK_OK(pin_view_map(ro, PROT_READ, (void **)&vr), pin_view_error(ro));
	for (i = 0; i < MiB(1); i++)
		if (vr[i] != own[MiB(1) + i])
			FAIL("view byte %zu differs from owner", i);

	/* Read-write view of the whole region writes through. */
	CHECK_OK(pin_view_create(r, 0, MiB(4), PIN_VIEW_WRITE, &rw),
		 pin_region_error(r));
	EXPECT_EQ(pin_view_writable(rw), 1);
	CHECK_OK(pin_view_map(rw, PROT_READ | PROT_WRITE, (void **)&vw),
		 pin_view_error(rw));
	t_fill(vw, MiB(4), 99);
	t_check(own, MiB(4), 99, "owner after view write");
	t_check(vr, MiB(1), (unsigned)(99 + 131u * MiB(1)), "ro view after view write");

	CHECK_OK(pin_view_unmap(rw, vw), pin_view_error(rw));
	CHECK_OK(pin_view_unmap(ro, vr), pin_view_error(ro));
	pin_view_close(rw);
	pin_view_close(ro);
	CHECK_OK(pin_region_unmap(r), pin_region_error(r));
	CHECK_OK(pin_region_close(r), "free");
	pin_dev_close(dev);
	return 0;
}
