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
	static const char cut[] = "...";
	char ebuf[128], tail[160];
	size_t n, tlen;
	int ret;

	ret = vsnprintf(buf, PIN_ERR_LEN, fmt, ap);
	if (ret < 0) {
		buf[0] = '\0';
		ret = 0;
	}
	if (!err)
		return err;
	ret = snprintf(tail, sizeof(tail), ": %s",
		       pin__strerror(err, ebuf, sizeof(ebuf)));
	tlen = ret < 0 ? 0 : (size_t)ret;
	if (tlen >= sizeof(tail))
		tlen = sizeof(tail) - 1;
	tail[tlen] = '\0';
	n = strlen(buf);
	/*
	 * A text too long for the buffer is cut before the errno words, not
	 * through them: the reason is the part worth keeping.
	 */
	if (n + tlen >= PIN_ERR_LEN) {
		n = PIN_ERR_LEN - 1 - tlen - (sizeof(cut) - 1);
		memcpy(buf + n, cut, sizeof(cut) - 1);
		n += sizeof(cut) - 1;
	}
	memcpy(buf + n, tail, tlen + 1);
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
