// SPDX-License-Identifier: GPL-2.0
/*
 * A file's identity, as the service keys what it holds: device, inode,
 * size, the modification, change and birth times, and which file system
 * (statfs f_fsid, which ext4, xfs and btrfs derive from the file system's
 * UUID, so that a device number handed to another file system after an
 * unmount does not name the same entry). Files on file systems whose key
 * cannot be trusted are not cached (Documentation/cache.md, "Keys").
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>

#include "service.h"

#define TMPFS_MAGIC		0x01021994
#define RAMFS_MAGIC		0x858458f6
#define HUGETLBFS_MAGIC		0x958458f6
#define FUSE_SUPER_MAGIC	0x65735546

/*
 * Where the key does not follow the content: tmpfs and its kin do not
 * update the modification time for writes through a shared mapping, and a
 * FUSE server says whatever it likes in stat. Their files are loaded by
 * the client itself.
 */
static const char *untrusted_fs(long type)
{
	switch (type) {
	case TMPFS_MAGIC:
		return "tmpfs";
	case RAMFS_MAGIC:
		return "ramfs";
	case HUGETLBFS_MAGIC:
		return "hugetlbfs";
	case FUSE_SUPER_MAGIC:
		return "FUSE";
	}
	return NULL;
}

static int fs_identity(int fd, struct cache_key *k, char *why, size_t len)
{
	const char *name;
	struct statfs sf;

	if (fstatfs(fd, &sf) < 0)
		return snprintf(why, len, "fstatfs: %s", strerror(errno)), -errno;
	name = untrusted_fs((long)sf.f_type);
	if (name) {
		snprintf(why, len, "not cached: the file is on %s, where a file's identity (inode, size, times) does not change with its content; load it privately",
			 name);
		return -EOPNOTSUPP;
	}
	memcpy(&k->fsid, &sf.f_fsid, sizeof(k->fsid));
	return 0;
}

static void birth_time(int fd, struct cache_key *k)
{
	struct statx sx;

	if (statx(fd, "", AT_EMPTY_PATH, STATX_BTIME, &sx) == 0 &&
	    (sx.stx_mask & STATX_BTIME)) {
		k->btime.tv_sec = sx.stx_btime.tv_sec;
		k->btime.tv_nsec = sx.stx_btime.tv_nsec;
	}
}

/*
 * The identity of the file open at fd. The fd must be open for reading
 * (an O_PATH fd proves nothing about the sender's right to read) and name
 * a regular file. Runs in a member's thread: any of these calls can block
 * on a file system the client controls.
 */
int key_of_fd(int fd, struct cache_key *k, char *why, size_t len)
{
	struct stat st;
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0)
		return snprintf(why, len, "fcntl: %s", strerror(errno)), -EBADF;
	if ((fl & O_PATH) || (fl & O_ACCMODE) == O_WRONLY) {
		snprintf(why, len, "the fd is not open for reading (O_PATH or write-only): open the checkpoint with O_RDONLY");
		return -EACCES;
	}
	if (fstat(fd, &st) < 0)
		return snprintf(why, len, "fstat: %s", strerror(errno)), -errno;
	if (!S_ISREG(st.st_mode)) {
		snprintf(why, len, "the fd is not a regular file");
		return -EINVAL;
	}
	memset(k, 0, sizeof(*k));
	k->dev = st.st_dev;
	k->ino = st.st_ino;
	k->size = st.st_size;
	k->mtime = st.st_mtim;
	k->ctime = st.st_ctim;
	birth_time(fd, k);
	return fs_identity(fd, k, why, len);
}

static int ts_equal(const struct timespec *a, const struct timespec *b)
{
	return a->tv_sec == b->tv_sec && a->tv_nsec == b->tv_nsec;
}

int key_equal(const struct cache_key *a, const struct cache_key *b)
{
	return a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
	       a->fsid == b->fsid && ts_equal(&a->mtime, &b->mtime) &&
	       ts_equal(&a->ctime, &b->ctime) && ts_equal(&a->btime, &b->btime);
}
