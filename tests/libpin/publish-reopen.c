// SPDX-License-Identifier: MIT
/*
 * publish: donated -> sealed (read-only views see the owner's new bytes,
 * no read-write view); reopen: donated -> open (read-write views again);
 * both refuse any other state with -EPERM.
 */
#include <sys/mman.h>

#include "test.h"

static int state(struct pin_region *r)
{
	struct pin_region_info info = PIN_INIT(struct pin_region_info);

	CHECK_OK(pin_region_info(r, &info), pin_region_error(r));
	return info.state;
}

int main(void)
{
	struct pin_dev *dev = t_open(PIN_BACKEND_DEVICE);
	struct pin_region *r;
	struct pin_view *v, *w = (struct pin_view *)1;
	unsigned char *own, *p;

	CHECK_OK(pin_region_create(dev, MiB(2), NULL, &r), pin_dev_error(dev));
	CHECK_OK(pin_region_map(r, (void **)&own), pin_region_error(r));
	EXPECT_EQ(pin_region_publish(r), -EPERM);
	EXPECT_CONTAINS(pin_region_error(r), "publish: region ");
	EXPECT_CONTAINS(pin_region_error(r), " is open");
	EXPECT_EQ(pin_region_reopen(r), -EPERM);

	CHECK_OK(pin_region_donate(r, 0), pin_region_error(r));
	t_fill(own, MiB(2), 1);	/* the owner rewrites it */
	CHECK_OK(pin_region_publish(r), pin_region_error(r));
	EXPECT_EQ(state(r), PIN_STATE_SEALED);
	EXPECT_EQ(pin_region_publish(r), -EPERM);
	EXPECT_EQ(pin_region_reopen(r), -EPERM);
	EXPECT_CONTAINS(pin_region_error(r), " is sealed");
	EXPECT_EQ(pin_view_create(r, 0, MiB(2), PIN_VIEW_WRITE, &w), -EPERM);
	CHECK_OK(pin_view_create(r, 0, MiB(2), 0, &v), pin_region_error(r));
	CHECK_OK(pin_view_map(v, PROT_READ, (void **)&p), pin_view_error(v));
	t_check(p, MiB(2), 1, "published view");
	CHECK_OK(pin_view_unmap(v, p), pin_view_error(v));
	pin_view_close(v);

	CHECK_OK(pin_region_donate(r, 0), pin_region_error(r));	/* sealed -> donated */
	CHECK_OK(pin_region_reopen(r), pin_region_error(r));
	EXPECT_EQ(state(r), PIN_STATE_OPEN);
	CHECK_OK(pin_view_create(r, 0, MiB(2), PIN_VIEW_WRITE, &w),
		 pin_region_error(r));
	CHECK_OK(pin_view_map(w, PROT_READ | PROT_WRITE, (void **)&p),
		 pin_view_error(w));
	t_fill(p, MiB(2), 2);
	t_check(own, MiB(2), 2, "owner after reopen and view write");
	CHECK_OK(pin_view_unmap(w, p), pin_view_error(w));
	pin_view_close(w);

	CHECK_OK(pin_region_close(r), "free");
	pin_dev_close(dev);
	return 0;
}
