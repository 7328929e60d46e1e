// SPDX-License-Identifier: GPL-2.0
/*
 * Scale checks for pinmem.ko, in a guest (make scale): one large region,
 * many regions, many mappings of one region. Each cost is printed as a
 * ratio to the same operation in the small case, measured in the same
 * run (TCG times mean nothing on their own).
 *
 *   scale BIG_MIB NR_REGIONS NR_MAPPINGS
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#include <fcntl.h>

#include <uapi/pinmem.h>

#define MiB (1ULL << 20)
#define SMALL 100

static int failed;

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int alloc(int dev, uint64_t size, uint64_t *id)
{
	struct pinmem_alloc a = { .size = size };

	if (ioctl(dev, PINMEM_IOC_ALLOC, &a)) {
		fprintf(stderr, "ALLOC %llu MiB: %s\n",
			(unsigned long long)(size / MiB), strerror(errno));
		exit(1);
	}
	if (id)
		*id = a.region_id;
	return a.fd;
}

static double list_once(int dev, struct pinmem_region_info *buf, uint32_t cap)
{
	struct pinmem_list l = { .regions_ptr = (uintptr_t)buf, .capacity = cap };
	double t0 = now();

	if (ioctl(dev, PINMEM_IOC_LIST, &l) || l.count > cap) {
		fprintf(stderr, "LIST: %s (count %u)\n", strerror(errno), l.count);
		exit(1);
	}
	return now() - t0;
}

static double holders_once(int fd, struct pinmem_holder *buf, uint32_t cap,
			   uint32_t want)
{
	struct pinmem_holders q = { .holders_ptr = (uintptr_t)buf,
				    .capacity = cap };
	double t0 = now();

	if (ioctl(fd, PINMEM_IOC_HOLDERS, &q) || q.count != want) {
		fprintf(stderr, "HOLDERS: %s (count %u, want %u)\n",
			strerror(errno), q.count, want);
		exit(1);
	}
	return now() - t0;
}

static double donate_once(int rfd)
{
	struct pinmem_transition t = { 0 };
	double t0 = now(), dt;

	if (ioctl(rfd, PINMEM_IOC_DONATE, &t)) {
		fprintf(stderr, "DONATE: %s\n", strerror(errno));
		exit(1);
	}
	dt = now() - t0;
	if (ioctl(rfd, PINMEM_IOC_REOPEN, &t)) {
		fprintf(stderr, "REOPEN: %s\n", strerror(errno));
		exit(1);
	}
	return dt;
}

static void ratio(const char *what, double small, double big, double limit)
{
	double r = big / small;

	printf("# %-44s small %.6f s, large %.6f s: %.2fx%s\n", what, small,
	       big, r, r > limit ? "  (over the bound)" : "");
	if (r > limit)
		failed = 1;
}

static void big_region(int dev, uint64_t big_mib)
{
	double t0, small, big;
	int fd;

	t0 = now();
	close(alloc(dev, 256 * MiB, NULL));
	small = (now() - t0) / 256;
	t0 = now();
	fd = alloc(dev, big_mib * MiB, NULL);
	big = (now() - t0) / big_mib;
	close(fd);
	printf("# ALLOC of %llu MiB: %.0f MiB/s; of 256 MiB: %.0f MiB/s (TCG)\n",
	       (unsigned long long)big_mib, 1 / big, 1 / small);
	ratio("ALLOC time per MiB, big region / 256 MiB", small, big, 2);
}

static void many_regions(int dev, unsigned n)
{
	struct pinmem_region_info *info = calloc(n, sizeof(*info));
	struct pinmem_holder h[4];
	double t_alloc_small = 0, t_alloc_big, l_small = 0, l_big,
	       h_small = 0, h_big, d_small = 0, d_big, t0;
	int *fds = calloc(n, sizeof(*fds));
	uint64_t first_id = 0;
	unsigned i;

	if (!info || !fds)
		exit(1);
	t0 = now();
	for (i = 0; i < n; i++) {
		if (i == SMALL) {
			t_alloc_small = (now() - t0) / SMALL;
			l_small = list_once(dev, info, n);
			h_small = holders_once(fds[0], h, 4, 0);
			d_small = donate_once(fds[0]);
			t0 = now();
		}
		fds[i] = alloc(dev, 2 * MiB, i ? NULL : &first_id);
	}
	t_alloc_big = (now() - t0) / (n - SMALL);
	l_big = list_once(dev, info, n);
	h_big = holders_once(fds[0], h, 4, 0);
	d_big = donate_once(fds[n - 1]);
	printf("# %u regions of 2 MiB\n", n);
	ratio("ALLOC, mean over the rest / first 100", t_alloc_small,
	      t_alloc_big, 3);
	ratio("LIST, all regions / 100 regions (linear)", l_small, l_big,
	      3.0 * n / SMALL);
	ratio("HOLDERS (region fd), n regions / 100", h_small, h_big, 3);
	ratio("DONATE, n regions / 100", d_small, d_big, 3);
	for (i = 0; i < n; i++)
		close(fds[i]);
	free(fds);
	free(info);
}

static void many_mappings(int dev, unsigned n)
{
	struct pinmem_view v = { .length = 2 * MiB };
	struct pinmem_holder *h = calloc(n + 1, sizeof(*h));
	double m_small = 0, m_big, h_small = 0, h_big, d_small, d_big, t0;
	void **maps = calloc(n, sizeof(*maps));
	int rfd = alloc(dev, 2 * MiB, NULL);
	unsigned i;

	if (!h || !maps || ioctl(rfd, PINMEM_IOC_VIEW, &v)) {
		fprintf(stderr, "VIEW: %s\n", strerror(errno));
		exit(1);
	}
	d_small = donate_once(rfd);
	t0 = now();
	for (i = 0; i < n; i++) {
		if (i == SMALL) {
			m_small = (now() - t0) / SMALL;
			h_small = holders_once(rfd, h, n + 1, SMALL);
			t0 = now();
		}
		maps[i] = mmap(NULL, 4096, PROT_READ, MAP_SHARED, v.fd, 0);
		if (maps[i] == MAP_FAILED) {
			fprintf(stderr, "mmap %u: %s\n", i, strerror(errno));
			exit(1);
		}
		*(volatile char *)maps[i];
	}
	m_big = (now() - t0) / (n - SMALL);
	h_big = holders_once(rfd, h, n + 1, n);
	for (i = 0; i < n; i++)
		munmap(maps[i], 4096);
	d_big = donate_once(rfd);
	printf("# %u view mappings of one region\n", n);
	ratio("view mmap, mean over the rest / first 100", m_small, m_big, 3);
	ratio("HOLDERS, n mappings / 100 (linear)", h_small, h_big,
	      3.0 * n / SMALL);
	ratio("DONATE after n mappings / none", d_small, d_big, 10);
	close(v.fd);
	close(rfd);
	free(maps);
	free(h);
}

int main(int argc, char **argv)
{
	struct rlimit nofile = { 65536, 65536 };
	int dev;

	if (argc != 4) {
		fprintf(stderr, "usage: scale BIG_MIB NR_REGIONS NR_MAPPINGS\n");
		return 2;
	}
	if (strtoul(argv[2], NULL, 0) <= SMALL ||
	    strtoul(argv[3], NULL, 0) <= SMALL) {
		fprintf(stderr, "scale: NR_REGIONS and NR_MAPPINGS must exceed %d\n",
			SMALL);
		return 2;
	}
	if (setrlimit(RLIMIT_NOFILE, &nofile))
		perror("RLIMIT_NOFILE");
	dev = open(PINMEM_DEVICE_PATH, O_RDWR | O_CLOEXEC);
	if (dev < 0) {
		perror(PINMEM_DEVICE_PATH);
		return 1;
	}
	big_region(dev, strtoull(argv[1], NULL, 0));
	many_regions(dev, (unsigned)strtoul(argv[2], NULL, 0));
	many_mappings(dev, (unsigned)strtoul(argv[3], NULL, 0));
	printf("%s - scale: every cost within its bound\n",
	       failed ? "not ok 1" : "ok 1");
	printf("1..1\n");
	return failed;
}
