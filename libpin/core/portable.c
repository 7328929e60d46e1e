// SPDX-License-Identifier: MIT
/*
 * The portable backend: a region is a memfd (MFD_HUGETLB when the hugetlb
 * pool has room, else shmem with MADV_HUGEPAGE), a view is the same file
 * reopened through /proc/self/fd (O_RDONLY unless writable), and seal is
 * F_SEAL_WRITE. Nothing counts mappings across processes here, so donate,
 * publish, reopen and holders are not offered.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysinfo.h>
#include <unistd.h>

#include "internal.h"

#define MEMFD_NAME	"pinmem-region"
#define HUGE_2M		(2ULL << 20)

#ifndef MFD_HUGE_2MB
#define MFD_HUGE_2MB	(21U << 26)
#endif

int pin__portable_unsupported(char *err, const char *what)
{
	return pin__fail(err, -EOPNOTSUPP,
			 "%s: not supported by the portable backend (memfd): without the pinmem module there is no kernel-arbitrated donation (load pinmem.ko for /dev/pinmem)",
			 what);
}

static int make_memfd(uint64_t size, int *hugetlb)
{
	int fd;

	/* Try the hugetlb pool first; an empty pool fails at fallocate. */
	fd = memfd_create(MEMFD_NAME, MFD_CLOEXEC | MFD_ALLOW_SEALING |
			  MFD_HUGETLB | MFD_HUGE_2MB);
	if (fd >= 0) {
		uint64_t hsize = (size + HUGE_2M - 1) & ~(HUGE_2M - 1);

		if (ftruncate(fd, (off_t)hsize) == 0 &&
		    pin__fallocate(fd, 0, hsize) == 0) {
			*hugetlb = 1;
			return fd;
		}
		close(fd);
	}
	*hugetlb = 0;
	return memfd_create(MEMFD_NAME, MFD_CLOEXEC | MFD_ALLOW_SEALING);
}

/*
 * shmem's fallocate takes whatever it is asked for, up to the OOM killer:
 * refuse up front what could never be pinned (more than the machine's RAM,
 * or than RLIMIT_MEMLOCK allows where mlock would honour it).
 */
static int check_pinnable(struct pin_dev *dev, uint64_t size)
{
	struct sysinfo si;
	struct rlimit rl;

	if (!sysinfo(&si) && size / si.mem_unit > si.totalram)
		return pin__fail(dev->err, -ENOMEM,
				 "alloc %" PRIu64 " bytes: more than this machine's memory (%" PRIu64 " bytes)",
				 size, (uint64_t)si.totalram * si.mem_unit);
	if (geteuid() != 0 && !getrlimit(RLIMIT_MEMLOCK, &rl) &&
	    rl.rlim_cur != RLIM_INFINITY && size > rl.rlim_cur)
		return pin__fail(dev->err, -ENOMEM,
				 "alloc %" PRIu64 " bytes: over RLIMIT_MEMLOCK (%" PRIu64 " bytes), which limits what this user may lock in memory: raise it (ulimit -l, limits.conf, LimitMEMLOCK= of a systemd unit), or use the pinmem module (group pinmem), whose pages the kernel pins without it",
				 size, (uint64_t)rl.rlim_cur);
	return 0;
}

/*
 * fallocate a memfd's range, -errno. shmem stops at any pending signal
 * with EINTR, and io_uring's task work counts as one (TIF_NOTIFY_SIGNAL):
 * a thread that has just closed a ring gets EINTR once, with nothing to
 * deliver; the work runs on the way back to user space, so try again.
 */
int pin__fallocate(int fd, uint64_t off, uint64_t len)
{
	int ret;

	do
		ret = fallocate(fd, 0, (off_t)off, (off_t)len) ? -errno : 0;
	while (ret == -EINTR);
	return ret;
}

/*
 * Allocate all of a shmem memfd's pages. fallocate would do it without
 * a mapping, but where shmem THP is "advise" only the faults of a
 * MADV_HUGEPAGE mapping get huge pages, and fallocate would fix them at
 * 4 KiB: there they are allocated through such a mapping, for the time
 * of the call. -errno.
 */
static int allocate_pages(int fd, uint64_t size)
{
	void *p;
	int ret = 0;

	if (!pin__shmem_thp_advise(PIN_THP_SYSFS))
		return pin__fallocate(fd, 0, size);
	p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		return -errno;
	madvise(p, size, MADV_HUGEPAGE);
	do
		ret = madvise(p, size, MADV_POPULATE_WRITE) ? -errno : 0;
	while (ret == -EINTR);	/* as pin__fallocate */
	munmap(p, size);
	/* Before Linux 5.14 there is no MADV_POPULATE_WRITE. */
	if (ret == -EINVAL)
		ret = pin__fallocate(fd, 0, size);
	/* Populating is refused for memory with EFAULT (SIGBUS). */
	return ret == -EFAULT ? -ENOMEM : ret;
}

