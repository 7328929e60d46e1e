// SPDX-License-Identifier: GPL-2.0
/*
 * pinload: load safetensors checkpoints (files or *.safetensors.index.json)
 * into pinned regions, report how it went, optionally verify every byte
 * against an independent buffered read and write the checkpoint back out.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <pin.h>

#include "cpu.h"
#include "pages.h"
#include "json.h"

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
		struct pin_st_tensor t;
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
	struct pin_st *ctx = pin_st_new();
	struct pin_io_stats st;
	int ret = -ENOMEM;

	if (!t || !k || !v || !ctx)
		goto out;
	for (i = 0; i < n; i++)
		pin_st_tensor(ck, i, &t[i]);
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
	pin_st_free(ctx);
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

#include "pinload_shared.h"	/* --shared: uses now_ns above */

static void usage(void)
{
	fprintf(stderr,
		"usage: pinload [options] PATH...\n"
		"  PATH: a .safetensors file or a *.safetensors.index.json\n"
		"  --json              one JSON object per PATH on stdout\n"
		"  --verify            compare every byte with a buffered read\n"
		"  --save-to FILE      write the (single) checkpoint back out\n"
		"  --backend B         device, portable or auto (default)\n"
		"  --queue-depth N     requests in flight (default %u)\n"
		"  --request-size N    bytes per request, K/M suffix (default %u)\n"
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
		"  --version           pinload's and libpin's version\n"
		"The backend in use, and why, goes to stderr before the first load.\n",
		PIN_IO_DEFAULT_QUEUE_DEPTH, PIN_IO_DEFAULT_REQUEST_SIZE);
}

static int parse_size(const char *s, uint32_t *out)
{
	char *end;
	unsigned long long v = strtoull(s, &end, 0);

	if (*end == 'K' || *end == 'k')
		v <<= 10, end++;
	else if (*end == 'M' || *end == 'm')
		v <<= 20, end++;
	if (*end || v > UINT32_MAX)
		return -1;
	*out = (uint32_t)v;
	return 0;
}

