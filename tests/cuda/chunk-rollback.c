// SPDX-License-Identifier: MIT
/*
 * A piece the driver refuses in the middle (the double fails the third
 * register call with CUDA_ERROR_OUT_OF_MEMORY) fails the whole
 * registration with -ENOMEM naming the piece, its offset and the
 * CUresult, and the two pieces already registered are unregistered again:
 * the region is left unregistered and freeable.
 */
#include "cuda-test.h"

int main(void)
{
	struct pin_dev *dev = test_dev();
	struct pin_region *r = test_region(dev, 16 * MiB);
	const struct cuda_double_stats *s;
	struct pin_cuda *c;
	uintptr_t base;
	void *addr;

	setenv("PIN_CUDA_TEST_CHUNK", "4194304", 1);
	setenv("CUDA_DOUBLE_FAIL_REGISTER", "3", 1);
	c = test_cuda();
	s = test_stats();
	EXPECT(pin_cuda_register(c, r, 0), -ENOMEM);
	CHECK(strstr(pin_cuda_error(c), "piece 3 of 4 at offset 8388608 of 16777216 bytes") &&
	      strstr(pin_cuda_error(c), "the pieces before it are unregistered") &&
	      strstr(pin_cuda_error(c), "CUDA_ERROR_OUT_OF_MEMORY"),
	      "error: %s", pin_cuda_error(c));
	EXPECT(pin_region_map(r, &addr), 0);
	base = (uintptr_t)addr;
	CHECK(s->register_calls == 3 && s->unregister_calls == 2,
	      "%lu register, %lu unregister calls", s->register_calls,
	      s->unregister_calls);
	CHECK(s->log[3].op == 'U' && s->log[3].base == base &&
	      s->log[4].op == 'U' && s->log[4].base == base + 4 * MiB,
	      "rollback unregistered %#lx, %#lx",
	      (unsigned long)s->log[3].base, (unsigned long)s->log[4].base);
	CHECK(s->live == 0, "%lu live", s->live);
	EXPECT(pin_cuda_unregister(c, r), -ENOENT);
	EXPECT(pin_region_unmap(r), 0);
	pin_cuda_close(c);
	test_double_clean(s);
	EXPECT(pin_region_close(r), 0);
	pin_dev_close(dev);
	return 0;
}
