// SPDX-License-Identifier: GPL-2.0
/*
 * pinbench shared FILE: N processes that each want one checkpoint. For N =
 * 1, 2, 4, ... up to --procs, the N workers load it each on their own
 * (pin_st_load: N copies), then all ask pinmem-cached for it
 * (pin_cache_open: one copy). Reported for each: the time from the first
 * fork until every worker holds the tensors and has read one byte of each
 * page, and the pinned memory grown meanwhile; and the time of one more
 * pin_cache_open of the file once it is in the service (a cached open).
 * A running service is needed (--socket, else $PIN_CACHE_SOCKET, else the
 * default socket).
 *
 * Each shared run must be a cold load for the service, whose key includes
 * the file's times: the file's modification time is moved one second
 * forward per run (its bytes are never touched), so the caller needs
 * write permission on it. Entries of earlier runs stay in the service until
 * its budget evicts them; memory is measured as the growth over the run,
 * and a run in which the service evicted anything, or loaded the file more
 * than once, fails: give the service a budget of (runs x steps + 1) copies.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <pin.h>

#include "lib/json.h"
#include "bench.h"

#define MAX_STEPS	8	/* N = 1, 2, 4, ... 64, and --procs */

/*
 * Pinned memory in the machine, in bytes: shared memory (the portable
 * backend's memfds) and the module's pages. The workers' page tables and
 * libraries are not a copy of the checkpoint and are left out.
 */
static int64_t pinned_bytes(struct pin_dev *dev)
{
	struct pin_dev_info info = PIN_INIT(struct pin_dev_info);
	long long shmem = -1;
	char line[256];
	FILE *f = fopen("/proc/meminfo", "re");

	if (!f || pin_dev_info(dev, &info)) {
		if (f)
			fclose(f);
		return -1;
	}
	while (fgets(line, sizeof(line), f) && shmem < 0)
		if (sscanf(line, "Shmem: %lld", &shmem) != 1)
			shmem = -1;
	fclose(f);
	return shmem * 1024 + (int64_t)info.total_bytes;
}

/* One private cold load, end to end, in seconds (< 0: it failed). */
static double private_load(struct cfg *c, struct pin_dev *dev,
			   const char *file)
{
	struct pin_st *ck = pin_st_create();
	uint64_t t0;
	double s;

	if (!ck)
		return -1;
	prep_cold(c);
	t0 = now_ns();
	if (pin_st_load(ck, dev, file, NULL)) {
		fprintf(stderr, "pinbench: %s\n", pin_st_error(ck));
		pin_st_close(ck);
		return -1;
	}
	s = (double)(now_ns() - t0) / 1e9;
	pin_st_close(ck);
	return s;
}

/* Read one byte of each page of every tensor; the sum keeps the reads. */
static unsigned touch_tensors(const struct pin_st *ck)
{
	struct pin_st_tensor t = PIN_INIT(struct pin_st_tensor);
	unsigned sum = 0;
	size_t i;
	uint64_t o;

	for (i = 0; i < pin_st_count(ck); i++) {
		if (pin_st_tensor(ck, i, &t))
			continue;
		for (o = 0; o < t.nbytes; o += 4096)
			sum += ((const volatile unsigned char *)t.data)[o];
	}
	return sum;
}

/* The checkpoint, from the service (socket) or loaded here (dev NULL). */
struct worker_ck {
	struct pin_cache_ck *shared;
	struct pin_dev *dev;
	struct pin_st *own;
};

