// SPDX-License-Identifier: MIT
/*
 * Regions: allocation, import, the owner mapping, queries.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <uapi/pinmem.h>

#include "internal.h"

static struct pin_region *region_new(int backend)
{
	struct pin_region *r = calloc(1, sizeof(*r));

	if (!r)
		return NULL;
	r->backend = backend;
	r->fd = -1;
	r->place.node = -1;
	return r;
}

static void region_destroy(struct pin_region *r)
{
	if (r->map)
		munmap(r->map, r->size);
	if (r->fd >= 0)
		close(r->fd);
	free(r);
}


/* Node arguments the backend cannot honour, before anything is made. */
static int alloc_node_check(struct pin_dev *dev, unsigned flags, int node)
{
	if (node < -1 || (node == -1 && (flags & PIN_REGION_ANY_NODE)))
		return pin__fail(dev->err, -EINVAL,
				 "alloc: node %d with flags 0x%x", node, flags);
	if (node == -1 || dev->backend == PIN_BACKEND_PORTABLE)
		return 0;	/* portable: pin__place_portable */
	if (dev->abi_version < 3)
		return pin__fail(dev->err, -EOPNOTSUPP,
				 "alloc on node %d: module ABI %u has no NUMA placement (ABI 3 has)",
				 node, dev->abi_version);
	return 0;
}

/* Why the module refused an allocation (err from PINMEM_IOC_ALLOC). */
static int alloc_refused(struct pin_dev *dev, int err, uint64_t size,
			 unsigned flags, int node)
{
	switch (err) {
	case -ENOSPC:
		return pin__fail(dev->err, err,
				 "alloc %" PRIu64 " bytes: over the module's max_total_bytes",
				 size);
	case -ENOMEM:
		if (node >= 0 && !(flags & PIN_REGION_ANY_NODE))
			return pin__fail(dev->err, err,
					 "alloc %" PRIu64 " bytes on node %d: the node has too little free memory (or none), or RLIMIT_MEMLOCK or the memory cgroup (PIN_REGION_ANY_NODE lets other nodes serve)",
					 size, node);
		return pin__fail(dev->err, err,
				 "alloc %" PRIu64 " bytes: RLIMIT_MEMLOCK, the memory cgroup, or no free 2 MiB pages%s",
				 size, (flags & PIN_REGION_FALLBACK) ? "" :
				 " (PIN_REGION_FALLBACK allows smaller chunks)");
	case -EINVAL:
		if (node >= 0)
			return pin__fail(dev->err, err,
					 "alloc %" PRIu64 " bytes on node %d: no such node online, or over the module's max_region_bytes",
					 size, node);
		return pin__fail(dev->err, err,
				 "alloc %" PRIu64 " bytes: over the module's max_region_bytes or invalid",
				 size);
	}
	return pin__fail(dev->err, err, "alloc %" PRIu64 " bytes", size);
}

/* A device region for r: PINMEM_IOC_ALLOC, then the size the module gave. */
static int device_alloc(struct pin_dev *dev, uint64_t size, unsigned flags,
			int node, struct pin_region *r, int lazy)
{
	struct pinmem_region_info ri;
	struct pinmem_alloc a;
	int ret;

	memset(&a, 0, sizeof(a));
	a.size = size;
	a.flags = (flags & PIN_REGION_FALLBACK) ? PINMEM_ALLOC_FALLBACK : 0;
	if (lazy && !(flags & PIN_REGION_FALLBACK) && dev->abi_version >= 4)
		a.flags |= PINMEM_ALLOC_LAZY;
	if (node >= 0) {
		a.flags |= PINMEM_ALLOC_NODE;
		a.node = node;
		if (flags & PIN_REGION_ANY_NODE)
			a.flags |= PINMEM_ALLOC_ANY_NODE;
	}
	ret = pin__ioctl(dev->fd, PINMEM_IOC_ALLOC, &a);
	if (ret)
		return alloc_refused(dev, ret, size, flags, node);
	r->fd = a.fd;
	r->id = a.region_id;
	r->lazy = !!(a.flags & PINMEM_ALLOC_LAZY);
	/* The kernel rounds up to a page; ask it rather than guess. */
	memset(&ri, 0, sizeof(ri));
	ret = pin__ioctl(r->fd, PINMEM_IOC_INFO, &ri);
	if (ret)
		return pin__fail(dev->err, ret, "alloc: region info");
	r->size = ri.size;
	return 0;
}

