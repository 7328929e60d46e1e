// SPDX-License-Identifier: MIT
/*
 * Gathered writes from memory to a file through the engine: sources that
 * sit anywhere copied into aligned bounce buffers (or written straight
 * from where they are aligned), blocks reserved ahead, the last partial
 * block padded or written buffered, and the file synced.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"
#include "io_internal.h"
#include "io_engine.h"

/* Cursor over the segments of a gathered write. */
struct gather {
	const struct pin__seg *segs;
	size_t nseg;
	size_t i;
	uint64_t at;		/* offset into segs[i] */
};

static uint64_t gather_copy(struct gather *g, char *dst, uint64_t want)
{
	uint64_t got = 0;

	while (got < want && g->i < g->nseg) {
		uint64_t left = g->segs[g->i].len - g->at;
		uint64_t n = want - got < left ? want - got : left;

		if (n)
			memcpy(dst + got, (const char *)g->segs[g->i].p + g->at,
			       n);
		got += n;
		g->at += n;
		if (g->at == g->segs[g->i].len) {
			g->i++;
			g->at = 0;
		}
	}
	return got;
}

/*
 * Where the source of the next bytes is itself aligned (a tensor at an
 * aligned place of a region, say), write straight from it: take up to n
 * bytes, a multiple of PIN_IO_ALIGN, from the current segment.
 */
static int zero_copy(struct gather *g, uint64_t n, struct slot *s)
{
	const struct pin__seg *sg;
	const char *src;
	uint64_t left;

	if (g->i >= g->nseg)
		return 0;
	sg = &g->segs[g->i];
	left = sg->len - g->at;
	src = (const char *)sg->p + g->at;
	if (left < PIN_IO_ALIGN || (uintptr_t)src % PIN_IO_ALIGN)
		return 0;
	if (n > left)
		n = left;
	n = ALIGN_DOWN(n);
	s->buf = (char *)src;
	s->len = n;
	s->fixed = -1;
	g->at += n;
	if (g->at == sg->len) {
		g->i++;
		g->at = 0;
	}
	return 1;
}

static int write_pass(struct engine *e, struct pin__file *f, char *bounce,
		      const struct pin__seg *segs, size_t nseg,
		      uint64_t file_off, uint64_t total, uint64_t wlen,
		      const struct pin_io_opts *o, struct pin__io_stats *st)
{
	struct gather g = { .segs = segs, .nseg = nseg };
	uint64_t next = file_off, end = file_off + wlen, done = 0;
	unsigned i, idx;
	int res, ret;

	pin__engine_register(e, bounce, (uint64_t)e->nslots * o->request_size,
			     o->request_size, o, st);
	for (;;) {
		for (i = 0; i < e->nslots && next < end; i++) {
			struct slot *s = &e->slots[i];
			uint64_t n, got;

			if (s->busy)
				continue;
			n = end - next < o->request_size ?
			    end - next : o->request_size;
			if (f->direct && zero_copy(&g, n, s)) {
				s->off = next;
				next += s->len;
				pin__engine_submit(e, f, i, 1);
				continue;
			}
			s->buf = bounce + (uint64_t)i * o->request_size;
			got = gather_copy(&g, s->buf, n);
			if (f->direct && got % PIN_IO_ALIGN) {
				/* The file's last block: pad it. */
				memset(s->buf + got, 0, ALIGN_UP(got) - got);
				got = ALIGN_UP(got);
			}
			s->off = next;
			s->len = got;
			s->fixed = e->fixed ? (int)i : -1;
			next += n;
			pin__engine_submit(e, f, i, 1);
		}
		if (!e->inflight)
			break;
		ret = pin__engine_next(e, f, st, 1, done, &idx, &res);
		if (ret < 0 || ret == REFUSED)
			return ret;
		if (ret == RETRIED)
			continue;
		struct slot *s = &e->slots[idx];

		if (res <= 0 || (f->direct && (uint64_t)res < s->len &&
				 res % PIN_IO_ALIGN)) {
			if (res >= 0)
				res = -EIO;
			pin__io_fail(st->error, sizeof(st->error), res,
				     "%s: write of %llu bytes at offset %llu",
				     f->path, (unsigned long long)s->len,
				     (unsigned long long)s->off);
			pin__engine_drain(e, st, f->path);
			return res;
		}
		st->bytes += (uint64_t)res;
		done += (uint64_t)res;
		if ((uint64_t)res < s->len) {
			st->short_ios++;
			s->buf += res;
			s->off += (uint64_t)res;
			s->len -= (uint64_t)res;
			pin__engine_submit(e, f, idx, 1);
			continue;
		}
		st->requests++;
		if (o->progress)
			o->progress(o->progress_arg,
				    done < total ? done : total, total);
	}
	(void)total;
	return 0;
}

/*
 * Reserve the blocks first: direct writes that extend a file are
 * serialised by the filesystem (ext4, xfs take the inode lock
 * exclusively), writes into allocated space run in parallel.
 */
