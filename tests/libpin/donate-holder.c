// SPDX-License-Identifier: MIT
/*
 * donate is refused while a view mapping exists, and the error names the
 * holder (pid, command, range, protection, offset); after pin_view_unmap
 * it succeeds, and new view mappings are then refused with -EBUSY.
 */
#include <sys/mman.h>
#include <unistd.h>

#include "test.h"

int main(void)
{
	struct pin_dev *dev = t_open(PIN_BACKEND_DEVICE);
	struct pin_region_info info = PIN_INIT(struct pin_region_info);
	struct pin_region *r;
	struct pin_view *v;
	unsigned char *p;
	char want[160], comm[16] = "";
	void *x = (void *)1;
	FILE *f;

	f = fopen("/proc/self/comm", "r");
	if (!f || !fgets(comm, sizeof(comm), f))
		FAIL("read /proc/self/comm");
	fclose(f);
	comm[strcspn(comm, "\n")] = '\0';

	CHECK_OK(pin_region_create(dev, MiB(4), NULL, &r), pin_dev_error(dev));
	CHECK_OK(pin_view_create(r, MiB(2), MiB(2), 0, &v), pin_region_error(r));
	CHECK_OK(pin_view_map(v, PROT_READ, (void **)&p), pin_view_error(v));

	EXPECT_EQ(pin_region_donate(r, 0), -EBUSY);
	snprintf(want, sizeof(want),
		 "donate: region %llu has 1 view mapping: pid %d (%s) view %p-%p r-- at +0x200000",
		 (unsigned long long)pin_region_id(r), (int)getpid(), comm,
		 (void *)p, (void *)(p + MiB(2)));
	EXPECT_CONTAINS(pin_region_error(r), want);
	CHECK_OK(pin_region_info(r, &info), pin_region_error(r));
	EXPECT_EQ(info.state, PIN_STATE_OPEN);
	EXPECT_EQ(info.view_mappings, 1);

	CHECK_OK(pin_view_unmap(v, p), pin_view_error(v));
	CHECK_OK(pin_region_donate(r, 0), pin_region_error(r));
	CHECK_OK(pin_region_donate(r, 0), pin_region_error(r));	/* already: 0 */
	CHECK_OK(pin_region_info(r, &info), pin_region_error(r));
	EXPECT_EQ(info.state, PIN_STATE_DONATED);
	EXPECT_EQ(info.view_mappings, 0);

	EXPECT_EQ(pin_view_map(v, PROT_READ, &x), -EBUSY);
	EXPECT_TRUE(x == NULL);
	EXPECT_CONTAINS(pin_view_error(v), "donated");
	EXPECT_EQ(pin_region_seal(r), -EPERM);
	EXPECT_CONTAINS(pin_region_error(r), "is donated");

	pin_view_close(v);
	CHECK_OK(pin_region_close(r), "free");
	pin_dev_close(dev);
	return 0;
}
