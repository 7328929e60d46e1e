// SPDX-License-Identifier: GPL-2.0
/*
 * What the benchmarks of pinmem-cached (shared.c, evict.c) ask the service:
 * its counts from --list's text, a cached open of a file, and a new key for
 * a file (so that the next request is a cold load).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <pin.h>

#include "bench.h"
#include "lib/args.h"

/* The service's --list text, NUL-terminated in buf (< 0: -errno). */
static int service_list(const struct cfg *c, char *buf, size_t len)
{
	struct pin_cache_opts o = { .size = sizeof(o), .socket = c->socket };
	int ret = pin_cache_list(&o, buf, len);

	if (ret >= 0)
		buf[len - 1] = 0;
	return ret;
}

/*
 * Whether a service answers at the socket, asked before a benchmark that
 * needs one: 0, or the exit status after saying which socket did not
 * answer (TOOLS_EXIT_NODEV when nothing listens there).
 */
int service_check(const struct cfg *c, const char *cmd)
{
	char buf[4096];
	int ret = service_list(c, buf, sizeof(buf));

	if (ret >= 0)
		return 0;
	fprintf(stderr, "pinbench %s: no service at %s: %s (start pinmem-cached, or --socket PATH)\n",
		cmd, pin_cache_socket(c->socket), strerror(-ret));
	return ret == -ENOENT || ret == -ECONNREFUSED ? TOOLS_EXIT_NODEV :
	       TOOLS_EXIT_FAILED;
}

/*
 * The service's entries and loads so far, from the first line of its list
 * ("...backend, E entries, ... of ... budget, L loads"); -EPROTO if it
 * says something else.
 */
int service_counts(const struct cfg *c, long *entries, long *loads)
{
	char buf[4096];
	const char *p, *q;
	int ret = service_list(c, buf, sizeof(buf));

	if (ret < 0)
		return ret;
	p = strstr(buf, "backend, ");
	q = strstr(buf, " loads");
	if (!p || !q || sscanf(p, "backend, %ld entries", entries) != 1)
		return -EPROTO;
	while (q > buf && q[-1] >= '0' && q[-1] <= '9')
		q--;
	return sscanf(q, "%ld", loads) == 1 ? 0 : -EPROTO;
}

/*
 * The service's evictions so far and what the last one took, from the
 * second line of its list ("evictions: N; the last: SIZE, DONATE X ms,
 * release Y ms; ..."); -EPROTO if it says something else.
 */
int service_evictions(const struct cfg *c, long *count, double *donate_ms,
		      double *release_ms)
{
	char buf[4096];
	const char *p, *q;
	int ret = service_list(c, buf, sizeof(buf));

	if (ret < 0)
		return ret;
	p = strstr(buf, "\nevictions: ");
	if (!p || sscanf(p, "\nevictions: %ld", count) != 1)
		return -EPROTO;
	*donate_ms = *release_ms = 0;
	if (!*count)
		return 0;
	q = strstr(p, ", DONATE ");
	if (!q || sscanf(q, ", DONATE %lf ms, release %lf ms", donate_ms,
			 release_ms) != 2)
		return -EPROTO;
	return 0;
}

/* One pin_cache_open of file the service holds already: its seconds. */
double cached_open(const struct cfg *c, const char *file)
{
	struct pin_cache_opts o = {
		.size = sizeof(o), .flags = PIN_CACHE_NO_FALLBACK,
		.socket = c->socket,
	};
	struct pin_cache_ck *ck;
	uint64_t t0 = now_ns();
	int fd = open(file, O_RDONLY | O_CLOEXEC), ret;
	double s;

	if (fd < 0)
		return -1;
	ret = pin_cache_open(fd, &o, &ck);
	s = (double)(now_ns() - t0) / 1e9;
	close(fd);
	if (ret)
		return -1;
	pin_cache_close(ck);
	return s;
}

/* A new key for the service: the file's times, one second on per call. */
int next_key(const char *file)
{
	struct timespec ts[2] = { { 0, UTIME_OMIT } };
	struct stat st;

	if (stat(file, &st))
		return -errno;
	ts[1] = st.st_mtim;
	ts[1].tv_sec += 1;
	return utimensat(AT_FDCWD, file, ts, 0) ? -errno : 0;
}
