// SPDX-License-Identifier: MIT
/*
 * The device handle: /dev/pinmem (with the ABI check) or the portable
 * memfd backend, plus the device-wide queries.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <pin.h>
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

/* The words for "the module is not loaded", the same in every tool. */
#define NO_MODULE_TEXT PINMEM_DEVICE_PATH " is absent: the pinmem module is not loaded (load it: sudo modprobe pinmem)"

/* The loaded module's version, or "?" (older modules have none). */
static void module_version(char *buf, size_t len)
{
	ssize_t n = -1;
	int fd;

	fd = open("/sys/module/pinmem/version", O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		n = read(fd, buf, len - 1);
		close(fd);
	}
	if (n <= 0)
		n = snprintf(buf, len, "?");
	buf[n] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
}

/* open() failing like this means no pinmem device is there at all. */
static int device_absent(int err)
{
	return err == ENOENT || err == ENODEV || err == ENXIO;
}

/* Set the handle's error text as written (no errno words added). */
static int fail_text(struct pin_dev *dev, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	pin__vfail(dev->err, 0, fmt, ap);
	va_end(ap);
	return err;
}

static int refused_text(struct pin_dev *dev, int err)
{
	struct group gr, *found = NULL;
	char gbuf[1024];
	struct stat st;

	if (stat(PINMEM_DEVICE_PATH, &st) == 0 && st.st_gid == 0)
		return fail_text(dev, -err,
				 "open %s: %s: the device is root's only (mode %03o): install pinmem's udev rule (60-pinmem.rules: group pinmem, mode 0660), reload the module and join group pinmem (sudo usermod -aG pinmem $USER, then log in again); or ask for the portable backend, without kernel arbitration (PIN_BACKEND=portable)",
				 PINMEM_DEVICE_PATH, strerror(err),
				 (unsigned int)(st.st_mode & 0777));
	if (stat(PINMEM_DEVICE_PATH, &st) != 0 ||
	    getgrgid_r(st.st_gid, &gr, gbuf, sizeof(gbuf), &found) || !found)
		found = NULL;
	return fail_text(dev, -err,
			 "open %s: %s: join group %s (sudo usermod -aG %s $USER, then log in again); or ask for the portable backend, without kernel arbitration (PIN_BACKEND=portable)",
			 PINMEM_DEVICE_PATH, strerror(err),
			 found ? found->gr_name : "pinmem",
			 found ? found->gr_name : "pinmem");
}

static int open_device(struct pin_dev *dev)
{
	struct pinmem_version ver;
	char modver[32];
	int fd, ret;

	fd = open(PINMEM_DEVICE_PATH, O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		ret = errno;
		if (device_absent(ret))
			return fail_text(dev, -ENOENT, NO_MODULE_TEXT);
		if (ret == EACCES || ret == EPERM)
			return refused_text(dev, ret);
		return pin__fail(dev->err, -ret, "open %s",
				 PINMEM_DEVICE_PATH);
	}
	memset(&ver, 0, sizeof(ver));
	ret = pin__ioctl(fd, PINMEM_IOC_VERSION, &ver);
	if (ret) {
		close(fd);
		/* Something else sits at the path: not our device. */
		return pin__fail(dev->err, ret == -ENOTTY ? -ENODEV : ret,
				 "%s does not answer as pinmem's device (version query)",
				 PINMEM_DEVICE_PATH);
	}
	module_version(modver, sizeof(modver));
	if (ver.abi_min_compat > PINMEM_ABI_VERSION ||
	    ver.abi_version < PINMEM_ABI_MIN_COMPAT) {
		close(fd);
		return fail_text(dev, -EPROTO,
				 "%s: module pinmem %s speaks ABI %u (serves libraries from ABI %u), this libpin %s speaks ABI %u (needs module ABI >= %u): install matching versions of the module and libpin (pinmem-dkms and libpin1 of one release), then reload the module (sudo modprobe -r pinmem && sudo modprobe pinmem)",
				 PINMEM_DEVICE_PATH, modver, ver.abi_version,
				 ver.abi_min_compat, PIN_VERSION_STRING,
				 PINMEM_ABI_VERSION, PINMEM_ABI_MIN_COMPAT);
	}
	dev->fd = fd;
	dev->abi_version = ver.abi_version;
	dev->abi_min_compat = ver.abi_min_compat;
	dev->chunk_size = ver.chunk_size;
	dev->backend = PIN_BACKEND_DEVICE;
	snprintf(dev->why, sizeof(dev->why),
		 "device %s: pinmem.ko %s, ABI %u; the kernel arbitrates donation",
		 PINMEM_DEVICE_PATH, modver, ver.abi_version);
	return 0;
}

