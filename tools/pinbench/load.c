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
	struct pin_st_step step;

	return pin_st_timeline(ck, &step, 1) > 0 &&
	       (step.flags & PIN_ST_STEP_KERNEL_FILL);
}

static int bench_load(struct cfg *c, const char *file)
{
	struct pin_io_opts o = { .queue_depth = c->qd, .request_size = c->req,
				 .flags = (c->pin_first ? PIN_IO_PIN_FIRST : 0) |
					  (c->no_kernel_fill ?
					   PIN_IO_NO_KERNEL_FILL : 0) };
	struct series s[9];
	struct pin_dev *devs[2] = { 0 };
	struct pin_region *r = NULL;
	char fb[256] = "";
	struct stat sb;
	void *dst;
	int run, b, ns = 0, i_fio, i_fio_fixed, i_pread, i_mmap, i_mmap_e2e;
	int i_lib[2], i_e2e[2];
	uint64_t size;
	char names[4][64];
	struct series ph[2][NPHASES];	/* per backend: seconds of each phase */
	const char *phase_of[2] = { NULL, NULL };

	if (stat(file, &sb) < 0) {
		fprintf(stderr, "pinbench: %s: %s\n", file, strerror(errno));
		return 1;
	}
	size = (uint64_t)sb.st_size;
	c->read_ahead_kb = read_ahead_kb(file);
	memset(s, 0, sizeof(s));
	memset(ph, 0, sizeof(ph));
	for (b = 0; b < c->nbackends; b++) {
		char why[1024];
		int ret = pin_open_why(&devs[b], c->backends[b], why, sizeof(why));

		if (ret) {
			fprintf(stderr, "pinbench: %s backend: %s\n",
				pin_backend_name(c->backends[b]),
				why[0] ? why : strerror(-ret));
			return 1;
		}
		fprintf(stderr, "pinbench: backend %s\n",
			pin_dev_backend_why(devs[b]));
		snprintf(names[2 * b], sizeof(names[0]), "libpin %s (transfer)",
			 pin_backend_name(pin_dev_backend(devs[b])));
		snprintf(names[2 * b + 1], sizeof(names[0]), "libpin %s (end to end)",
			 pin_backend_name(pin_dev_backend(devs[b])));
		i_lib[b] = ns++;
		s[i_lib[b]].name = names[2 * b];
		i_e2e[b] = ns++;
		s[i_e2e[b]].name = names[2 * b + 1];
	}
	i_fio = ns++;
	s[i_fio].name = "fio io_uring O_DIRECT";
	i_fio_fixed = ns++;
	s[i_fio_fixed].name = "fio io_uring O_DIRECT fixedbufs";
	i_pread = ns++;
	s[i_pread].name = "buffered pread -> pinned";
	i_mmap = ns++;
	s[i_mmap].name = "mmap + memcpy -> pinned";
	i_mmap_e2e = ns++;
	s[i_mmap_e2e].name = "mmap + memcpy -> fresh pinned";
	/* The baselines' pinned destination, allocated once, off the clock. */
	if (pin_alloc(devs[0], size, 0, &r) &&
	    pin_alloc(devs[0], size, PIN_ALLOC_FALLBACK, &r)) {
		fprintf(stderr, "pinbench: pinned region of %llu bytes: %s\n",
			(unsigned long long)size, pin_dev_error(devs[0]));
		return 1;
	}
	if (pin_region_map(r, &dst)) {
		fprintf(stderr, "pinbench: %s\n", pin_region_error(r));
		return 1;
	}
	for (run = 0; run < c->runs; run++) {
		for (b = 0; b < c->nbackends; b++) {
			struct pin_st *ck = pin_st_new();
			struct pin_io_stats st;
			struct cpu_mark m;

			prep_cold(c);
			cpu_start(&m);
			if (pin_st_load(ck, devs[b], file, &o) &&
			    pin_st_load(ck, devs[b], file, &o)) {
				fprintf(stderr, "pinbench: %s\n", pin_st_error(ck));
				return 1;
			}
			add_cpu(&s[i_e2e[b]], cpu_per_gb(&m, size));
			add_phases(ph[b], ck);
			c->pages[b] = page_kind(pin_dev_backend(devs[b]),
						pin_st_region(ck, 0));
			c->kernel_fill[b] = kernel_filled(ck);
			pin_st_stats(ck, &st);
			add(&s[i_lib[b]], (double)st.bytes / (double)st.io_ns);
			add(&s[i_e2e[b]], (double)st.bytes / (double)st.ns);
			if (!st.direct || (!st.fixed_buffers &&
					    !c->kernel_fill[b]))
				snprintf(fb, sizeof(fb), "libpin: %s%s",
					 st.direct ? "O_DIRECT; " : "buffered; ",
					 st.fallback_reason);
			pin_st_free(ck);
		}
		baseline_load(c, &s[i_fio], BASE_FIO, file, NULL, size);
		baseline_load(c, &s[i_fio_fixed], BASE_FIO_FIXED, file, NULL,
			      size);
		baseline_load(c, &s[i_pread], BASE_PREAD, file, dst, size);
		baseline_load(c, &s[i_mmap], BASE_MMAP, file, dst, size);
		mmap_alloc_load(c, &s[i_mmap_e2e], devs[0], file, size);
	}
	for (b = 0; b < c->nbackends; b++)
		phase_of[b] = pin_backend_name(pin_dev_backend(devs[b]));
	report(c, "load", file, size, s, ns, i_fio, fb, phase_of, ph);
	if (!c->json) {
		printf("  libpin (transfer) / fio: %.2f   / fio --fixedbufs: %.2f   / mmap+memcpy: %.2f\n",
		       median(&s[i_lib[0]]) / median(&s[i_fio]),
		       median(&s[i_lib[0]]) / median(&s[i_fio_fixed]),
		       median(&s[i_lib[0]]) / median(&s[i_mmap]));
		if (c->nbackends == 2)
			printf("  %s / %s (transfer): %.3f   (end to end): %.3f\n",
			       pin_backend_name(pin_dev_backend(devs[0])),
			       pin_backend_name(pin_dev_backend(devs[1])),
			       median(&s[i_lib[0]]) / median(&s[i_lib[1]]),
			       median(&s[i_e2e[0]]) / median(&s[i_e2e[1]]));
	}
	pin_region_free(r);
	for (b = 0; b < c->nbackends; b++)
		pin_close(devs[b]);
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
