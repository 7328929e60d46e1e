// SPDX-License-Identifier: MIT
/*
 * For the pinctl checks of references: allocate a 4 MiB region, map a
 * read-only view of its second 2 MiB, vmsplice 4 of its pages into a pipe
 * nobody reads, unmap the view; print the region id, then hold the pipe
 * until stdin closes.
 */
#include <fcntl.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include <pin.h>

int main(void)
{
	struct pin_dev *dev;
	struct pin_region *r;
	struct pin_view *v;
	struct iovec iov;
	int pfd[2];
	void *p;
	char c;

	if (pin_dev_open(&dev, PIN_BACKEND_DEVICE, NULL) ||
	    pin_region_create(dev, 4 << 20, NULL, &r) ||
	    pin_view_create(r, 2 << 20, 2 << 20, 0, &v) ||
	    pin_view_map(v, PROT_READ, &p) || pipe(pfd)) {
		fprintf(stderr, "hold-refs: setup failed\n");
		return 1;
	}
	iov.iov_base = p;
	iov.iov_len = 4 * 4096;
	if (vmsplice(pfd[1], &iov, 1, 0) != 4 * 4096 || pin_view_unmap(v, p)) {
		fprintf(stderr, "hold-refs: vmsplice or unmap failed\n");
		return 1;
	}
	printf("%llu\n", (unsigned long long)pin_region_id(r));
	fflush(stdout);
	while (read(0, &c, 1) > 0)
		;
	close(pfd[0]);
	close(pfd[1]);
	pin_view_close(v);
	pin_region_close(r);
	pin_dev_close(dev);
	return 0;
}
