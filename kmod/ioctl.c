// SPDX-License-Identifier: GPL-2.0
/*
 * pinmem: the ioctls of the device, region and view fds, the one place
 * their arguments are handled, and the region and view fds' file
 * operations. An ioctl number is matched to the fd it is issued on (else
 * ENOTTY); its struct is copied in at the caller's size, which the number
 * carries (copy_struct_from_user(): fields past the end of the caller's
 * struct read as zero, bytes past ours must be zero, else E2BIG); its
 * fields are validated here (unknown flags, reserved fields, lengths and
 * ranges: EINVAL) and handed to the operation as kernel values; the
 * struct is copied out at the smaller of the two sizes. The operations
 * (region.c, view.c, state.c, ...) never touch user memory, and no lock
 * is held across a copy here. LIST, HOLDERS and REFS hand their records
 * to records.c, which checks the caller's record_size (EINVAL below the
 * first published one) and copies them out.
 */
#include <linux/anon_inodes.h>
#include <linux/err.h>
#include <linux/file.h>
#include <linux/fs.h>
#include <linux/log2.h>
#include <linux/numa.h>
#include <linux/overflow.h>
#include <linux/slab.h>
#include <linux/uaccess.h>

#include "pinmem.h"

/* The fds an ioctl is served on. */
#define PINMEM_ON_DEV		BIT(0)
#define PINMEM_ON_REGION	BIT(1)
#define PINMEM_ON_VIEW		BIT(2)
#define PINMEM_ON_ANY		(PINMEM_ON_DEV | PINMEM_ON_REGION | PINMEM_ON_VIEW)

/* Room for the struct of any ioctl, as the module knows it. */
union pinmem_ioc_arg {
	struct pinmem_version version;
	struct pinmem_dev_info dev_info;
	struct pinmem_alloc alloc;
	struct pinmem_list list;
	struct pinmem_holders holders;
	struct pinmem_region_info info;
	struct pinmem_view view;
	struct pinmem_view_info view_info;
	struct pinmem_populate populate;
	struct pinmem_fill fill;
	struct pinmem_transition transition;
	struct pinmem_expect expect;
	struct pinmem_refs refs;
	struct pinmem_nodes nodes;
};

/* One ioctl call: the fd's region (NULL on the device fd) and its struct. */
struct pinmem_ioc_call {
	struct pinmem_region *region;
	struct pinmem_view_file *view;	/* on a view fd */
	void __user *uarg;
	size_t usize;			/* the caller's struct: _IOC_SIZE */
	size_t ksize;			/* the module's */
	bool copied_out;		/* the handler has copied arg out */
	union pinmem_ioc_arg arg;
};

/* The fds ALLOC and VIEW make (at the end of this file). */
static const struct file_operations pinmem_region_fops;
static const struct file_operations pinmem_view_fops;

/* Copy the struct out, the bytes both sides know. */
static int pinmem_ioc_copy_out(struct pinmem_ioc_call *c)
{
	c->copied_out = true;
	if (copy_to_user(c->uarg, &c->arg, min(c->usize, c->ksize)))
		return -EFAULT;
	return 0;
}

/*
 * Install a new file as an fd only once the caller's struct, holding the
 * fd number at *fdp, has been copied out: a failed copy leaves no fd
 * behind.
 */
static int pinmem_ioc_install(struct pinmem_ioc_call *c, struct file *file,
			      __s32 *fdp)
{
	int fd = get_unused_fd_flags(O_CLOEXEC);

	if (fd < 0) {
		fput(file);
		return fd;
	}
	*fdp = fd;
	if (pinmem_ioc_copy_out(c)) {
		put_unused_fd(fd);
		fput(file);
		return -EFAULT;
	}
	fd_install(fd, file);
	return 0;
}

/* A byte range of a region: page multiples, not empty, within size. */
static int pinmem_check_range(u64 offset, u64 length, u64 size)
{
	if (!length || !PAGE_ALIGNED(offset) || !PAGE_ALIGNED(length))
		return -EINVAL;
	if (offset > size || length > size - offset)
		return -EINVAL;
	return 0;
}