/*
 * lazy: a region whose memory the loader prepares step by step: portable,
 * a memfd without its pages; device (ABI 4), ALLOC_LAZY, populated by
 * POPULATE. A device region that may fall back to small chunks is
 * allocated whole (ALLOC_LAZY regions are order 9 only).
 */
static int region_alloc_node(struct pin_dev *dev, uint64_t size,
			     unsigned flags, int node, struct pin_region **rp,
			     int lazy)
{
	struct pin_region *r;
	int ret;

	if (!rp)
		return -EINVAL;
	*rp = NULL;
	if (!dev)
		return -EINVAL;
	if (flags & ~(PIN_REGION_FALLBACK | PIN_REGION_ANY_NODE))
		return pin__fail(dev->err, -EINVAL,
				 "alloc: unknown flags 0x%x", flags);
	if (size == 0)
		return pin__fail(dev->err, -EINVAL, "alloc: size 0");
	ret = alloc_node_check(dev, flags, node);
	if (ret)
		return ret;

	r = region_new(dev->backend);
	if (!r)
		return pin__fail(dev->err, -ENOMEM, "alloc");
	if (dev->backend == PIN_BACKEND_PORTABLE) {
		ret = pin__place_portable(dev->err, node, flags, size,
					  &r->place);
		if (!ret)
			ret = pin__portable_alloc(dev, size, r, lazy);
	} else {
		ret = device_alloc(dev, size, flags, node, r, lazy);
	}
	if (ret) {
		region_destroy(r);
		return ret;
	}
	*rp = r;
	return 0;
}

int pin_region_create(struct pin_dev *dev, uint64_t size,
		      const struct pin_region_opts *opts,
		      struct pin_region **rp)
{
	struct pin_region_opts o;
	int ret;

	if (rp)
		*rp = NULL;
	ret = pin__opts_in(&o, sizeof(o), opts, PIN__REGION_OPTS_SIZE);
	if (ret || !dev)
		return ret ? ret : -EINVAL;
	if (o.flags & ~(PIN_REGION_FALLBACK | PIN_REGION_ANY_NODE |
			PIN_REGION_NODE))
		return pin__fail(dev->err, -EINVAL, "alloc: unknown flags 0x%x",
				 o.flags);
	if (!(o.flags & PIN_REGION_NODE)) {
		if (o.flags & PIN_REGION_ANY_NODE)
			return pin__fail(dev->err, -EINVAL,
					 "alloc: PIN_REGION_ANY_NODE without PIN_REGION_NODE");
		o.node = -1;
	} else if (o.node < 0) {
		return pin__fail(dev->err, -EINVAL, "alloc: node %d",
				 (int)o.node);
	}
	return region_alloc_node(dev, size, o.flags & ~PIN_REGION_NODE,
				 o.node, rp, 0);
}

int pin__alloc_to_fill(struct pin_dev *dev, uint64_t size, unsigned flags,
		       int node, struct pin_region **rp)
{
	return region_alloc_node(dev, size, flags, node, rp, 1);
}

int pin_region_import(struct pin_dev *dev, int fd, struct pin_region **rp)
{
	struct pinmem_region_info ri;
	struct pinmem_view_info vi;
	struct pin_region *r;
	int ret;

	if (!rp)
		return -EINVAL;
	*rp = NULL;
	if (!dev)
		return -EINVAL;
	if (fd < 0)
		return pin__fail(dev->err, -EBADF, "region import: fd %d", fd);
	r = region_new(dev->backend);
	if (!r)
		return pin__fail(dev->err, -ENOMEM, "region import");
	r->fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (r->fd < 0) {
		ret = -errno;
		region_destroy(r);
		return pin__fail(dev->err, ret, "region import: dup fd %d", fd);
	}
	if (dev->backend == PIN_BACKEND_PORTABLE) {
		ret = pin__portable_import(dev, r->fd, r);
		if (ret) {
			region_destroy(r);
			return ret;
		}
		*rp = r;
		return 0;
	}
	memset(&vi, 0, sizeof(vi));
	ret = pin__ioctl(r->fd, PINMEM_IOC_VIEW_INFO, &vi);
	if (ret == 0) {
		region_destroy(r);
		return pin__fail(dev->err, -EINVAL,
				 "region import: fd %d is a view of region %" PRIu64 ", not a region fd (use pin_view_import)",
				 fd, (uint64_t)vi.region_id);
	}
	memset(&ri, 0, sizeof(ri));
	ret = pin__ioctl(r->fd, PINMEM_IOC_INFO, &ri);
	if (ret) {
		region_destroy(r);
		if (ret == -ENOTTY)
			ret = -EINVAL;
		return pin__fail(dev->err, ret,
				 "region import: fd %d is not a pinmem region", fd);
	}
	r->id = ri.region_id;
	r->size = ri.size;
	*rp = r;
	return 0;
}

