// SPDX-License-Identifier: MIT
/*
 * Never a silent downgrade: PIN_BACKEND_AUTO gives the portable backend only
 * when /dev/pinmem is absent, and says so; a device this process may not
 * open is -EACCES (or -EPERM) with words that name the group and the fix,
 * for AUTO as for DEVICE; an openable device says its module version.
 * Which of the three applies is decided from the device node, so the same
 * program runs on the host (absent), in the guest as root (openable) and
 * in the guest as an unprivileged user (refused: tests/guest.d/15-access).
 */
#include <stdlib.h>
#include <unistd.h>

#include "test.h"

#define EXPECT_STR_CONTAINS(text, part) do {				\
	const char *_t = (text);					\
	if (!strstr(_t, (part)))					\
		FAIL("\"%s\" lacks \"%s\"", _t, (part));		\
} while (0)

#define NOT_LOADED "/dev/pinmem is absent: the pinmem module is not loaded (load it: sudo modprobe pinmem)"

static void absent(void)
{
	struct pin_dev *dev;
	char why[1024];
	struct pin_dev_opts o = {
		.size = sizeof(o), .why = why, .why_len = sizeof(why),
	};

	CHECK_OK(pin_dev_open(&dev, PIN_BACKEND_AUTO, &o), why);
	EXPECT_EQ(pin_dev_backend(dev), PIN_BACKEND_PORTABLE);
	EXPECT_STR_CONTAINS(pin_dev_backend_why(dev), "portable (memfd), no kernel arbitration");
	EXPECT_STR_CONTAINS(pin_dev_backend_why(dev), NOT_LOADED);
	EXPECT_TRUE(why[0] == '\0');
	pin_dev_close(dev);
	EXPECT_EQ(pin_dev_open(&dev, PIN_BACKEND_DEVICE, &o), -ENOENT);
	EXPECT_TRUE(dev == NULL);
	EXPECT_STR_CONTAINS(why, NOT_LOADED);
}

static void refused(void)
{
	struct pin_dev *dev = (struct pin_dev *)1;
	char why[1024];
	struct pin_dev_opts o = {
		.size = sizeof(o), .why = why, .why_len = sizeof(why),
	};
	int ret;

	ret = pin_dev_open(&dev, PIN_BACKEND_AUTO, &o);
	if (ret != -EACCES && ret != -EPERM)
		FAIL("AUTO on a device we may not open: %d (%s), want -EACCES", ret, why);
	EXPECT_TRUE(dev == NULL);
	EXPECT_STR_CONTAINS(why, "open /dev/pinmem: ");
	EXPECT_STR_CONTAINS(why, "sudo usermod -aG ");
	EXPECT_STR_CONTAINS(why, "PIN_BACKEND=portable");
	/* Plain pin_dev_open fails the same way. */
	EXPECT_EQ(pin_dev_open(&dev, PIN_BACKEND_AUTO, NULL), ret);
	EXPECT_EQ(pin_dev_open(&dev, PIN_BACKEND_DEVICE, &o), ret);
	/* Asked for by name, the portable backend still works, and says so. */
	CHECK_OK(pin_dev_open(&dev, PIN_BACKEND_PORTABLE, NULL), "portable");
	EXPECT_STR_CONTAINS(pin_dev_backend_why(dev), "portable (memfd), no kernel arbitration: asked for");
	pin_dev_close(dev);
	setenv("PIN_BACKEND", "portable", 1);
	CHECK_OK(pin_dev_open(&dev, PIN_BACKEND_AUTO, NULL), "PIN_BACKEND=portable");
	EXPECT_STR_CONTAINS(pin_dev_backend_why(dev), "asked for by PIN_BACKEND");
	pin_dev_close(dev);
	unsetenv("PIN_BACKEND");
}

static void openable(void)
{
	struct pin_dev *dev;
	char why[1024], want[64];
	struct pin_dev_opts o = {
		.size = sizeof(o), .why = why, .why_len = sizeof(why),
	};

	CHECK_OK(pin_dev_open(&dev, PIN_BACKEND_AUTO, &o), why);
	EXPECT_EQ(pin_dev_backend(dev), PIN_BACKEND_DEVICE);
	snprintf(want, sizeof(want), "pinmem.ko %s, ABI ", pin_version());
	EXPECT_STR_CONTAINS(pin_dev_backend_why(dev), "device /dev/pinmem: ");
	EXPECT_STR_CONTAINS(pin_dev_backend_why(dev), want);
	pin_dev_close(dev);
}

int main(void)
{
	char why[8] = "x";
	struct pin_dev *dev;
	struct pin_dev_opts o = {
		.size = sizeof(o), .why = why, .why_len = sizeof(why),
	};

	unsetenv("PIN_BACKEND");
	/* No stale text: the reason replaces it, cut to fit. */
	EXPECT_EQ(pin_dev_open(NULL, PIN_BACKEND_AUTO, &o), -EINVAL);
	EXPECT_TRUE(!strcmp(why, "pin_dev"));
	/* Options without their size, or with fields unknown here. */
	o.size = 0;
	EXPECT_EQ(pin_dev_open(&dev, PIN_BACKEND_AUTO, &o), -EINVAL);
	EXPECT_TRUE(dev == NULL);
	o.size = sizeof(o);
	o.flags = 1;
	EXPECT_EQ(pin_dev_open(&dev, PIN_BACKEND_AUTO, &o), -EINVAL);
	o.flags = 0;
	if (access("/dev/pinmem", F_OK)) {
		absent();
	} else if (access("/dev/pinmem", R_OK | W_OK)) {
		refused();
	} else {
		openable();
	}
	/* A cut text still ends in a NUL. */
	setenv("PIN_BACKEND", "device", 1);
	if (pin_dev_open(&dev, PIN_BACKEND_AUTO, &o) == 0)
		pin_dev_close(dev);
	else
		EXPECT_TRUE(strlen(why) < sizeof(why));
	return 0;
}
