// SPDX-License-Identifier: MIT
/*
 * The device handle: /dev/pinmem (with the ABI check) or the portable
 * memfd backend, plus the device-wide queries.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <uapi/pinmem.h>

#include "internal.h"

static int backend_from_env(int backend)
{
	const char *env;

	if (backend != PIN_BACKEND_AUTO)
		return backend;
	env = secure_getenv("PIN_BACKEND");
	if (!env || !*env || !strcmp(env, "auto"))
		return PIN_BACKEND_AUTO;
	if (!strcmp(env, "device"))
		return PIN_BACKEND_DEVICE;
	if (!strcmp(env, "portable"))
		return PIN_BACKEND_PORTABLE;
	return -EINVAL;
}

/* *opened tells whether open() itself worked (AUTO falls back if not). */
static int open_device(struct pin_dev *dev, int *opened)
{
	struct pinmem_version ver;
	int fd, ret;

	*opened = 0;
	fd = open(PINMEM_DEVICE_PATH, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return pin__fail(dev->err, -errno, "open %s",
				 PINMEM_DEVICE_PATH);
	*opened = 1;
	memset(&ver, 0, sizeof(ver));
	ret = pin__ioctl(fd, PINMEM_IOC_VERSION, &ver);
	if (ret) {
		close(fd);
		/* Something else sits at the path: not our device. */
		if (ret == -ENOTTY)
			ret = -ENOENT;
		return pin__fail(dev->err, ret, "%s: version query",
				 PINMEM_DEVICE_PATH);
	}
	if (ver.abi_min_compat > PINMEM_ABI_VERSION ||
	    ver.abi_version < PINMEM_ABI_MIN_COMPAT) {
		close(fd);
		return pin__fail(dev->err, -EPROTO,
				 "%s: module ABI %u (serves libraries from ABI %u) does not fit this libpin (ABI %u, needs module ABI >= %u)",
				 PINMEM_DEVICE_PATH, ver.abi_version,
				 ver.abi_min_compat, PINMEM_ABI_VERSION,
				 PINMEM_ABI_MIN_COMPAT);
	}
	dev->fd = fd;
	dev->abi_version = ver.abi_version;
	dev->abi_min_compat = ver.abi_min_compat;
	dev->chunk_size = ver.chunk_size;
	dev->backend = PIN_BACKEND_DEVICE;
	return 0;
}

int pin_open(struct pin_dev **devp, int backend)
{
	struct pin_dev *dev;
	int ret, want;

	if (!devp)
		return -EINVAL;
	*devp = NULL;
	if (backend != PIN_BACKEND_AUTO && backend != PIN_BACKEND_DEVICE &&
	    backend != PIN_BACKEND_PORTABLE)
		return -EINVAL;
	want = backend_from_env(backend);
	if (want < 0)
		return want;

	dev = calloc(1, sizeof(*dev));
	if (!dev)
		return -ENOMEM;
	dev->fd = -1;
	dev->chunk_size = PINMEM_CHUNK_SIZE;

	if (want == PIN_BACKEND_DEVICE || want == PIN_BACKEND_AUTO) {
		int opened;

		ret = open_device(dev, &opened);
		/*
		 * AUTO falls back when the device cannot be opened (absent,
		 * no permission), never past a device that answers wrongly
		 * (an ABI mismatch must be heard, not papered over).
		 */
		if (ret == 0 || want == PIN_BACKEND_DEVICE || opened) {
			if (ret) {
				free(dev);
				return ret;
			}
			*devp = dev;
			return 0;
		}
	}
	dev->backend = PIN_BACKEND_PORTABLE;
	dev->err[0] = '\0';
	*devp = dev;
	return 0;
}

void pin_close(struct pin_dev *dev)
{
	if (!dev)
		return;
	if (dev->fd >= 0)
		close(dev->fd);
	free(dev);
}

int pin_dev_backend(const struct pin_dev *dev)
{
	return dev ? dev->backend : -EINVAL;
}

int pin_dev_info(struct pin_dev *dev, struct pin_dev_info *info)
{
	struct pinmem_dev_info di;
	int ret;

	if (!dev || !info)
		return -EINVAL;
	memset(info, 0, sizeof(*info));
	info->backend = dev->backend;
	info->chunk_size = dev->chunk_size;
	if (dev->backend != PIN_BACKEND_DEVICE)
		return 0;
	memset(&di, 0, sizeof(di));
	ret = pin__ioctl(dev->fd, PINMEM_IOC_DEV_INFO, &di);
	if (ret)
		return pin__fail(dev->err, ret, "device info");
	info->abi_version = dev->abi_version;
	info->abi_min_compat = dev->abi_min_compat;
	info->max_total_bytes = di.max_total_bytes;
	info->max_region_bytes = di.max_region_bytes;
	info->total_bytes = di.total_bytes;
	info->nr_regions = di.nr_regions;
	info->nr_mappings = di.nr_mappings;
	info->nr_view_fds = di.nr_view_fds;
	return 0;
}

void pin__info_from_uapi(struct pin_region_info *info, const void *uinfo)
{
	const struct pinmem_region_info *u = uinfo;

	memset(info, 0, sizeof(*info));
	info->id = u->region_id;
	info->size = u->size;
	info->state = (int)u->state;
	info->donate_pending = !!(u->flags & PINMEM_INFO_DONATE_PENDING);
	info->chunk_order = u->chunk_order;
	info->min_order = u->min_order;
	info->nr_chunks = u->nr_chunks;
	info->nr_fallback_chunks = u->nr_fallback_chunks;
	info->owner_mappings = u->owner_mappings;
	info->view_mappings = u->view_mappings;
	info->writable_view_mappings = u->writable_view_mappings;
	info->view_fds = u->view_fds;
	info->owner_uid = (uid_t)u->owner_uid;
	info->owner_pid = (pid_t)u->owner_tgid;
}

static int portable_no_registry(struct pin_dev *dev, const char *what)
{
	return pin__fail(dev->err, -EOPNOTSUPP,
			 "%s: the portable backend (memfd) keeps no registry of regions or mappings; load pinmem.ko for /dev/pinmem",
			 what);
}

int pin_dev_list(struct pin_dev *dev, struct pin_region_info *infos,
		 size_t cap)
{
	struct pinmem_region_info *u = NULL;
	struct pinmem_list l;
	size_t i, n;
	int ret;

	if (!dev || (cap && !infos))
		return -EINVAL;
	if (dev->backend != PIN_BACKEND_DEVICE)
		return portable_no_registry(dev, "list");
	if (cap > UINT32_MAX)
		cap = UINT32_MAX;
	if (cap) {
		u = calloc(cap, sizeof(*u));
		if (!u)
			return pin__fail(dev->err, -ENOMEM, "list");
	}
	memset(&l, 0, sizeof(l));
	l.regions_ptr = (uintptr_t)u;
	l.capacity = (uint32_t)cap;
	ret = pin__ioctl(dev->fd, PINMEM_IOC_LIST, &l);
	if (ret) {
		free(u);
		return pin__fail(dev->err, ret, "list regions");
	}
	n = l.count < cap ? l.count : cap;
	for (i = 0; i < n; i++)
		pin__info_from_uapi(&infos[i], &u[i]);
	free(u);
	if (l.count > INT32_MAX)
		return INT32_MAX;
	return (int)l.count;
}

int pin_dev_holders(struct pin_dev *dev, uint64_t id,
		    struct pin_holder *holders, size_t cap)
{
	int ret;

	if (!dev || !id || (cap && !holders))
		return -EINVAL;
	if (dev->backend != PIN_BACKEND_DEVICE)
		return portable_no_registry(dev, "holders");
	ret = pin__holders_ioctl(dev->fd, id, holders, cap);
	if (ret < 0) {
		if (ret == -ENOENT)
			return pin__fail(dev->err, ret,
					 "holders: no region %llu visible to this user",
					 (unsigned long long)id);
		return pin__fail(dev->err, ret, "holders of region %llu",
				 (unsigned long long)id);
	}
	return ret;
}
