// SPDX-License-Identifier: GPL-2.0
/*
 * pinbench evict FILE: what it costs pinmem-cached to take one checkpoint's
 * memory back. Each run asks the service for FILE under a new key (its
 * modification time moved on, the bytes untouched), so the entry of the
 * run before, no longer mapped by anyone, must be evicted to make room:
 * the service's budget must hold one copy but not two. Reported per run,
 * from the service's own timing (--list's "evictions" line): the kernel's
 * DONATE and the release of the pages; and the whole request that needed
 * the room, against the first request, which needed none.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include <pin.h>

#include "bench.h"

/* One cold request of a new key: its seconds (< 0: it failed). */
static double cold_request(struct cfg *c, const char *file)
{
	if (next_key(file))
		return -1;
	prep_cold(c);
	return cached_open(c, file);
}

static int one_run(struct cfg *c, const char *file, long *seen,
		   struct series *req, struct series *don,
		   struct series *rel)
{
	double s = cold_request(c, file), d, r;
	long n;
	int ret;

	if (s < 0)
		return -EIO;
	ret = service_evictions(c, &n, &d, &r);
	if (ret)
		return ret;
	if (n != *seen + 1) {
		fprintf(stderr, "pinbench: the service evicted %ld entries for one request, not 1: give it a budget (and one user's share, --user-share) of more than one copy of the file and less than two\n",
			n - *seen);
		return -EAGAIN;
	}
	*seen = n;
	add(req, s);
	add(don, d);
	add(rel, r);
	return 0;
}

int bench_evict(struct cfg *c, const char *file)
{
	struct series req = { .name = "request" }, don = { .name = "DONATE" };
	struct series rel = { .name = "release" };
	double first, mib;
	struct stat st;
	long seen;
	int r, ret;

	if (stat(file, &st)) {
		perror(file);
		return 1;
	}
	mib = (double)st.st_size / 1048576.0;
	first = cold_request(c, file);
	ret = first < 0 ? -EIO : service_evictions(c, &seen, &(double){0},
						    &(double){0});
	for (r = 0; r < c->runs && !ret; r++)
		ret = one_run(c, file, &seen, &req, &don, &rel);
	if (ret) {
		fprintf(stderr, "pinbench: evict: %s\n", strerror(-ret));
		return 1;
	}
	if (c->json) {
		printf("{\"bench\":\"evict\",\"bytes\":%lld,\"runs\":%d,"
		       "\"first_request_s\":%.6f,\"request_s\":%.6f,"
		       "\"donate_ms\":%.3f,\"release_ms\":%.3f}\n",
		       (long long)st.st_size, c->runs, first, median(&req),
		       median(&don), median(&rel));
		return 0;
	}
	printf("evict %s (%.0f MiB), medians of %d run(s):\n", file, mib,
	       c->runs);
	printf("  DONATE             %9.3f ms\n", median(&don));
	printf("  release the pages  %9.3f ms (%.2f GiB/s)\n", median(&rel),
	       mib / 1024.0 / (median(&rel) / 1e3));
	printf("  request that evicted %7.3f s, the first request (no eviction) %.3f s\n",
	       median(&req), first);
	return 0;
}
