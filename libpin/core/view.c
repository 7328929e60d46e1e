// SPDX-License-Identifier: MIT
/*
 * Views: a view fd over part of a region, and the view mappings made of
 * it, each counted by the kernel until unmapped.
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

static struct pin_view *view_new(int backend)
{
	struct pin_view *v = calloc(1, sizeof(*v));

	if (!v)
		return NULL;
	v->backend = backend;
	v->fd = -1;
	return v;
}

static int page_aligned(uint64_t x)
{
	return (x & ((uint64_t)sysconf(_SC_PAGESIZE) - 1)) == 0;
}

int pin_view_create(struct pin_region *r, uint64_t offset, uint64_t length,
		    unsigned flags, struct pin_view **vp)
{
	struct pinmem_view pv;
	struct pin_view *v;
	int ret;

	if (!vp)
		return -EINVAL;
	*vp = NULL;
	if (!r)
		return -EINVAL;
	if (flags & ~PIN_VIEW_WRITE)
		return pin__fail(r->err, -EINVAL, "view: unknown flags 0x%x",
				 flags);
	if (!length || !page_aligned(offset) || !page_aligned(length) ||
	    offset + length < offset || offset + length > r->size)
		return pin__fail(r->err, -EINVAL,
				 "view: range +0x%" PRIx64 " length 0x%" PRIx64 " is not a non-empty run of whole pages inside region %" PRIu64 " (0x%" PRIx64 " bytes)",
				 offset, length, r->id, r->size);
	v = view_new(r->backend);
	if (!v)
		return pin__fail(r->err, -ENOMEM, "view");
	v->region_id = r->id;
	v->offset = offset;
	v->length = length;
	v->writable = !!(flags & PIN_VIEW_WRITE);

	if (r->backend == PIN_BACKEND_PORTABLE) {
		ret = pin__portable_view(r, offset, length, flags, v);
		if (ret) {
			free(v);
			return ret;
		}
		*vp = v;
		return 0;
	}
	memset(&pv, 0, sizeof(pv));
	pv.offset = offset;
	pv.length = length;
	pv.flags = v->writable ? PINMEM_VIEW_WRITE : 0;
	ret = pin__ioctl(r->fd, PINMEM_IOC_VIEW, &pv);
	if (ret) {
		free(v);
		if (ret == -EPERM) {
			struct pin_region_info info = PIN_INIT(struct pin_region_info);
			const char *st = "not open";

			if (pin_region_info(r, &info) == 0)
				st = pin_state_name(info.state);
			return pin__fail(r->err, ret,
					 "view: region %" PRIu64 " is %s, no read-write view",
					 r->id, st);
		}
		return pin__fail(r->err, ret, "view of region %" PRIu64, r->id);
	}
	v->fd = pv.fd;
	*vp = v;
	return 0;
}

int pin_view_import(struct pin_dev *dev, int fd, struct pin_view **vp)
{
	struct pinmem_view_info vi;
	struct pin_view *v;
	int ret;

	if (!vp)
		return -EINVAL;
	*vp = NULL;
	if (!dev)
		return -EINVAL;
	if (fd < 0)
		return pin__fail(dev->err, -EBADF, "view import: fd %d", fd);
	v = view_new(dev->backend);
	if (!v)
		return pin__fail(dev->err, -ENOMEM, "view import");
	v->fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (v->fd < 0) {
		ret = -errno;
		free(v);
		return pin__fail(dev->err, ret, "view import: dup fd %d", fd);
	}
	if (dev->backend == PIN_BACKEND_PORTABLE)
		ret = pin__portable_view_import(dev, v->fd, v);
	else {
		memset(&vi, 0, sizeof(vi));
		ret = pin__ioctl(v->fd, PINMEM_IOC_VIEW_INFO, &vi);
		if (ret) {
			if (ret == -ENOTTY)
				ret = -EINVAL;
			pin__fail(dev->err, ret,
				  "view import: fd %d is not a pinmem view", fd);
		} else {
			v->region_id = vi.region_id;
			v->offset = vi.offset;
			v->length = vi.length;
			v->writable = !!(vi.flags & PINMEM_VIEW_WRITE);
		}
	}
	if (ret) {
		close(v->fd);
		free(v);
		return ret;
	}
	*vp = v;
	return 0;
}

void pin_view_close(struct pin_view *v)
{
	if (!v)
		return;
	/*
	 * Mappings stay valid (the kernel keeps them counted); this handle
	 * only forgets them. A CUDA-registered mapping would be leaked, which
	 * cuda.c prevents by keeping the view open.
	 */
	if (v->fd >= 0)
		close(v->fd);
	free(v->maps);
	free(v);
}

