// SPDX-License-Identifier: GPL-2.0
/*
 * pinload: load safetensors checkpoints (files or *.safetensors.index.json)
 * into pinned regions, report how it went, optionally verify every byte
 * against an independent buffered read and write the checkpoint back out.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <pin.h>

#include "lib/args.h"
#include "lib/cpu.h"
#include "lib/pages.h"
#include "lib/json.h"

struct bar {
	int on;
	uint64_t t0;
	uint64_t last;
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}


static void progress(void *arg, uint64_t done, uint64_t total)
{
	struct bar *b = arg;
	uint64_t t = now_ns();
	double secs, rate, left;
	double unit = total >= 1000000000ULL ? 1e9 : 1e6;
	int width = 30, fill, i;
	char line[160];

	if (!b->on || (t - b->last < 100000000ULL && done < total))
		return;
	b->last = t;
	secs = (double)(t - b->t0) / 1e9;
	rate = secs > 0 ? (double)done / secs : 0;
	left = rate > 0 ? (double)(total - done) / rate : 0;
	fill = total ? (int)((double)done / (double)total * width) : width;
	for (i = 0; i < width; i++)
		line[i] = i < fill ? '#' : '.';
	line[width] = 0;
	/* MB below a gigabyte, so that a small file does not read 0.00/0.00. */
	fprintf(stderr, "\r[%s] %.2f/%.2f %s %.2f GB/s %.1fs left ", line,
		(double)done / unit, (double)total / unit,
		unit == 1e9 ? "GB" : "MB", rate / 1e9, left);
	if (done >= total)
		fprintf(stderr, "\n");
}

/* Compare every tensor with a plain buffered pread of its file. */
static int verify(struct pin_st *ck, uint64_t *bad)
{
	size_t i, n = pin_st_count(ck);
	size_t cap = 1 << 20;
	char *buf = malloc(cap);
	int ret = 0;

	*bad = 0;
	if (!buf)
		return -ENOMEM;
	for (i = 0; i < n && !ret; i++) {
		struct pin_st_tensor t = PIN_INIT(struct pin_st_tensor);
		uint64_t at = 0;
		int fd;

		pin_st_tensor(ck, i, &t);
		fd = open(pin_st_file_path(ck, t.file_index), O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			ret = -errno;
			break;
		}
		while (at < t.nbytes) {
			size_t want = t.nbytes - at < cap ? t.nbytes - at : cap;
			ssize_t r = pread(fd, buf, want, (off_t)(t.file_offset + at));

			if (r <= 0) {
				ret = r < 0 ? -errno : -EIO;
				break;
			}
			if (memcmp(buf, (char *)t.data + at, (size_t)r)) {
				fprintf(stderr, "pinload: verify: tensor %s differs near byte %llu\n",
					t.name, (unsigned long long)at);
				(*bad)++;
				break;
			}
			at += (uint64_t)r;
		}
		close(fd);
	}
	free(buf);
	return ret;
}

static int save(struct pin_st *ck, const char *out,
		const struct pin_io_opts *o, int json)
{
	size_t n = pin_st_count(ck), m = pin_st_metadata_count(ck), i;
	struct pin_st_tensor *t = calloc(n + 1, sizeof(*t));
	const char **k = calloc(m + 1, sizeof(char *));
	const char **v = calloc(m + 1, sizeof(char *));
	struct pin_st *ctx = pin_st_create();
	struct pin_io_stats st = PIN_INIT(struct pin_io_stats);
	int ret = -ENOMEM;

	if (!t || !k || !v || !ctx)
		goto out;
	for (i = 0; i < n; i++) {
		t[i].size = sizeof(t[i]);
		pin_st_tensor(ck, i, &t[i]);
	}
	for (i = 0; i < m; i++)
		pin_st_metadata(ck, i, &k[i], &v[i]);
	ret = pin_st_save(ctx, out, t, n, k, v, m, o);
	if (ret) {
		fprintf(stderr, "pinload: save: %s\n", pin_st_error(ctx));
		goto out;
	}
	pin_st_stats(ctx, &st);
	if (!json)
		printf("saved %s: %zu tensors, %.3f GB in %.3f s, %.2f GB/s, %s%s%s\n",
		       out, n, (double)st.bytes / 1e9, (double)st.ns / 1e9,
		       st.ns ? (double)st.bytes / (double)st.ns : 0.0,
		       st.direct ? "O_DIRECT" : "buffered fallback",
		       st.fallback_reason[0] ? ": " : "", st.fallback_reason);
out:
	pin_st_close(ctx);
	free(t);
	free(k);
	free(v);
	return ret;
}

