// SPDX-License-Identifier: GPL-2.0
/*
 * pinmem-cached answers LIST with a table for people (service/list.c, the
 * protocol's only form). pinctl --json cache reads it back into fields:
 * the totals of the first two lines and, per entry, its row and the
 * clients, evict and last-refusal lines under it. Sizes in the table are
 * rounded (one decimal of KiB, MiB or GiB), and so are the *_bytes fields
 * read from them; a line this reader does not know is skipped, so that a
 * newer service's table still gives what it can.
 */
#include <stdlib.h>
#include <string.h>

#include "cachelist.h"
#include "json.h"

/* "2.0 MiB" (as human_bytes writes it) as bytes; 0 if not a size. */
static unsigned long long bytes_of(double v, const char *unit)
{
	double m = !strcmp(unit, "KiB") ? 1024.0 : !strcmp(unit, "MiB") ?
		   1048576.0 : !strcmp(unit, "GiB") ? 1073741824.0 : 0;

	return (unsigned long long)(v * m + 0.5);
}

static void size_field(FILE *f, const char *key, double v, const char *unit)
{
	fprintf(f, "\"%s\": \"%.1f %s\", \"%s_bytes\": %llu", key, v, unit,
		key, bytes_of(v, unit));
}

static void head_json(FILE *f, const char *line)
{
	char backend[32], uu[8], bu[8];
	unsigned entries;
	unsigned long long loads;
	double used, budget;

	if (sscanf(line, "pinmem-cached: %31s backend, %u entries, %lf %7s of %lf %7s budget, %llu loads",
		   backend, &entries, &used, uu, &budget, bu, &loads) != 7)
		return;
	fputs(", \"backend\": ", f);
	json_str(f, backend);
	fprintf(f, ", \"entry_count\": %u, ", entries);
	size_field(f, "used", used, uu);
	fputs(", ", f);
	size_field(f, "budget", budget, bu);
	fprintf(f, ", \"loads\": %llu", loads);
}

static void evictions_json(FILE *f, const char *line)
{
	unsigned long long count;
	double last, donate, release, slowest;
	char unit[8];

	if (sscanf(line, "evictions: %llu", &count) != 1)
		return;
	fprintf(f, ", \"evictions\": {\"count\": %llu", count);
	if (sscanf(line, "evictions: %*u; the last: %lf %7[^,], DONATE %lf ms, release %lf ms; the slowest %lf ms",
		   &last, unit, &donate, &release, &slowest) == 5) {
		fputs(", ", f);
		size_field(f, "last", last, unit);
		fprintf(f, ", \"last_donate_ms\": %.3f, \"last_release_ms\": %.3f, \"slowest_ms\": %.3f",
			donate, release, slowest);
	}
	fputc('}', f);
}

/* "pid 4242 (python3), pid 4243 (x)[, and 2 of other users]" */
static void pids_json(FILE *f, const char *s)
{
	int first = 1;

	fputs(", \"clients\": [", f);
	while (!strncmp(s, "pid ", 4)) {
		char *end;
		unsigned long pid = strtoul(s + 4, &end, 10);
		const char *c = end, *close;

		if (strncmp(c, " (", 2))
			break;
		c += 2;
		close = c;
		/* The command may hold ')': its end is one before ", " or the end. */
		while ((close = strchr(close, ')')) && close[1] && strncmp(close + 1, ", ", 2))
			close++;
		if (!close)
			break;
		fprintf(f, "%s{\"pid\": %lu, \"comm\": ", first ? "" : ", ", pid);
		first = 0;
		{
			char comm[128];
			size_t n = (size_t)(close - c) < sizeof(comm) - 1 ?
				   (size_t)(close - c) : sizeof(comm) - 1;

			memcpy(comm, c, n);
			comm[n] = '\0';
			json_str(f, comm);
		}
		fputc('}', f);
		s = close + 1;
		if (!strncmp(s, ", pid ", 6))
			s += 2;
	}
	fputc(']', f);
	if (!strncmp(s, ", and ", 6))
		s += 6;
	fprintf(f, ", \"clients_of_other_users\": %lu", strtoul(s, NULL, 10));
}

