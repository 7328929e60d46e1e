// SPDX-License-Identifier: MIT
/*
 * GPU check: how fast libpin registers a region with CUDA, and whether DMA
 * from a registered pinmem region runs at pinned speed. Needs a GPU and
 * the CUDA driver; built and run by tests/gpu/check.sh.
 *
 *   bandwidth [GiB [iterations]]      (default 4 GiB, 5 iterations)
 *
 * The region is placed on GPU 0's NUMA node where the platform names one
 * (pin_cuda_numa_node, preferred: PIN_REGION_ANY_NODE), and the line
 * before the table says where its memory went. Times
 * pin_cuda_register/unregister of a region of that size, then
 * cuMemcpyHtoD/DtoH of the whole buffer from the registered region, from
 * cuMemHostAlloc memory and from malloc (pageable), several iterations
 * each, and prints the medians in GB/s (10^9 bytes per second). The
 * device-to-host copy into the region is compared with the pattern
 * written before, so a registration that did not pin the right pages
 * shows as a failure, not a number.
 */
#include <cuda.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pin.h"

#define GiB (1ULL << 30)

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void cu_check(CUresult res, const char *what)
{
	const char *name = NULL;

	if (res == CUDA_SUCCESS)
		return;
	cuGetErrorName(res, &name);
	fprintf(stderr, "bandwidth: %s: %s\n", what, name ? name : "?");
	exit(1);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double median(double *v, int n)
{
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Median GB/s of iters whole-buffer copies each way between host and dev. */
static void copy_rates(void *host, CUdeviceptr dev, size_t size, int iters,
		       double *h2d, double *d2h)
{
	double t[64];
	int i;

	for (i = 0; i < iters; i++) {
		double t0 = now();

		cu_check(cuMemcpyHtoD(dev, host, size), "cuMemcpyHtoD");
		cu_check(cuCtxSynchronize(), "cuCtxSynchronize");
		t[i] = size / (now() - t0) / 1e9;
	}
	*h2d = median(t, iters);
	for (i = 0; i < iters; i++) {
		double t0 = now();

		cu_check(cuMemcpyDtoH(host, dev, size), "cuMemcpyDtoH");
		cu_check(cuCtxSynchronize(), "cuCtxSynchronize");
		t[i] = size / (now() - t0) / 1e9;
	}
	*d2h = median(t, iters);
}

static void fill(unsigned char *p, size_t size, unsigned seed)
{
	size_t i;

	for (i = 0; i < size; i += 4096)
		p[i] = (unsigned char)(seed + i / 4096 * 131);
}

static int check_fill(const unsigned char *p, size_t size, unsigned seed)
{
	size_t i;

	for (i = 0; i < size; i += 4096)
		if (p[i] != (unsigned char)(seed + i / 4096 * 131))
			return -1;
	return 0;
}

/* Where the region lies, against the GPU's node (-1: none named). */
static void print_nodes(struct pin_region *r, int gpu_node)
{
	uint64_t bytes[64];
	int n = pin_region_nodes(r, bytes, 64), i;

	printf("GPU 0's NUMA node: %d; the region's memory by node:", gpu_node);
	if (n < 0)
		printf(" unknown (%s)", pin_region_error(r));
	for (i = 0; i < n && i < 64; i++)
		if (bytes[i])
			printf(" %d: %.2f GiB", i, (double)bytes[i] / GiB);
	printf("\n");
}

int main(int argc, char **argv)
{
	double gib = argc > 1 ? atof(argv[1]) : 4;
	int iters = argc > 2 ? atoi(argv[2]) : 5;
	size_t size = (size_t)(gib * GiB) & ~(size_t)(2 * 1024 * 1024 - 1);
	double h2d[3], d2h[3], t0, t_reg, t_unreg;
	struct pin_region_opts ro = PIN_INIT(struct pin_region_opts);
	struct pin_cuda_opts co = PIN_INIT(struct pin_cuda_opts);
	struct pin_region *r;
	struct pin_cuda *pc;
	struct pin_dev *pd;
	CUdeviceptr dev;
	CUcontext ctx;
	CUdevice cudev;
	void *region, *hostalloc, *pageable;
	char why[1024], name[128];
	int err, node;

	if (size == 0 || iters < 1 || iters > 64) {
		fprintf(stderr, "usage: bandwidth [GiB [iterations 1..64]]\n");
		return 2;
	}

	/* The driver API for the measurement. */
	cu_check(cuInit(0), "cuInit");
	cu_check(cuDeviceGet(&cudev, 0), "cuDeviceGet");
	cu_check(cuDeviceGetName(name, sizeof(name), cudev), "cuDeviceGetName");
	cu_check(cuDevicePrimaryCtxRetain(&ctx, cudev), "cuDevicePrimaryCtxRetain");
	cu_check(cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
	cu_check(cuMemAlloc(&dev, size), "cuMemAlloc");

	/* libpin: a region, its owner mapping, registration. */
	err = pin_dev_open(&pd, PIN_BACKEND_AUTO, NULL);
	if (err) {
		fprintf(stderr, "bandwidth: pin_dev_open: %s\n", strerror(-err));
		return 1;
	}
	co.why = why;
	co.why_len = sizeof(why);
	err = pin_cuda_open(&pc, 0, &co);
	if (err) {
		fprintf(stderr, "bandwidth: pin_cuda_open: %s\n", why);
		return 1;
	}
	/* Beside the GPU where the platform names its node (either backend). */
	node = pin_cuda_numa_node(pc);
	if (node < 0)
		node = -1;	/* none named, or sysfs could not say */
	ro.flags = PIN_REGION_FALLBACK;
	if (node >= 0) {
		ro.flags |= PIN_REGION_NODE | PIN_REGION_ANY_NODE;
		ro.node = node;
	}
	err = pin_region_create(pd, size, &ro, &r);
	if (err) {
		fprintf(stderr, "bandwidth: pin_region_create %zu bytes: %s\n", size,
			pin_dev_error(pd));
		return 1;
	}
	err = pin_region_map(r, &region);
	if (err) {
		fprintf(stderr, "bandwidth: map: %s\n", pin_region_error(r));
		return 1;
	}
	fill(region, size, 1);
	print_nodes(r, node);

	t0 = now();
	err = pin_cuda_register(pc, r, 0);
	t_reg = now() - t0;
	if (err) {
		fprintf(stderr, "bandwidth: pin_cuda_register: %s\n",
			pin_cuda_error(pc));
		return 1;
	}
	copy_rates(region, dev, size, iters, &h2d[0], &d2h[0]);
	/* The device now holds pattern 1; write it back over pattern 2. */
	fill(region, size, 2);
	cu_check(cuMemcpyDtoH(region, dev, size), "cuMemcpyDtoH");
	if (check_fill(region, size, 1)) {
		fprintf(stderr, "bandwidth: data read back into the region differs\n");
		return 1;
	}
	t0 = now();
	err = pin_cuda_unregister(pc, r);
	t_unreg = now() - t0;
	if (err) {
		fprintf(stderr, "bandwidth: pin_cuda_unregister: %s\n",
			pin_cuda_error(pc));
		return 1;
	}

	cu_check(cuMemHostAlloc(&hostalloc, size, CU_MEMHOSTALLOC_PORTABLE),
		 "cuMemHostAlloc");
	memset(hostalloc, 1, size);
	copy_rates(hostalloc, dev, size, iters, &h2d[1], &d2h[1]);
	cu_check(cuMemFreeHost(hostalloc), "cuMemFreeHost");

	pageable = malloc(size);
	if (!pageable) {
		fprintf(stderr, "bandwidth: malloc %zu: out of memory\n", size);
		return 1;
	}
	memset(pageable, 1, size);
	copy_rates(pageable, dev, size, iters, &h2d[2], &d2h[2]);
	free(pageable);

	printf("device 0: %s; %.2f GiB, median of %d copies; backend %s\n",
	       name, (double)size / GiB, iters,
	       pin_backend_name(pin_dev_backend(pd)));
	printf("pin_cuda_register    %8.3f s  %7.2f GB/s  (%llu piece(s) of <= %llu GiB)\n",
	       t_reg, size / t_reg / 1e9,
	       (unsigned long long)((size + pin_cuda_chunk_max(pc) - 1) /
				    pin_cuda_chunk_max(pc)),
	       (unsigned long long)(pin_cuda_chunk_max(pc) / GiB));
	printf("pin_cuda_unregister  %8.3f s  %7.2f GB/s\n", t_unreg,
	       size / t_unreg / 1e9);
	printf("%-24s %10s %10s\n", "host memory", "H2D GB/s", "D2H GB/s");
	printf("%-24s %10.2f %10.2f\n", "pinmem (registered)", h2d[0], d2h[0]);
	printf("%-24s %10.2f %10.2f\n", "cuMemHostAlloc", h2d[1], d2h[1]);
	printf("%-24s %10.2f %10.2f\n", "malloc (pageable)", h2d[2], d2h[2]);

	pin_cuda_close(pc);
	cu_check(cuMemFree(dev), "cuMemFree");
	cu_check(cuDevicePrimaryCtxRelease(cudev), "cuDevicePrimaryCtxRelease");
	if (pin_region_close(r))
		fprintf(stderr, "bandwidth: free: %s\n", pin_region_error(r));
	pin_dev_close(pd);
	return 0;
}
