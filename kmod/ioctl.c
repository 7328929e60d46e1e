// SPDX-License-Identifier: GPL-2.0
/*
 * pinmem: ioctls of the device, region and view fds. Arguments are
 * validated here (unknown flags, reserved fields, lengths: EINVAL); every
 * struct copied out is zeroed first. Foreign ioctl numbers: ENOTTY.
 */
#include <linux/err.h>
#include <linux/file.h>
#include <linux/fs.h>
#include <linux/log2.h>
#include <linux/overflow.h>
#include <linux/slab.h>
#include <linux/uaccess.h>

#include "pinmem.h"

static int pinmem_ioc_version(void __user *arg)
{
	struct pinmem_version v;

	memset(&v, 0, sizeof(v));
	v.abi_version = PINMEM_ABI_VERSION;
	v.abi_min_compat = PINMEM_ABI_MIN_COMPAT;
	v.chunk_size = PINMEM_CHUNK_SIZE;
	return copy_to_user(arg, &v, sizeof(v)) ? -EFAULT : 0;
}

static int pinmem_ioc_dev_info(void __user *arg)
{
	struct pinmem_dev_info d;

	memset(&d, 0, sizeof(d));
	d.max_total_bytes = READ_ONCE(pinmem_max_total_bytes);
	d.max_region_bytes = READ_ONCE(pinmem_max_region_bytes);
	d.total_bytes = (u64)atomic64_read(&pinmem_totals.pages) << PAGE_SHIFT;
	d.nr_regions = atomic64_read(&pinmem_totals.regions);
	d.nr_mappings = atomic64_read(&pinmem_totals.mappings);
	d.nr_view_fds = atomic64_read(&pinmem_totals.view_fds);
	return copy_to_user(arg, &d, sizeof(d)) ? -EFAULT : 0;
}

/*
 * Install a new file as an fd only once the caller's struct, holding the
 * fd number, has been copied out: a failed copy leaves no fd behind.
 */
static int pinmem_install_fd(struct file *file, void __user *arg,
			     void *karg, size_t size, __s32 *fdp)
{
	int fd = get_unused_fd_flags(O_CLOEXEC);

	if (fd < 0) {
		fput(file);
		return fd;
	}
	*fdp = fd;
	if (copy_to_user(arg, karg, size)) {
		put_unused_fd(fd);
		fput(file);
		return -EFAULT;
	}
	fd_install(fd, file);
	return 0;
}

static int pinmem_ioc_alloc(void __user *arg)
{
	struct pinmem_region *region;
	struct pinmem_place place;
	struct pinmem_alloc a;
	struct file *file;
	u64 size;
	int ret;

	if (copy_from_user(&a, arg, sizeof(a)))
		return -EFAULT;
	if (!a.size || a.flags & ~PINMEM_ALLOC_FLAGS || a.reserved)
		return -EINVAL;
	/* A lazy region's chunks are all order 9 (see pinmem_region_page). */
	if ((a.flags & PINMEM_ALLOC_LAZY) && (a.flags & PINMEM_ALLOC_FALLBACK))
		return -EINVAL;
	ret = pinmem_place_from_alloc(&a, &place);
	if (ret)
		return ret;
	if (a.size > U64_MAX - PAGE_SIZE + 1)
		return -EINVAL;
	size = PAGE_ALIGN(a.size);
	if (size > READ_ONCE(pinmem_max_region_bytes))
		return -EINVAL;

	ret = pinmem_region_create(size, a.flags, &place, &region);
	if (ret)
		return ret;
	file = pinmem_region_file(region);
	if (IS_ERR(file)) {
		pinmem_region_put(region);
		return PTR_ERR(file);
	}
	a.region_id = region->id;
	return pinmem_install_fd(file, arg, &a, sizeof(a), &a.fd);
}

/*
 * Snapshot records into a kernel buffer, sized by what exists rather than
 * by the caller's capacity: ask for the count first, then fill, again
 * (with room to grow) if the count grew in between. A process that keeps
 * adding mappings must not starve the query: after the last try the
 * records taken stand as the whole answer, count included, so that
 * count and the records filled always agree. Returns the buffer (NULL
 * when no record is to be copied), its record count in *filled and the
 * total in *count.
 */
static void *pinmem_snapshot(u32 (*snap)(void *ctx, void *buf, u32 cap),
			     void *ctx, size_t size, u32 capacity,
			     u32 *filled, u32 *count)
{
	void *buf = NULL;
	u32 n = 0;
	int tries;

	for (tries = 0; ; tries++) {
		*count = snap(ctx, buf, n);
		if (*count <= n || n == capacity)
			break;
		if (tries == 4) {
			*count = n;
			break;
		}
		kvfree(buf);
		n = min_t(u64, (u64)*count + *count / 4 + 16, capacity);
		buf = kvcalloc(n, size, GFP_KERNEL_ACCOUNT);
		if (!buf)
			return ERR_PTR(-ENOMEM);
	}
	*filled = min(*count, n);
	return buf;
}

/*
 * Snapshot records and copy up to capacity of them to ptr; the total
 * goes to *count. 0 or -errno.
 */
