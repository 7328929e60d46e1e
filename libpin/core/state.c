// SPDX-License-Identifier: MIT
/*
 * Region state changes: seal, donate, publish, reopen. On EBUSY the
 * region's error text names the mappings in the way.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <uapi/pinmem.h>

#include "internal.h"

/* Longest single wait handed to the kernel when asked to wait forever. */
#define FOREVER_SLICE_MS	(24u * 3600u * 1000u)

static int transition(struct pin_region *r, unsigned long req,
		      uint32_t flags, uint32_t timeout_ms)
{
	struct pinmem_transition t;

	memset(&t, 0, sizeof(t));
	t.flags = flags;
	t.timeout_ms = timeout_ms;
	return pin__ioctl(r->fd, req, &t);
}

static int state_error(struct pin_region *r, const char *op, int ret)
{
	if (ret == -EPERM) {
		struct pin_region_info info = PIN_INIT(struct pin_region_info);
		const char *st = "?";

		if (pin_region_info(r, &info) == 0)
			st = pin_state_name(info.state);
		return pin__fail(r->err, ret, "%s: region %" PRIu64 " is %s",
				 op, r->id, st);
	}
	return pin__fail(r->err, ret, "%s: region %" PRIu64, op, r->id);
}

int pin_region_seal(struct pin_region *r)
{
	int ret;

	if (!r)
		return -EINVAL;
	if (r->backend == PIN_BACKEND_PORTABLE)
		return pin__portable_seal(r);
	ret = transition(r, PINMEM_IOC_SEAL, 0, 0);
	if (ret == -EBUSY) {
		pin__explain_busy(r, "seal", 1);
		return ret;
	}
	if (ret)
		return state_error(r, "seal", ret);
	return 0;
}

int pin_region_donate(struct pin_region *r, int timeout_ms)
{
	int ret;

	if (!r)
		return -EINVAL;
	if (r->backend == PIN_BACKEND_PORTABLE)
		return pin__portable_unsupported(r->err, "donate");
	if (timeout_ms == 0) {
		ret = transition(r, PINMEM_IOC_DONATE, 0, 0);
	} else if (timeout_ms > 0) {
		ret = transition(r, PINMEM_IOC_DONATE, PINMEM_DONATE_WAIT,
				 (uint32_t)timeout_ms);
	} else {
		do
			ret = transition(r, PINMEM_IOC_DONATE,
					 PINMEM_DONATE_WAIT, FOREVER_SLICE_MS);
		while (ret == -ETIMEDOUT);
	}
	switch (ret) {
	case 0:
		return 0;
	case -EBUSY:
		pin__explain_busy(r, "donate", 0);
		return ret;
	case -ETIMEDOUT:
		pin__explain_busy(r, "donate", 0);
		{
			char tail[64];
			size_t len = strlen(r->err);

			snprintf(tail, sizeof(tail), " (after waiting %d ms)",
				 timeout_ms);
			if (len < PIN_ERR_LEN)
				snprintf(r->err + len, PIN_ERR_LEN - len, "%s",
					 tail);
		}
		return ret;
	case -EINTR:
		return pin__fail(r->err, ret,
				 "donate: region %" PRIu64 ": wait interrupted by a signal",
				 r->id);
	}
	return state_error(r, "donate", ret);
}

int pin_region_publish(struct pin_region *r)
{
	int ret;

	if (!r)
		return -EINVAL;
	if (r->backend == PIN_BACKEND_PORTABLE)
		return pin__portable_unsupported(r->err, "publish");
	ret = transition(r, PINMEM_IOC_PUBLISH, 0, 0);
	return ret ? state_error(r, "publish", ret) : 0;
}

int pin_region_reopen(struct pin_region *r)
{
	int ret;

	if (!r)
		return -EINVAL;
	if (r->backend == PIN_BACKEND_PORTABLE)
		return pin__portable_unsupported(r->err, "reopen");
	ret = transition(r, PINMEM_IOC_REOPEN, 0, 0);
	return ret ? state_error(r, "reopen", ret) : 0;
}
