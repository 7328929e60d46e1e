// SPDX-License-Identifier: GPL-2.0
/*
 * Loading one entry, in a thread of its own so that the event loop keeps
 * serving: the whole file image (header and data) into a region sized by
 * the file the client asked about (and room for padding), checked as
 * safetensors, with every tensor moved onto 64 bytes where libpin's loader
 * read it (CACHE_LOAD_ALIGNED), sealed, with one read-only view to hand
 * out. The thread owns the entry's load fields
 * until it posts the entry as loaded; the client's fd then goes to its
 * member's thread to be closed.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "service.h"

#define ALIGN_UP(x, a)	(((x) + (a) - 1) / (a) * (a))

static int fail(struct entry *e, int err, const char *fmt, const char *text)
{
	snprintf(e->errtext, sizeof(e->errtext), fmt, text);
	return err;
}

/*
 * Where the service cannot open the file by itself (it runs as its own
 * user; the client's permissions are what count), read from the client's
 * fd with pread, never past the size the request was charged for.
 */
static int read_from_fd(struct entry *e, uint64_t size)
{
	uint8_t *p;
	uint64_t off = 0;
	int ret = pin_region_map(e->region, (void **)&p);

	if (ret)
		return fail(e, -ret, "map: %s", pin_region_error(e->region));
	while (off < size) {
		size_t chunk = size - off > (8U << 20) ? 8U << 20 : size - off;
		ssize_t n = pread(e->file_fd, p + off, chunk, (off_t)off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return fail(e, errno, "read: %s", strerror(errno));
		if (n == 0)
			return fail(e, EIO, "%s", "read: end of file before its size: the file shrank");
		off += (uint64_t)n;
	}
	return 0;
}

/* The image read from the fd must be a valid safetensors file. */
static int check_image(struct entry *e, uint64_t size)
{
	struct pin_st *st;
	void *p;
	int ret;

	ret = pin_region_map(e->region, &p);
	if (ret)
		return fail(e, -ret, "map: %s", pin_region_error(e->region));
	st = pin_st_create();
	if (!st)
		return fail(e, ENOMEM, "%s", "out of memory");
	ret = pin_st_parse_buffer(st, p, size, e->name);
	if (ret)
		fail(e, -ret, "%s", pin_st_error(st));
	pin_st_close(st);
	return -ret;
}

/*
 * libpin's loader (io_uring, O_DIRECT where allowed) into the region this
 * thread made: a file that has grown since the request does not fit and
 * is refused before anything is read. EACCES: the service may not open
 * the file itself (read_from_fd then).
 */
static int load_whole_file(struct entry *e, unsigned flags)
{
	struct pin_st_phases ph = { .size = sizeof(ph) };
	struct pin_st_load_opts lo = {
		.size = sizeof(lo), .flags = PIN_ST_LOAD_WHOLE_FILE | flags,
	};
	struct pin_st *st = pin_st_create();
	char path[64];
	int ret;

	if (!st)
		return fail(e, ENOMEM, "%s", "out of memory");
	snprintf(path, sizeof(path), "/proc/self/fd/%d", e->file_fd);
	ret = pin_st_load_into(st, e->region, 0, path, &lo);
	/* Only where a tensor moved is the image not the file itself. */
	e->aligned = !ret && !pin_st_phases(st, &ph) && ph.align_bytes;
	if (ret == -ENOSPC)
		snprintf(e->errtext, sizeof(e->errtext), "%.150s: the file changed between the request and the load (it no longer fits the size it was asked with)",
			 e->name);
	else if (ret && ret != -EACCES && ret != -EPERM)
		/* Named by the path the file had when first asked for. */
		snprintf(e->errtext, sizeof(e->errtext), "%.150s: %.350s",
			 e->name, pin_st_error(st));
	pin_st_close(st);
	if (ret == -EACCES || ret == -EPERM)
		return EACCES;
	return ret == -ENOSPC ? ESTALE : -ret;
}

/*
 * A file keyed by its bytes: the image read must have the digest the
 * request was keyed with, so that every client is served exactly the
 * bytes its own fd gave.
 */
static int check_digest(struct entry *e, uint64_t size)
{
	uint8_t sha[32];
	void *p;
	int ret = pin_region_map(e->region, &p);

	if (ret)
		return fail(e, -ret, "map: %s", pin_region_error(e->region));
	if (key_digest(p, size, sha))
		return fail(e, EIO, "%.200s: SHA-256: libcrypto failed", e->name);
	if (memcmp(sha, e->key.sha, sizeof(sha)))
		return fail(e, ESTALE, "%.200s: the file's bytes changed between the request and the load",
			    e->name);
	return 0;
}

/* The file must be the one asked about: before the load, and after. */
static int check_unchanged(struct entry *e, const char *when)
{
	struct cache_key now;

	if (key_of_fd(e->file_fd, &now, e->errtext, sizeof(e->errtext)))
		return EIO;
	if (e->key.by_content) {
		/* Its stat says nothing; its size must still fit the charge. */
		now.hashed = 1;
		memcpy(now.sha, e->key.sha, sizeof(now.sha));
	}
	if (!key_equal(&now, &e->key)) {
		snprintf(e->errtext, sizeof(e->errtext), "%.200s: the file changed %s",
			 e->name, when);
		return ESTALE;
	}
	return 0;
}

/*
 * Room for the padding that puts every tensor on 64 bytes: at most 63
 * bytes a tensor, and a header of n bytes names at most n / 50 + 1 of them
 * (the shortest entry, "":{"dtype":"U8","shape":[],"data_offsets":[0,0]},
 * has 50). 0 where the length cannot be read (the load then says why).
 */
static uint64_t padding_room(struct entry *e)
{
	unsigned char b[8];
	uint64_t n = 0;
	int i;

	if (pread(e->file_fd, b, 8, 0) != 8)
		return 0;
	for (i = 7; i >= 0; i--)
		n = n << 8 | b[i];
	return n > PIN_ST_MAX_HEADER ? 0 : 64 * (n / 50 + 2);
}

/*
 * The region: the file and room for the padding, never more than was
 * charged; pinned before the reads.
 */
static int make_region(struct entry *e, uint64_t size)
{
	uint64_t want = size + padding_room(e);
	int ret;

	if (want > e->bytes)
		want = e->bytes > size ? e->bytes : size;
	ret = pin_region_create(e->dev, ALIGN_UP(want, 4096),
				&(struct pin_region_opts){
					.size = sizeof(struct pin_region_opts),
					.flags = PIN_REGION_FALLBACK },
				&e->region);

	return ret ? fail(e, -ret, "allocate: %s", pin_dev_error(e->dev)) : 0;
}

static int fill_and_seal(struct entry *e, uint64_t size)
{
	/*
	 * Every tensor on 64 bytes (JAX takes such memory in place), where
	 * the padding fits the region; else the file's own layout. A file
	 * keyed by its bytes is read as it is through the client's fd (as
	 * for EACCES), and its digest checked.
	 */
	int ret = e->key.by_content ? EACCES :
		  load_whole_file(e, PIN_ST_LOAD_ALIGN);

	if (ret == ESTALE) {
		e->errtext[0] = 0;
		ret = load_whole_file(e, 0);
	}
	if (ret == EACCES) {
		ret = read_from_fd(e, size);
		if (!ret && e->key.by_content)
			ret = check_digest(e, size);
		if (!ret)
			ret = check_image(e, size);
	}
	if (!ret)
		ret = check_unchanged(e, "while it was loaded");
	if (ret)
		return ret;
	pin_region_unmap(e->region);
	ret = pin_region_seal(e->region);
	return ret ? fail(e, -ret, "seal: %s", pin_region_error(e->region)) : 0;
}

static int load_entry(struct entry *e)
{
	const char *delay = getenv("PINMEM_CACHED_LOAD_DELAY_MS");
	uint64_t size = (uint64_t)e->key.size;
	int ret;

	/* For the tests: a load slow enough to meet others, or a kill. */
	if (delay)
		usleep((useconds_t)atoi(delay) * 1000);

	if (size < 8)
		return fail(e, EINVAL, "%s: shorter than the 8-byte header length: not a safetensors file",
			    e->name);
	ret = check_unchanged(e, "between the request and the load");
	if (ret)
		return ret;
	ret = pin_dev_open(&e->dev, e->backend, &(struct pin_dev_opts){
		.size = sizeof(struct pin_dev_opts), .why = e->errtext,
		.why_len = sizeof(e->errtext) });
	if (ret)
		return -ret;
	ret = make_region(e, size);
	if (!ret)
		ret = fill_and_seal(e, size);
	if (ret)
		return ret;
	/* The whole region: a hugetlb memfd's views must be 2 MiB multiples. */
	e->view_length = pin_region_size(e->region);
	ret = pin_view_create(e->region, 0, e->view_length, 0, &e->view);
	if (ret)
		return fail(e, -ret, "view: %s", pin_region_error(e->region));
	return 0;
}

/* The load's thread: load, hand the fd to be closed, tell the loop. */
static void *load_thread(void *arg)
{
	struct entry *e = arg;
	struct event *ev = event_new(EV_LOADED);

	e->err = load_entry(e);
	if (e->err)
		entry_release(e);
	else
		fdstore_put(e);
	member_drop_fd(e->file_member, e->file_fd);
	e->file_fd = -1;
	ev->entry = e;
	events_post(&e->owner->ev, ev);
	return NULL;
}

int load_start(struct store *s, struct entry *e)
{
	e->owner = s;
	return thread_detached(load_thread, e);
}