/* Bytes per NUMA node over the checkpoint's regions, as --node asked. */
static void print_nodes(struct pin_st *ck, int json)
{
	uint64_t sum[64] = { 0 }, bytes[64];
	size_t f;
	int n = 0, k, first = 1;

	for (f = 0; f < pin_st_file_count(ck); f++) {
		struct pin_region *r = pin_st_region(ck, f);

		n = pin_region_nodes(r, bytes, 64);
		if (n < 0) {
			fprintf(stderr, "pinload: %s\n", pin_region_error(r));
			return;
		}
		for (k = 0; k < n && k < 64; k++)
			sum[k] += bytes[k];
	}
	printf(json ? ",\"nodes\":{" : "  memory by NUMA node:");
	for (k = 0; k < n && k < 64; k++) {
		if (!sum[k])
			continue;
		if (json)
			printf("%s\"%d\":%llu", first ? "" : ",", k,
			       (unsigned long long)sum[k]);
		else
			printf(" node %d %.1f MiB", k, (double)sum[k] / 1048576);
		first = 0;
	}
	printf(json ? "}" : "\n");
}

/*
 * --shared: each checkpoint (a file, or a sharded checkpoint's index) from
 * pinmem-cached (pin_cache_open_path), one copy per host, or a private
 * load where no service answers (said on stderr).
 * Prints per file: tensors, bytes, seconds and how it was served.
 */
static int load_shared_one(const char *path, int json, int timeout_ms,
			   const char *sock)
{
	struct pin_cache_ck *c;
	char why[1024] = "";
	uint64_t bytes = 0, t0 = now_ns();
	struct pin_st_tensor t = PIN_INIT(struct pin_st_tensor);
	const struct pin_st *st;
	int ret;

	ret = pin_cache_open_path(path, &(struct pin_cache_opts){
		.size = sizeof(struct pin_cache_opts), .socket = sock,
		.why = why, .why_len = sizeof(why), .timeout_ms = timeout_ms },
		&c);
	if (ret) {
		fprintf(stderr, "pinload: %s: %s\n", path, why[0] ? why : strerror(-ret));
		return 1;
	}
	st = pin_cache_st(c);
	for (size_t i = 0; i < pin_st_count(st); i++)
		if (!pin_st_tensor(st, i, &t))
			bytes += t.nbytes;
	if (!pin_cache_shared(c))
		fprintf(stderr, "pinload: %s\n", pin_cache_how(c));
	if (json) {
		printf("{\"path\":");
		json_str(stdout, path);
		printf(",\"shared\":%s,\"entry\":%llu,\"tensors\":%zu,\"bytes\":%llu,\"seconds\":%.6f,\"how\":",
		       pin_cache_shared(c) ? "true" : "false",
		       (unsigned long long)pin_cache_entry(c), pin_st_count(st),
		       (unsigned long long)bytes, (double)(now_ns() - t0) / 1e9);
		json_str(stdout, pin_cache_how(c));
		printf("}\n");
	} else {
		printf("%s: %zu tensors, %llu bytes in %.3f s; %s\n", path,
		       pin_st_count(st), (unsigned long long)bytes,
		       (double)(now_ns() - t0) / 1e9, pin_cache_how(c));
	}
	pin_cache_close(c);
	return 0;
}

