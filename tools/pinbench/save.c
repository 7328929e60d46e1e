// SPDX-License-Identifier: GPL-2.0
/*
 * pinbench save [OUT]: pin_st_save of a pinned checkpoint against fio's
 * O_DIRECT writes + fsync of the same size, runs alternating.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <pin.h>

#include "bench.h"

enum { NT = 16 };	/* tensors in the checkpoint saved */

/*
 * The checkpoint to save: NT byte tensors tiling r (size bytes, mapped at
 * map), filled with pseudo-random bytes.
 */
static void make_tensors(struct pin_region *r, void *map, uint64_t size,
			 struct pin_st_tensor *t, uint64_t *shapes,
			 char (*names)[16])
{
	uint64_t per = size / NT, i;
	uint32_t x = 12345;
	uint8_t *p;

	for (p = map, i = 0; i < size; i++) {
		x = x * 1103515245u + 12345u;
		p[i] = (uint8_t)(x >> 16);
	}
	for (i = 0; i < NT; i++) {
		snprintf(names[i], sizeof(names[i]), "w%llu", (unsigned long long)i);
		shapes[i] = per;
		t[i] = (struct pin_st_tensor){
			.size = sizeof(struct pin_st_tensor),
			.name = names[i], .dtype = PIN_DT_U8, .ndim = 1,
			.shape = &shapes[i], .nbytes = per, .region = r,
			.region_offset = i * per,
		};
	}
}

int bench_save(struct cfg *c, const char *out)
{
	const struct pin_region_opts fallback = {
		.size = sizeof(fallback), .flags = PIN_REGION_FALLBACK,
	};
	struct pin_io_opts o = {
		.size = sizeof(o), .queue_depth = c->qd, .request_size = c->req,
	};
	struct pin_st_tensor t[NT];
	uint64_t shapes[NT], size = c->save_size / NT * NT;
	char names[NT][16], fiofile[4096], fb[256] = "";
	struct series s[4];
	struct pin_region *r;
	struct pin_dev *dev;
	struct pin_st *ck = pin_st_create();
	void *map;
	int run;

	if (pin_dev_open(&dev, c->backends[0], NULL) ||
	    (pin_region_create(dev, size, NULL, &r) &&
	     pin_region_create(dev, size, &fallback, &r)) ||
	    pin_region_map(r, &map)) {
		fprintf(stderr, "pinbench: a pinned region of %llu bytes failed\n",
			(unsigned long long)size);
		return 1;
	}
	make_tensors(r, map, size, t, shapes, names);
	snprintf(fiofile, sizeof(fiofile), "%s.fio", out);
	memset(s, 0, sizeof(s));
	s[0].name = "libpin pin_st_save (transfer)";
	s[1].name = "libpin pin_st_save (end to end)";
	s[2].name = "fio io_uring O_DIRECT + fsync";
	s[3].name = "fio O_DIRECT + fsync, fixedbufs";
	for (run = 0; run < c->runs; run++) {
		struct pin_io_stats st = PIN_INIT(struct pin_io_stats);
		struct cpu_mark m;

		unlink(out);
		prep_cold(c);
		cpu_start(&m);
		if (pin_st_save(ck, out, t, NT, NULL, NULL, 0, &o)) {
			fprintf(stderr, "pinbench: %s\n", pin_st_error(ck));
			return 1;
		}
		add_cpu(&s[1], cpu_per_gb(&m, size));
		pin_st_stats(ck, &st);
		add(&s[0], (double)st.bytes / (double)st.io_ns);
		add(&s[1], (double)st.bytes / (double)st.ns);
		if (!st.direct || !st.fixed_buffers)
			snprintf(fb, sizeof(fb), "libpin: %s%s",
				 st.direct ? "O_DIRECT; " : "buffered; ",
				 st.fallback_reason);
		unlink(fiofile);
		prep_cold(c);
		cpu_start(&m);
		add(&s[2], fio_save(c, fiofile, size, 0) / 1e9);
		add_cpu(&s[2], cpu_per_gb(&m, size));
		unlink(fiofile);
		prep_cold(c);
		cpu_start(&m);
		add(&s[3], fio_save(c, fiofile, size, 1) / 1e9);
		add_cpu(&s[3], cpu_per_gb(&m, size));
	}
	unlink(out);
	unlink(fiofile);
	report(c, "save", out, size, s, 4, 2, fb, NULL, NULL);
	pin_st_close(ck);
	pin_region_close(r);
	pin_dev_close(dev);
	return 0;
}
