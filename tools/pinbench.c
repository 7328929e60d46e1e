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
 *   pinbench save [OUT]  pin_st_save of a pinned checkpoint against fio's
 *                        O_DIRECT writes + fsync of the same size (plain and
 *                        with registered buffers)
 *
 * Runs alternate between the methods; the page cache is dropped before each
 * run (needs root; otherwise the report says the caches were warm). The
 * report gives medians and ratios. The in-process baselines read into a
 * pinned region allocated before their clock starts, except "mmap + memcpy
 * -> fresh pinned", which allocates, maps and locks its destination in the
 * clock as a loader without libpin would; libpin's own time is
 * given both for the transfer (io_ns) and end to end (allocation, pinning,
 * header, seal included). Each method's CPU time (user + system, every
 * thread, and fio's as a child) is reported per GB moved; libpin's is that
 * of the whole load, its transfer alone is not metered apart.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pin.h>

#include "pinbench/bench.h"

static void usage(void)
{
	fprintf(stderr,
		"usage: pinbench load FILE [options]\n"
		"       pinbench save [OUT] [options]   (default OUT: ./pinbench-save.safetensors)\n"
		"       pinbench donate [--size MAX] [--runs N]   DONATE latency, 2 MiB..MAX (default 1G)\n"
		"       pinbench alloc-rate [--size N] [--runs N]   kernel ALLOC on all CPUs vs one\n"
		"                      (root; sets pinmem's alloc_threads, restores it; default 1G)\n"
		"  --runs N            alternated runs per method (default 5)\n"
		"  --queue-depth N     (default %u)\n"
		"  --request-size N    bytes, K/M/G suffix (default %u)\n"
		"  --backend LIST      device, portable, or device,portable to compare\n"
		"                      (load; save uses the first)\n"
		"  --size N            save: bytes to write; donate: the largest region;\n"
		"                      alloc-rate: the region (K/M/G suffix, default 1G)\n"
		"  --fio PATH          fio binary (default fio)\n"
		"  --json              one JSON object\n"
		"  --hugetlb-pool      load: run inside a hugetlb pool big enough for the\n"
		"                      file (root; nr_hugepages restored afterwards)\n"
		"  --pin-first         load: libpin pins all of the region before reading\n"
		"                      (no overlap), to compare with the default\n"
		"  --no-kernel-fill    load, device backend: read through the mapping\n"
		"                      with io_uring instead of the module's FILL\n"
		"  --version           pinbench's and libpin's version\n",
		PIN_IO_DEFAULT_QUEUE_DEPTH, PIN_IO_DEFAULT_REQUEST_SIZE);
}

static int parse_size(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v = strtoull(s, &end, 0);

	switch (*end) {
	case 'K': case 'k': v <<= 10; end++; break;
	case 'M': case 'm': v <<= 20; end++; break;
	case 'G': case 'g': v <<= 30; end++; break;
	}
	if (*end || !v)
		return -1;
	*out = v;
	return 0;
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
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ 0 }
	};
	uint64_t v;
	char *comma;
	int ch;

	while ((ch = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		switch (ch) {
		case 'n':
			c->runs = atoi(optarg);
			if (c->runs < 1 || c->runs > MAX_RUNS)
				return usage(), 2;
			break;
		case 'q': c->qd = (unsigned)atoi(optarg); break;
		case 'r':
			if (parse_size(optarg, &v) || v > UINT32_MAX)
				return usage(), 2;
			c->req = (uint32_t)v;
			break;
		case 'b':
			comma = strchr(optarg, ',');
			if (comma)
				*comma = 0;
			c->backends[0] = parse_backend(optarg);
			c->nbackends = 1;
			if (comma) {
				c->backends[1] = parse_backend(comma + 1);
				c->nbackends = 2;
			}
			if (c->backends[0] < 0 || (comma && c->backends[1] < 0))
				return usage(), 2;
			break;
		case 's':
			if (parse_size(optarg, &c->save_size))
				return usage(), 2;
			break;
		case 'f': c->fio = optarg; break;
		case 'j': c->json = 1; break;
		case 'H': c->hugetlb_pool = 1; break;
		case 'P': c->pin_first = 1; break;
		case 'K': c->no_kernel_fill = 1; break;
		case 'V':
			printf("pinbench %s (libpin %s)\n", PIN_VERSION_STRING,
			       pin_version());
			return 0;
		default:
			usage();
			return ch == 'h' ? 0 : 2;
		}
	}
	return -1;
}

int main(int argc, char **argv)
{
	struct cfg c = {
		.qd = PIN_IO_DEFAULT_QUEUE_DEPTH,
		.req = PIN_IO_DEFAULT_REQUEST_SIZE, .runs = 5, .cold = 1,
		.backends = { PIN_BACKEND_AUTO }, .nbackends = 1,
		.save_size = 1ULL << 30, .fio = "fio", .read_ahead_kb = -1,
		.pool_was = -1, .pool_set = -1,
	};
	int ret = parse_options(argc, argv, &c);

	if (ret >= 0)
		return ret;
	if (optind + 1 == argc && !strcmp(argv[optind], "donate"))
		return bench_donate(&c, c.save_size);
	if (optind + 1 == argc && !strcmp(argv[optind], "alloc-rate"))
		return bench_alloc_rate(&c, c.save_size);
	if (drop_caches())
		c.cold = 0;
	if (optind < argc && !strcmp(argv[optind], "load") && optind + 2 == argc)
		return bench_load_pool(&c, argv[optind + 1]);
	if (optind < argc && !strcmp(argv[optind], "save") && optind + 2 >= argc)
		return bench_save(&c, optind + 1 < argc ? argv[optind + 1] :
				  "pinbench-save.safetensors");
	usage();
	return 2;
}