/*
 * The memfd of size bytes, and its pages unless the loader pins them
 * itself, step by step (fill.c), so that ENOMEM shows here. -errno.
 */
static int make_region_memfd(uint64_t size, int lazy, int *hugetlb)
{
	int fd, ret;

	fd = make_memfd(size, hugetlb);
	if (fd < 0)
		return -errno;
	if (!*hugetlb) {
		ret = ftruncate(fd, (off_t)size) ? -errno : 0;
		if (!ret && !lazy)
			ret = allocate_pages(fd, size);
		if (ret) {
			close(fd);
			return ret == -ENOSPC ? -ENOMEM : ret;
		}
	}
	return fd;
}

int pin__portable_alloc(struct pin_dev *dev, uint64_t size,
			struct pin_region *r, int lazy)
{
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
	struct pin__place_scope scope;
	struct stat st;
	int fd, ret;

	if (size > (uint64_t)INT64_MAX - HUGE_2M)
		return pin__fail(dev->err, -EINVAL,
				 "alloc %" PRIu64 " bytes: too large", size);
	size = (size + page - 1) & ~(page - 1);
	ret = check_pinnable(dev, size);
	if (ret)
		return ret;
	/* The pages come from the policy of the thread that allocates them. */
	ret = pin__place_enter(&r->place, &scope);
	if (ret)
		return pin__fail(dev->err, ret,
				 "alloc on node %d: set_mempolicy (is the node outside this process's cpuset?)",
				 r->place.node);
	fd = make_region_memfd(size, lazy, &r->hugetlb);
	pin__place_leave(&scope);
	if (fd < 0)
		return pin__fail(dev->err, fd, "alloc %" PRIu64 " bytes (memfd%s)",
				 size, r->place.node >= 0 ? ", on a node" : "");
	if (fstat(fd, &st)) {
		ret = -errno;
		close(fd);
		return pin__fail(dev->err, ret, "alloc: fstat");
	}
	r->fd = fd;
	r->id = (uint64_t)st.st_ino;
	r->size = (uint64_t)st.st_size;
	r->owner_pid = getpid();
	return 0;
}

static int is_memfd(int fd)
{
	char path[64], target[128];
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	n = readlink(path, target, sizeof(target) - 1);
	if (n < 0)
		return 0;
	target[n] = '\0';
	return !strncmp(target, "/memfd:" MEMFD_NAME,
			strlen("/memfd:" MEMFD_NAME));
}

int pin__portable_import(struct pin_dev *dev, int fd, struct pin_region *r)
{
	struct stat st;
	int fl;

	if (!is_memfd(fd))
		return pin__fail(dev->err, -EINVAL,
				 "region import: fd is not a libpin memfd (portable backend)");
	fl = fcntl(fd, F_GETFL);
	if (fl < 0 || (fl & O_ACCMODE) != O_RDWR)
		return pin__fail(dev->err, -EINVAL,
				 "region import: fd is a read-only view, not a region (use pin_view_import)");
	if (fstat(fd, &st))
		return pin__fail(dev->err, -errno, "region import: fstat");
	r->id = (uint64_t)st.st_ino;
	r->size = (uint64_t)st.st_size;
	/* A hugetlbfs inode reports 2 MiB blocks. */
	r->hugetlb = st.st_blksize == (blksize_t)HUGE_2M;
	return 0;
}

/* 1 if the memfd is write-sealed, 0 if not, -errno on failure. */
int pin__portable_sealed(int fd)
{
	int seals = fcntl(fd, F_GET_SEALS);

	if (seals < 0)
		return -errno;
	return !!(seals & F_SEAL_WRITE);
}

/*
 * Swap the owner mapping, in place, for one of protection prot taken from
 * a file of access mode acc: a read-only one from an O_RDONLY file does not
 * count as writable for F_SEAL_WRITE.
 */
