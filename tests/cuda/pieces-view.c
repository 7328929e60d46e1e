// SPDX-License-Identifier: MIT
/*
 * A view mapping is cut where its region is: with 4 MiB pieces, a view of
 * region bytes [2 MiB, 12 MiB) goes to the driver as 2, 4 and 4 MiB at
 * region offsets 2, 4 and 8 MiB (not 4, 4, 2 from the view's own start),
 * so no cut splits one of the region's chunks or huge pages however the
 * view is placed. Unregistering passes those three bases.
 */
#include <sys/mman.h>

#include "cuda-test.h"

int main(void)
{
	static const uint64_t want[] = { 2 * MiB, 4 * MiB, 4 * MiB };
	struct pin_dev *dev = test_dev();
	struct pin_region *r = test_region(dev, 16 * MiB);
	const struct cuda_double_stats *s;
	struct pin_cuda *c;
	struct pin_view *v;
	uintptr_t next;
	void *a;
	int i;

	setenv("PIN_CUDA_TEST_CHUNK", "4194304", 1);
	setenv("CUDA_DOUBLE_REGISTER_MAX", "4194304", 1);
	c = test_cuda();
	s = test_stats();
	EXPECT(pin_view_create(r, 2 * MiB, 10 * MiB, 0, &v), 0);
	EXPECT(pin_view_map(v, PROT_READ, &a), 0);
	EXPECT(pin_cuda_register_view(c, v, a, 0), 0);
	CHECK(s->register_calls == 3, "%lu register calls",
	      s->register_calls);
	next = (uintptr_t)a;
	for (i = 0; i < 3; i++) {
		const struct cuda_double_call *l = &s->log[i];

		CHECK(l->op == 'R' && l->base == next && l->size == want[i] &&
		      l->result == 0, "call %d: %c %#lx+%#llx -> %d, want %#lx+%#llx",
		      i, l->op, (unsigned long)l->base,
		      (unsigned long long)l->size, l->result,
		      (unsigned long)next, (unsigned long long)want[i]);
		next += want[i];
	}
	EXPECT(pin_cuda_unregister_view(c, v, a), 0);
	for (i = 0, next = (uintptr_t)a; i < 3; next += want[i], i++)
		CHECK(s->log[3 + i].op == 'U' && s->log[3 + i].base == next,
		      "unregister %d: %c %#lx, want %#lx", i, s->log[3 + i].op,
		      (unsigned long)s->log[3 + i].base, (unsigned long)next);
	EXPECT(pin_view_unmap(v, a), 0);
	pin_cuda_close(c);
	test_double_clean(s);
	pin_view_close(v);
	EXPECT(pin_region_close(r), 0);
	pin_dev_close(dev);
	return 0;
}