int main(int argc, char **argv)
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
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ 0 }
	};
	struct pin_io_opts o = { 0 };
	struct bar bar = { 0 };
	const char *save_to = NULL;
	int json = 0, do_verify = 0, backend = PIN_BACKEND_AUTO, c, i;
	int status = 0, noprog = 0, node = -1, shared = 0;
	unsigned node_flags = 0;
	struct pin_dev *dev;
	char why[1024], *end;

	while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		switch (c) {
		case 'j': json = 1; break;
		case 'v': do_verify = 1; break;
		case 's': save_to = optarg; break;
		case 'b':
			if (!strcmp(optarg, "device"))
				backend = PIN_BACKEND_DEVICE;
			else if (!strcmp(optarg, "portable"))
				backend = PIN_BACKEND_PORTABLE;
			else if (strcmp(optarg, "auto"))
				return usage(), 2;
			break;
		case 'q': o.queue_depth = (unsigned)atoi(optarg); break;
		case 'r':
			if (parse_size(optarg, &o.request_size))
				return usage(), 2;
			break;
		case 'B': o.flags |= PIN_IO_BUFFERED; break;
		case 'F': o.flags |= PIN_IO_NO_FIXED; break;
		case 'R': o.flags |= PIN_IO_PIN_FIRST; break;
		case 'K': o.flags |= PIN_IO_NO_KERNEL_FILL; break;
		case 'P': noprog = 1; break;
		case 'n':
			node = (int)strtol(optarg, &end, 10);
			if (*end || end == optarg || node < 0)
				return usage(), 2;
			break;
		case 'A': node_flags = PIN_ALLOC_ANY_NODE; break;
		case 'S': shared = 1; break;
		case 'V':
			printf("pinload %s (libpin %s)\n", PIN_VERSION_STRING,
			       pin_version());
			return 0;
		default:
			usage();
			return c == 'h' ? 0 : 2;
		}
	}
	if (optind >= argc || (save_to && argc - optind != 1) ||
	    (node_flags && node < 0)) {
		usage();
		return 2;
	}
	if (shared)
		return load_shared_all(argc - optind, argv + optind, json);
	c = pin_open_why(&dev, backend, why, sizeof(why));
	if (c) {
		fprintf(stderr, "pinload: %s\n", why[0] ? why : strerror(-c));
		return 1;
	}
	fprintf(stderr, "pinload: backend %s\n", pin_dev_backend_why(dev));
	bar.on = !json && !noprog && isatty(2);
	o.progress = progress;
	o.progress_arg = &bar;
	for (i = optind; i < argc; i++) {
		struct pin_st *ck = pin_st_new();
		struct pin_io_stats st;
		struct pin_st_phases ph;
		struct pin_st_step step;
		uint64_t bad = 0, chunks = 0, fbchunks = 0, bytes = 0;
		const char *vres = NULL;
		size_t f, t;
		double secs, cpu;
		int ret, kfill;

		if (!ck) {
			fprintf(stderr, "pinload: out of memory\n");
			return 1;
		}
		bar.t0 = now_ns();
		bar.last = 0;
		cpu = cpu_seconds(RUSAGE_SELF);
		ret = pin_st_load_on_node(ck, dev, argv[i], node, node_flags,
					  &o);
		cpu = cpu_seconds(RUSAGE_SELF) - cpu;
		if (ret) {
			fprintf(stderr, "pinload: %s\n", pin_st_error(ck));
			if (json) {
				printf("{\"path\":");
				json_str(stdout, argv[i]);
				printf(",\"error\":");
				json_str(stdout, pin_st_error(ck));
				printf(",\"errno\":%d}\n", -ret);
			}
			pin_st_free(ck);
			status = 1;
			continue;
		}
		pin_st_stats(ck, &st);
		pin_st_phases(ck, &ph);
		kfill = pin_st_timeline(ck, &step, 1) > 0 &&
			(step.flags & PIN_ST_STEP_KERNEL_FILL);
		for (f = 0; f < pin_st_file_count(ck); f++) {
			struct pin_region_info ri;

			if (!pin_region_info(pin_st_region(ck, f), &ri)) {
				chunks += ri.nr_chunks;
				fbchunks += ri.nr_fallback_chunks;
			}
		}
		for (t = 0; t < pin_st_count(ck); t++) {
			struct pin_st_tensor x;

			pin_st_tensor(ck, t, &x);
			bytes += x.nbytes;
		}
		if (do_verify) {
			ret = verify(ck, &bad);
			vres = ret ? "error" : bad ? "failed" : "ok";
			if (ret || bad)
				status = 1;
		}
		secs = (double)st.ns / 1e9;
		if (json) {
			printf("{\"path\":");
			json_str(stdout, argv[i]);
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
			       (unsigned long long)bytes,
			       (unsigned long long)st.bytes, secs,
			       secs > 0 ? (double)st.bytes / secs / 1e9 : 0.0,
			       (double)st.io_ns / 1e9, (double)ph.alloc_ns / 1e9,
			       (double)ph.pin_ns / 1e9, (double)ph.seal_ns / 1e9,
			       cpu, st.bytes ? cpu / ((double)st.bytes / 1e9) : 0.0,
			       st.direct ? "true" : "false",
			       kfill ? "true" : "false",
			       st.fixed_buffers ? "true" : "false");
			json_str(stdout, st.fallback_reason);
			printf(",\"queue_depth\":%u,\"request_size\":%u,"
			       "\"requests\":%llu,\"short_ios\":%llu,\"retries\":%llu,"
			       "\"region_chunks\":%llu,\"fallback_chunks\":%llu,"
			       "\"pages\":\"%s\",\"verify\":",
			       st.queue_depth, st.request_size,
			       (unsigned long long)st.requests,
			       (unsigned long long)st.short_ios,
			       (unsigned long long)st.retries,
			       (unsigned long long)chunks,
			       (unsigned long long)fbchunks,
			       page_kind(pin_dev_backend(dev),
					 pin_st_region(ck, 0)));
			if (vres)
				json_str(stdout, vres);
			else
				printf("null");
			if (node >= 0)
				print_nodes(ck, 1);
			printf("}\n");
		} else {
			printf("%s: %zu tensors in %zu file(s), %.3f GB in %.3f s, %.2f GB/s (%s backend)\n",
			       argv[i], pin_st_count(ck), pin_st_file_count(ck),
			       (double)st.bytes / 1e9, secs,
			       secs > 0 ? (double)st.bytes / secs / 1e9 : 0.0,
			       pin_backend_name(pin_dev_backend(dev)));
			printf("  pages: %s\n", page_kind(pin_dev_backend(dev),
							   pin_st_region(ck, 0)));
			printf("  transfer alone: %.3f s, %.2f GB/s (pinning runs under it; the rest: header, allocating, seal)\n",
			       (double)st.io_ns / 1e9,
			       st.io_ns ? (double)st.bytes / (double)st.io_ns : 0.0);
			printf("  phases: allocate %.3f s, pin %.3f s, transfer %.3f s, seal %.3f s; CPU %.3f s (%.3f s per GB)\n",
			       (double)ph.alloc_ns / 1e9, (double)ph.pin_ns / 1e9,
			       (double)ph.transfer_ns / 1e9,
			       (double)ph.seal_ns / 1e9, cpu,
			       st.bytes ? cpu / ((double)st.bytes / 1e9) : 0.0);
			printf("  %s, %s, %llu requests of up to %u bytes, queue depth %u, %llu short, %llu retried\n",
			       st.direct ? "O_DIRECT" : "buffered fallback",
			       kfill ? "read by the module (FILL)" :
			       st.fixed_buffers ? "fixed buffers" : "no fixed buffers",
			       (unsigned long long)st.requests, st.request_size,
			       st.queue_depth, (unsigned long long)st.short_ios,
			       (unsigned long long)st.retries);
			printf("  region chunks: %llu (%llu below 2 MiB)\n",
			       (unsigned long long)chunks,
			       (unsigned long long)fbchunks);
			if (st.fallback_reason[0])
				printf("  why: %s\n", st.fallback_reason);
			if (vres)
				printf("  verify: %s (%llu tensors differ)\n", vres,
				       (unsigned long long)bad);
			if (node >= 0)
				print_nodes(ck, 0);
		}
		if (save_to && save(ck, save_to, &o, json))
			status = 1;
		pin_st_free(ck);
	}
	pin_close(dev);
	return status;
}
