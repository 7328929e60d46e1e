// SPDX-License-Identifier: MIT
/*
 * pin_cuda_register of the owner mapping declares the registration to the
 * kernel (one reference per page, PIN_EXPECT_PER_PAGE), so that the
 * owner's own CUDA registration never holds up a donation; unregistering
 * takes the declaration back, and so does a registration that fails.
 * A registration of a view declares nothing. Device backend only: INFO's
 * expected_refs is read on the region fd.
 */
#include <sys/ioctl.h>
#include <sys/mman.h>

#include <uapi/pinmem.h>

#include "cuda-test.h"

static unsigned long long expected_refs(struct pin_region *r)
{
	struct pinmem_region_info ri;

	if (ioctl(pin_region_fd(r), PINMEM_IOC_INFO, &ri))
		return ~0ULL;
	return ri.expected_refs;
}

int main(void)
{
	struct pin_dev *dev = test_dev();
	struct pin_region *r;
	struct pin_cuda *c;
	struct pin_view *v;
	void *p;

	if (pin_dev_backend(dev) != PIN_BACKEND_DEVICE) {
		pin_dev_close(dev);
		SKIP("declarations are the device backend's");
	}
	r = test_region(dev, 8 * MiB);
	c = test_cuda();
	EXPECT(pin_cuda_register(c, r, 0), 0);
	CHECK(expected_refs(r) == 8 * MiB / 4096, "declared %llu",
	      expected_refs(r));
	EXPECT(pin_cuda_unregister(c, r), 0);
	CHECK(expected_refs(r) == 0, "left declared %llu", expected_refs(r));

	EXPECT(pin_view_create(r, 0, 2 * MiB, 0, &v), 0);
	EXPECT(pin_view_map(v, PROT_READ, &p), 0);
	EXPECT(pin_cuda_register_view(c, v, p, 0), 0);
	CHECK(expected_refs(r) == 0, "a view's registration declared %llu",
	      expected_refs(r));
	EXPECT(pin_cuda_unregister_view(c, v, p), 0);
	EXPECT(pin_view_unmap(v, p), 0);
	pin_view_close(v);

	pin_cuda_close(c);
	EXPECT(pin_region_close(r), 0);
	pin_dev_close(dev);
	return 0;
}
