// SPDX-License-Identifier: MIT
/*
 * The holders of a region, by region handle and by id from the device:
 * owner and view mappings with pid, command, range, offset, protection and
 * the writable flag; pin_dev_regions shows the region with its counts; cap 0
 * returns the count only; an unknown id is -ENOENT.
 */
#include <sys/mman.h>
#include <unistd.h>

#include "test.h"

int main(void)
{
	struct pin_dev *dev = t_open(PIN_BACKEND_DEVICE);
	struct pin_region_info infos[64] = { PIN_INIT(struct pin_region_info) };
	struct pin_region_info *mine = NULL;
	struct pin_holder hs[8] = { PIN_INIT(struct pin_holder) };
	struct pin_holder hd[8] = { PIN_INIT(struct pin_holder) };
	struct pin_region *r;
	struct pin_view *ro, *rw;
	void *own, *p, *q;
	int n, i, seen_owner = 0, seen_ro = 0, seen_rw = 0;
	char line[160];

	CHECK_OK(pin_region_create(dev, MiB(4), NULL, &r), pin_dev_error(dev));
	CHECK_OK(pin_region_map(r, &own), pin_region_error(r));
	CHECK_OK(pin_view_create(r, 0, MiB(2), 0, &ro), pin_region_error(r));
	CHECK_OK(pin_view_create(r, MiB(2), MiB(2), PIN_VIEW_WRITE, &rw),
		 pin_region_error(r));
	CHECK_OK(pin_view_map(ro, PROT_READ, &p), pin_view_error(ro));
	CHECK_OK(pin_view_map(rw, PROT_READ | PROT_WRITE, &q), pin_view_error(rw));

	EXPECT_EQ(pin_region_holders(r, NULL, 0), 3);
	n = pin_region_holders(r, hs, 8);
	EXPECT_EQ(n, 3);
	for (i = 0; i < n; i++) {
		EXPECT_EQ(hs[i].pid, getpid());
		if (hs[i].kind == PIN_HOLDER_OWNER) {
			EXPECT_EQ(hs[i].start, (uintptr_t)own);
			EXPECT_EQ(hs[i].length, MiB(4));
			EXPECT_EQ(hs[i].prot, PROT_READ | PROT_WRITE);
			seen_owner++;
		} else if (hs[i].start == (uintptr_t)p) {
			EXPECT_EQ(hs[i].kind, PIN_HOLDER_VIEW);
			EXPECT_EQ(hs[i].offset, 0);
			EXPECT_EQ(hs[i].prot, PROT_READ);
			EXPECT_EQ(hs[i].maywrite, 0);
			seen_ro++;
		} else if (hs[i].start == (uintptr_t)q) {
			EXPECT_EQ(hs[i].kind, PIN_HOLDER_VIEW);
			EXPECT_EQ(hs[i].offset, MiB(2));
			EXPECT_EQ(hs[i].length, MiB(2));
			EXPECT_EQ(hs[i].prot, PROT_READ | PROT_WRITE);
			EXPECT_EQ(hs[i].maywrite, 1);
			seen_rw++;
		} else {
			FAIL("unexpected holder at 0x%llx",
			     (unsigned long long)hs[i].start);
		}
	}
	EXPECT_TRUE(seen_owner == 1 && seen_ro == 1 && seen_rw == 1);
	EXPECT_EQ(pin_region_holders(r, hs, 1), 3);	/* cut short, count kept */

	n = pin_dev_region_holders(dev, pin_region_id(r), hd, 8);
	EXPECT_EQ(n, 3);
	CHECK_OK(pin_region_holders(r, hs, 8), pin_region_error(r));
	for (i = 0; i < n; i++) {
		EXPECT_EQ(hd[i].start, hs[i].start);
		EXPECT_EQ(hd[i].kind, hs[i].kind);
		EXPECT_TRUE(!strcmp(hd[i].comm, hs[i].comm));
	}
	EXPECT_TRUE(pin_holder_format(&hd[0], line, sizeof(line)) > 0);
	EXPECT_CONTAINS(line, "pid ");
	EXPECT_EQ(pin_dev_region_holders(dev, (uint64_t)-2, hd, 8), -ENOENT);
	EXPECT_CONTAINS(pin_dev_error(dev), "no region");
	EXPECT_EQ(pin_dev_region_holders(dev, 0, hd, 8), -EINVAL);

	n = pin_dev_regions(dev, infos, 64);
	EXPECT_TRUE(n >= 1 && n <= 64);
	EXPECT_EQ(pin_dev_regions(dev, NULL, 0), n);
	for (i = 0; i < n; i++) {
		if (i)
			EXPECT_TRUE(infos[i].id > infos[i - 1].id);
		if (infos[i].id == pin_region_id(r))
			mine = &infos[i];
	}
	EXPECT_TRUE(mine != NULL);
	EXPECT_EQ(mine->region_size, MiB(4));
	EXPECT_EQ(mine->owner_mappings, 1);
	EXPECT_EQ(mine->view_mappings, 2);
	EXPECT_EQ(mine->writable_view_mappings, 1);
	EXPECT_EQ(mine->view_fds, 2);
	EXPECT_EQ(mine->owner_pid, getpid());
	EXPECT_EQ(mine->owner_uid, getuid());
	EXPECT_EQ(mine->nr_chunks, 2);

	CHECK_OK(pin_view_unmap(ro, p), pin_view_error(ro));
	CHECK_OK(pin_view_unmap(rw, q), pin_view_error(rw));
	pin_view_close(ro);
	pin_view_close(rw);
	EXPECT_EQ(pin_region_holders(r, hs, 8), 1);
	CHECK_OK(pin_region_close(r), "free");
	pin_dev_close(dev);
	return 0;
}