static int pinmem_ioc_version(struct pinmem_ioc_call *c)
{
	struct pinmem_version *v = &c->arg.version;

	v->abi_version = PINMEM_ABI_VERSION;
	v->abi_min_compat = PINMEM_ABI_MIN_COMPAT;
	v->chunk_size = PINMEM_CHUNK_SIZE;
	return 0;
}

static int pinmem_ioc_dev_info(struct pinmem_ioc_call *c)
{
	struct pinmem_dev_info *d = &c->arg.dev_info;

	d->max_total_bytes = READ_ONCE(pinmem_max_total_bytes);
	d->max_region_bytes = READ_ONCE(pinmem_max_region_bytes);
	d->total_bytes = (u64)atomic64_read(&pinmem_totals.pages) << PAGE_SHIFT;
	d->nr_regions = atomic64_read(&pinmem_totals.regions);
	d->nr_mappings = atomic64_read(&pinmem_totals.mappings);
	d->nr_view_fds = atomic64_read(&pinmem_totals.view_fds);
	return 0;
}

/* ALLOC's fields, and where its chunks are to come from. */
static int pinmem_alloc_check(const struct pinmem_alloc *a,
			      struct pinmem_place *place)
{
	if (!a->size || a->flags & ~PINMEM_ALLOC_FLAGS || a->reserved)
		return -EINVAL;
	/* A lazy region's chunks are all order 9 (see pinmem_region_page). */
	if ((a->flags & PINMEM_ALLOC_LAZY) && (a->flags & PINMEM_ALLOC_FALLBACK))
		return -EINVAL;
	if (a->size > U64_MAX - PAGE_SIZE + 1 ||
	    PAGE_ALIGN(a->size) > READ_ONCE(pinmem_max_region_bytes))
		return -EINVAL;
	place->nid = NUMA_NO_NODE;
	place->gfp = 0;
	if (!(a->flags & PINMEM_ALLOC_NODE))
		return a->node || (a->flags & PINMEM_ALLOC_ANY_NODE) ? -EINVAL : 0;
	return pinmem_place_on_node(place, a->node,
				    a->flags & PINMEM_ALLOC_ANY_NODE);
}

static int pinmem_ioc_alloc(struct pinmem_ioc_call *c)
{
	struct pinmem_alloc *a = &c->arg.alloc;
	struct pinmem_region *region;
	struct pinmem_place place;
	struct file *file;
	int ret;

	ret = pinmem_alloc_check(a, &place);
	if (ret)
		return ret;
	ret = pinmem_region_create(PAGE_ALIGN(a->size), a->flags, &place,
				   &region);
	if (ret)
		return ret;
	file = anon_inode_getfile("[pinmem]", &pinmem_region_fops, region,
				  O_RDWR);
	if (IS_ERR(file)) {
		pinmem_region_put(region);
		return PTR_ERR(file);
	}
	a->region_id = region->id;
	return pinmem_ioc_install(c, file, &a->fd);
}

static int pinmem_list_snap(void *ctx, void *buf, u32 cap, u32 *count)
{
	return pinmem_region_list(buf, cap, count);
}

static int pinmem_ioc_list(struct pinmem_ioc_call *c)
{
	struct pinmem_list *l = &c->arg.list;
	struct pinmem_records q = {
		.snap = pinmem_list_snap,
		.size = sizeof(struct pinmem_region_info),
		.size_ver0 = PINMEM_REGION_INFO_SIZE_VER0,
		.ptr = l->regions_ptr,
		.capacity = l->capacity,
		.record_size = l->record_size,
	};

	if (l->reserved)
		return -EINVAL;
	return pinmem_records_to_user(&q, &l->count);
}

/*
 * A records query about a region: on the device fd (c->region NULL) the
 * one of region_id, visible as for HOLDERS; on a region or view fd its
 * own (region_id 0).
 */
