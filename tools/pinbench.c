// SPDX-License-Identifier: GPL-2.0
/*
 * pinbench: how fast checkpoints move between disk and pinned memory.
 *
 *   pinbench load FILE   libpin (pin_st_load) against fio's io_uring
 *                        O_DIRECT reads of the same file with the same queue
 *                        depth and request size (plain, and with registered
 *                        buffers as libpin uses them), buffered pread into pinned
 *                        memory, and mmap + memcpy into pinned memory
 *   pinbench alloc-rate  the kernel's ALLOC on all CPUs against one
 *                        (pinbench/alloc_rate.c)
 *   pinbench shared FILE N processes loading one checkpoint each on their
 *                        own, then sharing one copy through pinmem-cached
 *                        (pinbench/shared.c)
 *   pinbench evict FILE  what pinmem-cached's eviction of one checkpoint
 *                        costs: DONATE, the release of the pages, the request
 *                        that needed the room (pinbench/evict.c)
 *   pinbench save [OUT]  pin_st_save of a pinned checkpoint against fio's
 *                        O_DIRECT writes + fsync of the same size (plain and
 *                        with registered buffers)
 *   pinbench prepare     what making locked memory costs by each way a
 *                        loader without the module has (pinbench/prepare.c)
 *   pinbench restart FILE  a new client's first tensor after the service
 *                        restarts, against a cold load (pinbench/restart.c)
 *   pinbench peers ...   pinmem's loaders against the other checkpoint
 *                        loaders, from Python (pinbench/python.c)
 *   pinbench dcp ...     PyTorch distributed checkpoint saves, torch's and
 *                        pinmem's, from Python (pinbench/python.c)
 *
 * Runs alternate between the methods; the page cache is dropped before each
 * run (needs root; otherwise, or with --no-drop-caches, the report says the
 * caches were warm). Dropping is the whole machine's page cache, so it is
 * said on stderr once. The
 * report gives medians and ratios. The in-process baselines read into a
 * pinned region allocated before their clock starts, except "mmap + memcpy
 * -> fresh pinned", which allocates, maps and locks its destination in the
 * clock as a loader without libpin would; libpin's own time is
 * given both for the transfer (io_ns) and end to end (allocation, pinning,
 * header, seal included). Each method's CPU time (user + system, every
 * thread, and fio's as a child) is reported per GB moved; libpin's is that
 * of the whole load, its transfer alone is not metered apart.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <pin.h>

#include "lib/args.h"
#include "pinbench/bench.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: pinbench load FILE [options]\n"
		"       pinbench save [OUT] [options]   (default OUT: ./pinbench-save.safetensors)\n"
		"       pinbench shared FILE [--procs N] [--socket PATH] [--runs N]\n"
		"                      N = 1, 2, 4 .. --procs workers (default 8), each\n"
		"                      loading privately, then all through pinmem-cached\n"
		"                      (moves the file's modification time on per run)\n"
		"       pinbench evict FILE [--socket PATH] [--runs N]\n"
		"                      the cost of an eviction; the service's budget must\n"
		"                      hold one copy of FILE but not two (moves its time on)\n"
		"       pinbench restart FILE --restart CMD [--socket PATH] [--runs N]\n"
		"                      a client's first tensor from a cold load, and after\n"
		"                      CMD restarts the service (moves the file's time on)\n"
		"       pinbench donate [--size MAX] [--runs N]   DONATE latency, 2 MiB..MAX (default 1G)\n"
		"       pinbench alloc-rate [--size N] [--runs N]   kernel ALLOC on all CPUs vs one\n"
		"                      (root; sets pinmem's alloc_threads, restores it; default 1G)\n"
		"       pinbench prepare [--size N] [--runs N]   locked memory: memfd 4k, anon\n"
		"                      4k, anon THP, and a pool's floor (default 1G)\n"
		"       pinbench peers [--small] [--runs N] [--json FILE] ...   against the other\n"
		"                      loaders (tests/python/bench_peers.py --help)\n"
		"       pinbench dcp [--gib G,..] [--saves N] [--rows ROWS] ...   PyTorch\n"
		"                      distributed checkpoint saves: torch's own and pinmem's\n"
		"                      (tests/python/bench_dcp.py --help)\n"
		"  --runs N            alternated runs per method, 1..%d (default 5)\n"
		"  --queue-depth N     1..256 (default %u)\n"
		"  --request-size N    bytes, 4K..64M, K/M suffix (default %u)\n"
		"  --backend LIST      device, portable, or device,portable to compare\n"
		"                      (load; save uses the first)\n"
		"  --size N            save: bytes to write; donate: the largest region;\n"
		"                      alloc-rate, prepare: the region (K/M/G/T suffix, default 1G)\n"
		"  --fio PATH          fio binary (default fio)\n"
		"  --json              one JSON object\n"
		"  --hugetlb-pool      load: run inside a hugetlb pool big enough for the\n"
		"                      file (root; nr_hugepages restored afterwards)\n"
		"  --pin-first         load: libpin pins all of the region before reading\n"
		"                      (no overlap), to compare with the default\n"
		"  --no-kernel-fill    load, device backend: read through the mapping\n"
		"                      with io_uring instead of the module's FILL\n"
		"  --no-drop-caches    load, save: keep the page cache (else, as root, the\n"
		"                      whole machine's page cache is dropped before each run)\n"
		"  --version           pinbench's and libpin's version\n"
		"Exit status: 0 ok, 1 a benchmark failed, 2 usage error, 3 no device\n"
		"(donate and alloc-rate need /dev/pinmem).\n",
		MAX_RUNS, PIN_IO_DEFAULT_QUEUE_DEPTH, PIN_IO_DEFAULT_REQUEST_SIZE);
}

static int parse_backend(const char *s)
{
	if (!strcmp(s, "device"))
		return PIN_BACKEND_DEVICE;
	if (!strcmp(s, "portable"))
		return PIN_BACKEND_PORTABLE;
	if (!strcmp(s, "auto"))
		return PIN_BACKEND_AUTO;
	return -1;
}

/* The largest --size (donate and alloc-rate refuse what the host cannot). */
#define MAX_SIZE	(1ULL << 50)