static int remap_owner(struct pin_region *r, int acc, int prot)
{
	char path[64];
	void *p;
	int fd, ret = 0;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", r->fd);
	fd = open(path, acc | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	p = mmap(r->map, r->size, prot, MAP_SHARED | MAP_FIXED, fd, 0);
	if (p == MAP_FAILED) {
		ret = -errno;
		/*
		 * A failed MAP_FIXED may already have unmapped the old range;
		 * msync says whether it is still mapped. If not, the handle
		 * has no owner mapping any more (the next map makes one).
		 */
		if (msync(r->map, r->size, MS_ASYNC) && errno == ENOMEM) {
			r->map = NULL;
			r->map_prot = 0;
		}
	} else {
		mlock(p, r->size);	/* best effort, as at map time */
		r->unlocked = 0;
	}
	close(fd);
	if (!ret)
		r->map_prot = prot;
	return ret;
}

int pin__portable_seal(struct pin_region *r)
{
	int ret, sealed, remapped = 0;

	sealed = pin__portable_sealed(r->fd);
	if (sealed < 0)
		return pin__fail(r->err, sealed, "seal: F_GET_SEALS");
	if (sealed)
		return 0;
	if (r->map && (r->map_prot & PROT_WRITE)) {
		/*
		 * memfd counts our own read-write owner mapping as a writable
		 * mapping; make it read-only first (same address, same pages).
		 */
		if (r->cuda_registered)
			return pin__fail(r->err, -EBUSY,
					 "seal: the portable backend must remap the owner mapping read-only, but it is registered with CUDA");
		ret = remap_owner(r, O_RDONLY, PROT_READ);
		if (ret)
			return pin__fail(r->err, ret,
					 "seal: remapping the owner mapping read-only");
		remapped = 1;
	}
	if (fcntl(r->fd, F_ADD_SEALS,
		  F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK) == 0)
		return 0;
	ret = -errno;
	if (remapped)
		remap_owner(r, O_RDWR, PROT_READ | PROT_WRITE);
	if (ret == -EBUSY)
		return pin__fail(r->err, ret,
				 "seal: region %" PRIu64 " still has writable shared mappings (the portable backend cannot say whose: memfd does not list holders)",
				 r->id);
	return pin__fail(r->err, ret, "seal: F_ADD_SEALS on region %" PRIu64,
			 r->id);
}

int pin__portable_view(struct pin_region *r, uint64_t offset,
		       uint64_t length, unsigned flags, struct pin_view *v)
{
	char path[64];
	int fd, sealed;

	/* hugetlbfs maps and unmaps in whole huge pages only. */
	if (r->hugetlb && ((offset | length) & (HUGE_2M - 1)))
		return pin__fail(r->err, -EINVAL,
				 "view: region %" PRIu64 " is a hugetlb memfd (portable backend): views must start and end on 2 MiB boundaries",
				 r->id);
	if (flags & PIN_VIEW_WRITE) {
		sealed = pin__portable_sealed(r->fd);
		if (sealed < 0)
			return pin__fail(r->err, sealed, "view: F_GET_SEALS");
		if (sealed)
			return pin__fail(r->err, -EPERM,
					 "view: region %" PRIu64 " is sealed, no read-write view",
					 r->id);
	}
	snprintf(path, sizeof(path), "/proc/self/fd/%d", r->fd);
	fd = open(path, ((flags & PIN_VIEW_WRITE) ? O_RDWR : O_RDONLY) |
		  O_CLOEXEC);
	if (fd < 0)
		return pin__fail(r->err, -errno, "view: reopen %s", path);
	v->fd = fd;
	return 0;
}

int pin__portable_view_import(struct pin_dev *dev, int fd, struct pin_view *v)
{
	struct stat st;
	int fl;

	if (!is_memfd(fd))
		return pin__fail(dev->err, -EINVAL,
				 "view import: fd is not a libpin memfd (portable backend)");
	fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fstat(fd, &st))
		return pin__fail(dev->err, -errno, "view import");
	/* A memfd carries no range: the imported view is the whole region. */
	v->region_id = (uint64_t)st.st_ino;
	v->offset = 0;
	v->length = (uint64_t)st.st_size;
	v->writable = (fl & O_ACCMODE) == O_RDWR;
	return 0;
}

int pin__portable_info(struct pin_region *r, struct pin_region_info *info)
{
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
	struct stat st;
	int sealed;

	sealed = pin__portable_sealed(r->fd);
	if (sealed < 0)
		return pin__fail(r->err, sealed, "info: F_GET_SEALS");
	if (fstat(r->fd, &st))
		return pin__fail(r->err, -errno, "info: fstat");
	memset(info, 0, sizeof(*info));
	info->id = r->id;
	info->region_size = r->size;
	info->state = sealed ? PIN_STATE_SEALED : PIN_STATE_OPEN;
	info->chunk_order = 9;
	if (r->hugetlb) {
		info->min_order = 9;
		info->nr_chunks = (r->size + HUGE_2M - 1) / HUGE_2M;
	} else {
		/* Transparent huge pages are not guaranteed: count pages. */
		info->min_order = 0;
		info->nr_fallback_chunks = r->size / page;
	}
	/* Only what this handle knows: nobody counts mappings here. */
	info->owner_mappings = r->map ? 1 : 0;
	info->owner_uid = st.st_uid;
	info->owner_pid = r->owner_pid;
	return 0;
}
