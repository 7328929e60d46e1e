// SPDX-License-Identifier: MIT
/*
 * The portable backend refuses donate, publish, reopen and the holder
 * queries with -EOPNOTSUPP and says there is no kernel-arbitrated donation.
 */
#include "test.h"

int main(void)
{
	struct pin_dev *dev = t_open(PIN_BACKEND_PORTABLE);
	struct pin_region_info infos[2] = { { .size = sizeof(struct pin_region_info) } };
	struct pin_holder hs[2] = { { .size = sizeof(struct pin_holder) } };
	struct pin_region *r;

	CHECK_OK(pin_region_create(dev, MiB(2), NULL, &r), pin_dev_error(dev));
	EXPECT_EQ(pin_region_donate(r, 0), -EOPNOTSUPP);
	EXPECT_CONTAINS(pin_region_error(r), "donate: ");
	EXPECT_CONTAINS(pin_region_error(r), "no kernel-arbitrated donation");
	EXPECT_EQ(pin_region_donate(r, 100), -EOPNOTSUPP);
	EXPECT_EQ(pin_region_publish(r), -EOPNOTSUPP);
	EXPECT_CONTAINS(pin_region_error(r), "publish: ");
	EXPECT_EQ(pin_region_reopen(r), -EOPNOTSUPP);
	EXPECT_CONTAINS(pin_region_error(r), "reopen: ");
	EXPECT_EQ(pin_region_holders(r, hs, 2), -EOPNOTSUPP);
	EXPECT_CONTAINS(pin_region_error(r), "no kernel-arbitrated donation");
	EXPECT_EQ(pin_dev_regions(dev, infos, 2), -EOPNOTSUPP);
	EXPECT_CONTAINS(pin_dev_error(dev), "pinmem.ko");
	EXPECT_EQ(pin_dev_region_holders(dev, pin_region_id(r), hs, 2), -EOPNOTSUPP);
	CHECK_OK(pin_region_close(r), "free");
	pin_dev_close(dev);
	return 0;
}
