// SPDX-License-Identifier: MIT
/*
 * pin_region_import/pin_view_import take a duplicate of an fd: the id,
 * size and bytes are the same; the caller keeps its fd; fds that are not
 * pinmem regions (or a view passed as a region) are refused with -EINVAL.
 */
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "test.h"

int main(void)
{
	struct pin_dev *dev = t_open(0);
	struct pin_region *r, *imp, *bad = (struct pin_region *)1;
	struct pin_view *v, *vimp, *vbad = (struct pin_view *)1;
	unsigned char *own, *p;
	int pfd[2];

	CHECK_OK(pin_region_create(dev, MiB(4), NULL, &r), pin_dev_error(dev));
	CHECK_OK(pin_region_map(r, (void **)&own), pin_region_error(r));
	t_fill(own, MiB(4), 21);

	CHECK_OK(pin_region_import(dev, pin_region_fd(r), &imp),
		 pin_dev_error(dev));
	EXPECT_TRUE(pin_region_fd(imp) != pin_region_fd(r));
	EXPECT_TRUE(fcntl(pin_region_fd(imp), F_GETFD) & FD_CLOEXEC);
	EXPECT_EQ(pin_region_id(imp), pin_region_id(r));
	EXPECT_EQ(pin_region_size(imp), pin_region_size(r));
	CHECK_OK(pin_region_map(imp, (void **)&p), pin_region_error(imp));
	EXPECT_TRUE(p != own);
	t_check(p, MiB(4), 21, "imported owner mapping");

	CHECK_OK(pin_view_create(r, MiB(2), MiB(2), 0, &v), pin_region_error(r));
	CHECK_OK(pin_view_import(dev, pin_view_fd(v), &vimp), pin_dev_error(dev));
	EXPECT_EQ(pin_view_writable(vimp), 0);
	if (pin_dev_backend(dev) == PIN_BACKEND_DEVICE) {
		EXPECT_EQ(pin_view_offset(vimp), MiB(2));
		EXPECT_EQ(pin_view_length(vimp), MiB(2));
		CHECK_OK(pin_view_map(vimp, PROT_READ, (void **)&p),
			 pin_view_error(vimp));
		t_check(p, MiB(2), (unsigned)(21 + 131u * MiB(2)), "imported view");
		EXPECT_EQ(pin_region_import(dev, pin_view_fd(v), &bad), -EINVAL);
		EXPECT_CONTAINS(pin_dev_error(dev), "pin_view_import");
		EXPECT_EQ(pin_view_import(dev, pin_region_fd(r), &vbad), -EINVAL);
		EXPECT_TRUE(vbad == NULL);
	} else {
		/* A memfd carries no range: the import is the whole region. */
		EXPECT_EQ(pin_view_offset(vimp), 0);
		EXPECT_EQ(pin_view_length(vimp), pin_region_size(r));
		CHECK_OK(pin_view_map(vimp, PROT_READ, (void **)&p),
			 pin_view_error(vimp));
		t_check(p, MiB(4), 21, "imported view");
		EXPECT_EQ(pin_region_import(dev, pin_view_fd(v), &bad), -EINVAL);
		EXPECT_CONTAINS(pin_dev_error(dev), "pin_view_import");
	}
	EXPECT_TRUE(bad == NULL);
	CHECK_OK(pin_view_unmap(vimp, p), pin_view_error(vimp));

	EXPECT_EQ(pipe(pfd), 0);
	EXPECT_EQ(pin_region_import(dev, pfd[0], &bad), -EINVAL);
	EXPECT_EQ(pin_view_import(dev, pfd[0], &vbad), -EINVAL);
	EXPECT_CONTAINS(pin_dev_error(dev), "not a");
	EXPECT_EQ(fcntl(pfd[0], F_GETFD) >= 0, 1);	/* caller's fd kept */
	close(pfd[0]);
	close(pfd[1]);

	pin_view_close(vimp);
	pin_view_close(v);
	CHECK_OK(pin_region_close(imp), "free imported");
	CHECK_OK(pin_region_close(r), "free");
	pin_dev_close(dev);
	return 0;
}
