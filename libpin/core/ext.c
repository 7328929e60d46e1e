// SPDX-License-Identifier: MIT
/*
 * Extensible structs (the conventions in pin.h): a caller built against
 * another libpin has a struct of another size, which it says in the
 * struct's first field. Options are read as far as both know them, and
 * an option only the caller knows must be unset; results are written as
 * far as both know them, the rest of the caller's bytes zeroed.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static uint32_t size_of(const void *s)
{
	uint32_t size;

	memcpy(&size, s, sizeof(size));
	return size;
}

int pin__opts_in(void *dst, size_t dst_size, const void *src,
		 size_t min_size)
{
	const unsigned char *p = src;
	uint32_t size, i;

	memset(dst, 0, dst_size);
	if (!src) {
		memcpy(dst, &(uint32_t){ (uint32_t)dst_size }, sizeof(size));
		return 0;
	}
	size = size_of(src);
	if (size < min_size)
		return -EINVAL;
	for (i = (uint32_t)dst_size; i < size; i++)
		if (p[i])
			return -E2BIG;
	memcpy(dst, src, size < dst_size ? size : dst_size);
	/* The copy is the library's struct now, whatever the caller had. */
	size = (uint32_t)dst_size;
	memcpy(dst, &size, sizeof(size));
	return 0;
}

int pin__out_check(const void *dst, size_t min_size)
{
	return dst && size_of(dst) >= min_size ? 0 : -EINVAL;
}

void pin__out_put(void *dst, const void *src, size_t src_size)
{
	uint32_t size = size_of(dst);

	if (size > src_size) {
		memcpy(dst, src, src_size);
		memset((char *)dst + src_size, 0, size - src_size);
	} else {
		memcpy(dst, src, size);
	}
	memcpy(dst, &size, sizeof(size));
}

int pin__array_stride(const void *arr, size_t cap, size_t min_size,
		      size_t *stride)
{
	*stride = 0;
	if (!cap)
		return 0;
	if (pin__out_check(arr, min_size))
		return -EINVAL;
	*stride = size_of(arr);
	return 0;
}

void pin__array_put(void *arr, size_t stride, size_t i, const void *src,
		    size_t src_size)
{
	char *dst = (char *)arr + i * stride;
	uint32_t size = (uint32_t)stride;

	/* Element 0 says the size; the others get it from there. */
	memcpy(dst, &size, sizeof(size));
	pin__out_put(dst, src, src_size);
}

void pin__why(char *why, size_t len, const char *text)
{
	if (why && len)
		snprintf(why, len, "%s", text);
}

int pin__array_in(const void *arr, size_t n, size_t elem_size,
		  size_t min_size, void **copy)
{
	const unsigned char *p = arr;
	size_t i, j, stride;
	uint32_t size = (uint32_t)elem_size;
	char *out;

	*copy = NULL;
	if (!n)
		return 0;
	if (pin__out_check(arr, min_size))
		return -EINVAL;
	stride = size_of(arr);
	for (i = 0; i < n; i++)
		for (j = elem_size; j < stride; j++)
			if (p[i * stride + j])
				return -E2BIG;
	out = calloc(n, elem_size);
	if (!out)
		return -ENOMEM;
	for (i = 0; i < n; i++) {
		memcpy(out + i * elem_size, p + i * stride,
		       stride < elem_size ? stride : elem_size);
		memcpy(out + i * elem_size, &size, sizeof(size));
	}
	*copy = out;
	return 0;
}