static int worker_open(struct worker_ck *w, const char *file, int shared,
		       const struct cfg *c)
{
	char why[512] = "";
	struct pin_cache_opts o = {
		.size = sizeof(o), .flags = PIN_CACHE_NO_FALLBACK,
		.socket = c->socket, .why = why, .why_len = sizeof(why),
	};
	int fd, ret;

	if (!shared) {
		ret = pin_dev_open(&w->dev, c->backends[0], NULL);
		w->own = ret ? NULL : pin_st_create();
		if (!ret && !w->own)
			ret = -ENOMEM;
		if (!ret)
			ret = pin_st_load(w->own, w->dev, file, NULL);
		if (ret && w->own)
			fprintf(stderr, "pinbench: worker %d: %s\n", getpid(),
				pin_st_error(w->own));
		return ret;
	}
	fd = open(file, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ret = pin_cache_open(fd, &o, &w->shared);
	close(fd);
	if (ret)
		fprintf(stderr, "pinbench: worker %d: %s\n", getpid(),
			why[0] ? why : strerror(-ret));
	return ret;
}

/*
 * A worker: the checkpoint (shared or its own), every page read; then one
 * byte to ready, and it holds the tensors until go closes. Exit status 0,
 * or 1 with the reason on stderr.
 */
static int worker(const char *file, int shared, const struct cfg *c,
		  int ready, int go)
{
	struct worker_ck w = { 0 };
	char b;
	int ret = worker_open(&w, file, shared, c);

	if (!ret) {
		b = (char)touch_tensors(shared ? pin_cache_st(w.shared) :
					w.own);
		if (write(ready, &b, 1) != 1 || read(go, &b, 1) < 0)
			ret = 1;
	}
	pin_cache_close(w.shared);
	pin_st_close(w.own);
	pin_dev_close(w.dev);
	return ret ? 1 : 0;
}

/* Wait for n workers; 0 when every one exited 0. */
static int reap(const pid_t *pids, int n)
{
	int i, st, bad = 0;

	for (i = 0; i < n; i++) {
		if (waitpid(pids[i], &st, 0) != pids[i] ||
		    !WIFEXITED(st) || WEXITSTATUS(st))
			bad = 1;
	}
	return bad;
}

/* What one step of n workers measured. */
struct step_result {
	double secs, grown, open_s;
};

/* Fork n workers; stop at the first fork that fails. */
static int fork_workers(const struct cfg *c, const char *file, int shared,
			int n, const int *ready, const int *go, pid_t *pids)
{
	int i;

	for (i = 0; i < n; i++) {
		pids[i] = fork();
		if (pids[i] == 0) {
			close(ready[0]);
			close(go[1]);
			_exit(worker(file, shared, c, ready[1], go[0]));
		}
		if (pids[i] < 0)
			break;
	}
	return i;
}

/*
 * n workers at once: seconds until all are ready and the pinned memory
 * grown; shared, the time of a cached open too. The service must have
 * loaded the file once for all of them and evicted nothing meanwhile
 * (else the growth would not be theirs).
 */
static int run_workers(struct cfg *c, struct pin_dev *dev, const char *file,
		       int shared, int n, struct step_result *res)
{
	int ready[2], go[2], got = 0, bad = 0;
	long e0 = 0, l0 = 0, e1 = 0, l1 = 0;
	pid_t pids[64];
	int64_t before;
	uint64_t t0;
	char b;

	if (shared && (bad = service_counts(c, &e0, &l0)))
		return bad;
	if (pipe2(ready, O_CLOEXEC) || pipe2(go, O_CLOEXEC))
		return -errno;
	prep_cold(c);
	before = pinned_bytes(dev);
	t0 = now_ns();
	n = fork_workers(c, file, shared, n, ready, go, pids);
	close(ready[1]);
	close(go[0]);
	while (got < n && read(ready[0], &b, 1) == 1)
		got++;
	res->secs = (double)(now_ns() - t0) / 1e9;
	res->grown = (double)(pinned_bytes(dev) - before);
	if (shared) {
		res->open_s = cached_open(c, file);
		bad = service_counts(c, &e1, &l1);
	}
	close(go[1]);
	close(ready[0]);
	if (reap(pids, n) || got < n || res->open_s < 0)
		return -EIO;
	if (shared && !bad && (l1 != l0 + 1 || e1 != e0 + 1)) {
		fprintf(stderr, "pinbench: the service went from %ld entries and %ld loads to %ld and %ld for one file: it evicted (--budget too small for %d runs?) or loaded more than once\n",
			e0, l0, e1, l1, c->runs);
		return -EAGAIN;
	}
	return bad;
}

/* The steps: 1, 2, 4, ... below procs, then procs. */
static int plan_steps(int procs, int *steps)
{
	int n = 0, p;

	for (p = 1; p < procs && n < MAX_STEPS - 1; p *= 2)
		steps[n++] = p;
	steps[n++] = procs;
	return n;
}

/* Per step: the private and the shared runs' series. */
struct step_series {
	struct series p_secs, p_mem, s_secs, s_mem, s_open;
};

static void print_json(const struct cfg *c, const char *file, uint64_t size,
		       double one, const struct step_series *ss,
		       const int *steps, int nsteps)
{
	int i;

	printf("{\"bench\":\"shared\",\"file\":");
	json_str(stdout, file);
	printf(",\"bytes\":%llu,\"runs\":%d,\"cold_cache\":%s,"
	       "\"one_load_s\":%.3f,\"steps\":[", (unsigned long long)size,
	       c->runs, c->cold ? "true" : "false", one);
	for (i = 0; i < nsteps; i++)
		printf("%s{\"procs\":%d,\"private_all_ready_s\":%.3f,"
		       "\"private_memory_bytes\":%.0f,\"shared_all_ready_s\":%.3f,"
		       "\"shared_memory_bytes\":%.0f,\"cached_open_s\":%.6f}",
		       i ? "," : "", steps[i], median(&ss[i].p_secs),
		       median(&ss[i].p_mem), median(&ss[i].s_secs),
		       median(&ss[i].s_mem), median(&ss[i].s_open));
	printf("]}\n");
}

static void print_table(const struct cfg *c, uint64_t size, double one,
			const struct step_series *ss, const int *steps,
			int nsteps)
{
	double mib = 1048576.0, sz = (double)size;
	int i;

	printf("%-5s %25s %25s %11s\n", "", "private (N copies)",
	       "shared (pinmem-cached)", "cached");
	printf("%-5s %12s %12s %12s %12s %11s\n", "procs", "all ready",
	       "memory", "all ready", "memory", "open");
	for (i = 0; i < nsteps; i++)
		printf("%-5d %7.3f s %4.2fx %7.0f MiB %3.2fx %7.3f s %4.2fx %7.0f MiB %3.2fx %8.2f ms\n",
		       steps[i], median(&ss[i].p_secs),
		       median(&ss[i].p_secs) / one, median(&ss[i].p_mem) / mib,
		       median(&ss[i].p_mem) / sz, median(&ss[i].s_secs),
		       median(&ss[i].s_secs) / one, median(&ss[i].s_mem) / mib,
		       median(&ss[i].s_mem) / sz, median(&ss[i].s_open) * 1e3);
	printf("one load (one process, pin_st_load): %.3f s; times as multiples of it, memory of the file's %.0f MiB; medians of %d run(s), %s\n",
	       one, sz / mib, c->runs, c->cold ?
	       "page cache dropped before each load" : "page cache kept");
}

/* One run of every step: n private workers, then n shared. */
static int run_steps(struct cfg *c, struct pin_dev *dev, const char *file,
		     struct step_series *ss, const int *steps, int nsteps)
{
	struct step_result res;
	int i, ret;

	for (i = 0; i < nsteps; i++) {
		memset(&res, 0, sizeof(res));
		ret = run_workers(c, dev, file, 0, steps[i], &res);
		add(&ss[i].p_secs, res.secs);
		add(&ss[i].p_mem, res.grown);
		if (!ret)
			ret = next_key(file);
		if (!ret)
			ret = run_workers(c, dev, file, 1, steps[i], &res);
		if (ret) {
			fprintf(stderr, "pinbench: %d workers: %s\n", steps[i],
				strerror(-ret));
			return ret;
		}
		add(&ss[i].s_secs, res.secs);
		add(&ss[i].s_mem, res.grown);
		add(&ss[i].s_open, res.open_s);
	}
	return 0;
}

int bench_shared(struct cfg *c, const char *file)
{
	struct step_series ss[MAX_STEPS];
	struct series one = { .name = "one load" };
	int steps[MAX_STEPS], nsteps = plan_steps(c->procs, steps);
	struct pin_dev *dev;
	struct stat st;
	int r, ret = 0;

	memset(ss, 0, sizeof(ss));
	if (stat(file, &st)) {
		perror(file);
		return 1;
	}
	ret = pin_dev_open(&dev, c->backends[0], NULL);
	if (ret) {
		fprintf(stderr, "pinbench: %s\n", strerror(-ret));
		return 1;
	}
	for (r = 0; r < c->runs && !ret; r++) {
		double s = private_load(c, dev, file);

		ret = s < 0 ? -EIO : run_steps(c, dev, file, ss, steps, nsteps);
		add(&one, s);
	}
	pin_dev_close(dev);
	if (ret)
		return 1;
	if (c->json)
		print_json(c, file, (uint64_t)st.st_size, median(&one), ss,
			   steps, nsteps);
	else
		print_table(c, (uint64_t)st.st_size, median(&one), ss, steps,
			    nsteps);
	return 0;
}
