// SPDX-License-Identifier: MIT
/*
 * pin_cuda_register hands the owner mapping to cuMemHostRegister in one
 * call (base = the mapping, size = the region, flags = PORTABLE) and
 * pin_cuda_unregister passes the same base back; a second register of the
 * same region is refused without a driver call; unregistering what is not
 * registered is -ENOENT.
 */
#include "cuda-test.h"

int main(void)
{
	struct pin_dev *dev = test_dev();
	struct pin_region *r = test_region(dev, 8 * MiB);
	struct pin_cuda *c = test_cuda();
	const struct cuda_double_stats *s = test_stats();
	void *addr;

	EXPECT(pin_cuda_unregister(c, r), -ENOENT);
	EXPECT(pin_cuda_register(c, r, 0), 0);
	EXPECT(pin_region_map(r, &addr), 0);
	CHECK(s->register_calls == 1, "%lu register calls", s->register_calls);
	CHECK(s->log[0].op == 'R' && s->log[0].base == (uintptr_t)addr,
	      "registered %#lx, owner mapping at %p",
	      (unsigned long)s->log[0].base, addr);
	CHECK(s->log[0].size == 8 * MiB, "size %llu",
	      (unsigned long long)s->log[0].size);
	CHECK(s->log[0].flags == 0x1, "flags %#x, want PORTABLE",
	      s->log[0].flags);
	CHECK(s->live == 1, "%lu live", s->live);
	CHECK(s->ctx_depth == 0, "context left pushed");

	EXPECT(pin_cuda_register(c, r, 0), -EBUSY);
	CHECK(strstr(pin_cuda_error(c), "already registered"), "error: %s",
	      pin_cuda_error(c));
	CHECK(s->register_calls == 1, "second register reached the driver");

	EXPECT(pin_cuda_unregister(c, r), 0);
	CHECK(s->unregister_calls == 1 && s->log[1].op == 'U' &&
	      s->log[1].base == (uintptr_t)addr, "unregistered %#lx",
	      (unsigned long)s->log[1].base);
	CHECK(s->live == 0, "%lu live", s->live);
	EXPECT(pin_cuda_unregister(c, r), -ENOENT);

	pin_cuda_close(c);
	test_double_clean(s);
	EXPECT(pin_region_close(r), 0);
	pin_dev_close(dev);
	return 0;
}
