// SPDX-License-Identifier: GPL-2.0
/*
 * Scale checks for pinmem.ko, in a guest (make scale): one large region,
 * many regions, many mappings of one region. Each cost is printed as a
 * ratio to the same operation in the small case, measured in the same
 * run (TCG times mean nothing on their own).
 *
 *   scale BIG_MIB NR_REGIONS NR_MAPPINGS   (BIG_MIB 0: no big region)
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

/* limit 0: reported, not judged. */
static void ratio(const char *what, double small, double big, double limit)
{
	double r = big / small;

	printf("# %-44s small %.6f s, large %.6f s: %.2fx", what, small, big,
	       r);
	if (limit > 0)
		printf(" (bound %gx)%s", limit,
		       r > limit ? "  OVER THE BOUND" : "");
	printf("\n");
	if (limit > 0 && r > limit)
		failed = 1;
}

/*
 * Counters of /proc/vmstat that say the guest kernel worked for memory
 * (compaction, reclaim): their growth over a step, printed if any.
 */
static const char *const pressure[] = { "compact_", "pgscan", "pgsteal",
					"allocstall", "kswapd", "drop_" };

struct vmstat {
	char name[64][48];
	unsigned long long v[64];
	int n;
};

static void vmstat_read(struct vmstat *s)
{
	FILE *f = fopen("/proc/vmstat", "re");
	unsigned long long v;
	char name[48];
	size_t i;

	s->n = 0;
	if (!f)
		return;
	while (s->n < 64 && fscanf(f, "%47s %llu", name, &v) == 2)
		for (i = 0; i < sizeof(pressure) / sizeof(*pressure); i++)
			if (!strncmp(name, pressure[i], strlen(pressure[i]))) {
				strcpy(s->name[s->n], name);
				s->v[s->n++] = v;
				break;
			}
	fclose(f);
}

static void vmstat_print(const char *what, const struct vmstat *a)
{
	struct vmstat b;
	int i, any = 0;

	vmstat_read(&b);
	printf("# vmstat over %s:", what);
	for (i = 0; i < a->n && i < b.n; i++)
		if (b.v[i] != a->v[i]) {
			printf(" %s +%llu", b.name[i], b.v[i] - a->v[i]);
			any = 1;
		}
	printf("%s\n", any ? "" : " no compaction or reclaim");
}

/* Seconds per MiB of one ALLOC of mib MiB (the free is not timed). */
static double alloc_per_mib(int dev, uint64_t mib, const char *what)
{
	struct vmstat vs;
	double t;
	int fd;

	vmstat_read(&vs);
	t = now();
	fd = alloc(dev, mib * MiB, NULL);
	t = (now() - t) / mib;
	close(fd);
	printf("# ALLOC of %llu MiB, %s: %.0f MiB/s (TCG)\n",
	       (unsigned long long)mib, what, 1 / t);
	vmstat_print(what, &vs);
	return t;
}

/*
 * The guest's RAM is the host's anonymous memory, given to QEMU on the
 * first write: the first ALLOC of most of it pays for the host's page
 * faults as well, which a machine's own RAM does not. So the big region
 * is allocated twice, and the bound is on the second, against 256 MiB
 * allocated after the first (memory the host has already given).
 */
static void big_region(int dev, uint64_t big_mib)
{
	double small, big1, big2;

	alloc_per_mib(dev, 256, "256 MiB, before any big one");
	big1 = alloc_per_mib(dev, big_mib, "first (host first touch)");
	small = alloc_per_mib(dev, 256, "256 MiB, the small case");
	big2 = alloc_per_mib(dev, big_mib, "second (memory touched before)");
	ratio("ALLOC per MiB, first big / 256 MiB", small, big1, 0);
	ratio("ALLOC per MiB, second big / 256 MiB", small, big2, 2);
}

#define RUNS 5

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, n, sizeof(*v), cmp_double);
	return v[n / 2];
}

/*
 * LIST (cap records), HOLDERS of region hfd, DONATE of region dfd: the
 * medians of RUNS calls each into out[0..2], each query's calls in a row
 * (a first call is cold, and a LIST of 10,000 records just before would
 * leave the caches and TLB cold for the next query).
 */
static void queries(int dev, struct pinmem_region_info *info, unsigned cap,
		    int hfd, int dfd, double *out)
{
	double l[RUNS], hq[RUNS], d[RUNS];
	struct pinmem_holder h[4];
	int r;

	for (r = 0; r < RUNS; r++)
		l[r] = list_once(dev, info, cap);
	for (r = 0; r < RUNS; r++)
		hq[r] = holders_once(hfd, h, 4, 0);
	for (r = 0; r < RUNS; r++)
		d[r] = donate_once(dfd);
	out[0] = median(l, RUNS);
	out[1] = median(hq, RUNS);
	out[2] = median(d, RUNS);
}

