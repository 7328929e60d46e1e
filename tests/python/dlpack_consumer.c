// SPDX-License-Identifier: GPL-2.0
/*
 * A small DLPack consumer in C, for tests/python/test_dlpack.py: takes a
 * DLManagedTensor (or the versioned one) as a C program receives it,
 * checks its fields, sums its elements through shape and strides, and
 * calls the deleter. The structs are written from the DLPack spec.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct dl_device { int32_t type, id; };
struct dl_dtype { uint8_t code, bits; uint16_t lanes; };
struct dl_tensor {
	void *data;
	struct dl_device device;
	int32_t ndim;
	struct dl_dtype dtype;
	int64_t *shape, *strides;
	uint64_t byte_offset;
};
struct dl_managed {
	struct dl_tensor t;
	void *ctx;
	void (*deleter)(struct dl_managed *m);
};
struct dl_version { uint32_t major, minor; };
struct dl_managed_v {
	struct dl_version version;
	void *ctx;
	void (*deleter)(struct dl_managed_v *m);
	uint64_t flags;
	struct dl_tensor t;
};

static double element(const struct dl_tensor *t, const char *p)
{
	if (t->dtype.code == 2 && t->dtype.bits == 32)
		return *(const float *)p;
	if (t->dtype.code == 0 && t->dtype.bits == 16)
		return *(const int16_t *)p;
	return *(const uint8_t *)p;
}

/* Sum of every element, walking the strides (in elements). */
static double sum_of(const struct dl_tensor *t)
{
	int64_t idx[8] = { 0 }, n = 1;
	const char *base = (const char *)t->data + t->byte_offset;
	size_t item = t->dtype.bits / 8;
	double s = 0;
	int d;

	for (d = 0; d < t->ndim; d++)
		n *= t->shape[d];
	while (n-- > 0) {
		int64_t off = 0;

		for (d = 0; d < t->ndim; d++)
			off += idx[d] * t->strides[d];
		s += element(t, base + off * (int64_t)item);
		for (d = t->ndim - 1; d >= 0; d--) {
			if (++idx[d] < t->shape[d])
				break;
			idx[d] = 0;
		}
	}
	return s;
}

static int describe(const struct dl_tensor *t, char *desc, size_t len)
{
	int n = snprintf(desc, len, "device %d/%d ndim %d code %u bits %u "
			 "lanes %u shape", t->device.type, t->device.id,
			 t->ndim, t->dtype.code, t->dtype.bits,
			 t->dtype.lanes);
	int d;

	for (d = 0; d < t->ndim && n > 0 && (size_t)n < len; d++)
		n += snprintf(desc + n, len - (size_t)n, " %lld",
			      (long long)t->shape[d]);
	return t->ndim <= 8 && t->dtype.lanes == 1 ? 0 : -1;
}

/* Returns 0 and the sum, or -1; calls the deleter either way. */
int dl_consume(void *p, int versioned, double *sum, uint64_t *flags,
	       char *desc, size_t len)
{
	const struct dl_tensor *t;
	int ret;

	if (versioned) {
		struct dl_managed_v *m = p;

		t = &m->t;
		*flags = m->flags;
		ret = m->version.major == 1 ? describe(t, desc, len) : -1;
		if (!ret)
			*sum = sum_of(t);
		m->deleter(m);
	} else {
		struct dl_managed *m = p;

		t = &m->t;
		*flags = 0;
		ret = describe(t, desc, len);
		if (!ret)
			*sum = sum_of(t);
		m->deleter(m);
	}
	return ret;
}