static int pinmem_query_region(struct pinmem_ioc_call *c, u64 region_id,
			       struct pinmem_records *q, u32 *count)
{
	struct pinmem_region *region;
	int ret;

	region = pinmem_region_get_queried(c->region, region_id);
	if (IS_ERR(region))
		return PTR_ERR(region);
	q->ctx = region;
	ret = pinmem_records_to_user(q, count);
	pinmem_region_put(region);
	return ret;
}

static int pinmem_ioc_holders(struct pinmem_ioc_call *c)
{
	struct pinmem_holders *h = &c->arg.holders;
	struct pinmem_records q = {
		.walk = pinmem_holders_walk,
		.size = sizeof(struct pinmem_holder),
		.size_ver0 = PINMEM_HOLDER_SIZE_VER0,
		.ptr = h->holders_ptr,
		.capacity = h->capacity,
		.record_size = h->record_size,
	};

	if (h->reserved)
		return -EINVAL;
	return pinmem_query_region(c, h->region_id, &q, &h->count);
}

static int pinmem_ioc_refs(struct pinmem_ioc_call *c)
{
	struct pinmem_refs *r = &c->arg.refs;
	struct pinmem_records q = {
		.snap = pinmem_refs_snapshot,
		.size = sizeof(struct pinmem_ref_range),
		.size_ver0 = PINMEM_REF_RANGE_SIZE_VER0,
		.ptr = r->ranges_ptr,
		.capacity = r->capacity,
		.record_size = r->record_size,
	};

	if (r->reserved)
		return -EINVAL;
	return pinmem_query_region(c, r->region_id, &q, &r->count);
}

/* NODES: the bytes of the region on each node, u64s to bytes_ptr. */
static int pinmem_ioc_nodes(struct pinmem_ioc_call *c)
{
	struct pinmem_nodes *q = &c->arg.nodes;
	struct pinmem_region *region;
	u32 filled;
	u64 *bytes;
	int ret = 0;

	if (q->reserved)
		return -EINVAL;
	region = pinmem_region_get_queried(c->region, q->region_id);
	if (IS_ERR(region))
		return PTR_ERR(region);
	bytes = kcalloc(nr_node_ids, sizeof(*bytes), GFP_KERNEL_ACCOUNT);
	if (bytes)
		pinmem_region_nodes(region, bytes);
	pinmem_region_put(region);
	if (!bytes)
		return -ENOMEM;
	filled = min_t(u32, q->capacity, nr_node_ids);
	if (copy_to_user(u64_to_user_ptr(q->bytes_ptr), bytes,
			 array_size(filled, sizeof(*bytes))))
		ret = -EFAULT;
	kfree(bytes);
	q->count = nr_node_ids;
	return ret;
}

static int pinmem_ioc_expect(struct pinmem_ioc_call *c)
{
	const struct pinmem_expect *e = &c->arg.expect;
	u32 kind = e->flags & (PINMEM_EXPECT_PER_PAGE | PINMEM_EXPECT_PER_CHUNK);
	struct pinmem_expect_req req = {
		.pgoff = e->offset >> PAGE_SHIFT,
		.nr_pages = e->length >> PAGE_SHIFT,
		.per_page = e->flags & PINMEM_EXPECT_PER_PAGE,
		.remove = e->flags & PINMEM_EXPECT_REMOVE,
	};

	if (e->flags & ~PINMEM_EXPECT_FLAGS || e->pad || e->reserved ||
	    !is_power_of_2(kind))
		return -EINVAL;
	if (pinmem_check_range(e->offset, e->length, c->region->size))
		return -EINVAL;
	return pinmem_refs_expect(c->region, &req);
}

static int pinmem_ioc_info(struct pinmem_ioc_call *c)
{
	pinmem_region_fill_info(c->region, &c->arg.info);
	return 0;
}

