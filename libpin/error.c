// SPDX-License-Identifier: MIT
/*
 * Last-error text: each handle keeps a fixed buffer that describes its last
 * failure in words. No global state: strerror_r into the caller's buffer.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>

#include "internal.h"

const char *pin__strerror(int err, char *buf, size_t len)
{
	if (err < 0)
		err = -err;
	/* GNU strerror_r: may return a static string or fill buf. */
	return strerror_r(err, buf, len);
}

int pin__vfail(char *buf, int err, const char *fmt, va_list ap)
{
	char ebuf[128];
	int n;

	n = vsnprintf(buf, PIN_ERR_LEN, fmt, ap);
	if (n < 0)
		n = 0;
	if (err && n < PIN_ERR_LEN)
		snprintf(buf + n, PIN_ERR_LEN - n, ": %s",
			 pin__strerror(err, ebuf, sizeof(ebuf)));
	return err;
}

int pin__fail(char *buf, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	pin__vfail(buf, err, fmt, ap);
	va_end(ap);
	return err;
}

int pin__ioctl(int fd, unsigned long req, void *arg)
{
	if (ioctl(fd, req, arg) < 0)
		return -errno;
	return 0;
}

const char *pin_dev_error(const struct pin_dev *dev)
{
	return dev ? dev->err : "no device handle";
}

const char *pin_region_error(const struct pin_region *r)
{
	return r ? r->err : "no region handle";
}

const char *pin_view_error(const struct pin_view *v)
{
	return v ? v->err : "no view handle";
}

const char *pin_backend_name(int backend)
{
	switch (backend) {
	case PIN_BACKEND_AUTO:
		return "auto";
	case PIN_BACKEND_DEVICE:
		return "device";
	case PIN_BACKEND_PORTABLE:
		return "portable";
	}
	return "unknown";
}

const char *pin_state_name(int state)
{
	switch (state) {
	case PIN_STATE_OPEN:
		return "open";
	case PIN_STATE_SEALED:
		return "sealed";
	case PIN_STATE_DONATED:
		return "donated";
	}
	return "unknown";
}
