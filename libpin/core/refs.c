// SPDX-License-Identifier: MIT
/*
 * Page references beyond the mappings (module ABI 2): the owner's
 * declarations (EXPECT), the REFS query, its formatting, and the words
 * that explain a donation held up by references rather than views.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uapi/pinmem.h>

#include "internal.h"

#define MiB	((uint64_t)1 << 20)

static int expect_ioctl(int fd, uint64_t offset, uint64_t length,
			unsigned flags)
{
	struct pinmem_expect e;

	memset(&e, 0, sizeof(e));
	e.offset = offset;
	e.length = length;
	e.flags = flags;
	return pin__ioctl(fd, PINMEM_IOC_EXPECT, &e);
}

int pin_region_expect(struct pin_region *r, uint64_t offset, uint64_t length,
		      unsigned flags)
{
	int ret;

	if (!r)
		return -EINVAL;
	if (r->backend != PIN_BACKEND_DEVICE)
		return pin__portable_unsupported(r->err, "expect");
	ret = expect_ioctl(r->fd, offset, length, flags);
	if (ret == -ENOTTY)
		return pin__fail(r->err, -EOPNOTSUPP,
				 "expect: region %" PRIu64 ": the module predates ABI 2 and counts no references",
				 r->id);
	if (ret)
		return pin__fail(r->err, ret,
				 "expect: region %" PRIu64 ", bytes %" PRIu64 "+%" PRIu64 ", flags 0x%x",
				 r->id, offset, length, flags);
	return 0;
}

/*
 * libpin's own long-term registration of [addr, addr + len) when it lies
 * in r's owner mapping: declared (add) or taken back. Returns whether a
 * declaration is in force afterwards for the caller to undo; a module
 * without references to count (ABI 1), or a range elsewhere, needs none.
 */
int pin__refs_declare(struct pin_region *r, const void *addr, uint64_t len,
		      unsigned flags, int add)
{
	uintptr_t base, a = (uintptr_t)addr;
	uint64_t off, end;

	if (!r || r->backend != PIN_BACKEND_DEVICE || !r->map || !len)
		return 0;
	base = (uintptr_t)r->map;
	if (a < base || a - base >= r->size)
		return 0;
	off = (a - base) & ~(uint64_t)4095;
	end = a - base + len;
	end = end > r->size ? r->size : (end + 4095) & ~(uint64_t)4095;
	if (!add)
		flags |= PIN_EXPECT_REMOVE;
	return expect_ioctl(r->fd, off, end - off, flags) == 0 && add;
}

void pin__refs_hold(struct pin__refs_hold *h, struct pin_region *r,
		    const void *addr, uint64_t len, unsigned flags)
{
	h->region = r;
	h->addr = addr;
	h->len = len;
	h->flags = flags;
	h->active = pin__refs_declare(r, addr, len, flags, 1);
}

void pin__refs_release(struct pin__refs_hold *h)
{
	if (h->active)
		pin__refs_declare(h->region, h->addr, h->len, h->flags, 0);
	h->active = 0;
}

static void ref_range_put(void *out, size_t stride, size_t i,
			  const void *rec)
{
	const struct pinmem_ref_range *u = rec;
	struct pin_ref_range rr = {
		.offset = u->offset,
		.length = u->length,
		.refs = u->refs,
		.pinned = u->pinned,
		.expected = u->expected,
	};

	pin__array_put(out, stride, i, &rr, sizeof(rr));
}

static int refs_ioctl(int fd, uint64_t id, void *out, size_t stride,
		      size_t cap)
{
	struct pinmem_refs q = { .region_id = id };
	const struct pin__records recs = {
		.req = PINMEM_IOC_REFS,
		.arg = &q,
		.ptr = &q.ranges_ptr,
		.capacity = &q.capacity,
		.count = &q.count,
		.rec_size = sizeof(struct pinmem_ref_range),
		.put = ref_range_put,
	};
	int ret = pin__records(fd, &recs, out, stride, cap);

	return ret == -ENOTTY ? -EOPNOTSUPP : ret;
}

