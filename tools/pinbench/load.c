// SPDX-License-Identifier: GPL-2.0
/*
 * pinbench load FILE: libpin's load (per backend) against the baselines
 * (baselines.c) on the same file, runs alternating, optionally inside a
 * hugetlb pool of its own.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <pin.h>

#include "lib/pages.h"
#include "bench.h"

/* Whether the load's steps were read by the module's FILL. */
static int kernel_filled(const struct pin_st *ck)
{
	struct pin_st_step step = PIN_INIT(struct pin_st_step);

	return pin_st_timeline(ck, &step, 1) > 0 &&
	       (step.flags & PIN_ST_STEP_KERNEL_FILL);
}

/* One load benchmark: its series, which is which, and its devices. */
struct load_bench {
	struct series s[9];
	int ns, i_fio, i_fio_fixed, i_pread, i_mmap, i_mmap_e2e;
	int i_lib[2], i_e2e[2];
	char names[4][64];
	struct series ph[2][NPHASES];	/* per backend: seconds of each phase */
	struct pin_dev *devs[2];
	char fb[256];			/* why libpin fell back, if it did */
};

/* Open each backend asked for and name its two series. */
static int open_backends(struct cfg *c, struct load_bench *lb)
{
	int b;

	for (b = 0; b < c->nbackends; b++) {
		char why[1024];
		struct pin_dev_opts o = {
			.size = sizeof(o), .why = why, .why_len = sizeof(why),
		};
		int ret = pin_dev_open(&lb->devs[b], c->backends[b], &o);
		const char *name;

		if (ret) {
			fprintf(stderr, "pinbench: %s backend: %s\n",
				pin_backend_name(c->backends[b]),
				why[0] ? why : strerror(-ret));
			return 1;
		}
		fprintf(stderr, "pinbench: backend %s\n",
			pin_dev_backend_why(lb->devs[b]));
		name = pin_backend_name(pin_dev_backend(lb->devs[b]));
		snprintf(lb->names[2 * b], sizeof(lb->names[0]),
			 "libpin %s (transfer)", name);
		snprintf(lb->names[2 * b + 1], sizeof(lb->names[0]),
			 "libpin %s (end to end)", name);
		lb->i_lib[b] = lb->ns++;
		lb->s[lb->i_lib[b]].name = lb->names[2 * b];
		lb->i_e2e[b] = lb->ns++;
		lb->s[lb->i_e2e[b]].name = lb->names[2 * b + 1];
	}
	return 0;
}

static int add_series(struct load_bench *lb, const char *name)
{
	lb->s[lb->ns].name = name;
	return lb->ns++;
}

/* One cold pin_st_load of file on backend b, into its series. */
static int libpin_run(struct cfg *c, struct load_bench *lb, int b,
		      const char *file, uint64_t size,
		      const struct pin_io_opts *o)
{
	struct pin_st_load_opts lo = { .size = sizeof(lo), .io = o };
	struct pin_st *ck = pin_st_create();
	struct pin_io_stats st = PIN_INIT(struct pin_io_stats);
	struct cpu_mark m;

	prep_cold(c);
	cpu_start(&m);
	if (pin_st_load(ck, lb->devs[b], file, &lo) &&
	    pin_st_load(ck, lb->devs[b], file, &lo)) {
		fprintf(stderr, "pinbench: %s\n", pin_st_error(ck));
		return 1;
	}
	add_cpu(&lb->s[lb->i_e2e[b]], cpu_per_gb(&m, size));
	add_phases(lb->ph[b], ck);
	c->pages[b] = page_kind(pin_dev_backend(lb->devs[b]),
				pin_st_region(ck, 0));
	c->kernel_fill[b] = kernel_filled(ck);
	pin_st_stats(ck, &st);
	add(&lb->s[lb->i_lib[b]], (double)st.bytes / (double)st.io_ns);
	add(&lb->s[lb->i_e2e[b]], (double)st.bytes / (double)st.ns);
	if (!st.direct || (!st.fixed_buffers && !c->kernel_fill[b]))
		snprintf(lb->fb, sizeof(lb->fb), "libpin: %s%s",
			 st.direct ? "O_DIRECT; " : "buffered; ",
			 st.fallback_reason);
	pin_st_close(ck);
	return 0;
}

/* The table's closing ratios: libpin against fio, and backend to backend. */
static void print_ratios(const struct cfg *c, const struct load_bench *lb)
{
	const struct series *s = lb->s;

	printf("  libpin (transfer) / fio: %.2f   / fio --fixedbufs: %.2f   / mmap+memcpy: %.2f\n",
	       median(&s[lb->i_lib[0]]) / median(&s[lb->i_fio]),
	       median(&s[lb->i_lib[0]]) / median(&s[lb->i_fio_fixed]),
	       median(&s[lb->i_lib[0]]) / median(&s[lb->i_mmap]));
	if (c->nbackends == 2)
		printf("  %s / %s (transfer): %.3f   (end to end): %.3f\n",
		       pin_backend_name(pin_dev_backend(lb->devs[0])),
		       pin_backend_name(pin_dev_backend(lb->devs[1])),
		       median(&s[lb->i_lib[0]]) / median(&s[lb->i_lib[1]]),
		       median(&s[lb->i_e2e[0]]) / median(&s[lb->i_e2e[1]]));
}