/* What the "    clients: " line says. */
static void clients_json(FILE *f, const char *s)
{
	unsigned n;

	if (!strncmp(s, "not known", 9)) {
		fputs(", \"clients\": null", f);
	} else if (!strcmp(s, "none mapping it")) {
		fputs(", \"clients\": [], \"clients_of_other_users\": 0", f);
	} else if (sscanf(s, "%u waiting for the load", &n) == 1 &&
		   strstr(s, "waiting")) {
		fprintf(f, ", \"waiting\": %u", n);
	} else if (!strncmp(s, "pid ", 4)) {
		pids_json(f, s);
	} else if (sscanf(s, "%u of other users", &n) == 1) {
		fprintf(f, ", \"clients\": [], \"clients_of_other_users\": %u", n);
	} else {
		fputs(", \"clients_error\": ", f);
		json_str(f, s);
	}
}

static void evict_json(FILE *f, const char *s)
{
	fprintf(f, ", \"evictable\": %s, \"evict\": ",
		!strncmp(s, "yes", 3) ? "true" : "false");
	json_str(f, s);
}

/* One entry's row: "   2    132.0 MiB    12.4s     0.3s ready    FILE". */
static int row_json(FILE *f, const char *line, int first)
{
	unsigned long long id;
	double size, age, idle;
	char unit[8], state[16];
	int off = 0;

	if (sscanf(line, "%llu %lf %7s %lfs %lfs %15s %n", &id, &size, unit,
		   &age, &idle, state, &off) != 6 || !off)
		return 0;
	fprintf(f, "%s{\"id\": %llu, ", first ? "" : "}, ", id);
	size_field(f, "size", size, unit);
	fprintf(f, ", \"age_s\": %.1f, \"idle_s\": %.1f, \"state\": ", age, idle);
	json_str(f, state);
	fputs(", \"file\": ", f);
	if (!strcmp(line + off, "(a file of another user)"))
		fputs("null", f);
	else
		json_str(f, line + off);
	return 1;
}

/* open: 1, an entry's object is open; | 2, its kept line was read. */
static void entry_end(FILE *f, int open)
{
	if (open == 1)
		fputs(", \"kept\": false", f);
}

static void entry_line(FILE *f, const char *line, int *open)
{
	if (!strncmp(line, "    kept: ", 10) && *open) {
		fputs(", \"kept\": true, \"kept_by\": ", f);
		json_str(f, line + 10);
		*open |= 2;
	} else if (!strncmp(line, "    clients: ", 13) && *open)
		clients_json(f, line + 13);
	else if (!strncmp(line, "    evict: ", 11) && *open)
		evict_json(f, line + 11);
	else if (!strncmp(line, "    last refused eviction: ", 27) && *open) {
		fputs(", \"last_refused_eviction\": ", f);
		json_str(f, line + 27);
	} else if (!strncmp(line, "    charged to: ", 16) && *open) {
		fputs(", \"charged_to\": ", f);
		json_str(f, line + 16);
	} else if (line[0] != ' ' || line[1] == ' ') {
		int was = *open;

		if (was)
			entry_end(f, was);
		if (row_json(f, line, !was))
			*open = 1;
		else if (was)
			*open = was | 2;	/* said already */
	}
}

/*
 * The table's fields, each written as ", \"key\": value" to follow what
 * the caller has opened: totals, evictions, "entries": [...].
 */
void cache_list_json(FILE *f, const char *table)
{
	char *copy = strdup(table), *line, *save = NULL;
	int n = 0, open = 0;

	if (!copy)
		return;
	for (line = strtok_r(copy, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save), n++) {
		if (n == 0) {
			head_json(f, line);
			continue;
		}
		if (n == 1) {
			evictions_json(f, line);
			fputs(", \"entries\": [", f);
			continue;
		}
		if (n > 2)
			entry_line(f, line, &open);
	}
	entry_end(f, open);
	if (n >= 2)
		fputs(open ? "}]" : "]", f);
	free(copy);
}
