// SPDX-License-Identifier: MIT
/*
 * Unregistering undoes every piece even past one the driver refuses (the
 * double fails the second cuMemHostUnregister): the call fails naming that
 * piece and its offset, the four others are unregistered, the region stays
 * registered (unmap -EBUSY). Trying again unregisters that one piece
 * alone, never a base already unregistered (which the driver would refuse
 * and the double counts as a violation).
 */
#include "cuda-test.h"

int main(void)
{
	struct pin_dev *dev = test_dev();
	struct pin_region *r = test_region(dev, 18 * MiB);
	const struct cuda_double_stats *s;
	struct pin_cuda *c;
	void *addr;

	setenv("PIN_CUDA_TEST_CHUNK", "4194304", 1);
	setenv("CUDA_DOUBLE_FAIL_UNREGISTER", "2", 1);
	c = test_cuda();
	s = test_stats();
	EXPECT(pin_cuda_register(c, r, 0), 0);
	EXPECT(pin_region_map(r, &addr), 0);
	CHECK(s->live == 5, "%lu live", s->live);
	EXPECT(pin_cuda_unregister(c, r), -EINVAL);
	CHECK(strstr(pin_cuda_error(c), "piece 2 of 5 at offset 4194304") &&
	      strstr(pin_cuda_error(c), "CUDA_ERROR_INVALID_VALUE"),
	      "error: %s", pin_cuda_error(c));
	CHECK(s->unregister_calls == 5 && s->live == 1,
	      "%lu unregister calls, %lu live", s->unregister_calls, s->live);
	EXPECT(pin_region_unmap(r), -EBUSY);

	EXPECT(pin_cuda_unregister(c, r), 0);
	CHECK(s->unregister_calls == 6 && s->log[10].op == 'U' &&
	      s->log[10].base == (uintptr_t)addr + 4 * MiB &&
	      s->log[10].result == 0,
	      "%lu unregister calls, the last %c %#lx -> %d",
	      s->unregister_calls, s->log[10].op,
	      (unsigned long)s->log[10].base, s->log[10].result);
	CHECK(s->live == 0, "%lu live", s->live);
	EXPECT(pin_cuda_unregister(c, r), -ENOENT);
	EXPECT(pin_region_unmap(r), 0);
	pin_cuda_close(c);
	test_double_clean(s);
	EXPECT(pin_region_close(r), 0);
	pin_dev_close(dev);
	return 0;
}
