// SPDX-License-Identifier: GPL-2.0
/*
 * pinbench shared FILE: N processes asking pinmem-cached for one checkpoint
 * (pin_cache_open) against one process loading it privately (pin_st_load).
 * For N = 1, 2, 4, ... up to --procs: the time from the first fork until
 * every worker has its view and has read one byte of each page of every
 * tensor, and the memory the machine uses for it. A running service is
 * needed (--socket, else $PIN_CACHE_SOCKET, else the default socket).
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

/*
 * The service's entries and loads so far, from the first line of its list
 * ("...backend, E entries, ... of ... budget, L loads"); -EPROTO if it
 * says something else.
 */
static int service_counts(const struct cfg *c, long *entries, long *loads)
{
	struct pin_cache_opts o = { .size = sizeof(o), .socket = c->socket };
	char buf[4096];
	const char *p, *q;
	int ret = pin_cache_list(&o, buf, sizeof(buf));

	if (ret < 0)
		return ret;
	buf[sizeof(buf) - 1] = 0;
	p = strstr(buf, "backend, ");
	q = strstr(buf, " loads");
	if (!p || !q || sscanf(p, "backend, %ld entries", entries) != 1)
		return -EPROTO;
	while (q > buf && q[-1] >= '0' && q[-1] <= '9')
		q--;
	return sscanf(q, "%ld", loads) == 1 ? 0 : -EPROTO;
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

/*
 * A worker: its own open of file, the service's view, every page read;
 * then one byte to ready, and it holds the view until go closes.
 * Exit status 0, or 1 with the reason on stderr.
 */
static int worker(const char *file, const char *socket, int ready, int go)
{
	char why[512] = "";
	struct pin_cache_opts o = {
		.size = sizeof(o), .flags = PIN_CACHE_NO_FALLBACK,
		.socket = socket, .why = why, .why_len = sizeof(why),
	};
	struct pin_cache_ck *ck;
	char b = (char)0;
	int fd = open(file, O_RDONLY | O_CLOEXEC);
	int ret;

	if (fd < 0) {
		perror(file);
		return 1;
	}
	ret = pin_cache_open(fd, &o, &ck);
	close(fd);
	if (ret) {
		fprintf(stderr, "pinbench: worker %d: %s\n", getpid(),
			why[0] ? why : strerror(-ret));
		return 1;
	}
	b = (char)touch_tensors(pin_cache_st(ck));
	if (write(ready, &b, 1) != 1 || read(go, &b, 1) < 0)
		ret = 1;
	pin_cache_close(ck);
	return ret;
}

/* A new key for the service: the file's times, one second on per call. */
static int next_key(const char *file)
{
	struct timespec ts[2] = { { 0, UTIME_OMIT } };
	struct stat st;

	if (stat(file, &st))
		return -errno;
	ts[1] = st.st_mtim;
	ts[1].tv_sec += 1;
	return utimensat(AT_FDCWD, file, ts, 0) ? -errno : 0;
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

/*
 * n workers at once: seconds until all are ready, and the pinned memory
 * grown. The service must have loaded the file once for all of them and
 * evicted nothing meanwhile (else the growth would not be theirs).
 */
static int shared_run(struct cfg *c, struct pin_dev *dev, const char *file,
		      int n, double *secs, double *grown)
{
	int ready[2], go[2], i, got = 0, bad;
	long e0, l0, e1, l1;
	pid_t pids[64];
	int64_t before;
	uint64_t t0;
	char b;

	bad = service_counts(c, &e0, &l0);
	if (bad)
		return bad;
	if (pipe2(ready, O_CLOEXEC) || pipe2(go, O_CLOEXEC))
		return -errno;
	prep_cold(c);
	before = pinned_bytes(dev);
	t0 = now_ns();
	for (i = 0; i < n; i++) {
		pids[i] = fork();
		if (pids[i] == 0) {
			close(ready[0]);
			close(go[1]);
			_exit(worker(file, c->socket, ready[1], go[0]));
		}
		if (pids[i] < 0)
			break;
	}
	n = i;
	close(ready[1]);
	close(go[0]);
	while (got < n && read(ready[0], &b, 1) == 1)
		got++;
	*secs = (double)(now_ns() - t0) / 1e9;
	*grown = (double)(pinned_bytes(dev) - before);
	bad = service_counts(c, &e1, &l1);
	close(go[1]);
	close(ready[0]);
	if (reap(pids, n) || got < n)
		return -EIO;
	if (!bad && (l1 != l0 + 1 || e1 != e0 + 1)) {
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

static void print_table(const struct cfg *c, const char *file,
			uint64_t size, const struct series *priv,
			const struct series *t, const struct series *m,
			const int *steps, int nsteps)
{
	double one = median(priv);
	int i;

	printf("%s%s\"file\":\"%s\",\"bytes\":%llu,\"runs\":%d,"
	       "\"cold_cache\":%s,\"private_load_s\":%.3f,\"shared\":[",
	       c->json ? "{\"bench\":\"shared\"," : "",
	       c->json ? "" : "# ", file, (unsigned long long)size, c->runs,
	       c->cold ? "true" : "false", one);
	for (i = 0; i < nsteps; i++)
		printf("%s{\"procs\":%d,\"all_ready_s\":%.3f,"
		       "\"all_ready_x_private\":%.2f,\"memory_mib\":%.1f,"
		       "\"memory_x_file\":%.3f}", i ? "," : "", steps[i],
		       median(&t[i]), median(&t[i]) / one,
		       median(&m[i]) / 1048576.0, median(&m[i]) / (double)size);
	printf("]%s\n", c->json ? "}" : "");
	if (c->json)
		return;
	printf("%-6s %12s %10s %12s %10s\n", "procs", "all ready s",
	       "x private", "memory MiB", "x file");
	for (i = 0; i < nsteps; i++)
		printf("%-6d %12.3f %10.2f %12.1f %10.3f\n", steps[i],
		       median(&t[i]), median(&t[i]) / one,
		       median(&m[i]) / 1048576.0, median(&m[i]) / (double)size);
	printf("private load (one process, pin_st_load): %.3f s median of %d%s\n",
	       one, priv->n, c->cold ? ", page cache dropped before each run" :
	       ", page cache kept");
}

int bench_shared(struct cfg *c, const char *file)
{
	struct series priv = { .name = "private" }, t[MAX_STEPS], m[MAX_STEPS];
	int steps[MAX_STEPS], nsteps = plan_steps(c->procs, steps);
	struct pin_dev *dev;
	struct stat st;
	int r, i, ret;

	memset(t, 0, sizeof(t));
	memset(m, 0, sizeof(m));
	if (stat(file, &st)) {
		perror(file);
		return 1;
	}
	ret = pin_dev_open(&dev, c->backends[0], NULL);
	if (ret) {
		fprintf(stderr, "pinbench: %s\n", strerror(-ret));
		return 1;
	}
	for (r = 0; r < c->runs; r++) {
		double s = private_load(c, dev, file), secs = 0, grown = 0;

		if (s < 0)
			goto fail;
		add(&priv, s);
		for (i = 0; i < nsteps; i++) {
			ret = next_key(file);
			if (!ret)
				ret = shared_run(c, dev, file, steps[i],
						 &secs, &grown);
			if (ret) {
				fprintf(stderr, "pinbench: %d workers: %s\n",
					steps[i], strerror(-ret));
				goto fail;
			}
			add(&t[i], secs);
			add(&m[i], grown);
		}
	}
	pin_dev_close(dev);
	print_table(c, file, (uint64_t)st.st_size, &priv, t, m, steps, nsteps);
	return 0;
fail:
	pin_dev_close(dev);
	return 1;
}
