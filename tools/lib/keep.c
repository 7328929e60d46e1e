// SPDX-License-Identifier: GPL-2.0
/*
 * Keeping checkpoints loaded in pinmem-cached. load asks for a file as
 * any client does (an ordinary entry); pin and unpin keep it loaded or
 * stop keeping it (root and the service's own user only); warm applies a
 * config file, the warm list: each line a path or glob and an optional
 * priority (higher first; 0 by default), # starting a comment. The list's
 * files are kept under one number, then what earlier lists kept and this
 * one does not name is kept no longer (an ordinary entry again). When the
 * kept entries would exceed the budget the service refuses the rest:
 * higher priorities go first so that they are the ones kept.
 */
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <pin.h>

#include "args.h"
#include "keep.h"

#define EXIT_FAILED	TOOLS_EXIT_FAILED
#define EXIT_USAGE	ARGS_EXIT_USAGE
#define EXIT_NOSERVICE	TOOLS_EXIT_NODEV

/* The exit status for ret, as why words it: 3 when no service answered. */
static int exit_of(int ret, const char *why)
{
	if (!ret)
		return 0;
	return strstr(why, "no service at ") ? EXIT_NOSERVICE : EXIT_FAILED;
}

struct warm_file {
	char *path;
	long priority;
	unsigned order;			/* in the file: ties keep it */
};

struct warm_list {
	struct warm_file *files;
	unsigned n, cap;
};

int keep_is_subcommand(const char *word)
{
	return !strcmp(word, "load") || !strcmp(word, "pin") ||
	       !strcmp(word, "unpin") || !strcmp(word, "warm");
}

/* One file to the service: op (0: an ordinary load), said; exit status. */
static int keep_file(const char *path, unsigned op, uint64_t set,
		     const char *sock)
{
	char why[512] = "";
	struct pin_cache_opts o = { .size = sizeof(o), .socket = sock,
				    .why = why, .why_len = sizeof(why),
				    .flags = PIN_CACHE_NO_FALLBACK };
	struct pin_cache_ck *c;
	int fd = open(path, O_RDONLY | O_CLOEXEC), ret;

	if (fd < 0) {
		fprintf(stderr, "pinctl: cache: %s: %s\n", path, strerror(errno));
		return EXIT_FAILED;
	}
	if (op) {
		ret = pin_cache_keep(fd, op, set, &o);
	} else {
		ret = pin_cache_open(fd, &o, &c);
		if (!ret) {
			snprintf(why, sizeof(why), "%s", pin_cache_how(c));
			pin_cache_close(c);
		}
	}
	close(fd);
	if (ret && exit_of(ret, why) == EXIT_NOSERVICE)
		fprintf(stderr, "pinctl: cache: %s\n", why);
	else if (ret)
		fprintf(stderr, "pinctl: cache: %s: %s%s%s\n", path, strerror(-ret),
			why[0] ? ": " : "", why);
	else
		printf("%s: %s%s\n", path, op == PIN_CACHE_UNPIN ? "" :
		       op ? "kept, " : "", why);
	return exit_of(ret, why);
}

static int warm_add(struct warm_list *w, const char *path, long priority)
{
	if (w->n == w->cap) {
		unsigned cap = w->cap ? w->cap * 2 : 16;
		struct warm_file *f = realloc(w->files, cap * sizeof(*f));

		if (!f)
			return -ENOMEM;
		w->files = f;
		w->cap = cap;
	}
	w->files[w->n].path = strdup(path);
	w->files[w->n].priority = priority;
	w->files[w->n].order = w->n;
	return w->files[w->n++].path ? 0 : -ENOMEM;
}

/* One line: "PATH-OR-GLOB [PRIORITY]"; 1 for a line that names nothing. */
static int warm_line(struct warm_list *w, char *line, const char *file,
		     unsigned lineno)
{
	char *hash = strchr(line, '#'), *pat, *prio, *end, *save = NULL;
	long priority = 0;
	glob_t g;
	int ret = 0;

	if (hash)
		*hash = 0;
	pat = strtok_r(line, " \t\r\n", &save);
	prio = strtok_r(NULL, " \t\r\n", &save);
	if (!pat)
		return 0;
	if (prio) {
		errno = 0;
		priority = strtol(prio, &end, 10);
		if (errno || *end || strtok_r(NULL, " \t\r\n", &save)) {
			fprintf(stderr, "pinctl: cache warm: %s:%u: not \"PATH [PRIORITY]\"\n",
				file, lineno);
			return -EINVAL;
		}
	}
	if (glob(pat, 0, NULL, &g)) {
		fprintf(stderr, "pinctl: cache warm: %s:%u: %s: no such file\n",
			file, lineno, pat);
		return 1;
	}
	for (size_t i = 0; i < g.gl_pathc && !ret; i++)
		ret = warm_add(w, g.gl_pathv[i], priority);
	globfree(&g);
	return ret;
}

