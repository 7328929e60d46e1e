// SPDX-License-Identifier: GPL-2.0
/*
 * pinbench donate: what DONATE costs now that it counts page references.
 * For each region size, the whole region is mapped through a view and
 * unmapped (so every chunk is marked for the reference check), then
 * DONATE is timed; REOPEN and a new view mapping between runs mark the
 * chunks again. Beside it: DONATE of a region no view ever mapped (no
 * chunk to look at) and a trivial ioctl (VERSION) on the same region fd,
 * the unit the DONATE times are divided by.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <pin.h>
#include <uapi/pinmem.h>

#include "bench.h"
#include "lib/args.h"

/* Median of runs timings of one DONATE of r after a full view map/unmap. */
static double donate_viewed_ns(struct pin_region *r, struct pin_view *v,
			       int runs, struct series *s)
{
	void *p;
	int i;

	s->n = 0;
	for (i = 0; i < runs; i++) {
		uint64_t t0;

		if (pin_view_map(v, PROT_READ, &p) || pin_view_unmap(v, p))
			return -1;
		t0 = now_ns();
		if (pin_region_donate(r, 0))
			return -1;
		add(s, (double)(now_ns() - t0));
		if (pin_region_reopen(r))
			return -1;
	}
	return median(s);
}

static double donate_unviewed_ns(struct pin_region *r, int runs,
				 struct series *s)
{
	int i;

	s->n = 0;
	for (i = 0; i < runs; i++) {
		uint64_t t0 = now_ns();

		if (pin_region_donate(r, 0))
			return -1;
		add(s, (double)(now_ns() - t0));
		if (pin_region_reopen(r))
			return -1;
	}
	return median(s);
}

static double trivial_ns(struct pin_region *r, int runs, struct series *s)
{
	struct pinmem_version ver;
	int i;

	s->n = 0;
	for (i = 0; i < runs; i++) {
		uint64_t t0 = now_ns();

		if (ioctl(pin_region_fd(r), PINMEM_IOC_VERSION, &ver))
			return -1;
		add(s, (double)(now_ns() - t0));
	}
	return median(s);
}

/* One row: sizes from 2 MiB doubling up to max. */
int bench_donate(struct cfg *c, uint64_t max)
{
	struct series s;
	struct pin_dev *dev;
	uint64_t size;
	int ret;

	ret = pin_dev_open(&dev, PIN_BACKEND_DEVICE, NULL);
	if (ret) {
		fprintf(stderr, "pinbench donate: needs /dev/pinmem (%s)\n",
			strerror(-ret));
		return ret == -ENOENT ? TOOLS_EXIT_NODEV : TOOLS_EXIT_FAILED;
	}
	printf("pinbench donate: %d runs per size, medians; DONATE after a view mapped the whole region\n",
	       c->runs);
	printf("  %10s %7s %14s %14s %12s %10s %10s\n", "size", "chunks",
	       "donate viewed", "donate unviewed", "VERSION ioctl",
	       "viewed/ioctl", "unviewed/ioctl");
	for (size = 2ULL << 20; size <= max; size *= 2) {
		struct pin_region *r;
		struct pin_view *v;
		double dv, du, tr;

		if (pin_region_create(dev, size, NULL, &r)) {
			fprintf(stderr, "pinbench donate: %llu MiB: %s\n",
				(unsigned long long)(size >> 20),
				pin_dev_error(dev));
			break;
		}
		if (pin_view_create(r, 0, size, 0, &v)) {
			fprintf(stderr, "pinbench donate: view: %s\n",
				pin_region_error(r));
			pin_region_close(r);
			break;
		}
		tr = trivial_ns(r, MAX_RUNS, &s);
		du = donate_unviewed_ns(r, c->runs, &s);
		dv = donate_viewed_ns(r, v, c->runs, &s);
		pin_view_close(v);
		pin_region_close(r);
		if (tr < 0 || du < 0 || dv < 0) {
			fprintf(stderr, "pinbench donate: %llu MiB: a step failed\n",
				(unsigned long long)(size >> 20));
			pin_dev_close(dev);
			return 1;
		}
		printf("  %6llu MiB %7llu %11.1f us %12.1f us %10.1f us %9.1fx %9.1fx\n",
		       (unsigned long long)(size >> 20),
		       (unsigned long long)(size >> 21), dv / 1e3, du / 1e3,
		       tr / 1e3, dv / tr, du / tr);
		fflush(stdout);
	}
	pin_dev_close(dev);
	return 0;
}
