// SPDX-License-Identifier: MIT
/*
 * Checkpoint I/O: io_uring reads and writes between files and memory.
 *
 * Reads move the PIN_IO_ALIGN-aligned superset of the wanted range straight
 * into the destination (no bounce), queue_depth requests of request_size
 * bytes in flight. Writes gather their sources into aligned bounce buffers
 * (sources may sit anywhere) and write those. O_DIRECT is used where the
 * filesystem allows it; where it refuses (open or the first transfer fails
 * with EINVAL, or statx says it cannot), the transfer is redone buffered and
 * the reason recorded. Registered buffers are tried and dropped, with the
 * reason recorded, where the kernel refuses them (6.1 refuses file-backed
 * non-shmem mappings such as pinmem's with EOPNOTSUPP).
 *
 * This file: the public entry points (pin_file_read/pin_file_write between
 * files and memory, pin_region_read_file/pin_region_write_file between files and
 * regions) and the options they share. The parts below it, lowest first:
 * io_base.c (error text, fallback notes, the clock), io_open.c opens files
 * (O_DIRECT or why not), io_engine.c runs the requests through io_uring
 * (io_plain.c with pread/pwrite where io_uring is unavailable),
 * io_fixed.c registers the buffers they use, io_read.c and io_write.c move
 * the data. fill.c, above this, prepares a region while it is read.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"
#include "io_internal.h"
#include "io_engine.h"

uint64_t pin_file_span(uint64_t file_off, uint64_t len)
{
	if (len > UINT64_MAX - file_off - PIN_IO_ALIGN)
		return 0;
	return ALIGN_UP(file_off + len) - ALIGN_DOWN(file_off);
}

int pin__io_opts(const struct pin_io_opts *opts, struct pin_io_opts *out,
		 struct pin__io_stats *st)
{
	int ret = pin__opts_in(out, sizeof(*out), opts, PIN__IO_OPTS_SIZE);

	if (ret == -E2BIG)
		return pin__io_fail(st->error, sizeof(st->error), ret,
				    "I/O options of %u bytes set fields this libpin %s does not know",
				    opts->size, PIN_VERSION_STRING);
	if (ret)
		return pin__io_fail(st->error, sizeof(st->error), ret,
				    "I/O options: size %u, below libpin 1.0's %zu (PIN_INIT sets it)",
				    opts->size, (size_t)PIN__IO_OPTS_SIZE);
	if (!out->queue_depth)
		out->queue_depth = PIN_IO_DEFAULT_QUEUE_DEPTH;
	if (!out->request_size)
		out->request_size = PIN_IO_DEFAULT_REQUEST_SIZE;
	if (out->queue_depth > PIN_IO_MAX_QUEUE_DEPTH)
		return pin__io_fail(st->error, sizeof(st->error), -EINVAL,
				    "queue depth %u over %u", out->queue_depth,
				    PIN_IO_MAX_QUEUE_DEPTH);
	if (out->request_size % PIN_IO_ALIGN ||
	    out->request_size > PIN_IO_MAX_REQUEST_SIZE)
		return pin__io_fail(st->error, sizeof(st->error), -EINVAL,
				    "request size %u not a multiple of %u up to %u",
				    out->request_size, PIN_IO_ALIGN,
				    PIN_IO_MAX_REQUEST_SIZE);
	if (out->flags & ~(PIN_IO_BUFFERED | PIN_IO_NO_FIXED | PIN_IO_PIN_FIRST |
			   PIN_IO_NO_KERNEL_FILL | PIN_IO_NO_SYNC))
		return pin__io_fail(st->error, sizeof(st->error), -EINVAL,
				    "unknown I/O flags 0x%x", out->flags);
	st->queue_depth = out->queue_depth;
	st->request_size = out->request_size;
	return 0;
}

void pin__io_stats_put(struct pin_io_stats *out,
		       const struct pin__io_stats *st)
{
	struct pin_io_stats pub = {
		.size = sizeof(pub),
		.bytes = st->bytes,
		.ns = st->ns,
		.io_ns = st->io_ns,
		.requests = st->requests,
		.short_ios = st->short_ios,
		.retries = st->retries,
		.queue_depth = st->queue_depth,
		.request_size = st->request_size,
		.direct = st->direct,
		.fixed_buffers = st->fixed_buffers,
	};

	memcpy(pub.fallback_reason, st->fallback_reason,
	       sizeof(pub.fallback_reason));
	pin__out_put(out, &pub, sizeof(pub));
}

static void stats_begin(struct pin__io_stats *st)
{
	memset(st, 0, sizeof(*st));
	st->direct = 1;
}

/*
 * The end of a public call: its stats to the caller, and the failure's
 * text to the handle-less caller's opts->why.
 */