static void many_regions(int dev, unsigned n)
{
	struct pinmem_region_info *info = calloc(n, sizeof(*info));
	double t_alloc_small = 0, t_alloc_big, small[3] = { 0 }, big[3], t0;
	int *fds = calloc(n, sizeof(*fds));
	unsigned i;

	if (!info || !fds)
		exit(1);
	t0 = now();
	for (i = 0; i < n; i++) {
		if (i == SMALL) {
			t_alloc_small = (now() - t0) / SMALL;
			queries(dev, info, n, fds[0], fds[SMALL - 1], small);
			t0 = now();
		}
		fds[i] = alloc(dev, 2 * MiB, NULL);
	}
	t_alloc_big = (now() - t0) / (n - SMALL);
	queries(dev, info, n, fds[0], fds[n - 1], big);
	printf("# %u regions of 2 MiB, queries medians of %d\n", n, RUNS);
	ratio("ALLOC, mean over the rest / first 100", t_alloc_small,
	      t_alloc_big, 3);
	ratio("LIST, all regions / 100 regions (linear)", small[0], big[0],
	      3.0 * n / SMALL);
	ratio("HOLDERS (region fd), n regions / 100", small[1], big[1], 3);
	ratio("DONATE, n regions / 100", small[2], big[2], 3);
	for (i = 0; i < n; i++)
		close(fds[i]);
	free(fds);
	free(info);
}

/* Seconds per mapping of maps[from..to), each a page of vfd, touched. */
static double map_views(int vfd, void **maps, unsigned from, unsigned to)
{
	double t0 = now();
	unsigned i;

	for (i = from; i < to; i++) {
		maps[i] = mmap(NULL, 4096, PROT_READ, MAP_SHARED, vfd, 0);
		if (maps[i] == MAP_FAILED) {
			fprintf(stderr, "mmap %u: %s\n", i, strerror(errno));
			exit(1);
		}
		*(volatile char *)maps[i];
	}
	return (now() - t0) / (to - from);
}

/*
 * Maps maps[SMALL..n). *first and *last: the means over mappings
 * SMALL+1..2 SMALL and the last SMALL, the windows compared: the same
 * work, on fresh addresses and page tables, with few and with n - SMALL
 * mappings in place. (The first SMALL are not a like case: they reuse the
 * addresses and page tables of the SMALL mappings just unmapped.) With
 * print, the means of the blocks between too.
 */
static void map_rest(int vfd, void **maps, unsigned n, int print,
		     double *first, double *last)
{
	unsigned step = (n - 2 * SMALL) / 8 + 1, from, to;
	double m;

	*first = map_views(vfd, maps, SMALL, 2 * SMALL);
	if (print)
		printf("# view mmap, us per mapping, by count: %u-%u: %.1f",
		       SMALL + 1, 2 * SMALL, *first * 1e6);
	for (from = 2 * SMALL; from < n - SMALL; from = to) {
		to = from + step < n - SMALL ? from + step : n - SMALL;
		m = map_views(vfd, maps, from, to);
		if (print)
			printf(" %u-%u: %.1f", from + 1, to, m * 1e6);
	}
	*last = map_views(vfd, maps, n - SMALL, n);
	if (print)
		printf(" %u-%u: %.1f\n", n - SMALL + 1, n, *last * 1e6);
}

/* The page tables of this process, in KiB (VmPTE); -1 if unknown. */
static long vm_pte_kb(void)
{
	FILE *f = fopen("/proc/self/status", "re");
	char line[128];
	long kb = -1;

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "VmPTE: %ld", &kb) == 1)
			break;
	if (f)
		fclose(f);
	return kb;
}

static void unmap_views(void **maps, unsigned n)
{
	while (n--)
		munmap(maps[n], 4096);
}

/*
 * count one-page mappings that are not pinmem's (shared anonymous: each
 * its own shmem object, so no two merge into one VMA), touched like the
 * views, and their unmapping: what the mm has to do after munmap is then
 * the same whether the VMAs were views or not.
 */
static void map_others(void **maps, unsigned count)
{
	unsigned i;

	for (i = 0; i < count; i++) {
		maps[i] = mmap(NULL, 4096, PROT_READ,
			       MAP_SHARED | MAP_ANONYMOUS, -1, 0);
		if (maps[i] == MAP_FAILED) {
			fprintf(stderr, "mmap other %u: %s\n", i,
				strerror(errno));
			exit(1);
		}
		*(volatile char *)maps[i];
	}
}

