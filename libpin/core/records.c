// SPDX-License-Identifier: MIT
/*
 * The module's record queries (LIST, HOLDERS, REFS): one way to ask for
 * an array of records and hand each on into the caller's size-versioned
 * array.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include <uapi/pinmem.h>

#include "internal.h"

/*
 * record_size is left 0, which asks for the records at their first
 * published size: this header's, as long as these hold.
 */
_Static_assert(sizeof(struct pinmem_region_info) ==
	       PINMEM_REGION_INFO_SIZE_VER0, "LIST's records grew");
_Static_assert(sizeof(struct pinmem_holder) == PINMEM_HOLDER_SIZE_VER0,
	       "HOLDERS' records grew");
_Static_assert(sizeof(struct pinmem_ref_range) == PINMEM_REF_RANGE_SIZE_VER0,
	       "REFS' records grew");

int pin__records(int fd, const struct pin__records *q, void *out,
		 size_t stride, size_t cap)
{
	unsigned char *recs = NULL;
	size_t i, n;
	int ret;

	if (cap > UINT32_MAX)
		cap = UINT32_MAX;
	if (cap) {
		recs = calloc(cap, q->rec_size);
		if (!recs)
			return -ENOMEM;
	}
	*q->ptr = (uintptr_t)recs;
	*q->capacity = (uint32_t)cap;
	ret = pin__ioctl(fd, q->req, q->arg);
	if (ret) {
		free(recs);
		return ret;
	}
	n = *q->count < cap ? *q->count : cap;
	for (i = 0; i < n; i++)
		q->put(out, stride, i, recs + i * q->rec_size);
	free(recs);
	return *q->count > INT32_MAX ? INT32_MAX : (int)*q->count;
}
