// SPDX-License-Identifier: MIT
/*
 * The portable backend refuses donate, publish, reopen and the holder
 * queries with -EOPNOTSUPP and says there is no kernel-arbitrated donation.
 */
#include "test.h"

int main(void)
{
	struct pin_dev *dev = t_open(PIN_BACKEND_PORTABLE);
	struct pin_region_info infos[2];
	struct pin_holder hs[2];
	struct pin_region *r;

	CHECK_OK(pin_alloc(dev, MiB(2), 0, &r), pin_dev_error(dev));
	EXPECT_EQ(pin_donate(r, 0), -EOPNOTSUPP);
	EXPECT_CONTAINS(pin_region_error(r), "donate: ");
	EXPECT_CONTAINS(pin_region_error(r), "no kernel-arbitrated donation");
	EXPECT_EQ(pin_donate(r, 100), -EOPNOTSUPP);
	EXPECT_EQ(pin_publish(r), -EOPNOTSUPP);
	EXPECT_CONTAINS(pin_region_error(r), "publish: ");
	EXPECT_EQ(pin_reopen(r), -EOPNOTSUPP);
	EXPECT_CONTAINS(pin_region_error(r), "reopen: ");
	EXPECT_EQ(pin_holders(r, hs, 2), -EOPNOTSUPP);
	EXPECT_CONTAINS(pin_region_error(r), "no kernel-arbitrated donation");
	EXPECT_EQ(pin_dev_list(dev, infos, 2), -EOPNOTSUPP);
	EXPECT_CONTAINS(pin_dev_error(dev), "pinmem.ko");
	EXPECT_EQ(pin_dev_holders(dev, pin_region_id(r), hs, 2), -EOPNOTSUPP);
	CHECK_OK(pin_region_free(r), "free");
	pin_close(dev);
	return 0;
}
