// SPDX-License-Identifier: GPL-2.0
/*
 * pinmem: the records of LIST, HOLDERS and REFS, copied to the caller's
 * array at the caller's record size: an older caller gets the fields it
 * knows, a newer one its fields past ours left as it gave them. LIST and
 * REFS snapshot into a kernel buffer first (the query's snap(), which
 * takes its own locks); HOLDERS walks its records in batches and copies
 * each batch as it goes (walk()). No lock is held across a copy, and no
 * call fills more than PINMEM_RECORDS_MAX records.
 */
#include <linux/err.h>
#include <linux/overflow.h>
#include <linux/slab.h>
#include <linux/uaccess.h>

#include "pinmem.h"
#include "testgate.h"

/* Snapshots of LIST and REFS: the last one is of the whole capacity. */
#define PINMEM_SNAPSHOT_TRIES	5

/* The caller's record size (LIST, HOLDERS, REFS): 0 is the first one. */
static int pinmem_record_size(u32 record_size, u32 size_ver0, u32 *out)
{
	if (record_size && record_size < size_ver0)
		return -EINVAL;
	*out = record_size ?: size_ver0;
	return 0;
}

/*
 * Snapshot records into a kernel buffer, sized by what exists rather than
 * by the caller's capacity: ask for the count first, then fill, again
 * (with room to grow) if the count grew in between. Records that keep
 * coming must not starve the query: the last try takes a buffer of the
 * whole capacity (at most PINMEM_RECORDS_MAX records), so that it always
 * answers, with the real count. Fewer records filled than counted then
 * means, as always, more than capacity. Returns the buffer (NULL when no
 * record is to be copied), its record count in *filled and the total in
 * *count; an ERR_PTR on failure.
 */
static void *pinmem_snapshot(const struct pinmem_records *q, u32 *filled,
			     u32 *count)
{
	void *buf = NULL;
	u32 n = 0;
	int tries, ret;

	for (tries = 0; ; tries++) {
		ret = q->snap(q->ctx, buf, n, count);
		if (ret) {
			kvfree(buf);
			return ERR_PTR(ret);
		}
		if (*count <= n || n == q->capacity)
			break;
		kvfree(buf);
		n = tries < PINMEM_SNAPSHOT_TRIES - 2 ?
		    min_t(u64, (u64)*count + *count / 4 + 16, q->capacity) :
		    q->capacity;
		buf = kvcalloc(n, q->size, GFP_KERNEL_ACCOUNT);
		if (!buf)
			return ERR_PTR(-ENOMEM);
		pinmem_gate(PINMEM_GATE_RECORDS_ROUND);
	}
	*filled = min(*count, n);
	return buf;
}

/*
 * Copy n records of size bytes from buf to the caller's array at ptr,
 * whose records are record_size bytes: each gets the bytes both know.
 */
static int pinmem_records_copy(u64 ptr, u32 record_size, const void *buf,
			       size_t size, u32 n)
{
	size_t len = min_t(size_t, record_size, size);
	u32 i;

	if (record_size == size)
		return copy_to_user(u64_to_user_ptr(ptr), buf,
				    array_size(n, size)) ? -EFAULT : 0;
	for (i = 0; i < n; i++) {
		if (copy_to_user(u64_to_user_ptr(ptr + (u64)i * record_size),
				 buf + i * size, len))
			return -EFAULT;
		cond_resched();
	}
	return 0;
}

/*
 * Put n records of the module's size, from buf, at index of the caller's
 * array (index + n <= q->capacity); q's record_size is resolved.
 */
int pinmem_records_put(const struct pinmem_records *q, u32 index,
		       const void *buf, u32 n)
{
	return pinmem_records_copy(q->ptr + (u64)index * q->record_size,
				   q->record_size, buf, q->size, n);
}

static_assert(sizeof(struct pinmem_region_info) >=
	      PINMEM_REGION_INFO_SIZE_VER0);
static_assert(sizeof(struct pinmem_holder) >= PINMEM_HOLDER_SIZE_VER0);
static_assert(sizeof(struct pinmem_ref_range) >= PINMEM_REF_RANGE_SIZE_VER0);

/*
 * Copy up to capacity records (no more than PINMEM_RECORDS_MAX) to the
 * caller; the total goes to *count. 0 or -errno.
 */
int pinmem_records_to_user(const struct pinmem_records *q, u32 *count)
{
	struct pinmem_records r = *q;
	u32 filled;
	void *buf;
	int ret;

	ret = pinmem_record_size(q->record_size, q->size_ver0, &r.record_size);
	if (ret)
		return ret;
	r.capacity = min_t(u32, q->capacity, PINMEM_RECORDS_MAX);
	if (r.walk)
		return r.walk(&r, count);
	buf = pinmem_snapshot(&r, &filled, count);
	if (IS_ERR(buf))
		return PTR_ERR(buf);
	ret = pinmem_records_put(&r, 0, buf, filled);
	kvfree(buf);
	return ret;
}
