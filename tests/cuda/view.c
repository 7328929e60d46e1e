// SPDX-License-Identifier: MIT
/*
 * A view mapping registers at its own address with the view's length;
 * a read-only mapping goes with READ_ONLY, a writable one without.
 * pin_view_unmap of a registered mapping is -EBUSY, of another mapping
 * of the same view it succeeds; after unregistering it succeeds. An
 * address that is not a mapping of the view is -EINVAL.
 */
#include <sys/mman.h>

#include "cuda-test.h"

int main(void)
{
	struct pin_dev *dev = test_dev();
	struct pin_region *r = test_region(dev, 8 * MiB);
	struct pin_cuda *c = test_cuda();
	const struct cuda_double_stats *s = test_stats();
	struct pin_view *ro, *rw;
	void *a, *b, *w;

	EXPECT(pin_view_create(r, 2 * MiB, 4 * MiB, 0, &ro), 0);
	EXPECT(pin_view_create(r, 0, 2 * MiB, PIN_VIEW_WRITE, &rw), 0);
	EXPECT(pin_view_map(ro, PROT_READ, &a), 0);
	EXPECT(pin_view_map(ro, PROT_READ, &b), 0);
	EXPECT(pin_view_map(rw, PROT_READ | PROT_WRITE, &w), 0);

	EXPECT(pin_cuda_register_view(c, ro, (char *)a + 4096, 0), -EINVAL);
	EXPECT(pin_cuda_register_view(c, rw, a, 0), -EINVAL);
	CHECK(s->register_calls == 0, "bad address reached the driver");

	EXPECT(pin_cuda_register_view(c, ro, a, 0), 0);
	CHECK(s->log[0].base == (uintptr_t)a && s->log[0].size == 4 * MiB &&
	      s->log[0].flags == 0x9,
	      "registered %#lx+%#llx flags %#x, want %p+4MiB PORTABLE|READ_ONLY",
	      (unsigned long)s->log[0].base,
	      (unsigned long long)s->log[0].size, s->log[0].flags, a);
	EXPECT(pin_cuda_register_view(c, ro, a, 0), -EBUSY);
	EXPECT(pin_cuda_register_view(c, rw, w, PIN_CUDA_DEVICEMAP), 0);
	CHECK(s->log[1].base == (uintptr_t)w && s->log[1].size == 2 * MiB &&
	      s->log[1].flags == 0x3, "writable view flags %#x",
	      s->log[1].flags);

	EXPECT(pin_view_unmap(ro, a), -EBUSY);
	EXPECT(pin_view_unmap(rw, w), -EBUSY);
	EXPECT(pin_view_unmap(ro, b), 0);	/* not registered */
	CHECK(((volatile char *)a)[0] == 0, "registered mapping unreadable");

	EXPECT(pin_cuda_unregister_view(c, ro, b), -ENOENT);
	EXPECT(pin_cuda_unregister_view(c, ro, a), 0);
	CHECK(s->log[2].op == 'U' && s->log[2].base == (uintptr_t)a,
	      "unregistered %#lx", (unsigned long)s->log[2].base);
	EXPECT(pin_view_unmap(ro, a), 0);
	EXPECT(pin_cuda_unregister_view(c, rw, w), 0);
	EXPECT(pin_view_unmap(rw, w), 0);
	pin_cuda_close(c);
	test_double_clean(s);
	pin_view_close(ro);
	pin_view_close(rw);
	EXPECT(pin_region_close(r), 0);
	pin_dev_close(dev);
	return 0;
}
