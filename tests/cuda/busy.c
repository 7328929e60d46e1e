// SPDX-License-Identifier: MIT
/*
 * While the owner mapping is registered, pin_region_unmap and
 * pin_region_close return -EBUSY and leave the mapping in place (still
 * readable and writable); after pin_cuda_unregister both succeed.
 */
#include "cuda-test.h"

int main(void)
{
	struct pin_dev *dev = test_dev();
	struct pin_region *r = test_region(dev, 4 * MiB);
	struct pin_cuda *c = test_cuda();
	const struct cuda_double_stats *s = test_stats();
	void *addr, *again;

	EXPECT(pin_cuda_register(c, r, 0), 0);
	EXPECT(pin_region_map(r, &addr), 0);
	EXPECT(pin_region_unmap(r), -EBUSY);
	EXPECT(pin_region_close(r), -EBUSY);
	EXPECT(pin_region_map(r, &again), 0);
	CHECK(again == addr, "owner mapping moved: %p, was %p", again, addr);
	((volatile char *)addr)[4 * MiB - 1] = 7;
	CHECK(((volatile char *)addr)[4 * MiB - 1] == 7, "mapping lost");
	CHECK(s->live == 1 && s->unregister_calls == 0,
	      "refused free touched the registration");

	EXPECT(pin_cuda_unregister(c, r), 0);
	EXPECT(pin_region_unmap(r), 0);
	EXPECT(pin_cuda_register(c, r, 0), 0);	/* maps it again */
	EXPECT(pin_region_close(r), -EBUSY);
	EXPECT(pin_cuda_unregister(c, r), 0);
	EXPECT(pin_region_close(r), 0);
	pin_cuda_close(c);
	test_double_clean(s);
	pin_dev_close(dev);
	return 0;
}
