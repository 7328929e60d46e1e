// SPDX-License-Identifier: GPL-2.0
/*
 * pinbench: how fast checkpoints move between disk and pinned memory.
 *
 *   pinbench load FILE   libpin (pin_st_load) against fio's io_uring
 *                        O_DIRECT reads of the same file with the same queue
 *                        depth and request size (plain, and with registered
 *                        buffers as libpin uses them), buffered pread into pinned
 *                        memory, and mmap + memcpy into pinned memory
 *   pinbench alloc-rate  the kernel's ALLOC on all CPUs against one
 *                        (pinbench_alloc_rate.h)
 *   pinbench save [OUT]  pin_st_save of a pinned checkpoint against fio's
 *                        O_DIRECT writes + fsync of the same size (plain and
 *                        with registered buffers)
 *
 * Runs alternate between the methods; the page cache is dropped before each
 * run (needs root; otherwise the report says the caches were warm). The
 * report gives medians and ratios. The in-process baselines read into a
 * pinned region allocated before their clock starts, except "mmap + memcpy
 * -> fresh pinned", which allocates, maps and locks its destination in the
 * clock as a loader without libpin would; libpin's own time is
 * given both for the transfer (io_ns) and end to end (allocation, pinning,
 * header, seal included). Each method's CPU time (user + system, every
 * thread, and fio's as a child) is reported per GB moved; libpin's is that
 * of the whole load, its transfer alone is not metered apart.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <pin.h>

#include "cpu.h"
#include "pages.h"
#include "json.h"

extern char **environ;

#define MAX_RUNS	64

struct series {
	const char *name;
	double v[MAX_RUNS];	/* GB/s */
	int n;
	double cpu[MAX_RUNS];	/* CPU seconds per GB */
	int ncpu;
};

/* CPU time of this process (all threads) and its waited-for children. */
struct cpu_mark {
	double self, children;
};