static int bad_backend(const char *first, const char *comma)
{
	fprintf(stderr, "pinbench: --backend: \"%s%s%s\" is not device, portable, "
		"auto or two of them with a comma\n", first, comma ? "," : "",
		comma ? comma + 1 : "");
	return ARGS_EXIT_USAGE;
}

/* --backend's one or two backends into c; nonzero (said) if not known. */
static int parse_backends(char *arg, struct cfg *c)
{
	char *comma = strchr(arg, ',');

	if (comma)
		*comma = 0;
	c->backends[0] = parse_backend(arg);
	c->nbackends = 1;
	if (comma) {
		c->backends[1] = parse_backend(comma + 1);
		c->nbackends = 2;
	}
	if (c->backends[0] < 0 || (comma && c->backends[1] < 0))
		return bad_backend(arg, comma);
	return 0;
}

static int print_version(void)
{
	printf("pinbench %s (libpin %s)\n", PIN_VERSION_STRING, pin_version());
	return 0;
}

/* The options into c: -1 to go on, or the exit status. */
static int parse_options(int argc, char **argv, struct cfg *c)
{
	static const struct option lo[] = {
		{ "runs", required_argument, NULL, 'n' },
		{ "queue-depth", required_argument, NULL, 'q' },
		{ "request-size", required_argument, NULL, 'r' },
		{ "backend", required_argument, NULL, 'b' },
		{ "size", required_argument, NULL, 's' },
		{ "fio", required_argument, NULL, 'f' },
		{ "json", no_argument, NULL, 'j' },
		{ "hugetlb-pool", no_argument, NULL, 'H' },
		{ "pin-first", no_argument, NULL, 'P' },
		{ "no-kernel-fill", no_argument, NULL, 'K' },
		{ "no-drop-caches", no_argument, NULL, 'D' },
		{ "procs", required_argument, NULL, 'p' },
		{ "socket", required_argument, NULL, 'S' },
		{ "restart", required_argument, NULL, 'R' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ 0 }
	};
	uint64_t v;
	int ch;

	argv[0] = (char *)"pinbench";	/* getopt's words start with it */
	while ((ch = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		switch (ch) {
		case 'n':
			if (parse_u64("--runs", optarg, 1, MAX_RUNS, &v))
				return ARGS_EXIT_USAGE;
			c->runs = (int)v;
			break;
		case 'q':
			if (parse_u64("--queue-depth", optarg, 1,
				      PIN_IO_MAX_QUEUE_DEPTH, &v))
				return ARGS_EXIT_USAGE;
			c->qd = (unsigned)v;
			break;
		case 'r':
			if (parse_size_multiple("--request-size", optarg,
						PIN_IO_ALIGN,
						PIN_IO_MAX_REQUEST_SIZE, &v))
				return ARGS_EXIT_USAGE;
			c->req = (uint32_t)v;
			break;
		case 'b':
			if (parse_backends(optarg, c))
				return ARGS_EXIT_USAGE;
			break;
		case 's':
			if (parse_size("--size", optarg, PIN_IO_ALIGN, MAX_SIZE,
				       &c->save_size))
				return ARGS_EXIT_USAGE;
			break;
		case 'f': c->fio = optarg; break;
		case 'j': c->json = 1; break;
		case 'H': c->hugetlb_pool = 1; break;
		case 'P': c->pin_first = 1; break;
		case 'K': c->no_kernel_fill = 1; break;
		case 'D': c->keep_caches = 1; break;
		case 'p':
			if (parse_u64("--procs", optarg, 1, 64, &v))
				return ARGS_EXIT_USAGE;
			c->procs = (int)v;
			break;
		case 'S': c->socket = optarg; break;
		case 'R': c->restart_cmd = optarg; break;
		case 'V':
			return print_version();
		case 'h':
			usage(stdout);
			return 0;
		default:
			args_try_help();
			return ARGS_EXIT_USAGE;
		}
	}
	return -1;
}

/*
 * Cold runs for load and save, unless --no-drop-caches: dropping once now
 * tells whether it works (root), and says so, as it is the whole machine's
 * page cache and not only the benchmark's file.
 */
static void plan_cold_runs(struct cfg *c)
{
	if (c->keep_caches || drop_caches()) {
		c->cold = 0;
		return;
	}
	fputs("pinbench: dropping the page cache (echo 3 > /proc/sys/vm/drop_caches) "
	      "before each cold run; --no-drop-caches to keep it\n", stderr);
}

/* The usage error for what main did not take: exit 2. */
static int bad_command(int n, char **words)
{
	static const char *const takes[] = {
		"load", "shared", "evict", "restart", "save", "donate", "alloc-rate",
		"prepare", "peers", "dcp",
	};
	size_t i;

	for (i = 0; n && i < sizeof(takes) / sizeof(takes[0]); i++)
		if (!strcmp(words[0], takes[i]))
			break;
	if (!n)
		fputs("pinbench: no command (load, shared, evict, restart, save, donate, alloc-rate, prepare, peers or dcp)\n",
		      stderr);
	else if (i == sizeof(takes) / sizeof(takes[0]))
		fprintf(stderr, "pinbench: unknown command \"%s\" (load, shared, evict, restart, save, donate, alloc-rate, prepare, peers or dcp)\n",
			words[0]);
	else
		fprintf(stderr, "pinbench: %s: wrong operands (load FILE, shared FILE, evict FILE, restart FILE, save [OUT], donate, alloc-rate, prepare, peers, dcp ...)\n",
			words[0]);
	args_try_help();
	return ARGS_EXIT_USAGE;
}

/* FILE of load, shared or evict, opened once before anything is dropped. */
static int readable(const char *cmd, const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0) {
		fprintf(stderr, "pinbench %s: %s: %s\n", cmd, path, strerror(errno));
		return 0;
	}
	close(fd);
	return 1;
}