/*
 * The config file's own safety: it says what the service pins, so only
 * root or the service's user (the caller) may have written it.
 */
static int warm_file_ok(FILE *f, const char *file)
{
	struct stat st;

	if (fstat(fileno(f), &st))
		return -errno;
	if ((st.st_uid != 0 && st.st_uid != geteuid()) ||
	    (st.st_mode & (S_IWGRP | S_IWOTH))) {
		fprintf(stderr, "pinctl: cache warm: %s: not used: it must be owned by root (or this user) and writable by its owner alone\n",
			file);
		return -EPERM;
	}
	return 0;
}

static int warm_read(const char *file, struct warm_list *w, int *missing)
{
	FILE *f = fopen(file, "re");
	char line[4096];
	unsigned lineno = 0;
	int ret;

	if (!f) {
		fprintf(stderr, "pinctl: cache warm: %s: %s\n", file, strerror(errno));
		return -errno;
	}
	ret = warm_file_ok(f, file);
	while (!ret && fgets(line, sizeof(line), f)) {
		ret = warm_line(w, line, file, ++lineno);
		if (ret == 1)
			*missing = 1, ret = 0;
	}
	fclose(f);
	return ret;
}

static int by_priority(const void *a, const void *b)
{
	const struct warm_file *x = a, *y = b;

	if (x->priority != y->priority)
		return x->priority > y->priority ? -1 : 1;
	return x->order < y->order ? -1 : 1;
}

static int cmd_warm(const char *file, const char *sock)
{
	struct warm_list w = { 0 };
	struct timespec ts;
	uint64_t set;
	int missing = 0, failed = 0, ret, st;
	char why[512] = "";
	struct pin_cache_opts o = { .size = sizeof(o), .socket = sock,
				    .why = why, .why_len = sizeof(why) };

	ret = warm_read(file, &w, &missing);
	if (ret) {
		for (unsigned i = 0; i < w.n; i++)
			free(w.files[i].path);
		free(w.files);
		return EXIT_FAILED;
	}
	qsort(w.files, w.n, sizeof(*w.files), by_priority);
	clock_gettime(CLOCK_REALTIME, &ts);
	set = (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
	set ^= (uint64_t)getpid() << 48;
	for (unsigned i = 0; i < w.n; i++) {
		failed |= keep_file(w.files[i].path, PIN_CACHE_WARM, set, sock) != 0;
		free(w.files[i].path);
	}
	free(w.files);
	ret = pin_cache_keep(-1, PIN_CACHE_WARM_END, set, &o);
	st = exit_of(ret, why);
	if (ret)
		fprintf(stderr, "pinctl: cache warm: %s%s%s\n", strerror(-ret),
			why[0] ? ": " : "", why);
	else
		printf("%s\n", why);
	return st ? st : failed || missing ? EXIT_FAILED : 0;
}

int keep_main(const char *word, int argc, char **argv, const char *sock)
{
	const char *file = KEEP_CONFIG_DEFAULT, *path = NULL;

	for (int i = 0; i < argc; i++) {
		const char *val = i + 1 < argc ? argv[i + 1] : NULL;

		if ((!strcmp(argv[i], "--config") && !strcmp(word, "warm")) ||
		    !strcmp(argv[i], "--socket")) {
			if (!val) {
				fprintf(stderr, "pinctl: cache %s: %s needs a value\n",
					word, argv[i]);
				return EXIT_USAGE;
			}
			*(argv[i][2] == 'c' ? &file : &sock) = val;
			i++;
		} else if (argv[i][0] != '-' && !path && strcmp(word, "warm")) {
			path = argv[i];
		} else {
			fprintf(stderr, "pinctl: cache %s: unexpected argument %s\n",
				word, argv[i]);
			args_try_help();
			return EXIT_USAGE;
		}
	}
	sock = pin_cache_socket(sock);
	if (!strcmp(word, "warm"))
		return cmd_warm(file, sock);
	if (!path) {
		fprintf(stderr, "pinctl: cache %s: FILE missing\n", word);
		args_try_help();
		return EXIT_USAGE;
	}
	return keep_file(path, !strcmp(word, "pin") ? PIN_CACHE_PIN :
			 !strcmp(word, "unpin") ? PIN_CACHE_UNPIN : 0, 0, sock);
}
