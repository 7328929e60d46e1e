// SPDX-License-Identifier: MIT
/*
 * PIN_CUDA_DEVICEMAP reaches the driver as PORTABLE|DEVICEMAP; unknown
 * flags are refused with -EINVAL before any driver call.
 */
#include "cuda-test.h"

int main(void)
{
	struct pin_dev *dev = test_dev();
	struct pin_region *r = test_region(dev, 4 * MiB);
	struct pin_cuda *c = test_cuda();
	const struct cuda_double_stats *s = test_stats();

	EXPECT(pin_cuda_register(c, r, 1U << 7), -EINVAL);
	CHECK(s->register_calls == 0, "bad flags reached the driver");
	EXPECT(pin_cuda_register(c, r, PIN_CUDA_DEVICEMAP), 0);
	CHECK(s->register_calls == 1 && s->log[0].flags == 0x3,
	      "flags %#x, want PORTABLE|DEVICEMAP (0x3)", s->log[0].flags);
	EXPECT(pin_cuda_unregister(c, r), 0);
	EXPECT(pin_cuda_register(c, r, PIN_CUDA_READ_ONLY), 0);
	CHECK(s->log[2].flags == 0x9, "flags %#x, want PORTABLE|READ_ONLY",
	      s->log[2].flags);
	EXPECT(pin_cuda_unregister(c, r), 0);
	pin_cuda_close(c);
	test_double_clean(s);
	EXPECT(pin_region_close(r), 0);
	pin_dev_close(dev);
	return 0;
}
