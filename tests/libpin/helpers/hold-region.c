// SPDX-License-Identifier: MIT
/*
 * For the pinctl checks: allocate a 4 MiB region, map it (owner), map a
 * read-only view of the first 2 MiB and a read-write view of the second,
 * print the region id, then hold everything until stdin closes.
 */
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <pin.h>

int main(void)
{
	struct pin_dev *dev;
	struct pin_region *r;
	struct pin_view *ro, *rw;
	void *own, *p, *q;
	char c;

	if (pin_dev_open(&dev, PIN_BACKEND_DEVICE, NULL) ||
	    pin_region_create(dev, 4 << 20, NULL, &r) ||
	    pin_region_map(r, &own) ||
	    pin_view_create(r, 0, 2 << 20, 0, &ro) ||
	    pin_view_create(r, 2 << 20, 2 << 20, PIN_VIEW_WRITE, &rw) ||
	    pin_view_map(ro, PROT_READ, &p) ||
	    pin_view_map(rw, PROT_READ | PROT_WRITE, &q)) {
		fprintf(stderr, "hold-region: setup failed\n");
		return 1;
	}
	printf("%llu %p %p\n", (unsigned long long)pin_region_id(r), p, q);
	fflush(stdout);
	while (read(0, &c, 1) > 0)
		;
	pin_view_unmap(ro, p);
	pin_view_unmap(rw, q);
	pin_view_close(ro);
	pin_view_close(rw);
	pin_region_close(r);
	pin_dev_close(dev);
	return 0;
}