static int io_done(int ret, const struct pin_io_opts *opts,
		   const struct pin__io_stats *st, struct pin_io_stats *stats)
{
	if (stats)
		pin__io_stats_put(stats, st);
	if (opts && opts->size >= PIN__IO_OPTS_SIZE)
		pin__why(opts->why, opts->why_len, ret < 0 ? st->error : "");
	return ret;
}

static int file_read(void *buf, uint64_t buf_len, const char *path,
		     uint64_t file_off, uint64_t len,
		     const struct pin_io_opts *opts, struct pin__io_stats *st)
{
	uint64_t t0 = pin__now_ns(), span, aoff;
	struct pin_io_opts o;
	struct pin__file f;
	int ret;

	stats_begin(st);
	if (!buf || !path)
		return pin__io_fail(st->error, sizeof(st->error), -EINVAL,
				    "pin_file_read: NULL buffer or path");
	span = pin_file_span(file_off, len);
	if (!span && len)
		return pin__io_fail(st->error, sizeof(st->error), -EINVAL,
				    "%s: range %llu+%llu overflows", path,
				    (unsigned long long)file_off,
				    (unsigned long long)len);
	if (buf_len < span)
		return pin__io_fail(st->error, sizeof(st->error), -EINVAL,
				    "%s: buffer of %llu bytes, the read needs %llu",
				    path, (unsigned long long)buf_len,
				    (unsigned long long)span);
	ret = pin__io_opts(opts, &o, st);
	if (ret < 0)
		return ret;
	ret = pin__io_open_read(&f, path, &o, st);
	if (ret < 0)
		return ret;
	aoff = ALIGN_DOWN(file_off);
	ret = pin__io_read_fd(&f, buf, aoff, len ? span : 0, file_off + len,
			      &o, st);
	st->direct = f.direct;
	pin__io_close(&f);
	st->ns = pin__now_ns() - t0;
	return ret < 0 ? ret : (int)(file_off - aoff);
}

int pin_file_read(void *buf, uint64_t buf_len, const char *path,
		  uint64_t file_off, uint64_t len,
		  const struct pin_io_opts *opts, struct pin_io_stats *stats)
{
	struct pin__io_stats st;
	int ret;

	stats_begin(&st);
	if (stats && pin__out_check(stats, PIN__IO_STATS_SIZE))
		ret = pin__io_fail(st.error, sizeof(st.error), -EINVAL,
				   "pin_file_read: stats without its size (PIN_INIT sets it)");
	else
		ret = file_read(buf, buf_len, path, file_off, len, opts, &st);
	return io_done(ret, opts, &st, stats);
}

static int file_write(const void *buf, uint64_t len, const char *path,
		      uint64_t file_off, const struct pin_io_opts *opts,
		      struct pin__io_stats *st)
{
	struct pin__seg seg = { .p = buf, .len = len };
	uint64_t t0 = pin__now_ns();
	struct pin_io_opts o;
	struct pin__file f;
	int ret;

	stats_begin(st);
	if ((!buf && len) || !path)
		return pin__io_fail(st->error, sizeof(st->error), -EINVAL,
				    "pin_file_write: NULL buffer or path");
	if (len > UINT64_MAX - file_off)
		return pin__io_fail(st->error, sizeof(st->error), -EINVAL,
				    "%s: range overflows", path);
	ret = pin__io_opts(opts, &o, st);
	if (ret < 0)
		return ret;
	ret = pin__io_open(&f, path, O_WRONLY | O_CREAT, &o, st);
	if (ret < 0)
		return ret;
	ret = pin__io_write_fd(&f, &seg, 1, file_off, &o, st);
	st->direct = f.direct;
	pin__io_close(&f);
	st->ns = pin__now_ns() - t0;
	return ret;
}

int pin_file_write(const void *buf, uint64_t len, const char *path,
		   uint64_t file_off, const struct pin_io_opts *opts,
		   struct pin_io_stats *stats)
{
	struct pin__io_stats st;
	int ret;