static int load_shared_all(int n, char **paths, int json, int timeout_ms,
			   const char *sock)
{
	int status = 0;

	for (int i = 0; i < n; i++)
		status |= load_shared_one(paths[i], json, timeout_ms, sock);
	return status;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: pinload [options] PATH...\n"
		"  PATH: a .safetensors file or a *.safetensors.index.json\n"
		"  --json              one JSON object per PATH on stdout\n"
		"  --verify            compare every byte with a buffered read\n"
		"  --save-to FILE      write the (single) checkpoint back out\n"
		"  --backend B         device, portable or auto (default)\n"
		"  --queue-depth N     requests in flight, 1..256 (default %u)\n"
		"  --request-size N    bytes per request, a multiple of 4K up to 64M,\n"
		"                      K/M suffix (default %u)\n"
		"  --buffered          no O_DIRECT\n"
		"  --no-fixed          no registered buffers\n"
		"  --pin-first         pin all of the region before reading (no overlap)\n"
		"  --no-kernel-fill    device backend: read through the mapping with\n"
		"                      io_uring, not the module's FILL\n"
		"  --node N            every region on NUMA node N (else ENOMEM)\n"
		"  --any-node          with --node: N preferred, other nodes may serve\n"
		"  --no-progress       no progress bar even on a terminal\n"
		"  --shared            from pinmem-cached: one copy per host\n"
		"                      (a private load, said so, without it)\n"
		"  --cache-timeout S   with --shared: wait S seconds (decimals allowed)\n"
		"                      for the service (default $PIN_CACHE_TIMEOUT, else 5)\n"
		"  --socket PATH       with --shared: the service's socket (default\n"
		"                      $PIN_CACHE_SOCKET, else " PIN_CACHE_SOCKET ")\n"
		"  --version           pinload's and libpin's version\n"
		"The backend in use, and why, goes to stderr before the first load.\n"
		"Exit status: 0 ok, 1 a load failed, 2 usage error.\n",
		PIN_IO_DEFAULT_QUEUE_DEPTH, PIN_IO_DEFAULT_REQUEST_SIZE);
}

struct options {
	struct pin_io_opts o;
	const char *save_to, *socket;
	int json, verify, backend, noprog, node, shared, cache_timeout_ms;
	unsigned node_flags;
};

/* The highest NUMA node a kernel can have (CONFIG_NODES_SHIFT 10). */
#define MAX_NODE	1023

/* --backend's text into *backend: 0, or -1 after saying why not. */
static int parse_backend(const char *text, int *backend)
{
	if (!strcmp(text, "device"))
		*backend = PIN_BACKEND_DEVICE;
	else if (!strcmp(text, "portable"))
		*backend = PIN_BACKEND_PORTABLE;
	else if (strcmp(text, "auto")) {
		fprintf(stderr, "pinload: --backend: \"%s\" is not device, portable or auto\n",
			text);
		return -1;
	}
	return 0;
}

/* What the options ask of the PATHs: -1 to go on, or the exit status. */
static int check_operands(int npaths, const struct options *op)
{
	const char *why = NULL;

	if (npaths < 1)
		why = "no PATH to load";
	else if (op->save_to && npaths != 1)
		why = "--save-to takes a single PATH";
	else if (op->node_flags && op->node < 0)
		why = "--any-node needs --node";
	else if (op->cache_timeout_ms && !op->shared)
		why = "--cache-timeout needs --shared";
	else if (op->socket && !op->shared)
		why = "--socket needs --shared";
	else if (op->save_to && op->shared)
		why = "--save-to and --shared do not go together";
	if (!why)
		return -1;
	fprintf(stderr, "pinload: %s\n", why);
	args_try_help();
	return ARGS_EXIT_USAGE;
}

