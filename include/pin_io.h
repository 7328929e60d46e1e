/* SPDX-License-Identifier: MIT */
/*
 * libpin: checkpoint I/O, file bytes to and from pinned memory with
 * io_uring.
 *
 * Part of libpin's public API: pin.h includes it, and the conventions at
 * the top of pin.h hold here too. Programs include <pin.h>; this header
 * also compiles on its own.
 */
#ifndef PIN_IO_H
#define PIN_IO_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct pin_region;	/* pin.h */

/*
 * io_uring file I/O straight into pinned memory (or any memory): many
 * requests in flight, O_DIRECT where the filesystem allows it, a buffered
 * fallback where it refuses (reported, never silent), registered (fixed)
 * buffers where the kernel accepts them for the mapping. Where io_uring
 * is unavailable (io_uring_setup refused with ENOSYS, EPERM or EACCES, as
 * under a container runtime's default seccomp profile), one request at a
 * time with pread/pwrite instead, reported in fallback_reason.
 *
 * Reads move the aligned superset of the wanted byte range: file bytes
 * [file_off & ~(PIN_IO_ALIGN-1), roundup(file_off + len, PIN_IO_ALIGN)) are
 * read into the destination starting at its first byte, so the wanted
 * bytes land (file_off % PIN_IO_ALIGN) bytes in. The layout is the same on
 * the O_DIRECT and the buffered path. The destination must have room for
 * the whole superset (pin_file_span) and, for O_DIRECT, start on a
 * PIN_IO_ALIGN boundary (a region offset that is a page multiple does);
 * otherwise the call falls back to buffered reads and says so. Bytes of
 * the superset beyond end of file are left as they were.
 */
#define PIN_IO_ALIGN		4096U

#define PIN_IO_BUFFERED		(1U << 0)	/* never O_DIRECT */
#define PIN_IO_NO_FIXED		(1U << 1)	/* never register fixed buffers */
#define PIN_IO_PIN_FIRST	(1U << 2)	/* loads: pin all of the region
						 * before the first read (no
						 * overlap; to compare) */
#define PIN_IO_NO_KERNEL_FILL	(1U << 3)	/* loads, device backend: read
						 * through the mapping with
						 * io_uring, not the module's
						 * FILL (to compare) */
#define PIN_IO_NO_SYNC		(1U << 4)	/* pin_file_write: no fsync
						 * before returning (a writer
						 * of many parts syncs the
						 * file once, after the last) */

#define PIN_IO_DEFAULT_QUEUE_DEPTH	16U
#define PIN_IO_DEFAULT_REQUEST_SIZE	(4U << 20)
#define PIN_IO_MAX_QUEUE_DEPTH		256U
#define PIN_IO_MAX_REQUEST_SIZE		(64U << 20)

/*
 * A request answered EAGAIN or EINTR is sent again: the first 64 times at
 * once, then after a 1 ms pause each; one answered so more than this many
 * times in a row (about a second) fails the call with that error.
 */
#define PIN_IO_MAX_RETRIES		1000U

/* Called now and then as requests complete: done of total bytes so far. */
typedef void (*pin_io_progress_fn)(void *arg, uint64_t done, uint64_t total);

/*
 * All fields but size zero (or a NULL opts pointer) means: defaults,
 * O_DIRECT. why is where pin_file_read and pin_file_write, which have no
 * handle, put the text of a failure (the region's and the checkpoint's
 * calls put it in pin_region_error and pin_st_error).
 */
struct pin_io_opts {
	uint32_t size;			/* sizeof(struct pin_io_opts) */
	unsigned queue_depth;		/* requests in flight, 1..256; 0: default */
	uint32_t request_size;		/* bytes, multiple of PIN_IO_ALIGN,
					 * up to 64 MiB; 0: default */
	unsigned flags;			/* PIN_IO_* */
	pin_io_progress_fn progress;	/* may be NULL */
	void *progress_arg;
	char *why;			/* may be NULL */
	size_t why_len;
};

/*
 * What one call did. Every I/O call fills the whole struct (it does not
 * add to earlier contents), on failure too; the failure's text is where
 * the conventions in pin.h say (which file, which offset and why).
 */
struct pin_io_stats {
	uint32_t size;			/* set by the caller */
	uint64_t bytes;			/* file bytes moved: the superset,
					 * less what lies past end of file */
	uint64_t ns;			/* wall time of the call */
	uint64_t io_ns;			/* of which moving bytes (no open,
					 * parse, allocation or seal) */
	uint64_t requests;		/* requests completed */
	uint64_t short_ios;		/* short transfers resubmitted */
	uint64_t retries;		/* EAGAIN/EINTR resubmissions */
	uint32_t queue_depth;		/* what was used */
	uint32_t request_size;
	int direct;			/* 1: every byte moved with O_DIRECT */
	int fixed_buffers;		/* 1: registered buffers were used */
	char fallback_reason[192];	/* why not O_DIRECT / not fixed, or "" */
};

/* Bytes of destination a read of [file_off, file_off + len) needs. */
uint64_t pin_file_span(uint64_t file_off, uint64_t len);

/*
 * Read the aligned superset of [file_off, file_off + len) of path into
 * buf (buf_len bytes, >= pin_file_span). Returns the offset into buf of
 * file_off (>= 0), or a negative errno: -EINVAL (arguments, buf_len too
 * small), -EIO (end of file before file_off + len: the file is shorter),
 * -ESTALE (the file changed size during the read), or the open/read
 * error; -E2BIG (opts). stats and opts may be NULL; the failure's text
 * goes to opts->why.
 */
int pin_file_read(void *buf, uint64_t buf_len, const char *path,
		  uint64_t file_off, uint64_t len,
		  const struct pin_io_opts *opts, struct pin_io_stats *stats);

/*
 * The same into a region at region_off (a multiple of PIN_IO_ALIGN), through
 * its owner mapping (made if needed). The region must be open for writing by
 * its owner (not sealed on the portable backend). Errors as pin_file_read,
 * also described by pin_region_error().
 */
int pin_region_read_file(struct pin_region *r, uint64_t region_off,
			 const char *path, uint64_t file_off, uint64_t len,
			 const struct pin_io_opts *opts,
			 struct pin_io_stats *stats);

/*
 * Write len bytes from buf to path at file_off (a multiple of
 * PIN_IO_ALIGN), creating the file (mode 0644) if needed, never truncating
 * it below file_off + len. O_DIRECT straight from buf where it is
 * PIN_IO_ALIGN-aligned, else from aligned bounce buffers; buffered where
 * O_DIRECT is refused; fsync before returning (not with PIN_IO_NO_SYNC,
 * where the caller syncs the file). buf may have any
 * alignment. Returns 0 or a negative errno (-EINVAL, open/write errors);
 * the failure's text goes to opts->why.
 */
int pin_file_write(const void *buf, uint64_t len, const char *path,
		   uint64_t file_off, const struct pin_io_opts *opts,
		   struct pin_io_stats *stats);

/* The same from a region's bytes [region_off, region_off + len). */
int pin_region_write_file(struct pin_region *r, uint64_t region_off,
			  const char *path, uint64_t file_off, uint64_t len,
			  const struct pin_io_opts *opts,
			  struct pin_io_stats *stats);

#ifdef __cplusplus
}
#endif

#endif /* PIN_IO_H */
