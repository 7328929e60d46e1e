// SPDX-License-Identifier: MIT
/*
 * pin_holder_format: one line per holder, with the address range, or with
 * "address withheld" where the kernel withheld it (start 0: a process of
 * another user); -ENOSPC when the buffer is too small, -EINVAL for no
 * buffer. Needs no backend.
 */
#include <sys/mman.h>

#include "test.h"

int main(void)
{
	struct pin_holder h = {
		.size = sizeof(struct pin_holder),
		.pid = 123, .kind = PIN_HOLDER_VIEW, .start = 0x7f0000200000ULL,
		.length = MiB(2), .offset = 0, .prot = PROT_READ,
		.comm = "python3",
	};
	char buf[160];

	EXPECT_TRUE(pin_holder_format(&h, buf, sizeof(buf)) > 0);
	EXPECT_EQ(strcmp(buf, "pid 123 (python3) view 0x7f0000200000-0x7f0000400000 r-- at +0x0"), 0);

	h.start = 0;
	h.pid = 7;
	h.kind = PIN_HOLDER_OWNER;
	h.offset = MiB(2);
	h.prot = PROT_READ | PROT_WRITE;
	strcpy(h.comm, "loader");
	EXPECT_EQ(pin_holder_format(&h, buf, sizeof(buf)), (long long)strlen(buf));
	EXPECT_EQ(strcmp(buf, "pid 7 (loader) owner (address withheld, 0x200000 bytes) rw- at +0x200000"), 0);

	EXPECT_EQ(pin_holder_format(&h, buf, 10), -ENOSPC);
	EXPECT_EQ(pin_holder_format(&h, NULL, 10), -EINVAL);
	EXPECT_EQ(pin_holder_format(NULL, buf, sizeof(buf)), -EINVAL);
	return 0;
}
