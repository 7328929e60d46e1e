// SPDX-License-Identifier: MIT
/*
 * A size that could never be pinned is refused up front, on either
 * backend, without taking memory first (on the portable backend shmem
 * would otherwise fill RAM until the OOM killer ran), and a sane size
 * still works afterwards.
 */
#include <sys/sysinfo.h>

#include "test.h"

int main(void)
{
	struct pin_dev *dev = t_open(0);
	struct pin_region *r = (struct pin_region *)1;
	struct sysinfo si;
	uint64_t ram;
	int ret;

	EXPECT_EQ(sysinfo(&si), 0);
	ram = (uint64_t)si.totalram * si.mem_unit;

	ret = pin_region_create(dev, 1ULL << 62, NULL, &r);
	EXPECT_TRUE(r == NULL);
	if (pin_dev_backend(dev) == PIN_BACKEND_DEVICE) {
		/* Over the module's max_region_bytes: the ABI says EINVAL. */
		EXPECT_EQ(ret, -EINVAL);
	} else {
		EXPECT_EQ(ret, -ENOMEM);
		EXPECT_CONTAINS(pin_dev_error(dev), "memory");
		/* Just over the machine's RAM: still refused, not attempted. */
		EXPECT_EQ(pin_region_create(dev, ram + MiB(2), NULL, &r), -ENOMEM);
	}

	CHECK_OK(pin_region_create(dev, MiB(2), NULL, &r), pin_dev_error(dev));
	CHECK_OK(pin_region_close(r), "free");
	pin_dev_close(dev);
	return 0;
}
