// SPDX-License-Identifier: MIT
/*
 * Where a load puts each tensor of a file: where the file has it, or,
 * with PIN_ST_LOAD_ALIGN, at a multiple of PIN_ST_ALIGN of its region,
 * moved there inside the region after the read and before the seal.
 */
#include <errno.h>
#include <sys/mman.h>

#include "safetensors_ck.h"

#define ALIGN_UP(x, a)	(((x) + (a) - 1) / (a) * (a))

/*
 * The places of the tensors from first on (sorted by data offset, as the
 * header check leaves them), relative to the data section's start, which
 * lies at region offset base. Returns the bytes from there to the end of
 * the last tensor (the data length when nothing moves).
 */
uint64_t pin__st_plan(struct pin_st *ck, size_t first, uint64_t base,
		      uint64_t data_len)
{
	uint64_t at = 0;
	size_t i;

	for (i = first; i < ck->n; i++) {
		struct st_tensor *t = &ck->t[i];

		t->place = t->begin;
		if (ck->load_flags & PIN_ST_LOAD_ALIGN)
			t->place = ALIGN_UP(base + at, PIN_ST_ALIGN) - base;
		at = t->place + (t->end - t->begin);
	}
	return at > data_len ? at : data_len;
}

/*
 * Move each tensor from first on from where the read put it (data +
 * begin) to its place (data + place), last first: places never lie
 * before offsets, so a move overwrites only bytes already moved away.
 * The padding between tensors is zeroed.
 */
static uint64_t move_tensors(struct pin_st *ck, size_t first, char *data)
{
	uint64_t moved = 0, at = 0;
	size_t i;

	for (i = ck->n; i-- > first;) {
		struct st_tensor *t = &ck->t[i];

		if (t->place == t->begin)
			continue;
		memmove(data + t->place, data + t->begin, t->end - t->begin);
		moved += t->end - t->begin;
	}
	for (i = first; i < ck->n; i++) {
		struct st_tensor *t = &ck->t[i];

		memset(data + at, 0, t->place - at);
		at = t->place + (t->end - t->begin);
	}
	return moved;
}

/*
 * The planned moves of the tensors from first on, in region r (open)
 * whose data section starts at region offset base; map: a writable
 * mapping of r, or NULL to make one (a portable region's owner mapping
 * is read-only once filled).
 */
int pin__st_place(struct pin_st *ck, struct pin_region *r, size_t first,
		  uint64_t base, char *map)
{
	uint64_t t0 = pin__now_ns();
	char *w = map;
	int ret = 0;

	if (!(ck->load_flags & PIN_ST_LOAD_ALIGN))
		return 0;
	if (!w && r->map && (r->map_prot & PROT_WRITE))
		w = r->map;
	if (!w) {
		/* The pages are there (filled): map them all at once. */
		w = mmap(NULL, r->size, PROT_READ | PROT_WRITE,
			 MAP_SHARED | MAP_POPULATE, r->fd, 0);
		if (w == MAP_FAILED)
			return pin__st_fail(ck, -errno, "region %llu: a writable mapping to align the tensors in: %s",
					    (unsigned long long)r->id,
					    strerror(errno));
	}
	ck->phases.align_bytes += move_tensors(ck, first, w + base);
	if (w != map && w != r->map)
		ret = munmap(w, r->size) ? -errno : 0;
	ck->phases.align_ns += pin__now_ns() - t0;
	return ret;
}

/*
 * The image of file fi (len bytes of the file: its header and data
 * section) parsed as pin__st_parse_image does, with each tensor's data
 * where a PIN_ST_LOAD_WHOLE_FILE | PIN_ST_LOAD_ALIGN load puts it: the
 * image of such a load, cap bytes of it readable at buf (pinmem-cached's
 * CACHE_LOAD_ALIGNED view).
 */
int pin__st_parse_placed(struct pin_st *ck, unsigned fi, const void *buf,
			 uint64_t len, uint64_t cap)
{
	struct st_file *sf = &ck->files[fi];
	unsigned flags = ck->load_flags;
	size_t i, first = ck->n;
	uint64_t end;
	int ret;

	ret = pin__st_parse_image(ck, fi, buf, len);
	if (ret)
		return ret;
	ck->load_flags = PIN_ST_LOAD_ALIGN;
	end = sf->data_start + pin__st_plan(ck, first, sf->data_start,
					    sf->data_len);
	ck->load_flags = flags;
	if (end > cap)
		return pin__st_fail(ck, -EINVAL, "%s: its tensors on %u bytes end at %llu, past the %llu bytes of the image",
				    sf->path, PIN_ST_ALIGN,
				    (unsigned long long)end,
				    (unsigned long long)cap);
	for (i = first; i < ck->n; i++)
		ck->t[i].pub.data = (char *)buf + sf->data_start +
				    ck->t[i].place;
	return 0;
}
