// SPDX-License-Identifier: MIT
/*
 * Chunking: with the chunk size lowered to 4 MiB (PIN_CUDA_TEST_CHUNK), an
 * 18 MiB region goes to the driver as five calls, 4+4+4+4+2 MiB at
 * consecutive bases, and is unregistered with exactly those five bases.
 */
#include "cuda-test.h"

int main(void)
{
	struct pin_dev *dev = test_dev();
	struct pin_region *r = test_region(dev, 18 * MiB);
	const struct cuda_double_stats *s;
	struct pin_cuda *c;
	uintptr_t base;
	void *addr;
	int i;

	setenv("PIN_CUDA_TEST_CHUNK", "0x400000", 1);
	c = test_cuda();
	s = test_stats();
	CHECK(pin_cuda_chunk_max(c) == 4 * MiB, "chunk %llu",
	      (unsigned long long)pin_cuda_chunk_max(c));
	EXPECT(pin_cuda_register(c, r, 0), 0);
	EXPECT(pin_region_map(r, &addr), 0);
	base = (uintptr_t)addr;
	CHECK(s->register_calls == 5, "%lu register calls", s->register_calls);
	for (i = 0; i < 5; i++) {
		const struct cuda_double_call *l = &s->log[i];

		CHECK(l->op == 'R' && l->base == base + i * 4 * MiB &&
		      l->size == (i < 4 ? 4 : 2) * MiB && l->result == 0,
		      "call %d: %c %#lx+%#llx -> %d", i, l->op,
		      (unsigned long)l->base, (unsigned long long)l->size,
		      l->result);
	}
	CHECK(s->live == 5, "%lu live", s->live);
	EXPECT(pin_cuda_unregister(c, r), 0);
	CHECK(s->unregister_calls == 5, "%lu unregister calls",
	      s->unregister_calls);
	for (i = 0; i < 5; i++) {
		const struct cuda_double_call *l = &s->log[5 + i];

		CHECK(l->op == 'U' && l->base == base + i * 4 * MiB &&
		      l->result == 0, "unregister %d: %c %#lx -> %d", i,
		      l->op, (unsigned long)l->base, l->result);
	}
	pin_cuda_close(c);
	test_double_clean(s);
	EXPECT(pin_region_close(r), 0);
	pin_dev_close(dev);
	return 0;
}
