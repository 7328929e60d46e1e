// SPDX-License-Identifier: MIT
/*
 * Who maps a region: the HOLDERS query, its formatting, and the words
 * that explain an EBUSY from seal or donate (views here; references that
 * outlive the views in refs.c).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <uapi/pinmem.h>

#include "internal.h"

static void holder_put(void *out, size_t stride, size_t i, const void *rec)
{
	const struct pinmem_holder *u = rec;
	struct pin_holder h;

	memset(&h, 0, sizeof(h));
	h.pid = (pid_t)u->tgid;
	h.kind = (int)u->kind;
	h.start = u->start;
	h.length = u->length;
	h.offset = u->offset;
	h.prot = (int)u->prot;
	h.maywrite = !!(u->flags & PINMEM_HOLDER_MAYWRITE);
	memcpy(h.comm, u->comm, sizeof(h.comm));
	h.comm[sizeof(h.comm) - 1] = '\0';
	pin__array_put(out, stride, i, &h, sizeof(h));
}

int pin__holders_ioctl(int fd, uint64_t id, void *holders, size_t stride,
		       size_t cap)
{
	struct pinmem_holders q = { .region_id = id };
	const struct pin__records recs = {
		.req = PINMEM_IOC_HOLDERS,
		.arg = &q,
		.ptr = &q.holders_ptr,
		.capacity = &q.capacity,
		.count = &q.count,
		.rec_size = sizeof(struct pinmem_holder),
		.put = holder_put,
	};

	return pin__records(fd, &recs, holders, stride, cap);
}

int pin_region_holders(struct pin_region *r, struct pin_holder *holders,
		       size_t cap)
{
	size_t stride;
	int ret;

	if (!r || pin__array_stride(holders, cap, PIN__HOLDER_SIZE, &stride))
		return -EINVAL;
	if (r->backend != PIN_BACKEND_DEVICE)
		return pin__portable_unsupported(r->err, "holders");
	ret = pin__holders_ioctl(r->fd, 0, holders, stride, cap);
	if (ret < 0)
		return pin__fail(r->err, ret, "holders of region %" PRIu64,
				 r->id);
	return ret;
}

int pin_holder_format(const struct pin_holder *h, char *buf, size_t len)
{
	const char *kind;
	char where[64];
	int n;

	if (pin__out_check(h, PIN__HOLDER_SIZE) || !buf || !len)
		return -EINVAL;
	kind = h->kind == PIN_HOLDER_OWNER ? "owner" :
	       h->kind == PIN_HOLDER_VIEW ? "view" : "mapping";
	if (h->start)
		snprintf(where, sizeof(where), "0x%" PRIx64 "-0x%" PRIx64,
			 h->start, h->start + h->length);
	else	/* withheld by the kernel: another user's or container's */
		snprintf(where, sizeof(where),
			 "(address withheld, 0x%" PRIx64 " bytes)", h->length);
	n = snprintf(buf, len, "pid %d (%s) %s %s %c%c%c at +0x%" PRIx64,
		     (int)h->pid, h->comm[0] ? h->comm : "?", kind, where,
		     (h->prot & PROT_READ) ? 'r' : '-',
		     (h->prot & PROT_WRITE) ? 'w' : '-',
		     (h->prot & PROT_EXEC) ? 'x' : '-', h->offset);
	if (n < 0)
		return -EINVAL;
	if ((size_t)n >= len)
		return -ENOSPC;
	return n;
}

/* Holders worth naming: views, or only writable views for seal. */
static int blocks(const struct pin_holder *h, int writable_only)
{
	if (h->kind != PIN_HOLDER_VIEW)
		return 0;
	return !writable_only || h->maywrite;
}

void pin__explain_busy(struct pin_region *r, const char *op, int writable_only)
{
	struct pin_holder hs[16];
	size_t i, n, off, shown = 0, count = 0;
	int total;
	char line[160];

	total = pin__holders_ioctl(r->fd, 0, hs, sizeof(hs[0]), 16);
	if (total < 0) {
		pin__fail(r->err, -EBUSY,
			  "%s: region %" PRIu64 " is in use (holders unknown: HOLDERS failed with %d)",
			  op, r->id, total);
		return;
	}
	n = (size_t)total < 16 ? (size_t)total : 16;
	for (i = 0; i < n; i++)
		count += blocks(&hs[i], writable_only);
	if ((size_t)total > n) {
		/* Only the first 16 were fetched: take the count from INFO. */
		struct pinmem_region_info ri;

		memset(&ri, 0, sizeof(ri));
		if (pin__ioctl(r->fd, PINMEM_IOC_INFO, &ri) == 0)
			count = writable_only ? ri.writable_view_mappings :
						ri.view_mappings;
	}
	if (count == 0) {
		/* No views: what holds it up are references (ABI 2). */
		off = (size_t)snprintf(r->err, PIN_ERR_LEN, "%s: region %" PRIu64,
				       op, r->id);
		if (pin__explain_refs(r, off) > 0)
			return;
	}
	off = (size_t)snprintf(r->err, PIN_ERR_LEN,
			       "%s: region %" PRIu64 " has %zu %sview mapping%s",
			       op, r->id, count,
			       writable_only ? "writable " : "",
			       count == 1 ? "" : "s");
	for (i = 0; i < n; i++) {
		int len;

		if (!blocks(&hs[i], writable_only))
			continue;
		len = pin_holder_format(&hs[i], line, sizeof(line));
		if (len < 0)
			continue;
		/* Keep room for the "and N more" tail. */
		if (off + (size_t)len + 2 + 48 >= PIN_ERR_LEN)
			break;
		off += (size_t)snprintf(r->err + off, PIN_ERR_LEN - off,
					"%s%s", shown ? "; " : ": ", line);
		shown++;
	}
	if (count > shown)
		off += (size_t)snprintf(r->err + off, PIN_ERR_LEN - off,
					"; and %zu more not listed",
					count - shown);
	if (count == 0 && off < PIN_ERR_LEN)
		/* The views went away between the failure and the query. */
		snprintf(r->err + off, PIN_ERR_LEN - off,
			 " now (the holders unmapped after the refusal)");
}
