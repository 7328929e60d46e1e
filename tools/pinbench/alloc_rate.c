// SPDX-License-Identifier: GPL-2.0
/*
 * pinbench alloc-rate: the kernel's ALLOC rate on every online CPU
 * against one CPU, same kernel, same run. The module parameter
 * alloc_threads is set to 1 (the caller alone) and to 0 (all CPUs) in
 * turn, one ALLOC of the given size each, alternating so that a change
 * in the machine's load falls on both; the old value is restored. Only
 * the ALLOC is timed (freeing is not), after one untimed ALLOC of the
 * same size.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <pin.h>

#include "bench.h"
#include "lib/args.h"

#define ALLOC_THREADS_PARAM "/sys/module/pinmem/parameters/alloc_threads"

static int alloc_threads_get(unsigned long *v)
{
	FILE *f = fopen(ALLOC_THREADS_PARAM, "re");
	int ok;

	if (!f)
		return -errno;
	ok = fscanf(f, "%lu", v) == 1;
	fclose(f);
	return ok ? 0 : -EIO;
}

static int alloc_threads_set(unsigned long v)
{
	char buf[32];
	int fd, len, ret = 0;

	fd = open(ALLOC_THREADS_PARAM, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	len = snprintf(buf, sizeof(buf), "%lu\n", v);
	if (write(fd, buf, (size_t)len) != len)
		ret = -errno;
	close(fd);
	return ret;
}

/* Seconds one ALLOC of size takes with threads workers; < 0 on error. */
static double timed_alloc(struct pin_dev *dev, uint64_t size,
			  unsigned long threads)
{
	struct pin_region *r;
	uint64_t t0;
	double s;
	int ret;

	ret = alloc_threads_set(threads);
	if (ret) {
		fprintf(stderr, "pinbench alloc-rate: %s: %s\n",
			ALLOC_THREADS_PARAM, strerror(-ret));
		return -1;
	}
	t0 = now_ns();
	if (pin_region_create(dev, size, NULL, &r)) {
		fprintf(stderr, "pinbench alloc-rate: %s\n", pin_dev_error(dev));
		return -1;
	}
	s = (double)(now_ns() - t0) / 1e9;
	pin_region_close(r);
	return s;
}

/* runs alternating pairs; medians of each into one[0], all[0]. */
static int alloc_rate_runs(struct pin_dev *dev, uint64_t size, int runs,
			   double *one, double *all)
{
	int i;

	/* Untimed: the first touch of memory (a VM's host faults) is in neither. */
	if (timed_alloc(dev, size, 0) < 0)
		return -1;
	printf("  %4s %12s %12s %8s\n", "run", "1 CPU (s)", "all (s)",
	       "ratio");
	for (i = 0; i < runs; i++) {
		one[i] = timed_alloc(dev, size, 1);
		if (one[i] < 0)
			return -1;
		all[i] = timed_alloc(dev, size, 0);
		if (all[i] < 0)
			return -1;
		printf("  %4d %12.3f %12.3f %7.2fx\n", i + 1, one[i], all[i],
		       one[i] / all[i]);
		fflush(stdout);
	}
	return 0;
}

int bench_alloc_rate(struct cfg *c, uint64_t size)
{
	double one[MAX_RUNS], all[MAX_RUNS], m1, ma, mib = (double)size / (1 << 20);
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	unsigned long was;
	struct pin_dev *dev;
	int ret;

	ret = pin_dev_open(&dev, PIN_BACKEND_DEVICE, NULL);
	if (ret) {
		fprintf(stderr, "pinbench alloc-rate: needs /dev/pinmem (%s)\n",
			strerror(-ret));
		return ret == -ENOENT ? TOOLS_EXIT_NODEV : TOOLS_EXIT_FAILED;
	}
	ret = alloc_threads_get(&was);
	if (ret) {
		fprintf(stderr, "pinbench alloc-rate: %s: %s\n",
			ALLOC_THREADS_PARAM, strerror(-ret));
		pin_dev_close(dev);
		return 1;
	}
	printf("pinbench alloc-rate: ALLOC of %.0f MiB, %d runs alternating 1 CPU and all %ld online\n",
	       mib, c->runs, cpus);
	ret = alloc_rate_runs(dev, size, c->runs, one, all);
	if (alloc_threads_set(was))
		fprintf(stderr, "pinbench alloc-rate: could not restore alloc_threads=%lu\n",
			was);
	pin_dev_close(dev);
	if (ret)
		return 1;
	m1 = median_of(one, c->runs);
	ma = median_of(all, c->runs);
	printf("median: 1 CPU %.3f s (%.0f MiB/s), all %ld CPUs %.3f s (%.0f MiB/s): %.2fx the rate\n",
	       m1, mib / m1, cpus, ma, mib / ma, m1 / ma);
	return 0;
}