static int pinmem_ioc_view(struct pinmem_ioc_call *c)
{
	struct pinmem_view *v = &c->arg.view;
	struct pinmem_view_file *view;
	struct file *file;
	int ret;

	if (v->flags & ~PINMEM_VIEW_FLAGS || v->reserved)
		return -EINVAL;
	if (pinmem_check_range(v->offset, v->length, c->region->size))
		return -EINVAL;
	ret = pinmem_view_create(c->region, v->offset >> PAGE_SHIFT,
				 v->length >> PAGE_SHIFT,
				 v->flags & PINMEM_VIEW_WRITE, &view);
	if (ret)
		return ret;
	file = anon_inode_getfile("[pinmem-view]", &pinmem_view_fops, view,
				  view->flags & PINMEM_VIEW_WRITE ?
				  O_RDWR : O_RDONLY);
	if (IS_ERR(file)) {
		pinmem_view_put(view);
		return PTR_ERR(file);
	}
	return pinmem_ioc_install(c, file, &v->fd);
}

static int pinmem_ioc_view_info(struct pinmem_ioc_call *c)
{
	struct pinmem_view_info *vi = &c->arg.view_info;
	struct pinmem_view_file *view = c->view;

	vi->region_id = view->region->id;
	vi->offset = (u64)view->pgoff << PAGE_SHIFT;
	vi->length = (u64)view->nr_pages << PAGE_SHIFT;
	vi->flags = view->flags;
	return 0;
}

static int pinmem_ioc_populate(struct pinmem_ioc_call *c)
{
	const struct pinmem_populate *p = &c->arg.populate;

	if (p->reserved[0] || p->reserved[1])
		return -EINVAL;
	if (pinmem_check_range(p->offset, p->length, c->region->size))
		return -EINVAL;
	return pinmem_populate(c->region, p->offset, p->length);
}

/*
 * FILL's range: chunk-aligned, whole chunks or up to the region's end;
 * its flags and reserved fields zero; the file offset within loff_t.
 */
static int pinmem_fill_check(struct pinmem_region *region,
			     const struct pinmem_fill *f)
{
	if (f->flags || f->reserved[0] || f->reserved[1])
		return -EINVAL;
	if (!f->length || f->offset >= region->size ||
	    f->length > region->size - f->offset)
		return -EINVAL;
	if (!IS_ALIGNED(f->offset, PINMEM_CHUNK_SIZE))
		return -EINVAL;
	if (!IS_ALIGNED(f->length, PINMEM_CHUNK_SIZE) &&
	    f->offset + f->length != region->size)
		return -EINVAL;
	if (f->file_offset > LLONG_MAX - f->length)
		return -EINVAL;
	return 0;
}

/* FILL's fd: open for reading (EBADF), a regular file or block device. */
static struct file *pinmem_fill_file(int fd)
{
	struct file *file = fget(fd);
	umode_t mode;

	if (!file)
		return ERR_PTR(-EBADF);
	mode = file_inode(file)->i_mode;
	if (!(file->f_mode & FMODE_READ)) {
		fput(file);
		return ERR_PTR(-EBADF);
	}
	if (!S_ISREG(mode) && !S_ISBLK(mode)) {
		fput(file);
		return ERR_PTR(-EINVAL);
	}
	return file;
}

/* The count read goes out before the chunks are published (fill.c). */
static int pinmem_ioc_fill(struct pinmem_ioc_call *c)
{
	struct pinmem_fill *f = &c->arg.fill;
	struct pinmem_fill_job job;
	struct file *file;
	int ret;

	ret = pinmem_fill_check(c->region, f);
	if (ret)
		return ret;
	file = pinmem_fill_file(f->fd);
	if (IS_ERR(file))
		return PTR_ERR(file);
	ret = pinmem_fill_read(c->region, file, f->file_offset, f->offset,
			       f->length, &job);
	f->bytes = job.bytes;
	if (!ret)
		ret = pinmem_ioc_copy_out(c);
	pinmem_fill_finish(c->region, &job, ret);
	fput(file);
	return ret;
}