int pin_region_refs(struct pin_region *r, struct pin_ref_range *ranges,
		    size_t cap)
{
	size_t stride;
	int ret;

	if (!r ||
	    pin__array_stride(ranges, cap, PIN__REF_RANGE_SIZE, &stride))
		return -EINVAL;
	if (r->backend != PIN_BACKEND_DEVICE)
		return pin__portable_unsupported(r->err, "refs");
	ret = refs_ioctl(r->fd, 0, ranges, stride, cap);
	if (ret == -EOPNOTSUPP)
		return pin__fail(r->err, ret,
				 "refs: the module predates ABI 2 and counts no references");
	if (ret < 0)
		return pin__fail(r->err, ret, "refs of region %" PRIu64, r->id);
	return ret;
}

int pin_dev_region_refs(struct pin_dev *dev, uint64_t id,
			struct pin_ref_range *ranges, size_t cap)
{
	size_t stride;
	int ret;

	if (!dev || !id ||
	    pin__array_stride(ranges, cap, PIN__REF_RANGE_SIZE, &stride))
		return -EINVAL;
	if (dev->backend != PIN_BACKEND_DEVICE)
		return pin__portable_unsupported(dev->err, "refs");
	ret = refs_ioctl(dev->fd, id, ranges, stride, cap);
	if (ret == -ENOENT)
		return pin__fail(dev->err, ret,
				 "refs: no region %" PRIu64 " visible to this user",
				 id);
	if (ret < 0)
		return pin__fail(dev->err, ret, "refs of region %" PRIu64, id);
	return ret;
}

/* A byte count as "N MiB" when whole, else hex. */
static void bytes_str(uint64_t v, char *buf, size_t len)
{
	if (v % MiB == 0)
		snprintf(buf, len, "%" PRIu64 " MiB", v / MiB);
	else
		snprintf(buf, len, "0x%" PRIx64, v);
}

int pin_ref_format(const struct pin_ref_range *rr, char *buf, size_t len)
{
	char a[32], b[32], what[96], mine[64] = "";
	int n;

	if (pin__out_check(rr, PIN__REF_RANGE_SIZE) || !buf || !len)
		return -EINVAL;
	bytes_str(rr->offset, a, sizeof(a));
	bytes_str(rr->offset + rr->length, b, sizeof(b));
	if (rr->pinned >= rr->refs)
		snprintf(what, sizeof(what), "%" PRIu64 " DMA pin%s", rr->refs,
			 rr->refs == 1 ? "" : "s");
	else if (!rr->pinned)
		snprintf(what, sizeof(what),
			 "%" PRIu64 " reference%s, not DMA pins", rr->refs,
			 rr->refs == 1 ? "" : "s");
	else
		snprintf(what, sizeof(what),
			 "%" PRIu64 " references, %" PRIu64 " of them DMA pins",
			 rr->refs, rr->pinned);
	if (rr->expected)
		snprintf(mine, sizeof(mine), " (%" PRIu64 " of them the owner's)",
			 rr->expected);
	n = snprintf(buf, len,
		     "bytes [%s, %s) referenced outside any mapping: %s%s - %s",
		     a, b, what, mine,
		     rr->pinned ?
		     "an io_uring fixed buffer, a CUDA registration or O_DIRECT through a view that is gone?" :
		     "a pipe holding vmsplice'd pages, or direct I/O in flight?");
	if (n < 0)
		return -EINVAL;
	if ((size_t)n >= len)
		return -ENOSPC;
	return n;
}

/*
 * Append to r->err, after "op: region N", why the references are in the
 * way; returns 0 if REFS found none (or cannot tell).
 */
int pin__explain_refs(struct pin_region *r, size_t off)
{
	struct pin_ref_range rr[4];
	char line[256];
	int total, i, n, len;

	total = refs_ioctl(r->fd, 0, rr, sizeof(rr[0]), 4);
	if (total <= 0)
		return 0;
	n = total < 4 ? total : 4;
	for (i = 0; i < n && off < PIN_ERR_LEN; i++) {
		len = pin_ref_format(&rr[i], line, sizeof(line));
		if (len < 0)
			continue;
		off += (size_t)snprintf(r->err + off, PIN_ERR_LEN - off,
					"%s%s", i ? "; " : ": ", line);
	}
	if (total > n && off < PIN_ERR_LEN)
		off += (size_t)snprintf(r->err + off, PIN_ERR_LEN - off,
					"; and %d more ranges", total - n);
	if (off < PIN_ERR_LEN)
		snprintf(r->err + off, PIN_ERR_LEN - off,
			 " (the kernel cannot say who holds them; the owner's own long-term registrations over these bytes must be declared: pin_region_expect)");
	return total;
}