/* The options into op: -1 to go on, or the exit status. */
static int parse_options(int argc, char **argv, struct options *op)
{
	static const struct option lo[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "verify", no_argument, NULL, 'v' },
		{ "save-to", required_argument, NULL, 's' },
		{ "backend", required_argument, NULL, 'b' },
		{ "queue-depth", required_argument, NULL, 'q' },
		{ "request-size", required_argument, NULL, 'r' },
		{ "buffered", no_argument, NULL, 'B' },
		{ "no-fixed", no_argument, NULL, 'F' },
		{ "pin-first", no_argument, NULL, 'R' },
		{ "no-kernel-fill", no_argument, NULL, 'K' },
		{ "no-progress", no_argument, NULL, 'P' },
		{ "node", required_argument, NULL, 'n' },
		{ "any-node", no_argument, NULL, 'A' },
		{ "shared", no_argument, NULL, 'S' },
		{ "cache-timeout", required_argument, NULL, 'T' },
		{ "socket", required_argument, NULL, 'k' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ 0 }
	};
	uint64_t v;
	int c;

	while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		switch (c) {
		case 'j': op->json = 1; break;
		case 'v': op->verify = 1; break;
		case 's': op->save_to = optarg; break;
		case 'b':
			if (parse_backend(optarg, &op->backend))
				return ARGS_EXIT_USAGE;
			break;
		case 'q':
			if (parse_u64("--queue-depth", optarg, 1,
				      PIN_IO_MAX_QUEUE_DEPTH, &v))
				return ARGS_EXIT_USAGE;
			op->o.queue_depth = (unsigned)v;
			break;
		case 'r':
			if (parse_size_multiple("--request-size", optarg,
						PIN_IO_ALIGN,
						PIN_IO_MAX_REQUEST_SIZE, &v))
				return ARGS_EXIT_USAGE;
			op->o.request_size = (uint32_t)v;
			break;
		case 'B': op->o.flags |= PIN_IO_BUFFERED; break;
		case 'F': op->o.flags |= PIN_IO_NO_FIXED; break;
		case 'R': op->o.flags |= PIN_IO_PIN_FIRST; break;
		case 'K': op->o.flags |= PIN_IO_NO_KERNEL_FILL; break;
		case 'P': op->noprog = 1; break;
		case 'n':
			if (parse_u64("--node", optarg, 0, MAX_NODE, &v))
				return ARGS_EXIT_USAGE;
			op->node = (int)v;
			break;
		case 'A': op->node_flags = PIN_REGION_ANY_NODE; break;
		case 'S': op->shared = 1; break;
		case 'k': op->socket = optarg; break;
		case 'T':
			if (parse_seconds("--cache-timeout", optarg, 86400, &v))
				return ARGS_EXIT_USAGE;
			op->cache_timeout_ms = (int)v;
			break;
		case 'V':
			printf("pinload %s (libpin %s)\n", PIN_VERSION_STRING,
			       pin_version());
			return 0;
		case 'h':
			usage(stdout);
			return 0;
		default:
			args_try_help();
			return ARGS_EXIT_USAGE;
		}
	}
	return check_operands(argc - optind, op);
}

/* What a load did, for the report. */
struct loaded {
	struct pin_io_stats st;
	struct pin_st_phases ph;
	uint64_t chunks, fbchunks, bytes, bad;
	double cpu;
	int kfill;
	const char *verify;	/* NULL when not asked for */
	const char *pages;
};

/* The stats of a load, its regions' chunks and its tensors' bytes. */
static void measure(struct pin_dev *dev, struct pin_st *ck,
		    struct loaded *l)
{
	struct pin_st_step step = PIN_INIT(struct pin_st_step);
	size_t f, t;

	pin_st_stats(ck, &l->st);
	pin_st_phases(ck, &l->ph);
	l->kfill = pin_st_timeline(ck, &step, 1) > 0 &&
		   (step.flags & PIN_ST_STEP_KERNEL_FILL);
	for (f = 0; f < pin_st_file_count(ck); f++) {
		struct pin_region_info ri = PIN_INIT(struct pin_region_info);

		if (!pin_region_info(pin_st_region(ck, f), &ri)) {
			l->chunks += ri.nr_chunks;
			l->fbchunks += ri.nr_fallback_chunks;
		}
	}
	for (t = 0; t < pin_st_count(ck); t++) {
		struct pin_st_tensor x = PIN_INIT(struct pin_st_tensor);

		pin_st_tensor(ck, t, &x);
		l->bytes += x.nbytes;
	}
	l->pages = page_kind(pin_dev_backend(dev), pin_st_region(ck, 0));
}

static void print_json(struct pin_dev *dev, const char *path,
		       struct pin_st *ck, const struct loaded *l, int node)
{
	const struct pin_io_stats *st = &l->st;
	double secs = (double)st->ns / 1e9;

