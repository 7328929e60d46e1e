// SPDX-License-Identifier: MIT
/*
 * With more view mappings than the error text lists (20), the refusal
 * still gives the exact count, names the first ones that fit, and says how
 * many it left out; pin_region_holders with a small cap returns the full count.
 */
#include <sys/mman.h>

#include "test.h"

#define N	20

int main(void)
{
	struct pin_dev *dev = t_open(PIN_BACKEND_DEVICE);
	struct pin_holder hs[4] = { { .size = sizeof(struct pin_holder) } };
	struct pin_region *r;
	struct pin_view *v;
	void *p[N];
	int i;

	CHECK_OK(pin_region_create(dev, MiB(2), NULL, &r), pin_dev_error(dev));
	CHECK_OK(pin_view_create(r, 0, 4096, 0, &v), pin_region_error(r));
	for (i = 0; i < N; i++)
		CHECK_OK(pin_view_map(v, PROT_READ, &p[i]), pin_view_error(v));
	EXPECT_EQ(pin_region_holders(r, hs, 4), N);
	EXPECT_EQ(pin_region_donate(r, 0), -EBUSY);
	EXPECT_CONTAINS(pin_region_error(r), "has 20 view mappings: pid ");
	EXPECT_CONTAINS(pin_region_error(r), " more not listed");
	EXPECT_TRUE(strlen(pin_region_error(r)) < 1024);
	for (i = 0; i < N; i++)
		CHECK_OK(pin_view_unmap(v, p[i]), pin_view_error(v));
	CHECK_OK(pin_region_donate(r, 0), pin_region_error(r));
	pin_view_close(v);
	CHECK_OK(pin_region_close(r), "free");
	pin_dev_close(dev);
	return 0;
}
