// SPDX-License-Identifier: MIT
/*
 * The portable backend takes 2 MiB pages from the hugetlb pool when it has
 * free ones: the region is rounded up to 2 MiB, its pages come out of the
 * pool at alloc and go back at free, info reports order-9 chunks, and views
 * must be 2 MiB aligned (-EINVAL, in words, otherwise).
 */
#include <sys/mman.h>

#include "test.h"

static long huge_free(void)
{
	char line[128];
	long n = -1;
	FILE *f = fopen("/proc/meminfo", "r");

	if (!f)
		FAIL("open /proc/meminfo: %s", strerror(errno));
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "HugePages_Free: %ld", &n) == 1)
			break;
	fclose(f);
	return n;
}

int main(void)
{
	struct pin_dev *dev;
	struct pin_region_info info = PIN_INIT(struct pin_region_info);
	struct pin_region *r;
	struct pin_view *v, *bad = (struct pin_view *)1;
	unsigned char *own, *p;
	long before = huge_free();

	if (before < 2)
		SKIP("the hugetlb pool has %ld free 2 MiB pages, 2 needed "
		     "(echo 2 > /proc/sys/vm/nr_hugepages)", before);
	dev = t_open(PIN_BACKEND_PORTABLE);
	CHECK_OK(pin_region_create(dev, MiB(3), NULL, &r), pin_dev_error(dev));
	EXPECT_EQ(pin_region_size(r), MiB(4));
	EXPECT_EQ(huge_free(), before - 2);
	CHECK_OK(pin_region_info(r, &info), pin_region_error(r));
	EXPECT_EQ(info.chunk_order, 9);
	EXPECT_EQ(info.min_order, 9);
	EXPECT_EQ(info.nr_chunks, 2);
	EXPECT_EQ(info.nr_fallback_chunks, 0);

	CHECK_OK(pin_region_map(r, (void **)&own), pin_region_error(r));
	t_fill(own, MiB(4), 9);
	EXPECT_EQ(pin_view_create(r, 4096, MiB(2), 0, &bad), -EINVAL);
	EXPECT_TRUE(bad == NULL);
	EXPECT_CONTAINS(pin_region_error(r), "2 MiB boundaries");
	EXPECT_EQ(pin_view_create(r, 0, 4096, 0, &bad), -EINVAL);
	CHECK_OK(pin_view_create(r, MiB(2), MiB(2), 0, &v), pin_region_error(r));
	CHECK_OK(pin_view_map(v, PROT_READ, (void **)&p), pin_view_error(v));
	t_check(p, MiB(2), (unsigned)(9 + 131u * MiB(2)), "hugetlb view");
	CHECK_OK(pin_view_unmap(v, p), pin_view_error(v));
	CHECK_OK(pin_region_seal(r), pin_region_error(r));	/* remaps the owner */
	t_check(own, MiB(4), 9, "owner after seal");
	pin_view_close(v);
	CHECK_OK(pin_region_close(r), "free");
	EXPECT_EQ(huge_free(), before);
	pin_dev_close(dev);
	return 0;
}
