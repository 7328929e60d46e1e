// SPDX-License-Identifier: MIT
/* pin_dev_open: backend selection, -ENOENT without the device, -EINVAL. */
#include <stdlib.h>
#include <unistd.h>

#include <uapi/pinmem.h>

#include "test.h"

int main(void)
{
	struct pin_dev *dev = (struct pin_dev *)1;
	struct pin_dev_info info = PIN_INIT(struct pin_dev_info);
	int have_dev = access("/dev/pinmem", F_OK) == 0;
	int ret;

	EXPECT_EQ(pin_dev_open(NULL, PIN_BACKEND_AUTO, NULL), -EINVAL);
	EXPECT_EQ(pin_dev_open(&dev, 7, NULL), -EINVAL);
	EXPECT_TRUE(dev == NULL);

	ret = pin_dev_open(&dev, PIN_BACKEND_DEVICE, NULL);
	if (have_dev) {
		CHECK_OK(ret, "device");
		EXPECT_EQ(pin_dev_backend(dev), PIN_BACKEND_DEVICE);
		CHECK_OK(pin_dev_info(dev, &info), pin_dev_error(dev));
		EXPECT_EQ(info.backend, PIN_BACKEND_DEVICE);
		EXPECT_EQ(info.abi_version, PINMEM_ABI_VERSION);
		EXPECT_EQ(info.chunk_size, MiB(2));
		pin_dev_close(dev);
	} else {
		EXPECT_EQ(ret, -ENOENT);
		EXPECT_TRUE(dev == NULL);
	}

	CHECK_OK(pin_dev_open(&dev, PIN_BACKEND_PORTABLE, NULL), "portable");
	EXPECT_EQ(pin_dev_backend(dev), PIN_BACKEND_PORTABLE);
	CHECK_OK(pin_dev_info(dev, &info), pin_dev_error(dev));
	EXPECT_EQ(info.backend, PIN_BACKEND_PORTABLE);
	EXPECT_EQ(info.abi_version, 0);
	EXPECT_EQ(info.total_bytes, 0);
	pin_dev_close(dev);

	/* The environment overrides AUTO, and only AUTO. */
	setenv("PIN_BACKEND", "portable", 1);
	CHECK_OK(pin_dev_open(&dev, PIN_BACKEND_AUTO, NULL), "env portable");
	EXPECT_EQ(pin_dev_backend(dev), PIN_BACKEND_PORTABLE);
	pin_dev_close(dev);
	setenv("PIN_BACKEND", "device", 1);
	ret = pin_dev_open(&dev, PIN_BACKEND_AUTO, NULL);
	EXPECT_EQ(ret, have_dev ? 0 : -ENOENT);
	pin_dev_close(dev);
	setenv("PIN_BACKEND", "bogus", 1);
	EXPECT_EQ(pin_dev_open(&dev, PIN_BACKEND_AUTO, NULL), -EINVAL);
	CHECK_OK(pin_dev_open(&dev, PIN_BACKEND_PORTABLE, NULL), "explicit beats env");
	pin_dev_close(dev);
	unsetenv("PIN_BACKEND");
	CHECK_OK(pin_dev_open(&dev, PIN_BACKEND_AUTO, NULL), "auto");
	EXPECT_EQ(pin_dev_backend(dev),
		  have_dev ? PIN_BACKEND_DEVICE : PIN_BACKEND_PORTABLE);
	pin_dev_close(dev);

	EXPECT_TRUE(!strcmp(pin_backend_name(PIN_BACKEND_DEVICE), "device"));
	EXPECT_TRUE(!strcmp(pin_backend_name(PIN_BACKEND_PORTABLE), "portable"));
	EXPECT_TRUE(!strcmp(pin_state_name(PIN_STATE_SEALED), "sealed"));
	pin_dev_close(NULL);
	return 0;
}
