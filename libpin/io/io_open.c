// SPDX-License-Identifier: MIT
/*
 * Opening files for checkpoint I/O: O_DIRECT where the file's filesystem
 * takes it with alignments that divide PIN_IO_ALIGN, buffered otherwise,
 * and the reason for every such fallback recorded in the stats, so that a
 * slow transfer can say why it was slow.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "internal.h"
#include "io_internal.h"
#include "io_engine.h"

/* Debian 12's headers may lack these (statx(2), Linux 6.1). */
#ifndef STATX_DIOALIGN
#define STATX_DIOALIGN		0x2000U
#endif
#define STATX_OFF_MASK		0	/* u32 stx_mask */
#define STATX_OFF_DIO_MEM	152	/* u32 stx_dio_mem_align */
#define STATX_OFF_DIO_OFFSET	156	/* u32 stx_dio_offset_align */

/*
 * O_DIRECT alignment the filesystem reports for fd. 0 and the alignments
 * (1 when statx does not know: we then rely on PIN_IO_ALIGN, 4096, which is
 * at least the logical block size of every device we meet), or -ENOTSUP
 * when it reports that the file has no direct I/O.
 */
static int dio_align(int fd, uint32_t *mem, uint32_t *off)
{
	unsigned char sx[256] __attribute__((aligned(8)));
	uint32_t mask;

	*mem = 1;
	*off = 1;
	memset(sx, 0, sizeof(sx));
	if (syscall(SYS_statx, fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, sx) < 0)
		return 0;
	memcpy(&mask, sx + STATX_OFF_MASK, 4);
	if (!(mask & STATX_DIOALIGN))
		return 0;
	memcpy(mem, sx + STATX_OFF_DIO_MEM, 4);
	memcpy(off, sx + STATX_OFF_DIO_OFFSET, 4);
	if (!*mem || !*off)
		return -ENOTSUP;
	return 0;
}

int pin__io_open(struct pin__file *f, const char *path, int wflags,
		 const struct pin_io_opts *o, struct pin__io_stats *st)
{
	int base = (wflags ? wflags : O_RDONLY) | O_CLOEXEC;
	uint32_t mem, off;
	struct stat sb;
	int fd = -1;

	f->fd = -1;
	f->direct = 0;
	f->path = path;
	if (o->flags & PIN_IO_BUFFERED) {
		pin__io_note_fallback(st, "buffered I/O asked for");
	} else {
		fd = open(path, base | O_DIRECT, 0644);
		if (fd < 0 && errno == EINVAL) {
			pin__io_note_fallback(st, "%s: open with O_DIRECT refused (EINVAL)",
					      path);
		} else if (fd < 0) {
			return pin__io_fail(st->error, sizeof(st->error), -errno,
					    "%s: open", path);
		} else if (dio_align(fd, &mem, &off) < 0) {
			pin__io_note_fallback(st, "%s: statx reports no direct I/O", path);
			close(fd);
			fd = -1;
		} else if (mem > PIN_IO_ALIGN || off > PIN_IO_ALIGN ||
			   PIN_IO_ALIGN % mem || PIN_IO_ALIGN % off) {
			pin__io_note_fallback(st, "%s: direct I/O alignment %u/%u does not divide %u",
					      path, mem, off, PIN_IO_ALIGN);
			close(fd);
			fd = -1;
		} else {
			f->direct = 1;
		}
	}
	if (fd < 0) {
		fd = open(path, base, 0644);
		if (fd < 0)
			return pin__io_fail(st->error, sizeof(st->error), -errno,
					    "%s: open", path);
	}
	if (fstat(fd, &sb) < 0) {
		int err = -errno;

		close(fd);
		return pin__io_fail(st->error, sizeof(st->error), err,
				    "%s: fstat", path);
	}
	if (!S_ISREG(sb.st_mode)) {
		int dir = S_ISDIR(sb.st_mode);

		/* A directory is the common slip: named as one, as open(2) would. */
		close(fd);
		return pin__io_fail(st->error, sizeof(st->error),
				    dir ? -EISDIR : -EINVAL, dir ? "%s" :
				    "%s: not a regular file", path);
	}
	f->fd = fd;
	f->size = (uint64_t)sb.st_size;
	return 0;
}

int pin__io_open_read(struct pin__file *f, const char *path,
		      const struct pin_io_opts *o, struct pin__io_stats *st)
{
	return pin__io_open(f, path, 0, o, st);
}

int pin__io_open_write_new(struct pin__file *f, const char *path,
			   const struct pin_io_opts *o, struct pin__io_stats *st)
{
	return pin__io_open(f, path, O_WRONLY | O_CREAT | O_TRUNC, o, st);
}

void pin__io_close(struct pin__file *f)
{
	if (f->fd >= 0)
		close(f->fd);
	f->fd = -1;
}

/* Reopen f without O_DIRECT after the kernel refused a direct transfer. */
int pin__io_reopen_buffered(struct pin__file *f, int wflags,
			    struct pin__io_stats *st)
{
	int fd = open(f->path, (wflags ? wflags : O_RDONLY) | O_CLOEXEC, 0644);

	if (fd < 0)
		return pin__io_fail(st->error, sizeof(st->error), -errno,
				    "%s: reopen without O_DIRECT", f->path);
	close(f->fd);
	f->fd = fd;
	f->direct = 0;
	return 0;
}