int pin_dev_open(struct pin_dev **devp, int backend,
		 const struct pin_dev_opts *opts)
{
	struct pin_dev_opts o;
	struct pin_dev *dev;
	int ret, want;

	if (devp)
		*devp = NULL;
	ret = pin__opts_in(&o, sizeof(o), opts, PIN__DEV_OPTS_SIZE);
	if (ret)
		return ret;	/* the size is wrong: why may not be there */
	pin__why(o.why, o.why_len, "");
	if (!devp || o.flags) {
		pin__why(o.why, o.why_len, "pin_dev_open: no handle pointer, or unknown flags");
		return -EINVAL;
	}
	*devp = NULL;
	if (backend != PIN_BACKEND_AUTO && backend != PIN_BACKEND_DEVICE &&
	    backend != PIN_BACKEND_PORTABLE) {
		pin__why(o.why, o.why_len, "pin_dev_open: unknown backend");
		return -EINVAL;
	}
	want = backend_from_env(backend);
	if (want < 0) {
		pin__why(o.why, o.why_len, "PIN_BACKEND must be auto, device or portable");
		return want;
	}

	dev = calloc(1, sizeof(*dev));
	if (!dev) {
		pin__why(o.why, o.why_len, "pin_dev_open: out of memory");
		return -ENOMEM;
	}
	dev->fd = -1;
	dev->chunk_size = PINMEM_CHUNK_SIZE;

	if (want == PIN_BACKEND_DEVICE || want == PIN_BACKEND_AUTO) {
		ret = open_device(dev);
		/*
		 * AUTO falls back only when there is no device at all. A
		 * device this user may not open, or whose ABI does not fit,
		 * is an error to hear, never a silent downgrade to memory
		 * whose donation nobody arbitrates.
		 */
		if (ret == 0) {
			*devp = dev;
			return 0;
		}
		if (want == PIN_BACKEND_DEVICE || ret != -ENOENT) {
			pin__why(o.why, o.why_len, dev->err);
			free(dev);
			return ret;
		}
		snprintf(dev->why, sizeof(dev->why),
			 "portable (memfd), no kernel arbitration: %s",
			 NO_MODULE_TEXT);
	} else {
		snprintf(dev->why, sizeof(dev->why),
			 "portable (memfd), no kernel arbitration: asked for%s",
			 backend == PIN_BACKEND_AUTO ? " by PIN_BACKEND" : "");
	}
	dev->backend = PIN_BACKEND_PORTABLE;
	dev->err[0] = '\0';
	*devp = dev;
	return 0;
}

const char *pin_dev_backend_why(const struct pin_dev *dev)
{
	return dev ? dev->why : "no device handle";
}

void pin_dev_close(struct pin_dev *dev)
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

int pin_dev_info(struct pin_dev *dev, struct pin_dev_info *out)
{
	struct pin_dev_info i, *info = &i;
	struct pinmem_dev_info di;
	int ret;

	if (!dev || pin__out_check(out, PIN__DEV_INFO_SIZE))
		return -EINVAL;
	memset(info, 0, sizeof(*info));
	info->backend = dev->backend;
	info->chunk_size = dev->chunk_size;
	if (dev->backend == PIN_BACKEND_DEVICE) {
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
	}
	pin__out_put(out, info, sizeof(*info));
	return 0;
}

void pin__info_from_uapi(struct pin_region_info *info, const void *uinfo)
{
	const struct pinmem_region_info *u = uinfo;

	memset(info, 0, sizeof(*info));
	info->id = u->region_id;
	info->region_size = u->size;
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

static void region_info_put(void *out, size_t stride, size_t i,
			    const void *rec)
{
	struct pin_region_info info;

	pin__info_from_uapi(&info, rec);
	pin__array_put(out, stride, i, &info, sizeof(info));
}

int pin_dev_regions(struct pin_dev *dev, struct pin_region_info *infos,
		    size_t cap)
{
	struct pinmem_list l = { 0 };
	const struct pin__records recs = {
		.req = PINMEM_IOC_LIST,
		.arg = &l,
		.ptr = &l.regions_ptr,
		.capacity = &l.capacity,
		.count = &l.count,
		.rec_size = sizeof(struct pinmem_region_info),
		.put = region_info_put,
	};
	size_t stride;
	int ret;

	if (!dev || pin__array_stride(infos, cap, PIN__REGION_INFO_SIZE,
				      &stride))
		return -EINVAL;
	if (dev->backend != PIN_BACKEND_DEVICE)
		return portable_no_registry(dev, "list");
	ret = pin__records(dev->fd, &recs, infos, stride, cap);
	if (ret < 0)
		return pin__fail(dev->err, ret, "list regions");
	return ret;
}

int pin_dev_region_holders(struct pin_dev *dev, uint64_t id,
			   struct pin_holder *holders, size_t cap)
{
	size_t stride;
	int ret;

	if (!dev || !id ||
	    pin__array_stride(holders, cap, PIN__HOLDER_SIZE, &stride))
		return -EINVAL;
	if (dev->backend != PIN_BACKEND_DEVICE)
		return portable_no_registry(dev, "holders");
	ret = pin__holders_ioctl(dev->fd, id, holders, stride, cap);
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
