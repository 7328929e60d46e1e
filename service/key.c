// SPDX-License-Identifier: GPL-2.0
/*
 * A file's identity, as the service keys what it holds: device, inode,
 * size, the modification, change and birth times, and which file system
 * (statfs f_fsid, which ext4, xfs and btrfs derive from the file system's
 * UUID, so that a device number handed to another file system after an
 * unmount does not name the same entry). Where the kernel cannot vouch
 * for that identity (FUSE and network file systems, whose stat is what a
 * server says), a file is keyed by its size and the SHA-256 of the bytes
 * its fd gives; where the identity does not follow the content (tmpfs and
 * its kin), it is not cached (Documentation/cache.md, "Keys").
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/vfs.h>

#include <openssl/evp.h>

#include "service.h"

#define TMPFS_MAGIC		0x01021994
#define RAMFS_MAGIC		0x858458f6
#define HUGETLBFS_MAGIC		0x958458f6
#define FUSE_SUPER_MAGIC	0x65735546
#define NFS_SUPER_MAGIC		0x6969
#define SMB2_MAGIC		0xfe534d42
#define CIFS_MAGIC		0xff534d42
#define SMB_SUPER_MAGIC		0x517b
#define V9FS_MAGIC		0x01021997
#define CEPH_SUPER_MAGIC	0x00c36400
#define AFS_FS_MAGIC		0x6b414653
#define AFS_SUPER_MAGIC		0x5346414f
#define CODA_SUPER_MAGIC	0x73757245
#define LUSTRE_SUPER_MAGIC	0x0bd00bd0
#define GPFS_SUPER_MAGIC	0x47504653
#define ORANGEFS_SUPER_MAGIC	0x20030528
#define NCP_SUPER_MAGIC		0x564c

/*
 * Where the key does not follow the content: tmpfs and its kin do not
 * update the modification time for writes through a shared mapping. Their
 * files are loaded by the client itself.
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
	}
	return NULL;
}

/*
 * Where the stat is a server's word, not the kernel's: a FUSE server says
 * what it likes, and a network file system's inode, size and times are
 * what its server answers (NFS has no f_fsid, and anonymous device numbers
 * are reused after an unmount), so a tenant's own server could name a
 * victim's file. Such files are keyed by their bytes.
 */
static int server_says_stat(long type)
{
	switch ((unsigned long)type & 0xffffffffUL) {
	case FUSE_SUPER_MAGIC:
	case NFS_SUPER_MAGIC:
	case SMB2_MAGIC:
	case CIFS_MAGIC:
	case SMB_SUPER_MAGIC:
	case V9FS_MAGIC:
	case CEPH_SUPER_MAGIC:
	case AFS_FS_MAGIC:
	case AFS_SUPER_MAGIC:
	case CODA_SUPER_MAGIC:
	case LUSTRE_SUPER_MAGIC:
	case GPFS_SUPER_MAGIC:
	case ORANGEFS_SUPER_MAGIC:
	case NCP_SUPER_MAGIC:
		return 1;
	}
	return 0;
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
	if (server_says_stat((long)sf.f_type)) {
		/* The size alone; the digest comes from reading it. */
		off_t size = k->size;

		memset(k, 0, sizeof(*k));
		k->size = size;
		k->by_content = 1;
		return 0;
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
	if (a->by_content || b->by_content)
		return a->by_content && b->by_content && a->hashed &&
		       b->hashed && a->size == b->size &&
		       !memcmp(a->sha, b->sha, sizeof(a->sha));
	return a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
	       a->fsid == b->fsid && ts_equal(&a->mtime, &b->mtime) &&
	       ts_equal(&a->ctime, &b->ctime) && ts_equal(&a->btime, &b->btime);
}

/*
 * SHA-256 from libcrypto (OpenSSL), which uses the CPU's SHA instructions
 * where it has them. A context per digest: threads share nothing.
 */
int key_digest(const void *p, size_t n, uint8_t out[32])
{
	unsigned int len = 0;

	if (EVP_Digest(p, n, out, &len, EVP_sha256(), NULL) != 1 || len != 32)
		return -EIO;
	return 0;
}

static EVP_MD_CTX *sha_begin(void)
{
	EVP_MD_CTX *c = EVP_MD_CTX_new();

	if (c && EVP_DigestInit_ex(c, EVP_sha256(), NULL) != 1) {
		EVP_MD_CTX_free(c);
		c = NULL;
	}
	return c;
}

static int sha_end(EVP_MD_CTX *c, uint8_t out[32])
{
	unsigned int len = 0;
	int ok = EVP_DigestFinal_ex(c, out, &len) == 1 && len == 32;

	EVP_MD_CTX_free(c);
	return ok ? 0 : -EIO;
}

/*
 * A by_content key's digest: the SHA-256 of the first k->size bytes the fd
 * gives, read with pread (the client's fd, so its right to read). A file
 * that ends before its size changed under us (ESTALE). Runs in a thread
 * of its own: the reads block for as long as the file's server likes.
 */
int key_hash_fd(int fd, struct cache_key *k, char *why, size_t len)
{
	const size_t chunk = 1U << 20;
	uint8_t *buf = malloc(chunk);
	EVP_MD_CTX *c = buf ? sha_begin() : NULL;
	uint64_t off = 0, size = (uint64_t)k->size;
	int ret = 0;

	k->hashed = 0;
	if (!c) {
		free(buf);
		return snprintf(why, len, "out of memory"), -ENOMEM;
	}
	while (off < size && !ret) {
		size_t want = size - off > chunk ? chunk : (size_t)(size - off);
		ssize_t n = pread(fd, buf, want, (off_t)off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			ret = -errno;
			snprintf(why, len, "read: %s", strerror(errno));
		} else if (n == 0) {
			ret = -ESTALE;
			snprintf(why, len, "read: end of file before its size: the file shrank");
		} else if (EVP_DigestUpdate(c, buf, (size_t)n) != 1) {
			ret = -EIO;
			snprintf(why, len, "SHA-256: libcrypto failed");
		}
		off += n > 0 ? (uint64_t)n : 0;
	}
	free(buf);
	if (sha_end(c, k->sha) && !ret) {
		ret = -EIO;
		snprintf(why, len, "SHA-256: libcrypto failed");
	}
	k->hashed = !ret;
	return ret;
}
