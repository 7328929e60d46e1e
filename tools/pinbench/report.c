// SPDX-License-Identifier: GPL-2.0
/*
 * pinbench's report: the table (or one JSON object) of medians, ratios and
 * CPU seconds per GB, and where libpin's end to end time went (allocate,
 * pin, transfer, seal).
 */
#include <stdio.h>

#include <pin.h>

#include "lib/json.h"
#include "bench.h"

static const char *const phase_names[NPHASES] = {
	"allocate", "pin", "transfer", "seal",
};

void add_phases(struct series *ph, const struct pin_st *ck)
{
	struct pin_st_phases p = PIN_INIT(struct pin_st_phases);

	pin_st_phases(ck, &p);
	add(&ph[0], (double)p.alloc_ns / 1e9);
	add(&ph[1], (double)p.pin_ns / 1e9);
	add(&ph[2], (double)p.transfer_ns / 1e9);
	add(&ph[3], (double)p.seal_ns / 1e9);
}

/* Medians of each backend's phases: JSON members, or lines of text. */
static void report_phases(const struct cfg *c, const char *const *backend,
			  struct series (*ph)[NPHASES])
{
	int b, k;

	if (c->json)
		printf(",\"phases_seconds\":{");
	for (b = 0; b < 2 && backend[b]; b++) {
		if (c->json)
			printf("%s\"libpin %s\":{", b ? "," : "", backend[b]);
		else
			printf("  libpin %s, where the end to end time went (medians):",
			       backend[b]);
		for (k = 0; k < NPHASES; k++) {
			if (c->json)
				printf("%s\"%s\":%.6f", k ? "," : "",
				       phase_names[k], median(&ph[b][k]));
			else
				printf("%s %s %.3f s", k ? "," : "",
				       phase_names[k], median(&ph[b][k]));
		}
		printf(c->json ? "}" : "\n");
	}
	if (c->json)
		printf("},\"pages\":{");
	for (b = 0; b < 2 && backend[b]; b++) {
		if (c->json)
			printf("%s\"libpin %s\":\"%s\"", b ? "," : "",
			       backend[b], c->pages[b]);
		else
			printf("  libpin %s: pages %s%s\n", backend[b],
			       c->pages[b], c->kernel_fill[b] ?
			       ", read by the module (FILL)" : "");
	}
	if (c->json)
		printf("},\"hugetlb_pool\":{\"was\":%ld,\"set\":%ld},"
		       "\"pin_first\":%s,\"kernel_fill\":%s", c->pool_was,
		       c->pool_set, c->pin_first ? "true" : "false",
		       c->kernel_fill[0] ? "true" : "false");
	else if (c->pool_set >= 0)
		printf("  hugetlb pool: %ld pages of 2 MiB for the run (was %ld, restored)\n",
		       c->pool_set, c->pool_was);
	if (!c->json && c->pin_first)
		printf("  libpin: --pin-first, all of the region pinned before the reads\n");
}

void report(const struct cfg *c, const char *what, const char *file,
		   uint64_t size, struct series *s, int ns, int base,
		   const char *extra, const char *const *phase_of,
		   struct series (*ph)[NPHASES])
{
	int i;

	if (c->json) {
		printf("{\"bench\":\"%s\",\"file\":", what);
		json_str(stdout, file);
		printf(",\"bytes\":%llu,"
		       "\"runs\":%d,\"queue_depth\":%u,\"request_size\":%u,"
		       "\"cold_cache\":%s,\"read_ahead_kb\":%ld,"
		       "\"median_gbps\":{",
		       (unsigned long long)size, c->runs, c->qd,
		       c->req, c->cold ? "true" : "false", c->read_ahead_kb);
		for (i = 0; i < ns; i++)
			printf("%s\"%s\":%.3f", i ? "," : "", s[i].name,
			       median(&s[i]));
		printf("},\"ratio_to\":{\"%s\":{", s[base].name);
		for (i = 0; i < ns; i++)
			printf("%s\"%s\":%.3f", i ? "," : "", s[i].name,
			       median(&s[base]) > 0 ?
			       median(&s[i]) / median(&s[base]) : 0);
		printf("}},\"median_cpu_s_per_gb\":{");
		for (i = 0; i < ns; i++) {
			printf("%s\"%s\":", i ? "," : "", s[i].name);
			if (s[i].ncpu)
				printf("%.3f", median_of(s[i].cpu, s[i].ncpu));
			else
				printf("null");
		}
		printf("}");
		if (phase_of)
			report_phases(c, phase_of, ph);
		printf(",\"note\":");
		json_str(stdout, extra);
		printf("}\n");
		return;
	}
	printf("pinbench %s %s: %.3f GB, %d runs alternated, queue depth %u, request %u bytes, %s\n",
	       what, file, (double)size / 1e9, c->runs, c->qd, c->req,
	       c->cold ? "page cache dropped before each run" :
	       c->keep_caches ? "CACHES WARM (--no-drop-caches)" :
	       "CACHES WARM (not root: cannot drop the page cache)");
	if (c->read_ahead_kb >= 0)
		printf("  disk read-ahead %ld KiB (the request size of the page cache's reads)\n",
		       c->read_ahead_kb);
	printf("  %-31s %10s %10s %9s   runs (GB/s)\n", "method", "median",
	       "ratio", "CPU s/GB");
	for (i = 0; i < ns; i++) {
		int k;

		printf("  %-31s %8.3f GB/s %6.2fx  ", s[i].name, median(&s[i]),
		       median(&s[base]) > 0 ? median(&s[i]) / median(&s[base]) : 0);
		if (s[i].ncpu)
			printf("%8.3f ", median_of(s[i].cpu, s[i].ncpu));
		else
			printf("%8s ", "-");
		for (k = 0; k < s[i].n; k++)
			printf(" %.2f", s[i].v[k]);
		printf("\n");
	}
	printf("  (ratios to %s)%s%s\n", s[base].name, extra[0] ? "\n  " : "",
	       extra);
	if (phase_of)
		report_phases(c, phase_of, ph);
}