int main(int argc, char **argv)
{
	struct cfg c = {
		.qd = PIN_IO_DEFAULT_QUEUE_DEPTH,
		.req = PIN_IO_DEFAULT_REQUEST_SIZE, .runs = 5, .cold = 1,
		.backends = { PIN_BACKEND_AUTO }, .nbackends = 1,
		.save_size = 1ULL << 30, .fio = "fio", .read_ahead_kb = -1,
		.pool_was = -1, .pool_set = -1, .procs = 8,
	};
	int ret;

	if (argc > 1 && (!strcmp(argv[1], "peers") || !strcmp(argv[1], "dcp")))
		return bench_python(argv[1], argc - 2, argv + 2);
	ret = parse_options(argc, argv, &c);

	if (ret >= 0)
		return ret;
	if (optind + 1 == argc && !strcmp(argv[optind], "donate"))
		return bench_donate(&c, c.save_size);
	if (optind + 1 == argc && !strcmp(argv[optind], "alloc-rate"))
		return bench_alloc_rate(&c, c.save_size);
	if (optind + 1 == argc && !strcmp(argv[optind], "prepare"))
		return bench_prepare(&c, c.save_size);
	if (optind < argc && !strcmp(argv[optind], "load") && optind + 2 == argc) {
		if (!readable("load", argv[optind + 1]))
			return TOOLS_EXIT_FAILED;
		plan_cold_runs(&c);
		return bench_load_pool(&c, argv[optind + 1]);
	}
	if (optind < argc && !strcmp(argv[optind], "shared") && optind + 2 == argc) {
		if (!readable("shared", argv[optind + 1]))
			return TOOLS_EXIT_FAILED;
		ret = service_check(&c, "shared");
		if (ret)
			return ret;
		plan_cold_runs(&c);
		return bench_shared(&c, argv[optind + 1]);
	}
	if (optind < argc && !strcmp(argv[optind], "evict") && optind + 2 == argc) {
		if (!readable("evict", argv[optind + 1]))
			return TOOLS_EXIT_FAILED;
		ret = service_check(&c, "evict");
		if (ret)
			return ret;
		plan_cold_runs(&c);
		return bench_evict(&c, argv[optind + 1]);
	}
	if (optind < argc && !strcmp(argv[optind], "restart") && optind + 2 == argc) {
		if (!c.restart_cmd) {
			fputs("pinbench: restart needs --restart CMD (a command that restarts the service)\n",
			      stderr);
			args_try_help();
			return ARGS_EXIT_USAGE;
		}
		if (!readable("restart", argv[optind + 1]))
			return TOOLS_EXIT_FAILED;
		ret = service_check(&c, "restart");
		if (ret)
			return ret;
		plan_cold_runs(&c);
		return bench_restart(&c, argv[optind + 1]);
	}
	if (optind < argc && !strcmp(argv[optind], "save") && optind + 2 >= argc) {
		plan_cold_runs(&c);
		return bench_save(&c, optind + 1 < argc ? argv[optind + 1] :
				  "pinbench-save.safetensors");
	}
	return bad_command(argc - optind, argv + optind);
}
