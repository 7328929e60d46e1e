// SPDX-License-Identifier: MIT
/*
 * A pipe holding a view's pages after the view is gone: pin_region_donate is
 * refused with -EBUSY and the error names the referenced bytes and how
 * they are held; pin_region_refs and pin_ref_format say the same; once the pipe
 * is drained the donation succeeds. pin_region_expect checks its
 * arguments and declares. Device backend (module ABI 2) only.
 */
#include <sys/mman.h>
#include <sys/uio.h>

#include "test.h"

int main(void)
{
	struct pin_dev *dev = t_open(PIN_BACKEND_DEVICE);
	struct pin_ref_range rr[2] = { { .size = sizeof(struct pin_ref_range) } };
	struct pin_region *r;
	struct pin_view *v;
	char *p, buf[4 * 4096], line[256];
	struct iovec iov;
	int pfd[2];

	CHECK_OK(pin_region_create(dev, MiB(4), NULL, &r), pin_dev_error(dev));
	CHECK_OK(pin_view_create(r, MiB(2), MiB(2), 0, &v), pin_region_error(r));
	CHECK_OK(pin_view_map(v, PROT_READ, (void **)&p), pin_view_error(v));
	if (pipe(pfd))
		FAIL("pipe");
	iov.iov_base = p;
	iov.iov_len = sizeof(buf);
	EXPECT_EQ(vmsplice(pfd[1], &iov, 1, 0), sizeof(buf));
	CHECK_OK(pin_view_unmap(v, p), pin_view_error(v));

	EXPECT_EQ(pin_region_donate(r, 0), -EBUSY);
	EXPECT_CONTAINS(pin_region_error(r),
			"bytes [2 MiB, 4 MiB) referenced outside any mapping: 4 references, not DMA pins - a pipe holding vmsplice'd pages");
	EXPECT_CONTAINS(pin_region_error(r), "cannot say who holds them");
	EXPECT_EQ(pin_region_donate(r, 150), -ETIMEDOUT);
	EXPECT_CONTAINS(pin_region_error(r), "bytes [2 MiB, 4 MiB)");
	EXPECT_CONTAINS(pin_region_error(r), "(after waiting 150 ms)");
	EXPECT_EQ(pin_region_refs(r, rr, 2), 1);
	EXPECT_EQ(rr[0].offset, MiB(2));
	EXPECT_EQ(rr[0].length, MiB(2));
	EXPECT_EQ(rr[0].refs, 4);
	EXPECT_EQ(rr[0].pinned, 0);
	EXPECT_EQ(rr[0].expected, 0);
	EXPECT_TRUE(pin_ref_format(&rr[0], line, sizeof(line)) > 0);
	EXPECT_CONTAINS(line, "bytes [2 MiB, 4 MiB) referenced");
	EXPECT_EQ(pin_ref_format(&rr[0], line, 10), -ENOSPC);
	rr[0].pinned = 4;
	EXPECT_TRUE(pin_ref_format(&rr[0], line, sizeof(line)) > 0);
	EXPECT_CONTAINS(line, "4 DMA pins - an io_uring fixed buffer, a CUDA registration or O_DIRECT");
	EXPECT_EQ(pin_region_refs(r, NULL, 1), -EINVAL);

	close(pfd[1]);
	EXPECT_EQ(read(pfd[0], buf, sizeof(buf)), sizeof(buf));
	close(pfd[0]);
	EXPECT_EQ(pin_region_refs(r, rr, 2), 0);
	CHECK_OK(pin_region_donate(r, 0), pin_region_error(r));

	EXPECT_EQ(pin_region_expect(r, 1, 4096, PIN_EXPECT_PER_PAGE), -EINVAL);
	EXPECT_CONTAINS(pin_region_error(r), "expect: region");
	EXPECT_EQ(pin_region_expect(r, 0, 4096, PIN_EXPECT_PER_PAGE |
				    PIN_EXPECT_REMOVE), -EINVAL);
	CHECK_OK(pin_region_expect(r, 0, MiB(4), PIN_EXPECT_PER_CHUNK),
		 pin_region_error(r));
	CHECK_OK(pin_region_expect(r, 0, MiB(4), PIN_EXPECT_PER_CHUNK |
				   PIN_EXPECT_REMOVE), pin_region_error(r));

	pin_view_close(v);
	CHECK_OK(pin_region_close(r), "free");
	pin_dev_close(dev);
	return 0;
}