	stats_begin(&st);
	if (stats && pin__out_check(stats, PIN__IO_STATS_SIZE))
		ret = pin__io_fail(st.error, sizeof(st.error), -EINVAL,
				   "pin_file_write: stats without its size (PIN_INIT sets it)");
	else
		ret = file_write(buf, len, path, file_off, opts, &st);
	return io_done(ret, opts, &st, stats);
}

static int region_range(struct pin_region *r, uint64_t off, uint64_t len,
			char **addr, struct pin__io_stats *st)
{
	void *map;
	int ret;

	if (off % PIN_IO_ALIGN || off > r->size || len > r->size - off) {
		pin__io_fail(st->error, sizeof(st->error), 0,
			     "region range %llu+%llu not %u-aligned or past its %llu bytes",
			     (unsigned long long)off, (unsigned long long)len,
			     PIN_IO_ALIGN, (unsigned long long)r->size);
		return pin__fail(r->err, -EINVAL, "%s", st->error);
	}
	ret = pin_region_map(r, &map);
	if (ret < 0) {
		pin__io_fail(st->error, sizeof(st->error), 0, "%s",
			     pin_region_error(r));
		return ret;
	}
	*addr = (char *)map + off;
	return 0;
}

static int region_read_file(struct pin_region *r, uint64_t region_off,
			    const char *path, uint64_t file_off, uint64_t len,
			    const struct pin_io_opts *opts,
			    struct pin__io_stats *st)
{
	uint64_t span = pin_file_span(file_off, len);
	struct pin__refs_hold hold;
	char *addr;
	int ret;

	stats_begin(st);
	ret = region_range(r, region_off, span, &addr, st);
	if (ret < 0)
		return ret;
	/* The read's fixed buffers are the owner's: declared (refs.c). */
	pin__refs_hold(&hold, r, addr, span, PIN_EXPECT_PER_CHUNK);
	ret = file_read(addr, r->size - region_off, path, file_off, len,
			opts, st);
	pin__refs_release(&hold);
	if (ret < 0)
		pin__fail(r->err, 0, "%s", st->error);
	return ret;
}

/* A region call's stats struct, if any, must say its size. */
static int region_stats_check(struct pin_region *r, struct pin_io_stats *stats,
			      const char *op)
{
	if (stats && pin__out_check(stats, PIN__IO_STATS_SIZE))
		return pin__fail(r->err, -EINVAL,
				 "%s: stats without its size (PIN_INIT sets it)",
				 op);
	return 0;
}

int pin_region_read_file(struct pin_region *r, uint64_t region_off,
			 const char *path, uint64_t file_off, uint64_t len,
			 const struct pin_io_opts *opts,
			 struct pin_io_stats *stats)
{
	struct pin__io_stats st;
	int ret;

	if (!r)
		return -EINVAL;
	ret = region_stats_check(r, stats, "read");
	if (ret)
		return ret;
	ret = region_read_file(r, region_off, path, file_off, len, opts, &st);
	if (stats)
		pin__io_stats_put(stats, &st);
	return ret;
}

static int region_write_file(struct pin_region *r, uint64_t region_off,
			     const char *path, uint64_t file_off,
			     uint64_t len, const struct pin_io_opts *opts,
			     struct pin__io_stats *st)
{
	char *addr;
	int ret;

	stats_begin(st);
	if (region_off > r->size || len > r->size - region_off)
		return pin__fail(r->err, -EINVAL,
				 "region range %llu+%llu past its %llu bytes",
				 (unsigned long long)region_off,
				 (unsigned long long)len,
				 (unsigned long long)r->size);
	ret = region_range(r, region_off & ~(uint64_t)(PIN_IO_ALIGN - 1), 0,
			   &addr, st);
	if (ret < 0)
		return ret;
	addr += region_off % PIN_IO_ALIGN;
	ret = file_write(addr, len, path, file_off, opts, st);
	if (ret < 0)
		pin__fail(r->err, 0, "%s", st->error);
	return ret;
}

int pin_region_write_file(struct pin_region *r, uint64_t region_off,
			  const char *path, uint64_t file_off, uint64_t len,
			  const struct pin_io_opts *opts,
			  struct pin_io_stats *stats)
{
	struct pin__io_stats st;
	int ret;

	if (!r)
		return -EINVAL;
	ret = region_stats_check(r, stats, "write");
	if (ret)
		return ret;
	ret = region_write_file(r, region_off, path, file_off, len, opts,
				&st);
	if (stats)
		pin__io_stats_put(stats, &st);
	return ret;
}
