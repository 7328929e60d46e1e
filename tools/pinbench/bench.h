/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What pinbench's parts share: the options (struct cfg), a method's runs
 * (struct series), and the declarations of each part. pinbench.c reads
 * the options and runs a benchmark; load.c, save.c, donate.c,
 * alloc_rate.c, shared.c and evict.c are the benchmarks (service.c asks
 * pinmem-cached what they need); baselines.c runs what libpin is
 * measured against; report.c prints; stats.c keeps the numbers.
 */
#ifndef PINBENCH_BENCH_H
#define PINBENCH_BENCH_H

#include <stdint.h>

#include <pin.h>

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
	int keep_caches;	/* --no-drop-caches */
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
	int procs;		/* shared: the most workers */
	const char *socket;	/* shared: the service's socket, or NULL */
	const char *restart_cmd;	/* restart: the command that restarts it */
};

/* stats.c */
uint64_t now_ns(void);
int drop_caches(void);
void cpu_start(struct cpu_mark *m);
double cpu_per_gb(const struct cpu_mark *m, uint64_t bytes);
void add(struct series *s, double gbps);
void add_cpu(struct series *s, double cpu_s_per_gb);
double median_of(const double *in, int n);
double median(const struct series *s);

/* service.c: asking pinmem-cached (c->socket) */
int service_check(const struct cfg *c, const char *cmd);
int service_counts(const struct cfg *c, long *entries, long *loads);
int service_evictions(const struct cfg *c, long *count, double *donate_ms,
		      double *release_ms);
double cached_open(const struct cfg *c, const char *file);
int next_key(const char *file);

/* prepare.c */
int bench_prepare(struct cfg *c, uint64_t size);

/* python.c: runs tests/python/bench_NAME.py with argv[0..argc) */
int bench_python(const char *name, int argc, char **argv);

/* baselines.c */
enum baseline { BASE_FIO, BASE_FIO_FIXED, BASE_PREAD, BASE_MMAP };
long read_ahead_kb(const char *file);
int prep_cold(struct cfg *c);
double fio_save(const struct cfg *c, const char *file, uint64_t size,
		int fixed);
void baseline_load(struct cfg *c, struct series *s, enum baseline how,
		   const char *file, void *dst, uint64_t size);
void mmap_alloc_load(struct cfg *c, struct series *s, struct pin_dev *dev,
		     const char *file, uint64_t size);

/* report.c: libpin's load phases (pin_st_phases), in seconds. */
#define NPHASES	4
void add_phases(struct series *ph, const struct pin_st *ck);
void report(const struct cfg *c, const char *what, const char *file,
	    uint64_t size, struct series *s, int ns, int base,
	    const char *extra, const char *const *phase_of,
	    struct series (*ph)[NPHASES]);

/* The benchmarks. */
int bench_load_pool(struct cfg *c, const char *file);	/* load.c */
int bench_save(struct cfg *c, const char *out);		/* save.c */
int bench_donate(struct cfg *c, uint64_t max);		/* donate.c */
int bench_alloc_rate(struct cfg *c, uint64_t size);	/* alloc_rate.c */
int bench_shared(struct cfg *c, const char *file);	/* shared.c */
int bench_evict(struct cfg *c, const char *file);	/* evict.c */
int bench_restart(struct cfg *c, const char *file);	/* restart.c */

#endif
