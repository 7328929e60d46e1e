// SPDX-License-Identifier: GPL-2.0
/*
 * The benchmarks that are Python, run from the checkout's tests/python
 * (next to build/bin/pinbench) with the arguments given, under Debian's
 * python3: pinbench peers (bench_peers.py: pinmem's loaders and the other
 * checkpoint loaders, fastsafetensors, Run:ai's streamer, safetensors,
 * the JAX ones, fio) and pinbench dcp (bench_dcp.py: PyTorch distributed
 * checkpoint saves, which re-runs itself under the test venv's torch).
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "pinbench/bench.h"

int bench_python(const char *name, int argc, char **argv)
{
	char exe[PATH_MAX], script[PATH_MAX + 64];
	char *args[64];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	char *slash;
	int i;

	if (n < 0) {
		fprintf(stderr, "pinbench: %s: /proc/self/exe: %s\n", name,
			strerror(errno));
		return 1;
	}
	exe[n] = '\0';
	slash = strrchr(exe, '/');	/* TOP/build/bin/pinbench */
	if (slash)
		*slash = '\0';
	snprintf(script, sizeof(script), "%s/../../tests/python/bench_%s.py",
		 exe, name);
	if (access(script, R_OK)) {
		fprintf(stderr, "pinbench: %s needs the source tree's tests/python/bench_%s.py (not found at %s)\n",
			name, name, script);
		return 1;
	}
	if (argc > (int)(sizeof(args) / sizeof(args[0])) - 3) {
		fprintf(stderr, "pinbench: %s: too many arguments\n", name);
		return 2;
	}
	args[0] = "/usr/bin/python3";
	args[1] = script;
	for (i = 0; i < argc; i++)
		args[i + 2] = argv[i];
	args[argc + 2] = NULL;
	execv(args[0], args);
	fprintf(stderr, "pinbench: %s: %s: %s\n", name, args[0],
		strerror(errno));
	return 1;
}
