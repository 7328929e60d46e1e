// SPDX-License-Identifier: MIT
/* Argument errors are -EINVAL (or -EBADF for fds) and leave nothing behind. */
#include <sys/mman.h>
#include <unistd.h>

#include "test.h"

int main(void)
{
	const struct pin_region_opts unknown_flag = {
		.size = sizeof(unknown_flag), .flags = 0x80,
	};
	struct pin_dev *dev = t_open(0);
	struct pin_region *r = (struct pin_region *)1, *r2;
	struct pin_view *v = (struct pin_view *)1, *ok;
	struct pin_holder h = PIN_INIT(struct pin_holder);
	char buf[8];
	void *p;
	long page = sysconf(_SC_PAGESIZE);

	EXPECT_EQ(pin_region_create(dev, 0, NULL, &r), -EINVAL);
	EXPECT_TRUE(r == NULL);
	EXPECT_CONTAINS(pin_dev_error(dev), "size 0");
	EXPECT_EQ(pin_region_create(dev, MiB(2), &unknown_flag, &r), -EINVAL);
	EXPECT_CONTAINS(pin_dev_error(dev), "flags");
	EXPECT_EQ(pin_region_create(NULL, MiB(2), NULL, &r), -EINVAL);
	EXPECT_EQ(pin_region_create(dev, MiB(2), NULL, NULL), -EINVAL);

	CHECK_OK(pin_region_create(dev, MiB(2), NULL, &r2), pin_dev_error(dev));
	EXPECT_EQ(pin_view_create(r2, 0, 0, 0, &v), -EINVAL);
	EXPECT_TRUE(v == NULL);
	EXPECT_EQ(pin_view_create(r2, 1, (uint64_t)page, 0, &v), -EINVAL);
	EXPECT_EQ(pin_view_create(r2, 0, (uint64_t)page + 1, 0, &v), -EINVAL);
	EXPECT_EQ(pin_view_create(r2, pin_region_size(r2), (uint64_t)page, 0, &v),
		  -EINVAL);
	EXPECT_EQ(pin_view_create(r2, (uint64_t)-page, 2 * (uint64_t)page, 0, &v),
		  -EINVAL);
	EXPECT_EQ(pin_view_create(r2, 0, (uint64_t)page, 0x10, &v), -EINVAL);
	EXPECT_CONTAINS(pin_region_error(r2), "unknown flags");

	CHECK_OK(pin_view_create(r2, 0, (uint64_t)page, 0, &ok),
		 pin_region_error(r2));
	EXPECT_EQ(pin_view_map(ok, PROT_NONE, &p), -EINVAL);
	EXPECT_EQ(pin_view_map(ok, PROT_READ | PROT_EXEC, &p), -EINVAL);
	EXPECT_EQ(pin_view_unmap(ok, &h), -EINVAL);
	EXPECT_CONTAINS(pin_view_error(ok), "not a mapping of this view");
	EXPECT_EQ(pin_view_unmap(ok, NULL), -EINVAL);
	pin_view_close(ok);

	EXPECT_EQ(pin_region_import(dev, -1, &r), -EBADF);
	EXPECT_EQ(pin_view_import(dev, -1, &v), -EBADF);
	EXPECT_EQ(pin_region_map(r2, NULL), -EINVAL);
	EXPECT_EQ(pin_region_info(r2, NULL), -EINVAL);
	EXPECT_EQ(pin_holder_format(NULL, buf, sizeof(buf)), -EINVAL);
	memset(&h, 0, sizeof(h));
	h.size = sizeof(h);
	h.kind = PIN_HOLDER_VIEW;
	EXPECT_EQ(pin_holder_format(&h, buf, sizeof(buf)), -ENOSPC);
	EXPECT_EQ(pin_region_holders(r2, NULL, 3), -EINVAL);
	EXPECT_EQ(pin_fd_send(-1, 0), -EBADF);
	EXPECT_EQ(pin_fd_recv(0, NULL), -EINVAL);
	EXPECT_EQ(pin_region_close(NULL), 0);
	pin_view_close(NULL);

	CHECK_OK(pin_region_close(r2), "free");
	pin_dev_close(dev);
	return 0;
}
