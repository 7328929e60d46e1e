// SPDX-License-Identifier: MIT
/*
 * pin_dev_open checks the module's ABI: -EPROTO when the module only serves
 * newer libraries (abi_min_compat > ours) or is older than we accept
 * (abi_version < our minimum), even for AUTO (no silent fallback), with
 * nothing left open; a newer module that still serves us is
 * fine. The module's answer is faked by interposing ioctl() for
 * PINMEM_IOC_VERSION only; everything else reaches the real device.
 */
#include <stdarg.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <uapi/pinmem.h>

#include "test.h"

/* Per-test fake; read by the interposed ioctl in this single thread. */
static struct pinmem_version fake;
static int faking;

int ioctl(int fd, unsigned long req, ...)
{
	va_list ap;
	void *arg;

	va_start(ap, req);
	arg = va_arg(ap, void *);
	va_end(ap);
	if (faking && req == PINMEM_IOC_VERSION) {
		memcpy(arg, &fake, sizeof(fake));
		return 0;
	}
	return (int)syscall(SYS_ioctl, fd, req, arg);
}

static int try_open(uint32_t version, uint32_t min_compat, int backend)
{
	struct pin_dev *dev = (struct pin_dev *)1;
	int ret;

	fake.abi_version = version;
	fake.abi_min_compat = min_compat;
	fake.chunk_size = PINMEM_CHUNK_SIZE;
	faking = 1;
	ret = pin_dev_open(&dev, backend, NULL);
	faking = 0;
	if (ret == 0 && backend == PIN_BACKEND_PORTABLE) {
		pin_dev_close(dev);
	} else if (ret == 0) {
		struct pin_dev_info info = PIN_INIT(struct pin_dev_info);

		CHECK_OK(pin_dev_info(dev, &info), pin_dev_error(dev));
		EXPECT_EQ(info.abi_version, version);
		EXPECT_EQ(info.abi_min_compat, min_compat);
		pin_dev_close(dev);
	} else {
		EXPECT_TRUE(dev == NULL);
	}
	return ret;
}

int main(void)
{
	struct pin_dev *dev;
	int before;

	unsetenv("PIN_BACKEND");	/* AUTO below must mean the device */
	if (access(PINMEM_DEVICE_PATH, F_OK))
		SKIP("needs %s (the module) to fake its version answer",
		     PINMEM_DEVICE_PATH);
	/* The real module answers and fits. */
	CHECK_OK(pin_dev_open(&dev, PIN_BACKEND_DEVICE, NULL), "real module");
	pin_dev_close(dev);

	before = t_count_fds();
	EXPECT_EQ(try_open(PINMEM_ABI_VERSION, PINMEM_ABI_VERSION, PIN_BACKEND_DEVICE), 0);
	/* A newer module that still serves ABI 1 libraries. */
	EXPECT_EQ(try_open(PINMEM_ABI_VERSION + 1, PINMEM_ABI_VERSION, PIN_BACKEND_DEVICE), 0);
	/* A newer module that serves only newer libraries. */
	EXPECT_EQ(try_open(PINMEM_ABI_VERSION + 1, PINMEM_ABI_VERSION + 1,
			   PIN_BACKEND_DEVICE), -EPROTO);
	EXPECT_EQ(try_open(PINMEM_ABI_VERSION + 1, PINMEM_ABI_VERSION + 1,
			   PIN_BACKEND_AUTO), -EPROTO);
	/* A module older than this library accepts. */
	EXPECT_EQ(try_open(PINMEM_ABI_MIN_COMPAT - 1, 0, PIN_BACKEND_DEVICE), -EPROTO);
	EXPECT_EQ(t_count_fds(), before);
	/* The portable backend asks no module. */
	EXPECT_EQ(try_open(99, 99, PIN_BACKEND_PORTABLE), 0);
	return 0;
}