	printf("{\"path\":");
	json_str(stdout, path);
	printf(",\"backend\":\"%s\",\"files\":%zu,\"tensors\":%zu,"
	       "\"tensor_bytes\":%llu,\"bytes_read\":%llu,"
	       "\"seconds\":%.6f,\"gbps\":%.3f,"
	       "\"transfer_seconds\":%.6f,\"alloc_seconds\":%.6f,"
	       "\"pin_seconds\":%.6f,\"seal_seconds\":%.6f,"
	       "\"cpu_seconds\":%.6f,\"cpu_s_per_gb\":%.3f,"
	       "\"direct\":%s,\"kernel_fill\":%s,"
	       "\"fixed_buffers\":%s,\"fallback_reason\":",
	       pin_backend_name(pin_dev_backend(dev)),
	       pin_st_file_count(ck), pin_st_count(ck),
	       (unsigned long long)l->bytes,
	       (unsigned long long)st->bytes, secs,
	       secs > 0 ? (double)st->bytes / secs / 1e9 : 0.0,
	       (double)st->io_ns / 1e9, (double)l->ph.alloc_ns / 1e9,
	       (double)l->ph.pin_ns / 1e9, (double)l->ph.seal_ns / 1e9,
	       l->cpu, st->bytes ? l->cpu / ((double)st->bytes / 1e9) : 0.0,
	       st->direct ? "true" : "false",
	       l->kfill ? "true" : "false",
	       st->fixed_buffers ? "true" : "false");
	json_str(stdout, st->fallback_reason);
	printf(",\"queue_depth\":%u,\"request_size\":%u,"
	       "\"requests\":%llu,\"short_ios\":%llu,\"retries\":%llu,"
	       "\"region_chunks\":%llu,\"fallback_chunks\":%llu,"
	       "\"pages\":\"%s\",\"verify\":",
	       st->queue_depth, st->request_size,
	       (unsigned long long)st->requests,
	       (unsigned long long)st->short_ios,
	       (unsigned long long)st->retries,
	       (unsigned long long)l->chunks,
	       (unsigned long long)l->fbchunks, l->pages);
	if (l->verify)
		json_str(stdout, l->verify);
	else
		printf("null");
	if (node >= 0)
		print_nodes(ck, 1);
	printf("}\n");
}

static void print_text(struct pin_dev *dev, const char *path,
		       struct pin_st *ck, const struct loaded *l, int node)
{
	const struct pin_io_stats *st = &l->st;
	double secs = (double)st->ns / 1e9;

	printf("%s: %zu tensors in %zu file(s), %.3f GB in %.3f s, %.2f GB/s (%s backend)\n",
	       path, pin_st_count(ck), pin_st_file_count(ck),
	       (double)st->bytes / 1e9, secs,
	       secs > 0 ? (double)st->bytes / secs / 1e9 : 0.0,
	       pin_backend_name(pin_dev_backend(dev)));
	printf("  pages: %s\n", l->pages);
	printf("  transfer alone: %.3f s, %.2f GB/s (pinning runs under it; the rest: header, allocating, seal)\n",
	       (double)st->io_ns / 1e9,
	       st->io_ns ? (double)st->bytes / (double)st->io_ns : 0.0);
	printf("  phases: allocate %.3f s, pin %.3f s, transfer %.3f s, seal %.3f s; CPU %.3f s (%.3f s per GB)\n",
	       (double)l->ph.alloc_ns / 1e9, (double)l->ph.pin_ns / 1e9,
	       (double)l->ph.transfer_ns / 1e9,
	       (double)l->ph.seal_ns / 1e9, l->cpu,
	       st->bytes ? l->cpu / ((double)st->bytes / 1e9) : 0.0);
	printf("  %s, %s, %llu requests of up to %u bytes, queue depth %u, %llu short, %llu retried\n",
	       st->direct ? "O_DIRECT" : "buffered fallback",
	       l->kfill ? "read by the module (FILL)" :
	       st->fixed_buffers ? "fixed buffers" : "no fixed buffers",
	       (unsigned long long)st->requests, st->request_size,
	       st->queue_depth, (unsigned long long)st->short_ios,
	       (unsigned long long)st->retries);
	printf("  region chunks: %llu (%llu below 2 MiB)\n",
	       (unsigned long long)l->chunks,
	       (unsigned long long)l->fbchunks);
	if (st->fallback_reason[0])
		printf("  why: %s\n", st->fallback_reason);
	if (l->verify)
		printf("  verify: %s (%llu tensors differ)\n", l->verify,
		       (unsigned long long)l->bad);
	if (node >= 0)
		print_nodes(ck, 0);
}