static int reserve_blocks(struct pin__file *f, uint64_t file_off,
			  uint64_t total, struct pin__io_stats *st)
{
	if (f->direct && file_off + total > f->size &&
	    fallocate(f->fd, 0, (off_t)file_off,
		      (off_t)ALIGN_UP(total)) < 0 &&
	    errno != EOPNOTSUPP && errno != ENOSYS)
		return pin__io_fail(st->error, sizeof(st->error), -errno,
				    "%s: fallocate %llu bytes at offset %llu",
				    f->path, (unsigned long long)ALIGN_UP(total),
				    (unsigned long long)file_off);
	return 0;
}

/*
 * The last tail bytes (a partial block inside the file, after wlen bytes
 * written direct) through a descriptor without O_DIRECT.
 */
static int write_tail(struct pin__file *f, const struct pin__seg *segs,
		      size_t nseg, uint64_t file_off, uint64_t wlen,
		      uint64_t tail, char *bounce, struct pin__io_stats *st)
{
	struct gather g = { .segs = segs, .nseg = nseg };
	char skip[4096];
	uint64_t left = wlen;
	ssize_t w;
	int bfd, err;

	while (left) {
		uint64_t n = left < sizeof(skip) ? left : sizeof(skip);

		gather_copy(&g, skip, n);
		left -= n;
	}
	gather_copy(&g, bounce, tail);
	bfd = open(f->path, O_WRONLY | O_CLOEXEC);
	w = bfd < 0 ? -1 : pwrite(bfd, bounce, tail, (off_t)(file_off + wlen));
	err = w < 0 ? -errno : -EIO;
	if (bfd >= 0)
		close(bfd);
	if (w != (ssize_t)tail)
		return pin__io_fail(st->error, sizeof(st->error), err,
				    "%s: write of the last %llu bytes at offset %llu",
				    f->path, (unsigned long long)tail,
				    (unsigned long long)(file_off + wlen));
	st->bytes += tail;
	pin__io_note_fallback(st, "%s: last %llu bytes written buffered (a partial block inside the file)",
			      f->path, (unsigned long long)tail);
	return 0;
}

/*
 * The file's length (past a padded last block) and, unless the caller
 * syncs it itself (PIN_IO_NO_SYNC), its data on disk.
 */
static int finish_file(struct pin__file *f, uint64_t file_off, uint64_t total,
		       uint64_t tail, int sync, struct pin__io_stats *st)
{
	if (!tail && f->direct && total % PIN_IO_ALIGN &&
	    file_off + total >= f->size &&
	    ftruncate(f->fd, (off_t)(file_off + total)) < 0)
		return pin__io_fail(st->error, sizeof(st->error), -errno,
				    "%s: truncate to %llu after the padded last block",
				    f->path,
				    (unsigned long long)(file_off + total));
	if (sync && fsync(f->fd) < 0)
		return pin__io_fail(st->error, sizeof(st->error), -errno,
				    "%s: fsync", f->path);
	if (file_off + total > f->size)
		f->size = file_off + total;
	return 0;
}

int pin__io_write_fd(struct pin__file *f, const struct pin__seg *segs,
		     size_t nseg, uint64_t file_off,
		     const struct pin_io_opts *o, struct pin__io_stats *st)
{
	uint64_t total = 0, wlen, tail = 0, t0;
	struct engine e;
	char *bounce = NULL;
	size_t i;
	int ret;

	for (i = 0; i < nseg; i++)
		total += segs[i].len;
	if (file_off % PIN_IO_ALIGN)
		return pin__io_fail(st->error, sizeof(st->error), -EINVAL,
				    "%s: write offset %llu not %u-aligned",
				    f->path, (unsigned long long)file_off,
				    PIN_IO_ALIGN);
	ret = posix_memalign((void **)&bounce, PIN_IO_ALIGN,
			     (size_t)o->queue_depth * o->request_size);
	if (ret)
		return pin__io_fail(st->error, sizeof(st->error), -ret,
				    "%s: %u bounce buffers of %u bytes",
				    f->path, o->queue_depth, o->request_size);
	t0 = pin__now_ns();
	ret = reserve_blocks(f, file_off, total, st);
	while (!ret) {
		wlen = total;
		tail = 0;
		/* Padding the last block would clobber later bytes of the file. */
		if (f->direct && total % PIN_IO_ALIGN && f->size > file_off + total) {
			tail = total % PIN_IO_ALIGN;
			wlen = total - tail;
		}
		ret = pin__engine_init(&e, o, st, f->path);
		if (ret < 0)
			break;
		ret = write_pass(&e, f, bounce, segs, nseg, file_off, total,
				 wlen, o, st);
		st->fixed_buffers = e.fixed;
		pin__engine_exit(&e);
		if (ret != REFUSED)
			break;
		/* Refused direct: once more, buffered. */
		ret = pin__io_reopen_buffered(f, O_WRONLY, st);
	}
	if (!ret && tail)
		ret = write_tail(f, segs, nseg, file_off, wlen, tail, bounce, st);
	if (!ret)
		ret = finish_file(f, file_off, total, tail,
				  !(o->flags & PIN_IO_NO_SYNC), st);
	if (!ret)
		st->io_ns += pin__now_ns() - t0;
	free(bounce);
	return ret < 0 ? ret : 0;
}
