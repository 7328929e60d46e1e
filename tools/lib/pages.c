// SPDX-License-Identifier: GPL-2.0
/*
 * Which pages a loaded region got, for the tools' reports: the device
 * backend's chunks, a hugetlb memfd (the host's pool), shmem transparent
 * huge pages (shmem_enabled "advise" or "always"), or 4 KiB pages.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pin.h>

#include "pages.h"

/* kB of the smaps entry starting at addr mapped by huge PMDs, or -1. */
long long pmd_mapped_kb(const void *addr)
{
	char line[256], want[32];
	long long kb = -1, v;
	int in = 0;
	FILE *f = fopen("/proc/self/smaps", "r");

	if (!f)
		return -1;
	snprintf(want, sizeof(want), "%lx-", (unsigned long)addr);
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, want, strlen(want))) {
			in = 1;
			kb = 0;
		} else if (in && (sscanf(line, "ShmemPmdMapped: %lld kB", &v) == 1 ||
				  sscanf(line, "FilePmdMapped: %lld kB", &v) == 1)) {
			kb += v;
		} else if (in && strchr(line, '-') && strchr(line, ' ') &&
			   strchr(line, '-') < strchr(line, ' ')) {
			break;		/* the next mapping's header */
		}
	}
	fclose(f);
	return kb;
}

/* "device", "hugetlb", "thp", "4k" or "unknown": r, of backend. */
const char *page_kind(int backend, struct pin_region *r)
{
	struct pin_region_info ri = PIN_INIT(struct pin_region_info);
	void *map;
	long long kb;

	if (!r || pin_region_info(r, &ri))
		return "unknown";
	if (backend == PIN_BACKEND_DEVICE)
		return "device";
	if (ri.min_order > 0)
		return "hugetlb";
	if (pin_region_map(r, &map))
		return "unknown";
	kb = pmd_mapped_kb(map);
	return kb > 0 ? "thp" : "4k";
}