/* SEAL, PUBLISH and REOPEN take no arguments: every field is zero. */
static int pinmem_transition_check(const struct pinmem_transition *t)
{
	return t->flags || t->timeout_ms || t->reserved ? -EINVAL : 0;
}

static int pinmem_ioc_seal(struct pinmem_ioc_call *c)
{
	return pinmem_transition_check(&c->arg.transition) ?:
	       pinmem_seal(c->region);
}

static int pinmem_ioc_publish(struct pinmem_ioc_call *c)
{
	return pinmem_transition_check(&c->arg.transition) ?:
	       pinmem_publish(c->region);
}

static int pinmem_ioc_reopen(struct pinmem_ioc_call *c)
{
	return pinmem_transition_check(&c->arg.transition) ?:
	       pinmem_reopen(c->region);
}

/* DONATE: flags, and timeout_ms only with PINMEM_DONATE_WAIT. */
static int pinmem_ioc_donate(struct pinmem_ioc_call *c)
{
	const struct pinmem_transition *t = &c->arg.transition;

	if (t->reserved || t->flags & ~PINMEM_DONATE_FLAGS)
		return -EINVAL;
	if (t->timeout_ms && !(t->flags & PINMEM_DONATE_WAIT))
		return -EINVAL;
	return pinmem_donate(c->region, t->flags & PINMEM_DONATE_WAIT,
			     t->timeout_ms);
}

/* An ioctl: its number (with the module's struct size) and its handler. */
struct pinmem_ioc {
	unsigned int cmd;
	u16 size_ver0;			/* the struct's first published size */
	u16 fds;			/* PINMEM_ON_* */
	int (*handle)(struct pinmem_ioc_call *c);
};