/* Load path, report it, verify and save it as asked: 0 or 1 (failed). */
static int load_one(struct pin_dev *dev, const char *path,
		    const struct options *op, struct bar *bar)
{
	struct pin_region_opts ro = {
		.size = sizeof(ro), .flags = PIN_REGION_NODE | op->node_flags,
		.node = op->node,
	};
	struct pin_st_load_opts load = {
		.size = sizeof(load), .region = op->node >= 0 ? &ro : NULL,
		.io = &op->o,
	};
	struct pin_st *ck = pin_st_create();
	struct loaded l = {
		.st = PIN_INIT(struct pin_io_stats),
		.ph = PIN_INIT(struct pin_st_phases),
	};
	int ret, status = 0;

	if (!ck) {
		fprintf(stderr, "pinload: out of memory\n");
		return -1;
	}
	bar->t0 = now_ns();
	bar->last = 0;
	l.cpu = cpu_seconds(RUSAGE_SELF);
	ret = pin_st_load(ck, dev, path, &load);
	l.cpu = cpu_seconds(RUSAGE_SELF) - l.cpu;
	if (ret) {
		fprintf(stderr, "pinload: %s\n", pin_st_error(ck));
		if (op->json) {
			printf("{\"path\":");
			json_str(stdout, path);
			printf(",\"error\":");
			json_str(stdout, pin_st_error(ck));
			printf(",\"errno\":%d}\n", -ret);
		}
		pin_st_close(ck);
		return 1;
	}
	measure(dev, ck, &l);
	if (op->verify) {
		ret = verify(ck, &l.bad);
		l.verify = ret ? "error" : l.bad ? "failed" : "ok";
		if (ret || l.bad)
			status = 1;
	}
	if (op->json)
		print_json(dev, path, ck, &l, op->node);
	else
		print_text(dev, path, ck, &l, op->node);
	if (op->save_to && save(ck, op->save_to, &op->o, op->json))
		status = 1;
	pin_st_close(ck);
	return status;
}

/*
 * Whether --save-to's path can be written, asked before the load rather
 * than found after it: 0, or 1 after naming the path as it was typed.
 */
static int check_save_to(const char *path)
{
	const char *slash = strrchr(path, '/');
	char dir[PATH_MAX];
	struct stat st;
	int err = 0;

	if (!stat(path, &st) && S_ISDIR(st.st_mode)) {
		fprintf(stderr, "pinload: --save-to %s: is a directory (name the file to write)\n",
			path);
		return 1;
	}
	if (!slash)
		snprintf(dir, sizeof(dir), ".");
	else
		snprintf(dir, sizeof(dir), "%.*s",
			 slash == path ? 1 : (int)(slash - path), path);
	if (stat(dir, &st))
		err = errno;
	else if (!S_ISDIR(st.st_mode))
		err = ENOTDIR;
	else if (access(dir, W_OK | X_OK))
		err = errno;
	if (err)
		fprintf(stderr, "pinload: --save-to %s: %s: %s\n", path, dir,
			strerror(err));
	return err ? 1 : 0;
}

int main(int argc, char **argv)
{
	struct options op = {
		.o = PIN_INIT(struct pin_io_opts),
		.backend = PIN_BACKEND_AUTO, .node = -1,
	};
	struct bar bar = { 0 };
	int status = 0, ret, i;
	struct pin_dev *dev;
	char why[1024];

	argv[0] = (char *)"pinload";	/* getopt's words start with it */
	ret = parse_options(argc, argv, &op);
	if (ret >= 0)
		return ret;
	if (op.shared)
		return load_shared_all(argc - optind, argv + optind, op.json,
				       op.cache_timeout_ms, op.socket);
	if (op.save_to && check_save_to(op.save_to))
		return 1;
	ret = pin_dev_open(&dev, op.backend, &(struct pin_dev_opts){ .size = sizeof(struct pin_dev_opts), .why = why, .why_len = sizeof(why) });
	if (ret) {
		fprintf(stderr, "pinload: %s\n", why[0] ? why : strerror(-ret));
		return 1;
	}
	fprintf(stderr, "pinload: backend %s\n", pin_dev_backend_why(dev));
	bar.on = !op.json && !op.noprog && isatty(2);
	op.o.progress = progress;
	op.o.progress_arg = &bar;
	for (i = optind; i < argc; i++) {
		ret = load_one(dev, argv[i], &op, &bar);
		if (ret < 0)
			return 1;
		if (ret)
			status = 1;
	}
	pin_dev_close(dev);
	return status;
}