int pin_view_fd(const struct pin_view *v)
{
	return v ? v->fd : -EINVAL;
}

uint64_t pin_view_length(const struct pin_view *v)
{
	return v ? v->length : 0;
}

uint64_t pin_view_offset(const struct pin_view *v)
{
	return v ? v->offset : 0;
}

int pin_view_writable(const struct pin_view *v)
{
	return v ? v->writable : 0;
}

struct pin_view_mapping *pin__view_mapping(struct pin_view *v, void *addr)
{
	size_t i;

	for (i = 0; i < v->nr_maps; i++)
		if (v->maps[i].addr == addr)
			return &v->maps[i];
	return NULL;
}

int pin_view_map(struct pin_view *v, int prot, void **addrp)
{
	uint64_t file_off;
	void *p;
	int ret;

	if (!v || !addrp)
		return -EINVAL;
	*addrp = NULL;
	if (prot != PROT_READ && prot != (PROT_READ | PROT_WRITE))
		return pin__fail(v->err, -EINVAL,
				 "view map: prot must be PROT_READ or PROT_READ|PROT_WRITE");
	if (v->nr_maps == v->cap_maps) {
		size_t cap = v->cap_maps ? 2 * v->cap_maps : 4;
		struct pin_view_mapping *m;

		m = realloc(v->maps, cap * sizeof(*m));
		if (!m)
			return pin__fail(v->err, -ENOMEM, "view map");
		v->maps = m;
		v->cap_maps = cap;
	}
	/* A device view fd's offset 0 is the view's first byte; a memfd's
	 * is the region's. */
	file_off = v->backend == PIN_BACKEND_PORTABLE ? v->offset : 0;
	p = mmap(NULL, v->length, prot, MAP_SHARED, v->fd, (off_t)file_off);
	if (p == MAP_FAILED) {
		ret = -errno;
		switch (ret) {
		case -EBUSY:
			return pin__fail(v->err, ret,
					 "view map: region %" PRIu64 " is donated or a donate is waiting",
					 v->region_id);
		case -EPERM:
			return pin__fail(v->err, ret,
					 "view map: region %" PRIu64 " is sealed, no writable mapping",
					 v->region_id);
		case -EACCES:
			return pin__fail(v->err, ret,
					 "view map: the view of region %" PRIu64 " is read-only",
					 v->region_id);
		}
		return pin__fail(v->err, ret, "view map of region %" PRIu64,
				 v->region_id);
	}
	if (v->backend == PIN_BACKEND_PORTABLE)
		madvise(p, v->length, MADV_HUGEPAGE);	/* a hint; may fail */
	v->maps[v->nr_maps].addr = p;
	v->maps[v->nr_maps].prot = prot;
	v->maps[v->nr_maps].cuda_registered = 0;
	v->nr_maps++;
	*addrp = p;
	return 0;
}

int pin_view_unmap(struct pin_view *v, void *addr)
{
	struct pin_view_mapping *m;

	if (!v)
		return -EINVAL;
	m = addr ? pin__view_mapping(v, addr) : NULL;
	if (!m)
		return pin__fail(v->err, -EINVAL,
				 "view unmap: %p is not a mapping of this view", addr);
	if (m->cuda_registered)
		return pin__fail(v->err, -EBUSY,
				 "view unmap: mapping %p is registered with CUDA",
				 addr);
	if (munmap(addr, v->length))
		return pin__fail(v->err, -errno, "view unmap %p", addr);
	*m = v->maps[--v->nr_maps];
	return 0;
}