int pin_region_close(struct pin_region *r)
{
	if (!r)
		return 0;
	if (r->cuda_registered)
		return pin__fail(r->err, -EBUSY,
				 "free: the owner mapping of region %" PRIu64 " is registered with CUDA",
				 r->id);
	region_destroy(r);
	return 0;
}

int pin_region_fd(const struct pin_region *r)
{
	return r ? r->fd : -EINVAL;
}

uint64_t pin_region_size(const struct pin_region *r)
{
	return r ? r->size : 0;
}

uint64_t pin_region_id(const struct pin_region *r)
{
	return r ? r->id : 0;
}

/* Lock a portable owner mapping; best effort, the text says why not. */
static void lock_portable(struct pin_region *r)
{
	/*
	 * Pin what we can. Not fatal: a host without the module often has
	 * a small RLIMIT_MEMLOCK; the text says so.
	 */
	if (mlock(r->map, r->size))
		pin__fail(r->err, -errno,
			  "map: mlock of region %" PRIu64 " failed, the pages are not locked (raise RLIMIT_MEMLOCK or use pinmem.ko)",
			  r->id);
	else
		r->err[0] = '\0';
	r->unlocked = 0;
}

static int region_map(struct pin_region *r, void **addrp, int lock)
{
	int prot = PROT_READ | PROT_WRITE;
	void *p;

	if (!r || !addrp)
		return -EINVAL;
	if (r->map) {
		if (lock && r->unlocked)
			lock_portable(r);
		*addrp = r->map;
		return 0;
	}
	/*
	 * A sealed memfd refuses writable shared mappings; the portable
	 * owner mapping of a sealed region is read-only.
	 */
	if (r->backend == PIN_BACKEND_PORTABLE && pin__portable_sealed(r->fd) > 0)
		prot = PROT_READ;
	p = mmap(NULL, r->size, prot, MAP_SHARED, r->fd, 0);
	if (p == MAP_FAILED)
		return pin__fail(r->err, -errno,
				 "map region %" PRIu64 " (%" PRIu64 " bytes)",
				 r->id, r->size);
	r->map = p;
	r->map_prot = prot;
	*addrp = p;
	if (r->backend == PIN_BACKEND_PORTABLE) {
		if (!r->hugetlb)
			madvise(p, r->size, MADV_HUGEPAGE);	/* a hint */
		r->unlocked = 1;
		if (lock)
			lock_portable(r);
	}
	return 0;
}

int pin_region_map(struct pin_region *r, void **addrp)
{
	return region_map(r, addrp, 1);
}

int pin_region_unmap(struct pin_region *r)
{
	if (!r)
		return -EINVAL;
	if (!r->map)
		return 0;
	if (r->cuda_registered)
		return pin__fail(r->err, -EBUSY,
				 "unmap: the owner mapping of region %" PRIu64 " is registered with CUDA",
				 r->id);
	munmap(r->map, r->size);
	r->map = NULL;
	return 0;
}

int pin_region_info(struct pin_region *r, struct pin_region_info *out)
{
	struct pinmem_region_info ri;
	struct pin_region_info info;
	int ret;

	if (!r || pin__out_check(out, PIN__REGION_INFO_SIZE))
		return -EINVAL;
	if (r->backend == PIN_BACKEND_PORTABLE) {
		ret = pin__portable_info(r, &info);
	} else {
		memset(&ri, 0, sizeof(ri));
		ret = pin__ioctl(r->fd, PINMEM_IOC_INFO, &ri);
		if (ret)
			return pin__fail(r->err, ret,
					 "info of region %" PRIu64, r->id);
		pin__info_from_uapi(&info, &ri);
	}
	if (!ret)
		pin__out_put(out, &info, sizeof(info));
	return ret;
}
