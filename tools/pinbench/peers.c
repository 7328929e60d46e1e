// SPDX-License-Identifier: GPL-2.0
/*
 * pinbench peers: the side-by-side table of pinmem's loaders and the
 * other checkpoint loaders (fastsafetensors, Run:ai's streamer,
 * safetensors, the JAX ones, fio), which is Python: this runs the
 * checkout's tests/python/bench_peers.py (next to build/bin/pinbench) with
 * the arguments given, under Debian's python3.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "pinbench/bench.h"

int bench_peers(int argc, char **argv)
{
	char exe[PATH_MAX], script[PATH_MAX + 64];
	char *args[64];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	char *slash;
	int i;

	if (n < 0) {
		fprintf(stderr, "pinbench: peers: /proc/self/exe: %s\n",
			strerror(errno));
		return 1;
	}
	exe[n] = '\0';
	slash = strrchr(exe, '/');	/* TOP/build/bin/pinbench */
	if (slash)
		*slash = '\0';
	snprintf(script, sizeof(script), "%s/../../tests/python/bench_peers.py",
		 exe);
	if (access(script, R_OK)) {
		fprintf(stderr, "pinbench: peers needs the source tree's tests/python/bench_peers.py (not found at %s)\n",
			script);
		return 1;
	}
	if (argc > (int)(sizeof(args) / sizeof(args[0])) - 3) {
		fprintf(stderr, "pinbench: peers: too many arguments\n");
		return 2;
	}
	args[0] = "/usr/bin/python3";
	args[1] = script;
	for (i = 0; i < argc; i++)
		args[i + 2] = argv[i];
	args[argc + 2] = NULL;
	execv(args[0], args);
	fprintf(stderr, "pinbench: peers: %s: %s\n", args[0], strerror(errno));
	return 1;
}