struct cfg {
	unsigned qd;
	uint32_t req;
	int runs;
	int json;
	int cold;		/* drop_caches works */
	int backends[2];
	int nbackends;
	uint64_t save_size;
	const char *fio;
	long read_ahead_kb;	/* of the file's disk; -1: unknown */
	int hugetlb_pool;	/* --hugetlb-pool: set one for the run */
	int pin_first;		/* --pin-first: libpin loads without overlap */
	int no_kernel_fill;	/* --no-kernel-fill: device loads via io_uring */
	int kernel_fill[2];	/* per backend: the last load used FILL */
	long pool_was, pool_set;	/* nr_hugepages before, during */
	const char *pages[2];	/* per backend: the last load's pages */
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static int drop_caches(void)
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


static void cpu_start(struct cpu_mark *m)
{
	m->self = cpu_seconds(RUSAGE_SELF);
	m->children = cpu_seconds(RUSAGE_CHILDREN);
}

/* CPU seconds since the mark, per GB of bytes moved. */
static double cpu_per_gb(const struct cpu_mark *m, uint64_t bytes)
{
	double used = cpu_seconds(RUSAGE_SELF) - m->self +
		      cpu_seconds(RUSAGE_CHILDREN) - m->children;

	return bytes ? used / ((double)bytes / 1e9) : 0;
}

static void add(struct series *s, double gbps)
{
	if (s->n < MAX_RUNS)
		s->v[s->n++] = gbps;
}

static void add_cpu(struct series *s, double cpu_s_per_gb)
{
	if (s->ncpu < MAX_RUNS)
		s->cpu[s->ncpu++] = cpu_s_per_gb;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median_of(const double *in, int n)
{
	double v[MAX_RUNS];

	if (!n)
		return 0;
	memcpy(v, in, sizeof(double) * (size_t)n);
	qsort(v, (size_t)n, sizeof(double), cmp_d);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static double median(const struct series *s)
{
	return median_of(s->v, s->n);
}

#include "pinbench_baselines.h"
#include "pinbench_report.h"

/* Whether the load's steps were read by the module's FILL. */
static int kernel_filled(const struct pin_st *ck)
{
	struct pin_st_step step = PIN_INIT(struct pin_st_step);

	return pin_st_timeline(ck, &step, 1) > 0 &&
	       (step.flags & PIN_ST_STEP_KERNEL_FILL);
}

static int bench_load(struct cfg *c, const char *file)
{
	const struct pin_region_opts fallback = {
		.size = sizeof(fallback), .flags = PIN_REGION_FALLBACK,
	};
	struct pin_io_opts o = { .size = sizeof(struct pin_io_opts), .queue_depth = c->qd, .request_size = c->req,
				 .flags = (c->pin_first ? PIN_IO_PIN_FIRST : 0) |
					  (c->no_kernel_fill ?
					   PIN_IO_NO_KERNEL_FILL : 0) };
	struct pin_st_load_opts lo = { .size = sizeof(lo), .io = &o };
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
		struct pin_dev_opts o = {
			.size = sizeof(o), .why = why, .why_len = sizeof(why),
		};
		int ret = pin_dev_open(&devs[b], c->backends[b], &o);

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
	if (pin_region_create(devs[0], size, NULL, &r) &&
	    pin_region_create(devs[0], size, &fallback, &r)) {
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
			struct pin_st *ck = pin_st_create();
			struct pin_io_stats st = PIN_INIT(struct pin_io_stats);
			struct cpu_mark m;

			prep_cold(c);
			cpu_start(&m);
			if (pin_st_load(ck, devs[b], file, &lo) &&
			    pin_st_load(ck, devs[b], file, &lo)) {
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
			pin_st_close(ck);
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
	pin_region_close(r);
	for (b = 0; b < c->nbackends; b++)
		pin_dev_close(devs[b]);
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
static int bench_load_pool(struct cfg *c, const char *file)
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

static int bench_save(struct cfg *c, const char *out)
{
	const struct pin_region_opts fallback = {
		.size = sizeof(fallback), .flags = PIN_REGION_FALLBACK,
	};
	struct pin_io_opts o = { .size = sizeof(struct pin_io_opts), .queue_depth = c->qd, .request_size = c->req };
	enum { NT = 16 };
	struct pin_st_tensor t[NT] = { { .size = sizeof(struct pin_st_tensor) } };
	uint64_t shapes[NT], size = c->save_size, per = size / NT, i;
	char names[NT][16], fiofile[4096], fb[256] = "";
	struct series s[4];
	struct pin_region *r;
	struct pin_dev *dev;
	struct pin_st *ck = pin_st_create();
	uint32_t x = 12345;
	uint8_t *p;
	void *map;
	int run;

	size = per * NT;
	if (pin_dev_open(&dev, c->backends[0], NULL) ||
	    (pin_region_create(dev, size, NULL, &r) &&
	     pin_region_create(dev, size, &fallback, &r)) ||
	    pin_region_map(r, &map)) {
		fprintf(stderr, "pinbench: a pinned region of %llu bytes failed\n",
			(unsigned long long)size);
		return 1;
	}
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

#include "pinbench_donate.h"
#include "pinbench_alloc_rate.h"

static void usage(void)
{
	fprintf(stderr,
		"usage: pinbench load FILE [options]\n"
		"       pinbench save [OUT] [options]   (default OUT: ./pinbench-save.safetensors)\n"
		"       pinbench donate [--size MAX] [--runs N]   DONATE latency, 2 MiB..MAX (default 1G)\n"
		"       pinbench alloc-rate [--size N] [--runs N]   kernel ALLOC on all CPUs vs one\n"
		"                      (root; sets pinmem's alloc_threads, restores it; default 1G)\n"
		"  --runs N            alternated runs per method (default 5)\n"
		"  --queue-depth N     (default %u)\n"
		"  --request-size N    bytes, K/M/G suffix (default %u)\n"
		"  --backend LIST      device, portable, or device,portable to compare\n"
		"                      (load; save uses the first)\n"
		"  --size N            save: bytes to write; donate: the largest region;\n"
		"                      alloc-rate: the region (K/M/G suffix, default 1G)\n"
		"  --fio PATH          fio binary (default fio)\n"
		"  --json              one JSON object\n"
		"  --hugetlb-pool      load: run inside a hugetlb pool big enough for the\n"
		"                      file (root; nr_hugepages restored afterwards)\n"
		"  --pin-first         load: libpin pins all of the region before reading\n"
		"                      (no overlap), to compare with the default\n"
		"  --no-kernel-fill    load, device backend: read through the mapping\n"
		"                      with io_uring instead of the module's FILL\n"
		"  --version           pinbench's and libpin's version\n",
		PIN_IO_DEFAULT_QUEUE_DEPTH, PIN_IO_DEFAULT_REQUEST_SIZE);
}

static int parse_size(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v = strtoull(s, &end, 0);

	switch (*end) {
	case 'K': case 'k': v <<= 10; end++; break;
	case 'M': case 'm': v <<= 20; end++; break;
	case 'G': case 'g': v <<= 30; end++; break;
	}
	if (*end || !v)
		return -1;
	*out = v;
	return 0;
}

static int parse_backend(const char *s)
{
	if (!strcmp(s, "device"))
		return PIN_BACKEND_DEVICE;
	if (!strcmp(s, "portable"))
		return PIN_BACKEND_PORTABLE;
	if (!strcmp(s, "auto"))
		return PIN_BACKEND_AUTO;
	return -1;
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "runs", required_argument, NULL, 'n' },
		{ "queue-depth", required_argument, NULL, 'q' },
		{ "request-size", required_argument, NULL, 'r' },
		{ "backend", required_argument, NULL, 'b' },
		{ "size", required_argument, NULL, 's' },
		{ "fio", required_argument, NULL, 'f' },
		{ "json", no_argument, NULL, 'j' },
		{ "hugetlb-pool", no_argument, NULL, 'H' },
		{ "pin-first", no_argument, NULL, 'P' },
		{ "no-kernel-fill", no_argument, NULL, 'K' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ 0 }
	};
	struct cfg c = {
		.qd = PIN_IO_DEFAULT_QUEUE_DEPTH,
		.req = PIN_IO_DEFAULT_REQUEST_SIZE, .runs = 5, .cold = 1,
		.backends = { PIN_BACKEND_AUTO }, .nbackends = 1,
		.save_size = 1ULL << 30, .fio = "fio", .read_ahead_kb = -1,
		.pool_was = -1, .pool_set = -1,
	};
	uint64_t v;
	char *comma;
	int ch;

	while ((ch = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		switch (ch) {
		case 'n':
			c.runs = atoi(optarg);
			if (c.runs < 1 || c.runs > MAX_RUNS)
				return usage(), 2;
			break;
		case 'q': c.qd = (unsigned)atoi(optarg); break;
		case 'r':
			if (parse_size(optarg, &v) || v > UINT32_MAX)
				return usage(), 2;
			c.req = (uint32_t)v;
			break;
		case 'b':
			comma = strchr(optarg, ',');
			if (comma)
				*comma = 0;
			c.backends[0] = parse_backend(optarg);
			c.nbackends = 1;
			if (comma) {
				c.backends[1] = parse_backend(comma + 1);
				c.nbackends = 2;
			}
			if (c.backends[0] < 0 || (comma && c.backends[1] < 0))
				return usage(), 2;
			break;
		case 's':
			if (parse_size(optarg, &c.save_size))
				return usage(), 2;
			break;
		case 'f': c.fio = optarg; break;
		case 'j': c.json = 1; break;
		case 'H': c.hugetlb_pool = 1; break;
		case 'P': c.pin_first = 1; break;
		case 'K': c.no_kernel_fill = 1; break;
		case 'V':
			printf("pinbench %s (libpin %s)\n", PIN_VERSION_STRING,
			       pin_version());
			return 0;
		default:
			usage();
			return ch == 'h' ? 0 : 2;
		}
	}
	if (optind + 1 == argc && !strcmp(argv[optind], "donate"))
		return bench_donate(&c, c.save_size);
	if (optind + 1 == argc && !strcmp(argv[optind], "alloc-rate"))
		return bench_alloc_rate(&c, c.save_size);
	if (drop_caches())
		c.cold = 0;
	if (optind < argc && !strcmp(argv[optind], "load") && optind + 2 == argc)
		return bench_load_pool(&c, argv[optind + 1]);
	if (optind < argc && !strcmp(argv[optind], "save") && optind + 2 >= argc)
		return bench_save(&c, optind + 1 < argc ? argv[optind + 1] :
				  "pinbench-save.safetensors");
	usage();
	return 2;
}
