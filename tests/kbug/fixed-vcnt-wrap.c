// SPDX-License-Identifier: GPL-2.0
/*
 * Reproducer for a block-layer bug in Linux 6.1 and 6.12 (and every kernel
 * between them we read): an O_DIRECT read or write through an io_uring
 * registered (fixed) buffer made of 4 KiB pages, started at a bvec from
 * which exactly 65537 (or 131073, ...) bvecs remain to the end of the
 * registered buffer, is sent to the driver as a one-segment request.
 *
 * Why (Documentation/kernel-bug-fixed-vcnt.md has the whole analysis):
 * io_import_fixed() hands the block layer an ITER_BVEC whose nr_segs is the
 * number of bvecs left in the *registered buffer*, not in the request.
 * bio_iov_bvec_set() stores it in bio->bi_vcnt, an unsigned short, so it
 * wraps modulo 65536. When it wraps to 1, bio_may_exceed_limits() (6.1) /
 * bio_may_need_split() (6.12) see "one bvec of at most PAGE_SIZE" and skip
 * bio_split_rw(): the request is counted as 1 physical segment while
 * blk_rq_map_sg() maps one per page. Two pages trip the WARN in
 * __blk_rq_map_sg(); more overrun the driver's scatterlist (virtio-blk
 * allocates rq->nr_phys_segments entries) and corrupt kernel memory.
 *
 * Needs liburing only.
 *
 *   fixed-vcnt-wrap FILE PAGES LEFT LEN [write]
 *
 * registers one buffer of PAGES 4 KiB pages (memfd, so never a huge page),
 * and issues one READ_FIXED (or WRITE_FIXED) of LEN bytes at file offset 0
 * from the page at which LEFT bvecs remain (PAGES - LEFT). LEFT = 65537
 * triggers the bug; any other LEFT below 65536 is the control. FILE must
 * allow O_DIRECT (ext4 on a block device; tmpfs on 6.1 does not) and hold
 * LEN bytes. Reads are checked against a buffered pread of the same bytes.
 * Exit 0: the transfer completed and the bytes match; 1: it did not; 77:
 * cannot run here (no O_DIRECT, io_uring refused, file too short).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define PG	4096UL

static int fail(const char *what, int err)
{
	fprintf(stderr, "fixed-vcnt-wrap: %s: %s\n", what, strerror(err));
	return err == EINVAL || err == EOPNOTSUPP || err == ENOSYS ? 77 : 1;
}

/* PAGES pages of shared memory, populated: 4 KiB pages, one bvec each. */
static char *map_pages(unsigned long pages)
{
	int fd = memfd_create("fixed-vcnt-wrap", MFD_CLOEXEC);
	char *p;

	if (fd < 0 || ftruncate(fd, pages * PG) < 0)
		return NULL;
	p = mmap(NULL, pages * PG, PROT_READ | PROT_WRITE,
		 MAP_SHARED | MAP_POPULATE, fd, 0);
	close(fd);
	return p == MAP_FAILED ? NULL : p;
}

int main(int argc, char **argv)
{
	unsigned long pages, left, len, at;
	struct io_uring_cqe *cqe;
	struct io_uring_sqe *sqe;
	struct io_uring ring;
	struct iovec iov;
	char *buf, *want;
	struct stat sb;
	int fd, write, ret;

	if (argc < 5) {
		fprintf(stderr, "usage: %s FILE PAGES LEFT LEN [write]\n",
			argv[0]);
		return 2;
	}
	pages = strtoul(argv[2], NULL, 0);
	left = strtoul(argv[3], NULL, 0);
	len = strtoul(argv[4], NULL, 0);
	write = argc > 5 && !strcmp(argv[5], "write");
	if (!left || left > pages || !len || len % PG || len > left * PG) {
		fprintf(stderr, "fixed-vcnt-wrap: need 0 < LEFT <= PAGES, LEN a multiple of 4096 within LEFT pages\n");
		return 2;
	}
	at = (pages - left) * PG;

	fd = open(argv[1], (write ? O_RDWR : O_RDONLY) | O_DIRECT);
	if (fd < 0)
		return fail(argv[1], errno);
	if (fstat(fd, &sb) < 0)
		return fail("fstat", errno);
	if (S_ISREG(sb.st_mode) && (unsigned long)sb.st_size < len) {
		fprintf(stderr, "fixed-vcnt-wrap: %s holds fewer than %lu bytes\n",
			argv[1], len);
		return 77;
	}
	buf = map_pages(pages);
	want = malloc(len);
	if (!buf || !want)
		return fail("memory", ENOMEM);

	ret = io_uring_queue_init(4, &ring, 0);
	if (ret < 0)
		return fail("io_uring_queue_init", -ret);
	iov.iov_base = buf;
	iov.iov_len = pages * PG;
	ret = io_uring_register_buffers(&ring, &iov, 1);
	if (ret < 0)
		return fail("io_uring_register_buffers", -ret);

	memset(buf + at, 0xa5, len);
	sqe = io_uring_get_sqe(&ring);
	if (write)
		io_uring_prep_write_fixed(sqe, fd, buf + at, len, 0, 0);
	else
		io_uring_prep_read_fixed(sqe, fd, buf + at, len, 0, 0);
	printf("fixed-vcnt-wrap: %s of %lu bytes from registered page %lu of %lu (%lu bvecs left, bi_vcnt %lu)\n",
	       write ? "WRITE_FIXED" : "READ_FIXED", len, pages - left, pages,
	       left, left % 65536);
	fflush(stdout);
	ret = io_uring_submit_and_wait(&ring, 1);
	if (ret < 0)
		return fail("io_uring_submit_and_wait", -ret);
	ret = io_uring_peek_cqe(&ring, &cqe);
	if (ret < 0)
		return fail("io_uring_peek_cqe", -ret);
	ret = cqe->res;
	io_uring_cqe_seen(&ring, cqe);
	if (ret < 0)
		return fail("the transfer", -ret);
	if ((unsigned long)ret != len) {
		fprintf(stderr, "fixed-vcnt-wrap: short transfer, %d of %lu\n",
			ret, len);
		return 1;
	}
	if (!write) {
		int dfd = open(argv[1], O_RDONLY);

		if (dfd < 0 || pread(dfd, want, len, 0) != (ssize_t)len)
			return fail("buffered pread", errno);
		close(dfd);
		if (memcmp(want, buf + at, len)) {
			fprintf(stderr, "fixed-vcnt-wrap: data differs from pread\n");
			return 1;
		}
	}
	printf("fixed-vcnt-wrap: completed, %s\n",
	       write ? "written" : "bytes match");
	io_uring_queue_exit(&ring);
	return 0;
}