/*
 * DONATE after n VMAs unmapped, SMALL of them views of the region and the
 * rest other mappings: the small case, like for like with n views.
 */
static double donate_after_others(int rfd, int vfd, void **maps, unsigned n)
{
	map_views(vfd, maps, 0, SMALL);
	map_others(maps + SMALL, n - SMALL);
	unmap_views(maps, n);
	return donate_once(rfd);
}

/*
 * Mappings of one view, each of one page. DONATE is compared like for
 * like: right after n VMAs were unmapped, SMALL or n of them views of the
 * region (the same chunk marked for the reference check either way),
 * medians of RUNS, so the ratio is that of the count of views alone.
 * Against DONATE after only SMALL unmaps it is printed, not judged: that
 * ratio holds the mm's own work after munmap of n VMAs (6.12 frees each
 * VMA after an RCU grace period), which varies run to run.
 */
static void many_mappings(int dev, unsigned n)
{
	struct pinmem_view v = { .length = 2 * MiB };
	struct pinmem_holder *h = calloc(n + 1, sizeof(*h));
	double m_first[RUNS], m_small[RUNS], m_big[RUNS], d_small[RUNS],
	       d_big[RUNS], d_alone[RUNS], h_small = 0, h_big = 0;
	void **maps = calloc(n, sizeof(*maps));
	int rfd = alloc(dev, 2 * MiB, NULL);
	long pte[3];
	int r;

	if (!h || !maps || ioctl(rfd, PINMEM_IOC_VIEW, &v)) {
		fprintf(stderr, "VIEW: %s\n", strerror(errno));
		exit(1);
	}
	for (r = 0; r < RUNS; r++) {
		map_views(v.fd, maps, 0, SMALL);
		unmap_views(maps, SMALL);
		d_alone[r] = donate_once(rfd);
		d_small[r] = donate_after_others(rfd, v.fd, maps, n);
	}
	for (r = 0; r < RUNS; r++) {
		pte[0] = vm_pte_kb();
		m_first[r] = map_views(v.fd, maps, 0, SMALL);
		pte[1] = vm_pte_kb();
		if (!r)
			h_small = holders_once(rfd, h, n + 1, SMALL);
		map_rest(v.fd, maps, n, !r, &m_small[r], &m_big[r]);
		pte[2] = vm_pte_kb();
		if (!r) {
			h_big = holders_once(rfd, h, n + 1, n);
			printf("# page tables (VmPTE): %ld KiB, %ld after the first %d mappings, %ld after %u\n",
			       pte[0], pte[1], SMALL, pte[2], n);
		}
		unmap_views(maps, n);
		d_big[r] = donate_once(rfd);
	}
	printf("# %u view mappings of one region, medians of %d runs\n", n, RUNS);
	ratio("view mmap, last 100 / first 100 (not alike)",
	      median(m_first, RUNS), median(m_big, RUNS), 0);
	ratio("view mmap, last 100 / mappings 101-200", median(m_small, RUNS),
	      median(m_big, RUNS), 3);
	ratio("HOLDERS, n mappings / 100 (linear)", h_small, h_big,
	      3.0 * n / SMALL);
	ratio("DONATE, n unmaps: n views / 100 views (flat)",
	      median(d_small, RUNS), median(d_big, RUNS), 3);
	ratio("DONATE, n views / 100 unmaps alone (+mm)",
	      median(d_alone, RUNS), median(d_big, RUNS), 0);
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
	    strtoul(argv[3], NULL, 0) < 3 * SMALL) {
		fprintf(stderr, "scale: NR_REGIONS must exceed %d, NR_MAPPINGS be at least %d\n",
			SMALL, 3 * SMALL);
		return 2;
	}
	if (setrlimit(RLIMIT_NOFILE, &nofile))
		perror("RLIMIT_NOFILE");
	dev = open(PINMEM_DEVICE_PATH, O_RDWR | O_CLOEXEC);
	if (dev < 0) {
		perror(PINMEM_DEVICE_PATH);
		return 1;
	}
	if (strtoull(argv[1], NULL, 0))
		big_region(dev, strtoull(argv[1], NULL, 0));
	many_regions(dev, (unsigned)strtoul(argv[2], NULL, 0));
	many_mappings(dev, (unsigned)strtoul(argv[3], NULL, 0));
	printf("%s - scale: every cost within its bound\n",
	       failed ? "not ok 1" : "ok 1");
	printf("1..1\n");
	return failed;
}