static int pinmem_snapshot_to_user(u32 (*snap)(void *ctx, void *buf, u32 cap),
				   void *ctx, size_t size, u32 capacity,
				   u64 ptr, u32 *count)
{
	u32 filled;
	void *buf;
	int ret = 0;

	buf = pinmem_snapshot(snap, ctx, size, capacity, &filled, count);
	if (IS_ERR(buf))
		return PTR_ERR(buf);
	if (copy_to_user(u64_to_user_ptr(ptr), buf, array_size(filled, size)))
		ret = -EFAULT;
	kvfree(buf);
	return ret;
}

static u32 pinmem_list_snap(void *ctx, void *buf, u32 cap)
{
	return pinmem_region_list(buf, cap);
}

static int pinmem_ioc_list(void __user *arg)
{
	struct pinmem_list l;
	u32 count;
	int ret;

	if (copy_from_user(&l, arg, sizeof(l)))
		return -EFAULT;
	if (l.reserved)
		return -EINVAL;
	ret = pinmem_snapshot_to_user(pinmem_list_snap, NULL,
				      sizeof(struct pinmem_region_info),
				      l.capacity, l.regions_ptr, &count);
	if (ret)
		return ret;
	l.count = count;
	return copy_to_user(arg, &l, sizeof(l)) ? -EFAULT : 0;
}

/* HOLDERS for a region already found; q has been validated. */
static int pinmem_holders(struct pinmem_region *region,
			  struct pinmem_holders *q, void __user *arg)
{
	u32 count;
	int ret;

	ret = pinmem_snapshot_to_user(pinmem_holders_snapshot, region,
				      sizeof(struct pinmem_holder), q->capacity,
				      q->holders_ptr, &count);
	if (ret)
		return ret;
	q->count = count;
	return copy_to_user(arg, q, sizeof(*q)) ? -EFAULT : 0;
}

/* HOLDERS on the device fd (region NULL: by id) or a region or view fd. */
static int pinmem_ioc_holders(struct pinmem_region *region, void __user *arg)
{
	struct pinmem_holders q;
	int ret;

	if (copy_from_user(&q, arg, sizeof(q)))
		return -EFAULT;
	if (q.reserved)
		return -EINVAL;
	region = pinmem_region_get_queried(region, q.region_id);
	if (IS_ERR(region))
		return PTR_ERR(region);
	ret = pinmem_holders(region, &q, arg);
	pinmem_region_put(region);
	return ret;
}

/* REFS for a region already found; q has been validated. */
static int pinmem_refs(struct pinmem_region *region, struct pinmem_refs *q,
		       void __user *arg)
{
	u32 count;
	int ret;

	ret = pinmem_snapshot_to_user(pinmem_refs_snapshot, region,
				      sizeof(struct pinmem_ref_range), q->capacity,
				      q->ranges_ptr, &count);
	if (ret)
		return ret;
	q->count = count;
	return copy_to_user(arg, q, sizeof(*q)) ? -EFAULT : 0;
}

/* REFS on the device fd (by id, visible as for HOLDERS) or on a region or
 * view fd (region_id 0).
 */
static int pinmem_ioc_refs(struct pinmem_region *region, void __user *arg)
{
	struct pinmem_refs q;
	int ret;

	if (copy_from_user(&q, arg, sizeof(q)))
		return -EFAULT;
	if (q.reserved)
		return -EINVAL;
	region = pinmem_region_get_queried(region, q.region_id);
	if (IS_ERR(region))
		return PTR_ERR(region);
	ret = pinmem_refs(region, &q, arg);
	pinmem_region_put(region);
	return ret;
}

static int pinmem_ioc_expect(struct pinmem_region *region, void __user *arg)
{
	struct pinmem_expect e;
	u32 kind;

	if (copy_from_user(&e, arg, sizeof(e)))
		return -EFAULT;
	kind = e.flags & (PINMEM_EXPECT_PER_PAGE | PINMEM_EXPECT_PER_CHUNK);
	if (e.flags & ~PINMEM_EXPECT_FLAGS || e.pad || e.reserved ||
	    !is_power_of_2(kind))
		return -EINVAL;
	if (!e.length || !PAGE_ALIGNED(e.offset) || !PAGE_ALIGNED(e.length))
		return -EINVAL;
	if (e.offset > region->size || e.length > region->size - e.offset)
		return -EINVAL;
	return pinmem_refs_expect(region, &e);
}

static int pinmem_ioc_info(struct pinmem_region *region, void __user *arg)
{
	struct pinmem_region_info info;

	pinmem_region_fill_info(region, &info);
	return copy_to_user(arg, &info, sizeof(info)) ? -EFAULT : 0;
}

