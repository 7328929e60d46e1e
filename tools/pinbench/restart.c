// SPDX-License-Identifier: GPL-2.0
/*
 * pinbench restart FILE --restart CMD: what a restart of pinmem-cached
 * costs a client that starts after it. Each run asks the service for FILE
 * under a new key (its modification time moved on), so the first request
 * is a cold load, then runs CMD (a shell command that returns once the
 * service has been restarted, e.g. "systemctl restart pinmem-cached"),
 * waits for the service to answer and asks again: a service that kept its
 * entries (the fd store) serves it from memory, with no new load, which is
 * checked from the service's own count of loads. Reported: the time to the
 * first tensor (pin_cache_open returning the mapped checkpoint) of the cold
 * request and of the request after the restart, and the restart itself.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <pin.h>

#include "bench.h"

#define ANSWER_WAIT_S	60

/* The service's loads so far, once it answers (up to ANSWER_WAIT_S). */
static int answered_loads(const struct cfg *c, long *loads)
{
	long entries;
	int i, ret = -ETIMEDOUT;

	for (i = 0; i < ANSWER_WAIT_S * 100; i++) {
		ret = service_counts(c, &entries, loads);
		if (!ret)
			return 0;
		usleep(10000);
	}
	return ret;
}

/* CMD, then the service's answer: the seconds it took (< 0: failed). */
static double restart_service(const struct cfg *c, long *loads)
{
	uint64_t t0 = now_ns();
	int st = system(c->restart_cmd);

	if (st) {
		fprintf(stderr, "pinbench: restart: \"%s\" exited with status %d\n",
			c->restart_cmd, WIFEXITED(st) ? WEXITSTATUS(st) : -1);
		return -1;
	}
	if (answered_loads(c, loads)) {
		fprintf(stderr, "pinbench: restart: the service did not answer within %d s of \"%s\"\n",
			ANSWER_WAIT_S, c->restart_cmd);
		return -1;
	}
	return (double)(now_ns() - t0) / 1e9;
}

/* A request served from memory: the loads count did not move. */
static int served_kept(const struct cfg *c, long before)
{
	long loads;
	int ret = answered_loads(c, &loads);

	if (ret)
		return ret;
	if (loads == before)
		return 0;
	fprintf(stderr, "pinbench: restart: the request after the restart loaded the file again (%ld loads, %ld before it): the service did not keep its entry\n",
		loads, before);
	return -ESTALE;
}

static int one_run(struct cfg *c, const char *file, struct series *cold,
		   struct series *warm, struct series *restart)
{
	double s_cold, s_restart, s_warm;
	long loads;

	if (next_key(file))
		return -EIO;
	prep_cold(c);
	s_cold = cached_open(c, file);
	if (s_cold < 0)
		return -EIO;
	s_restart = restart_service(c, &loads);
	if (s_restart < 0)
		return -ECHILD;
	s_warm = cached_open(c, file);
	if (s_warm < 0)
		return -EIO;
	if (served_kept(c, loads))
		return -ESTALE;
	add(cold, s_cold);
	add(restart, s_restart);
	add(warm, s_warm);
	return 0;
}

static void print_text(const struct cfg *c, const char *file, double mib,
		       struct series *cold, struct series *warm,
		       struct series *restart)
{
	printf("restart %s (%.0f MiB), medians of %d run(s):\n", file, mib,
	       c->runs);
	printf("  first tensor, cold load                %10.2f ms\n",
	       median(cold) * 1e3);
	printf("  the restart, until the service answers %10.2f ms\n",
	       median(restart) * 1e3);
	printf("  first tensor, after the restart        %10.2f ms (%.0fx faster than cold)\n",
	       median(warm) * 1e3, median(cold) / median(warm));
}

int bench_restart(struct cfg *c, const char *file)
{
	struct series cold = { .name = "cold" }, warm = { .name = "warm" };
	struct series restart = { .name = "restart" };
	struct stat st;
	int r, ret = 0;

	if (stat(file, &st)) {
		perror(file);
		return 1;
	}
	for (r = 0; r < c->runs && !ret; r++)
		ret = one_run(c, file, &cold, &warm, &restart);
	if (ret) {
		fprintf(stderr, "pinbench: restart: run %d: %s\n", r, strerror(-ret));
		return 1;
	}
	if (c->json) {
		printf("{\"bench\":\"restart\",\"bytes\":%lld,\"runs\":%d,"
		       "\"cold_first_tensor_s\":%.6f,\"restart_s\":%.6f,"
		       "\"restarted_first_tensor_s\":%.6f}\n",
		       (long long)st.st_size, c->runs, median(&cold),
		       median(&restart), median(&warm));
		return 0;
	}
	print_text(c, file, (double)st.st_size / 1048576.0, &cold, &warm,
		   &restart);
	return 0;
}
