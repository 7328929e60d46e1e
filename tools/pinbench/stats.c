// SPDX-License-Identifier: GPL-2.0
/*
 * pinbench's numbers: the clock, cold caches, CPU time per GB moved, and
 * the runs of each method with their medians.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lib/cpu.h"
#include "bench.h"

uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

int drop_caches(void)
{
	int fd;

	sync();
	fd = open("/proc/sys/vm/drop_caches", O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (write(fd, "3", 1) != 1) {
		int err = -errno;

		close(fd);
		return err;
	}
	close(fd);
	return 0;
}

void cpu_start(struct cpu_mark *m)
{
	m->self = cpu_seconds(RUSAGE_SELF);
	m->children = cpu_seconds(RUSAGE_CHILDREN);
}

/* CPU seconds since the mark, per GB of bytes moved. */
double cpu_per_gb(const struct cpu_mark *m, uint64_t bytes)
{
	double used = cpu_seconds(RUSAGE_SELF) - m->self +
		      cpu_seconds(RUSAGE_CHILDREN) - m->children;

	return bytes ? used / ((double)bytes / 1e9) : 0;
}

void add(struct series *s, double gbps)
{
	if (s->n < MAX_RUNS)
		s->v[s->n++] = gbps;
}

void add_cpu(struct series *s, double cpu_s_per_gb)
{
	if (s->ncpu < MAX_RUNS)
		s->cpu[s->ncpu++] = cpu_s_per_gb;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

double median_of(const double *in, int n)
{
	double v[MAX_RUNS];

	if (!n)
		return 0;
	memcpy(v, in, sizeof(double) * (size_t)n);
	qsort(v, (size_t)n, sizeof(double), cmp_d);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

double median(const struct series *s)
{
	return median_of(s->v, s->n);
}
