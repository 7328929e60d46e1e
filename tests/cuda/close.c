// SPDX-License-Identifier: MIT
/*
 * pin_cuda_close unregisters what is still registered through the handle
 * (owner and view mappings, every chunk) and releases the context; the
 * region can be freed and the view unmapped afterwards.
 */
#include <sys/mman.h>

#include "cuda-test.h"

int main(void)
{
	struct pin_dev *dev = test_dev();
	struct pin_region *r = test_region(dev, 8 * MiB);
	const struct cuda_double_stats *s;
	struct pin_cuda *c;
	struct pin_view *v;
	void *a;

	setenv("PIN_CUDA_TEST_CHUNK", "2097152", 1);
	c = test_cuda();
	s = test_stats();
	EXPECT(pin_view_create(r, 0, 4 * MiB, 0, &v), 0);
	EXPECT(pin_view_map(v, PROT_READ, &a), 0);
	EXPECT(pin_cuda_register(c, r, 0), 0);
	EXPECT(pin_cuda_register_view(c, v, a, 0), 0);
	CHECK(s->live == 6, "%lu live, want 4 + 2 chunks", s->live);
	CHECK(s->primary_refs == 1, "%d contexts retained", s->primary_refs);
	pin_cuda_close(c);
	CHECK(s->unregister_calls == 6, "%lu unregister calls",
	      s->unregister_calls);
	test_double_clean(s);
	EXPECT(pin_view_unmap(v, a), 0);
	pin_view_close(v);
	EXPECT(pin_region_close(r), 0);
	pin_dev_close(dev);
	return 0;
}