/* The module's struct is never smaller than the first published one. */
#define PINMEM_IOC(name, type, fds, fn)					\
	{ PINMEM_IOC_##name, PINMEM_##type##_SIZE_VER0 +		\
	  BUILD_BUG_ON_ZERO(_IOC_SIZE(PINMEM_IOC_##name) <		\
			    PINMEM_##type##_SIZE_VER0), fds, fn }

static const struct pinmem_ioc pinmem_iocs[] = {
	PINMEM_IOC(VERSION, VERSION, PINMEM_ON_ANY, pinmem_ioc_version),
	PINMEM_IOC(DEV_INFO, DEV_INFO, PINMEM_ON_DEV, pinmem_ioc_dev_info),
	PINMEM_IOC(ALLOC, ALLOC, PINMEM_ON_DEV, pinmem_ioc_alloc),
	PINMEM_IOC(LIST, LIST, PINMEM_ON_DEV, pinmem_ioc_list),
	PINMEM_IOC(HOLDERS, HOLDERS, PINMEM_ON_ANY, pinmem_ioc_holders),
	PINMEM_IOC(INFO, REGION_INFO, PINMEM_ON_REGION | PINMEM_ON_VIEW,
		   pinmem_ioc_info),
	PINMEM_IOC(VIEW, VIEW, PINMEM_ON_REGION, pinmem_ioc_view),
	PINMEM_IOC(VIEW_INFO, VIEW_INFO, PINMEM_ON_VIEW, pinmem_ioc_view_info),
	PINMEM_IOC(POPULATE, POPULATE, PINMEM_ON_REGION, pinmem_ioc_populate),
	PINMEM_IOC(FILL, FILL, PINMEM_ON_REGION, pinmem_ioc_fill),
	PINMEM_IOC(SEAL, TRANSITION, PINMEM_ON_REGION, pinmem_ioc_seal),
	PINMEM_IOC(DONATE, TRANSITION, PINMEM_ON_REGION, pinmem_ioc_donate),
	PINMEM_IOC(PUBLISH, TRANSITION, PINMEM_ON_REGION, pinmem_ioc_publish),
	PINMEM_IOC(REOPEN, TRANSITION, PINMEM_ON_REGION, pinmem_ioc_reopen),
	PINMEM_IOC(EXPECT, EXPECT, PINMEM_ON_REGION, pinmem_ioc_expect),
	PINMEM_IOC(REFS, REFS, PINMEM_ON_ANY, pinmem_ioc_refs),
	PINMEM_IOC(NODES, NODES, PINMEM_ON_ANY, pinmem_ioc_nodes),
};

/*
 * The ioctl cmd names on an fd of kind on: the same type, number and
 * direction as one of ours, and a size from its first published one up.
 */
static const struct pinmem_ioc *pinmem_ioc_find(unsigned int cmd,
						unsigned int on)
{
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(pinmem_iocs); i++) {
		const struct pinmem_ioc *ioc = &pinmem_iocs[i];

		if ((cmd & ~IOCSIZE_MASK) != (ioc->cmd & ~IOCSIZE_MASK))
			continue;
		if (!(ioc->fds & on) || _IOC_SIZE(cmd) < ioc->size_ver0)
			return NULL;
		return ioc;
	}
	return NULL;
}

static long pinmem_ioctl(unsigned int on, struct pinmem_region *region,
			 struct pinmem_view_file *view, unsigned int cmd,
			 unsigned long arg)
{
	const struct pinmem_ioc *ioc = pinmem_ioc_find(cmd, on);
	struct pinmem_ioc_call c;
	int ret;

	if (!ioc)
		return -ENOTTY;
	memset(&c, 0, sizeof(c));
	c.region = region;
	c.view = view;
	c.uarg = (void __user *)arg;
	c.usize = _IOC_SIZE(cmd);
	c.ksize = _IOC_SIZE(ioc->cmd);
	if (_IOC_DIR(cmd) & _IOC_WRITE) {
		ret = copy_struct_from_user(&c.arg, c.ksize, c.uarg, c.usize);
		if (ret)
			return ret;
	}
	ret = ioc->handle(&c);
	if (!ret && (_IOC_DIR(cmd) & _IOC_READ) && !c.copied_out)
		ret = pinmem_ioc_copy_out(&c);
	return ret;
}

long pinmem_dev_ioctl(struct file *file, unsigned int cmd, unsigned long arg)
{
	return pinmem_ioctl(PINMEM_ON_DEV, NULL, NULL, cmd, arg);
}

static long pinmem_region_ioctl(struct file *file, unsigned int cmd,
				unsigned long arg)
{
	return pinmem_ioctl(PINMEM_ON_REGION, file->private_data, NULL, cmd,
			    arg);
}

static long pinmem_view_ioctl(struct file *file, unsigned int cmd,
			      unsigned long arg)
{
	struct pinmem_view_file *view = file->private_data;

	return pinmem_ioctl(PINMEM_ON_VIEW, view->region, view, cmd, arg);
}

static int pinmem_region_release(struct inode *inode, struct file *file)
{
	pinmem_region_put(file->private_data);
	return 0;
}

static int pinmem_view_release(struct inode *inode, struct file *file)
{
	pinmem_view_put(file->private_data);
	return 0;
}

/* The region fd: ALLOC makes it; its mmaps are owner mappings (mmap.c). */
static const struct file_operations pinmem_region_fops = {
	.owner		= THIS_MODULE,
	.release	= pinmem_region_release,
	.mmap		= pinmem_region_mmap,
	.unlocked_ioctl	= pinmem_region_ioctl,
	.compat_ioctl	= compat_ptr_ioctl,
	.llseek		= noop_llseek,
};

/* A view fd: VIEW makes it; its mmaps are view mappings (mmap.c). */
static const struct file_operations pinmem_view_fops = {
	.owner		= THIS_MODULE,
	.release	= pinmem_view_release,
	.mmap		= pinmem_view_mmap,
	.unlocked_ioctl	= pinmem_view_ioctl,
	.compat_ioctl	= compat_ptr_ioctl,
	.llseek		= noop_llseek,
};
