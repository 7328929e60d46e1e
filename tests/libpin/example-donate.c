// SPDX-License-Identifier: MIT
/*
 * The README example: a view blocks donation, the error names who holds
 * it, and once the view is unmapped the owner can take the region back.
 * Build: cc example-donate.c $(pkg-config --cflags --libs libpin)
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include <pin.h>

int main(void)
{
	struct pin_dev *dev;
	struct pin_region *r;
	struct pin_view *v;
	void *owner, *view;
	int ret, busy;

	ret = pin_dev_open(&dev, PIN_BACKEND_DEVICE, NULL);
	if (ret) {
		fprintf(stderr, "pin_dev_open: %s\n", strerror(-ret));
		return ret == -ENOENT ? 77 : 1;
	}
	ret = pin_region_create(dev, 2 << 20, NULL, &r);	/* one 2 MiB chunk */
	if (ret) {
		fprintf(stderr, "%s\n", pin_dev_error(dev));
		return 1;
	}
	pin_region_map(r, &owner);			/* the runtime's mapping */
	memset(owner, 0x5a, 2 << 20);

	/* A reader's view: read-only, its own counted mapping. */
	pin_view_create(r, 0, 2 << 20, 0, &v);
	pin_view_map(v, PROT_READ, &view);

	busy = pin_region_donate(r, 0);		/* refused: a view exists */
	printf("donate: %s\n  %s\n", strerror(-busy), pin_region_error(r));
	/* donate: Device or resource busy
	 *   donate: region 1 has 1 view mapping: pid 4242 (example-donate)
	 *   view 0x7f...-0x7f... r-- at +0x0 */

	pin_view_unmap(v, view);		/* the view's lifetime ends */
	ret = pin_region_donate(r, 0);			/* now the owner may reuse it */
	printf("donate after unmap: %s\n", ret ? strerror(-ret) : "ok");

	pin_view_close(v);
	pin_region_close(r);
	pin_dev_close(dev);
	return busy == -EBUSY && ret == 0 ? 0 : 1;
}