static int bench_load(struct cfg *c, const char *file)
{
	const struct pin_region_opts fallback = {
		.size = sizeof(fallback), .flags = PIN_REGION_FALLBACK,
	};
	struct pin_io_opts o = {
		.size = sizeof(o), .queue_depth = c->qd, .request_size = c->req,
		.flags = (c->pin_first ? PIN_IO_PIN_FIRST : 0) |
			 (c->no_kernel_fill ? PIN_IO_NO_KERNEL_FILL : 0),
	};
	struct load_bench lb;
	const char *phase_of[2] = { NULL, NULL };
	struct pin_region *r = NULL;
	struct stat sb;
	uint64_t size;
	void *dst;
	int run, b;

	if (stat(file, &sb) < 0) {
		fprintf(stderr, "pinbench: %s: %s\n", file, strerror(errno));
		return 1;
	}
	size = (uint64_t)sb.st_size;
	c->read_ahead_kb = read_ahead_kb(file);
	memset(&lb, 0, sizeof(lb));
	if (open_backends(c, &lb))
		return 1;
	lb.i_fio = add_series(&lb, "fio io_uring O_DIRECT");
	lb.i_fio_fixed = add_series(&lb, "fio io_uring O_DIRECT fixedbufs");
	lb.i_pread = add_series(&lb, "buffered pread -> pinned");
	lb.i_mmap = add_series(&lb, "mmap + memcpy -> pinned");
	lb.i_mmap_e2e = add_series(&lb, "mmap + memcpy -> fresh pinned");
	/* The baselines' pinned destination, allocated once, off the clock. */
	if (pin_region_create(lb.devs[0], size, NULL, &r) &&
	    pin_region_create(lb.devs[0], size, &fallback, &r)) {
		fprintf(stderr, "pinbench: pinned region of %llu bytes: %s\n",
			(unsigned long long)size, pin_dev_error(lb.devs[0]));
		return 1;
	}
	if (pin_region_map(r, &dst)) {
		fprintf(stderr, "pinbench: %s\n", pin_region_error(r));
		return 1;
	}
	for (run = 0; run < c->runs; run++) {
		for (b = 0; b < c->nbackends; b++)
			if (libpin_run(c, &lb, b, file, size, &o))
				return 1;
		baseline_load(c, &lb.s[lb.i_fio], BASE_FIO, file, NULL, size);
		baseline_load(c, &lb.s[lb.i_fio_fixed], BASE_FIO_FIXED, file,
			      NULL, size);
		baseline_load(c, &lb.s[lb.i_pread], BASE_PREAD, file, dst, size);
		baseline_load(c, &lb.s[lb.i_mmap], BASE_MMAP, file, dst, size);
		mmap_alloc_load(c, &lb.s[lb.i_mmap_e2e], lb.devs[0], file, size);
	}
	for (b = 0; b < c->nbackends; b++)
		phase_of[b] = pin_backend_name(pin_dev_backend(lb.devs[b]));
	report(c, "load", file, size, lb.s, lb.ns, lb.i_fio, lb.fb, phase_of,
	       lb.ph);
	if (!c->json)
		print_ratios(c, &lb);
	pin_region_close(r);
	for (b = 0; b < c->nbackends; b++)
		pin_dev_close(lb.devs[b]);
	return 0;
}

#define NR_HUGEPAGES	"/proc/sys/vm/nr_hugepages"

static long read_pool(void)
{
	FILE *f = fopen(NR_HUGEPAGES, "r");
	long v = -1;

	if (f) {
		if (fscanf(f, "%ld", &v) != 1)
			v = -1;
		fclose(f);
	}
	return v;
}

static int write_pool(long v)
{
	FILE *f = fopen(NR_HUGEPAGES, "w");
	int ok;

	if (!f)
		return -1;
	ok = fprintf(f, "%ld\n", v) > 0;
	return (fclose(f) == 0 && ok) ? 0 : -1;
}

/*
 * bench_load, with --hugetlb-pool inside a pool of 2 MiB pages big enough
 * for the baselines' region and libpin's (the kernel may give fewer: the
 * report says how many), restored afterwards.
 */
int bench_load_pool(struct cfg *c, const char *file)
{
	struct stat sb;
	long need;
	int ret;

	if (!c->hugetlb_pool)
		return bench_load(c, file);
	if (stat(file, &sb) < 0) {
		fprintf(stderr, "pinbench: %s: %s\n", file, strerror(errno));
		return 1;
	}
	need = (long)(2 * (((uint64_t)sb.st_size >> 21) + 2));
	c->pool_was = read_pool();
	if (c->pool_was < 0 || write_pool(c->pool_was + need)) {
		fprintf(stderr, "pinbench: cannot set %s (root needed)\n",
			NR_HUGEPAGES);
		return 1;
	}
	c->pool_set = read_pool();
	if (c->pool_set < c->pool_was + need)
		fprintf(stderr, "pinbench: hugetlb pool: %ld pages of the %ld asked for\n",
			c->pool_set, c->pool_was + need);
	ret = bench_load(c, file);
	if (write_pool(c->pool_was))
		fprintf(stderr, "pinbench: could not restore %s to %ld\n",
			NR_HUGEPAGES, c->pool_was);
	return ret;
}
