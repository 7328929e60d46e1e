// SPDX-License-Identifier: MIT
/*
 * Whether shmem gives huge pages to a MADV_HUGEPAGE mapping's faults that
 * it would not give to fallocate(), read from the THP knobs in sysfs: the
 * "advise" mode. The loader asks because it fallocates a step before
 * faulting it in (fill.c, cheaper for 4 KiB pages), and under "advise"
 * that fallocate, which has no mapping to take the advice from, fixes the
 * pages at 4 KiB (Documentation/benchmark-log.md, "Shmem THP").
 *
 * The knobs (Documentation/admin-guide/mm/transhuge.rst): shmem_enabled
 * holds always, within_size, advise, never, or the testing modes deny
 * and force, which override everything. Since Linux 6.11 each folio size
 * has a knob of its own (hugepages-<size>kB/shmem_enabled), where
 * "inherit" follows the top one.
 */
#include <dirent.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"

/* The selected (bracketed) word of a sysfs choice file; 0 or -1. */
static int knob_read(const char *path, char *word, size_t len)
{
	char line[256], *open, *close;
	FILE *f = fopen(path, "re");
	int ret = -1;

	if (!f)
		return -1;
	if (fgets(line, sizeof(line), f)) {
		open = strchr(line, '[');
		close = open ? strchr(open, ']') : NULL;
		if (close && (size_t)(close - open - 1) < len) {
			memcpy(word, open + 1, (size_t)(close - open - 1));
			word[close - open - 1] = '\0';
			ret = 0;
		}
	}
	fclose(f);
	return ret;
}

/*
 * 1 if a per-size knob under thp_dir is "advise" (top: whether the top
 * one, which "inherit" follows, is), 0 if none is, -1 if there are none
 * (before 6.11).
 */
static int some_size_advised(const char *thp_dir, DIR *d, int top)
{
	char path[512], mode[32];
	struct dirent *de;
	int ret = -1;

	while ((de = readdir(d))) {
		if (strncmp(de->d_name, "hugepages-", 10))
			continue;
		snprintf(path, sizeof(path), "%s/%s/shmem_enabled", thp_dir,
			 de->d_name);
		if (knob_read(path, mode, sizeof(mode)))
			continue;
		if (!strcmp(mode, "advise") || (!strcmp(mode, "inherit") && top))
			return 1;
		ret = 0;
	}
	return ret;
}

/*
 * 1 if shmem gives some size of huge folio only to a MADV_HUGEPAGE
 * mapping under the THP sysfs directory thp_dir
 * (/sys/kernel/mm/transparent_hugepage), else 0 (also without THP, and
 * under the overrides deny and force).
 */
int pin__shmem_thp_advise(const char *thp_dir)
{
	char path[512], top[32];
	DIR *d;
	int advised;

	snprintf(path, sizeof(path), "%s/shmem_enabled", thp_dir);
	if (knob_read(path, top, sizeof(top)) || !strcmp(top, "deny") ||
	    !strcmp(top, "force"))
		return 0;
	d = opendir(thp_dir);
	if (!d)
		return !strcmp(top, "advise");
	advised = some_size_advised(thp_dir, d, !strcmp(top, "advise"));
	closedir(d);
	return advised < 0 ? !strcmp(top, "advise") : advised;
}