static int pinmem_ioc_view(struct pinmem_region *region, void __user *arg)
{
	struct pinmem_view v;
	struct file *file;
	int ret;

	if (copy_from_user(&v, arg, sizeof(v)))
		return -EFAULT;
	if (v.flags & ~PINMEM_VIEW_FLAGS || v.reserved)
		return -EINVAL;
	if (!v.length || !PAGE_ALIGNED(v.offset) || !PAGE_ALIGNED(v.length))
		return -EINVAL;
	if (v.offset > region->size || v.length > region->size - v.offset)
		return -EINVAL;
	ret = pinmem_view_create(region, &v, &file);
	if (ret)
		return ret;
	return pinmem_install_fd(file, arg, &v, sizeof(v), &v.fd);
}

static int pinmem_ioc_view_info(struct pinmem_view_file *view,
				void __user *arg)
{
	struct pinmem_view_info vi;

	memset(&vi, 0, sizeof(vi));
	vi.region_id = view->region->id;
	vi.offset = (u64)view->pgoff << PAGE_SHIFT;
	vi.length = (u64)view->nr_pages << PAGE_SHIFT;
	vi.flags = view->flags;
	return copy_to_user(arg, &vi, sizeof(vi)) ? -EFAULT : 0;
}

static int pinmem_ioc_transition(struct pinmem_region *region,
				 unsigned int cmd, void __user *arg)
{
	struct pinmem_transition t;

	if (copy_from_user(&t, arg, sizeof(t)))
		return -EFAULT;
	if (t.reserved)
		return -EINVAL;
	if (cmd == PINMEM_IOC_DONATE) {
		if (t.flags & ~PINMEM_DONATE_FLAGS)
			return -EINVAL;
		if (t.timeout_ms && !(t.flags & PINMEM_DONATE_WAIT))
			return -EINVAL;
		return pinmem_donate(region, t.flags, t.timeout_ms);
	}
	if (t.flags || t.timeout_ms)
		return -EINVAL;
	switch (cmd) {
	case PINMEM_IOC_SEAL:
		return pinmem_seal(region);
	case PINMEM_IOC_PUBLISH:
		return pinmem_publish(region);
	default:
		return pinmem_reopen(region);
	}
}

long pinmem_dev_ioctl(struct file *file, unsigned int cmd, unsigned long arg)
{
	void __user *uarg = (void __user *)arg;

	switch (cmd) {
	case PINMEM_IOC_VERSION:
		return pinmem_ioc_version(uarg);
	case PINMEM_IOC_DEV_INFO:
		return pinmem_ioc_dev_info(uarg);
	case PINMEM_IOC_ALLOC:
		return pinmem_ioc_alloc(uarg);
	case PINMEM_IOC_LIST:
		return pinmem_ioc_list(uarg);
	case PINMEM_IOC_HOLDERS:
		return pinmem_ioc_holders(NULL, uarg);
	case PINMEM_IOC_REFS:
		return pinmem_ioc_refs(NULL, uarg);
	case PINMEM_IOC_NODES:
		return pinmem_ioc_nodes(NULL, uarg);
	default:
		return -ENOTTY;
	}
}

long pinmem_region_ioctl(struct file *file, unsigned int cmd,
			 unsigned long arg)
{
	struct pinmem_region *region = file->private_data;
	void __user *uarg = (void __user *)arg;

	switch (cmd) {
	case PINMEM_IOC_VERSION:
		return pinmem_ioc_version(uarg);
	case PINMEM_IOC_INFO:
		return pinmem_ioc_info(region, uarg);
	case PINMEM_IOC_VIEW:
		return pinmem_ioc_view(region, uarg);
	case PINMEM_IOC_HOLDERS:
		return pinmem_ioc_holders(region, uarg);
	case PINMEM_IOC_REFS:
		return pinmem_ioc_refs(region, uarg);
	case PINMEM_IOC_EXPECT:
		return pinmem_ioc_expect(region, uarg);
	case PINMEM_IOC_NODES:
		return pinmem_ioc_nodes(region, uarg);
	case PINMEM_IOC_POPULATE:
		return pinmem_ioc_populate(region, uarg);
	case PINMEM_IOC_FILL:
		return pinmem_ioc_fill(region, uarg);
	case PINMEM_IOC_SEAL:
	case PINMEM_IOC_DONATE:
	case PINMEM_IOC_PUBLISH:
	case PINMEM_IOC_REOPEN:
		return pinmem_ioc_transition(region, cmd, uarg);
	default:
		return -ENOTTY;
	}
}

long pinmem_view_ioctl(struct file *file, unsigned int cmd, unsigned long arg)
{
	struct pinmem_view_file *view = file->private_data;
	void __user *uarg = (void __user *)arg;

	switch (cmd) {
	case PINMEM_IOC_VERSION:
		return pinmem_ioc_version(uarg);
	case PINMEM_IOC_INFO:
		return pinmem_ioc_info(view->region, uarg);
	case PINMEM_IOC_VIEW_INFO:
		return pinmem_ioc_view_info(view, uarg);
	case PINMEM_IOC_HOLDERS:
		return pinmem_ioc_holders(view->region, uarg);
	case PINMEM_IOC_REFS:
		return pinmem_ioc_refs(view->region, uarg);
	case PINMEM_IOC_NODES:
		return pinmem_ioc_nodes(view->region, uarg);
	default:
		return -ENOTTY;
	}
}
