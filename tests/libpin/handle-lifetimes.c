// SPDX-License-Identifier: MIT
/*
 * Handles are independent: the device handle may be closed before its
 * regions, a region handle freed while its views and their mappings live
 * on, and a view fd closed while its mappings stay readable. Every fd the
 * library opened is closed again (counted in /proc/self/fd).
 */
#include <sys/mman.h>
#include <unistd.h>

#include "test.h"

int main(void)
{
	struct pin_dev *dev;
	struct pin_region *r;
	struct pin_view *v, *w;
	unsigned char *own, *p, *q;
	int before = t_count_fds();

	dev = t_open(0);
	CHECK_OK(pin_region_create(dev, MiB(2), NULL, &r), pin_dev_error(dev));
	pin_dev_close(dev);	/* the region does not need the device handle */
	CHECK_OK(pin_region_map(r, (void **)&own), pin_region_error(r));
	t_fill(own, MiB(2), 42);
	CHECK_OK(pin_view_create(r, 0, MiB(2), 0, &v), pin_region_error(r));
	CHECK_OK(pin_view_create(r, 0, MiB(2), PIN_VIEW_WRITE, &w),
		 pin_region_error(r));
	CHECK_OK(pin_region_close(r), "free");	/* views outlive it */

	CHECK_OK(pin_view_map(v, PROT_READ, (void **)&p), pin_view_error(v));
	t_check(p, MiB(2), 42, "view after region freed");
	CHECK_OK(pin_view_map(w, PROT_READ | PROT_WRITE, (void **)&q),
		 pin_view_error(w));
	pin_view_close(w);	/* its mapping stays */
	t_fill(q, MiB(2), 43);
	t_check(p, MiB(2), 43, "view after write through closed view's mapping");
	EXPECT_EQ(munmap(q, MiB(2)), 0);
	CHECK_OK(pin_view_unmap(v, p), pin_view_error(v));
	pin_view_close(v);

	EXPECT_EQ(t_count_fds(), before);
	return 0;
}
