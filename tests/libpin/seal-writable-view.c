// SPDX-License-Identifier: MIT
/*
 * seal fails with -EBUSY while a writable view mapping exists; once it is
 * gone seal succeeds, and then no writable view fd (-EPERM) nor writable
 * mapping of an existing read-write view fd (-EPERM) can be had, while
 * read-only views still work.
 */
#include <sys/mman.h>
#include <unistd.h>

#include "test.h"

int main(void)
{
	struct pin_dev *dev = t_open(0);
	struct pin_region_info info = PIN_INIT(struct pin_region_info);
	struct pin_region *r;
	struct pin_view *rw, *ro, *late = (struct pin_view *)1;
	unsigned char *w, *rd;
	void *x = (void *)1;

	CHECK_OK(pin_region_create(dev, MiB(2), NULL, &r), pin_dev_error(dev));
	CHECK_OK(pin_view_create(r, 0, MiB(2), PIN_VIEW_WRITE, &rw),
		 pin_region_error(r));
	CHECK_OK(pin_view_map(rw, PROT_READ | PROT_WRITE, (void **)&w),
		 pin_view_error(rw));
	t_fill(w, MiB(2), 5);

	EXPECT_EQ(pin_region_seal(r), -EBUSY);
	EXPECT_CONTAINS(pin_region_error(r), "seal: region ");
	if (pin_dev_backend(dev) == PIN_BACKEND_DEVICE) {
		char want[64];

		snprintf(want, sizeof(want), "pid %d (", (int)getpid());
		EXPECT_CONTAINS(pin_region_error(r), "1 writable view mapping: ");
		EXPECT_CONTAINS(pin_region_error(r), want);
		EXPECT_CONTAINS(pin_region_error(r), " rw- at +0x0");
	} else {
		EXPECT_CONTAINS(pin_region_error(r), "writable shared mappings");
	}
	CHECK_OK(pin_region_info(r, &info), pin_region_error(r));
	EXPECT_EQ(info.state, PIN_STATE_OPEN);

	CHECK_OK(pin_view_unmap(rw, w), pin_view_error(rw));
	CHECK_OK(pin_region_seal(r), pin_region_error(r));
	CHECK_OK(pin_region_seal(r), pin_region_error(r));	/* already sealed: 0 */
	CHECK_OK(pin_region_info(r, &info), pin_region_error(r));
	EXPECT_EQ(info.state, PIN_STATE_SEALED);

	EXPECT_EQ(pin_view_create(r, 0, MiB(2), PIN_VIEW_WRITE, &late), -EPERM);
	EXPECT_TRUE(late == NULL);
	EXPECT_CONTAINS(pin_region_error(r), "sealed");
	EXPECT_EQ(pin_view_map(rw, PROT_READ | PROT_WRITE, &x), -EPERM);
	EXPECT_CONTAINS(pin_view_error(rw), "sealed");

	CHECK_OK(pin_view_create(r, 0, MiB(2), 0, &ro), pin_region_error(r));
	CHECK_OK(pin_view_map(ro, PROT_READ, (void **)&rd), pin_view_error(ro));
	t_check(rd, MiB(2), 5, "sealed view");
	/* The read-write fd still maps read-only. */
	CHECK_OK(pin_view_map(rw, PROT_READ, &x), pin_view_error(rw));
	CHECK_OK(pin_view_unmap(rw, x), pin_view_error(rw));

	CHECK_OK(pin_view_unmap(ro, rd), pin_view_error(ro));
	pin_view_close(ro);
	pin_view_close(rw);
	CHECK_OK(pin_region_close(r), "free");
	pin_dev_close(dev);
	return 0;
}
