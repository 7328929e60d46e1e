// SPDX-License-Identifier: MIT
/*
 * pinctl: inspect pinmem regions through libpin.
 *
 *   pinctl [--json] info              backend, ABI, limits, totals
 *   pinctl [--json] ls                every region visible to the caller
 *   pinctl [--json] holders REGION-ID every mapping of one region
 *   pinctl [--json] cache [SOCKET]    pinmem-cached's entries and clients
 *                                     (or --socket PATH)
 *   pinctl cache load|pin|unpin FILE  load a checkpoint into pinmem-cached;
 *                                     keep it loaded; stop keeping it
 *   pinctl cache warm [--config FILE] keep a config file's checkpoints
 *                                     loaded (lib/keep.c)
 *   pinctl cdi generate [--output FILE] [--cdi-version V] [--socket PATH]
 *                                     a CDI spec for containers (lib/cdi.c)
 *
 * --json may also follow the command. PIN_BACKEND=device|portable in the
 * environment picks the backend as for every libpin program.
 *
 * Exit status: 0 ok; 1 the operation failed (words on stderr); 2 usage
 * error; 3 no device (/dev/pinmem absent, or the portable backend, which
 * keeps no registry of regions: ls and holders need the module).
 *
 * JSON (one object on stdout; sizes and addresses are plain integers):
 *   info:    {"backend": "device"|"portable", "backend_why": "...",
 *             "libpin_version": "1.0.0", "kernel_arbitration": bool,
 *             "abi_version": N, "abi_min_compat": N, "chunk_size": N,
 *             "max_total_bytes": N, "max_region_bytes": N (0: no limit),
 *             "total_bytes": N, "nr_regions": N, "nr_mappings": N,
 *             "nr_view_fds": N}
 *   ls:      {"regions": [{"id": N, "size": N, "chunks": N,
 *             "fallback_chunks": N, "min_order": N, "state":
 *             "open"|"sealed"|"donated", "donate_pending": bool,
 *             "owner_mappings": N, "view_mappings": N,
 *             "writable_view_mappings": N, "view_fds": N,
 *             "owner_uid": N, "owner_pid": N}, ...]}
 *   holders: {"region": N, "holders": [{"pid": N, "comm": "...",
 *             "kind": "owner"|"view", "start": N|null, "end": N|null,
 *             "length": N,
 *             "offset": N, "prot": "rw-", "maywrite": bool}, ...],
 *             "refs": [{"offset": N, "length": N, "refs": N, "pinned": N,
 *             "expected": N}, ...]}
 *   cache:   {"socket": "...", "backend": "...", "entry_count": N,
 *             "used": "...", "used_bytes": N, "budget": "...",
 *             "budget_bytes": N, "loads": N, "evictions": {"count": N, ...},
 *             "entries": [{"id": N, "size": "...", "size_bytes": N,
 *             "age_s": F, "idle_s": F, "state": "...", "file": "..."|null,
 *             "clients": [{"pid": N, "comm": "..."}]|null,
 *             "clients_of_other_users": N, "evictable": bool,
 *             "evict": "...", "kept": bool, "kept_by": "pinned"|
 *             "warm list"|"pinned, warm list" (when kept)}, ...],
 *             "table": "..."} (read from the
 *             service's text, which "table" holds as it came)
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <pin.h>

#include <grp.h>
#include <pwd.h>

#include "lib/args.h"
#include "lib/cdi.h"
#include "lib/cachelist.h"
#include "lib/json.h"
#include "lib/keep.h"
#include "lib/sockdir.h"

#define EXIT_FAILED	TOOLS_EXIT_FAILED
#define EXIT_USAGE	ARGS_EXIT_USAGE
#define EXIT_NODEV	TOOLS_EXIT_NODEV

static const char usage_text[] =
"usage: pinctl [--json] COMMAND [ARGS]\n"
"\n"
"commands:\n"
"  info                backend, ABI version, limits and totals\n"
"  ls                  every region visible to you: id, size, 2 MiB chunks\n"
"                      (+fallback), state, owner/view/writable-view mappings,\n"
"                      view fds, owner uid/pid\n"
"  holders REGION-ID   every mapping of a region: pid, command, kind,\n"
"                      address range, offset, protection; then the bytes\n"
"                      referenced outside any mapping (DMA pins, pipes)\n"
"  nodes REGION-ID     the region's bytes on each NUMA node (module ABI 3)\n"
"  cache [SOCKET]      pinmem-cached's entries: size, age, idle time, clients\n"
"                      (pid, command), whether each may be evicted, and\n"
"                      whether it is kept loaded (pinned, warm list)\n"
"  cache load FILE     open FILE (your permissions) and have pinmem-cached\n"
"                      load it now, an ordinary entry\n"
"  cache pin FILE      the same, and keep it loaded: never evicted for room\n"
"                      (root and the service's user only; others: EPERM)\n"
"  cache unpin FILE    stop keeping it: an ordinary entry again\n"
"  cache warm          keep the checkpoints a config file names loaded, and\n"
"                      stop keeping those an earlier one named; options:\n"
"      --config FILE        the file (default " KEEP_CONFIG_DEFAULT "):\n"
"                           lines of a path or glob and an optional\n"
"                           priority (higher first), # comments\n"
"  cdi generate        a Container Device Interface spec naming the device\n"
"                      " CDI_KIND "=" CDI_DEVICE ": " CDI_DEVICE_NODE " (group pinmem, 0660),\n"
"                      the cache socket's directory (read-only bind) and\n"
"                      PIN_CACHE_SOCKET; options:\n"
"      --output FILE        write FILE (e.g. /etc/cdi/pinmem.json), not stdout\n"
"      --cdi-version V      0.5.0 (default: every CDI runtime, Debian 12's\n"
"                           podman 4.3 too) or 0.7.0 (adds the group to the\n"
"                           container's process: additionalGids)\n"
"      --socket PATH        the cache socket in the spec (default as for cache;\n"
"                           needed with --output): its directory must be\n"
"                           pinmem's own, as " SOCKDIR_DEFAULT ", holding only it\n"
"                      (exit 1 without group pinmem or when FILE is not written)\n"
"\n"
"options:\n"
"  --json              one JSON object on stdout instead of a table\n"
"  --socket PATH       cache: the service's socket (as the SOCKET operand;\n"
"                      default $PIN_CACHE_SOCKET, else " PIN_CACHE_SOCKET ")\n"
"  --version           pinctl's and libpin's version\n"
"  -h, --help          this text\n"
"\n"
"JSON:\n"
"  info:    {backend, backend_why, libpin_version, kernel_arbitration, abi_version, abi_min_compat,\n"
"            chunk_size, max_total_bytes, max_region_bytes, total_bytes,\n"
"            nr_regions, nr_mappings, nr_view_fds}\n"
"  ls:      {regions: [{id, size, chunks, fallback_chunks, min_order, state,\n"
"            donate_pending, owner_mappings, view_mappings,\n"
"            writable_view_mappings, view_fds, owner_uid, owner_pid}]}\n"
"  holders: {region, holders: [{pid, comm, kind, start, end, length, offset,\n"
"            prot, maywrite}], refs: [{offset, length, refs, pinned,\n"
"            expected}]}\n"
"  nodes:   {region, nodes: {\"NODE\": bytes}} (nodes holding none left out)\n"
"  cache:   {socket, backend, entry_count, used, used_bytes, budget,\n"
"            budget_bytes, loads, evictions: {count, last, last_bytes,\n"
"            last_donate_ms, last_release_ms, slowest_ms}, entries: [{id, size,\n"
"            size_bytes, age_s, idle_s, state, file, clients: [{pid, comm}],\n"
"            clients_of_other_users, waiting, evictable, evict, kept,\n"
"            kept_by,\n"
"            last_refused_eviction, charged_to}], table} (read from the\n"
"            service's text, which table holds as it came; sizes to its one\n"
"            decimal; file null where another user's; clients null where not\n"
"            known; charged_to, the entry's tenant, to root only)\n"
"  (sizes, addresses and counts are integers; start/end are null where the\n"
"   kernel withholds another user's addresses; state is open|sealed|donated;\n"
"   kind is owner|view; prot is like \"rw-\")\n"
"\n"
"exit status: 0 ok, 1 operation failed, 2 usage error, 3 no device\n"
"(no /dev/pinmem, or the portable backend: ls and holders need pinmem.ko;\n"
"cache: no service answers at the socket)\n"
"PIN_BACKEND=device|portable selects the backend.\n";

static void human(uint64_t n, char *buf, size_t len)
{
	static const char *const unit[] = { "KiB", "MiB", "GiB", "TiB", "PiB" };
	double v = (double)n;
	int u = -1;

	if (n < 1024) {
		snprintf(buf, len, "%" PRIu64 " B", n);
		return;
	}
	while (v >= 1024 && u < 4) {
		v /= 1024;
		u++;
	}
	if (v == (double)(uint64_t)v)
		snprintf(buf, len, "%.0f %s", v, unit[u]);
	else
		snprintf(buf, len, "%.1f %s", v, unit[u]);
}

static void prot_str(int prot, char out[4])
{
	out[0] = (prot & PROT_READ) ? 'r' : '-';
	out[1] = (prot & PROT_WRITE) ? 'w' : '-';
	out[2] = (prot & PROT_EXEC) ? 'x' : '-';
	out[3] = '\0';
}

/* Open the backend; for ls/holders the device is required. */
static int open_dev(struct pin_dev **devp, int need_device, const char *cmd)
{
	char why[1024];
	struct pin_dev_opts o = {
		.size = sizeof(o), .why = why, .why_len = sizeof(why),
	};
	int ret = pin_dev_open(devp, PIN_BACKEND_AUTO, &o);

	if (ret) {
		fprintf(stderr, "pinctl %s: %s\n", cmd,
			why[0] ? why : strerror(-ret));
		return ret == -ENOENT ? EXIT_NODEV : EXIT_FAILED;
	}
	if (need_device && pin_dev_backend(*devp) != PIN_BACKEND_DEVICE) {
		fprintf(stderr, "pinctl %s: no device: the portable backend keeps no registry of regions (backend: %s)\n",
			cmd, pin_dev_backend_why(*devp));
		pin_dev_close(*devp);
		*devp = NULL;
		return EXIT_NODEV;
	}
	return 0;
}

static int cmd_info(int json)
{
	struct pin_dev_info info = PIN_INIT(struct pin_dev_info);
	struct pin_dev *dev;
	char a[32], b[32], c[32];
	int ret, dev_backend;

	ret = open_dev(&dev, 0, "info");
	if (ret)
		return ret;
	ret = pin_dev_info(dev, &info);
	if (ret) {
		fprintf(stderr, "pinctl info: %s\n", pin_dev_error(dev));
		pin_dev_close(dev);
		return EXIT_FAILED;
	}
	dev_backend = info.backend == PIN_BACKEND_DEVICE;
	if (json) {
		printf("{\"backend\": \"%s\", \"backend_why\": ",
		       pin_backend_name(info.backend));
		json_str(stdout, pin_dev_backend_why(dev));
		printf(", \"libpin_version\": \"%s\", \"kernel_arbitration\": %s, "
		       "\"abi_version\": %u, \"abi_min_compat\": %u, "
		       "\"chunk_size\": %" PRIu64 ", \"max_total_bytes\": %" PRIu64
		       ", \"max_region_bytes\": %" PRIu64 ", \"total_bytes\": %" PRIu64
		       ", \"nr_regions\": %" PRIu64 ", \"nr_mappings\": %" PRIu64
		       ", \"nr_view_fds\": %" PRIu64 "}\n",
		       pin_version(), dev_backend ? "true" : "false", info.abi_version,
		       info.abi_min_compat, info.chunk_size,
		       info.max_total_bytes, info.max_region_bytes,
		       info.total_bytes, info.nr_regions, info.nr_mappings,
		       info.nr_view_fds);
	} else if (!dev_backend) {
		human(info.chunk_size, a, sizeof(a));
		printf("backend:          portable backend, no kernel arbitration\n"
		       "                  (memfd: donate, publish, reopen and holders\n"
		       "                  need pinmem.ko)\n"
		       "why:              %s\n"
		       "chunk size:       %s\n", pin_dev_backend_why(dev), a);
	} else {
		human(info.chunk_size, a, sizeof(a));
		printf("backend:          device (/dev/pinmem), kernel arbitration\n"
		       "why:              %s\n"
		       "ABI:              %u (serves libraries from ABI %u)\n"
		       "chunk size:       %s\n", pin_dev_backend_why(dev),
		       info.abi_version, info.abi_min_compat, a);
		human(info.max_total_bytes, a, sizeof(a));
		human(info.max_region_bytes, b, sizeof(b));
		printf("max total:        %s\nmax per region:   %s\n",
		       info.max_total_bytes ? a : "no limit",
		       info.max_region_bytes ? b : "no limit");
		human(info.total_bytes, c, sizeof(c));
		printf("pinned now:       %s in %" PRIu64 " region%s\n"
		       "mappings:         %" PRIu64 "\nview fds:         %" PRIu64 "\n",
		       c, info.nr_regions, info.nr_regions == 1 ? "" : "s",
		       info.nr_mappings, info.nr_view_fds);
	}
	pin_dev_close(dev);
	return 0;
}

static void ls_json(const struct pin_region_info *infos, size_t n)
{
	size_t i;

	printf("{\"regions\": [");
	for (i = 0; i < n; i++) {
		const struct pin_region_info *r = &infos[i];

		printf("%s{\"id\": %" PRIu64 ", \"size\": %" PRIu64
		       ", \"chunks\": %" PRIu64 ", \"fallback_chunks\": %" PRIu64
		       ", \"min_order\": %u, \"state\": \"%s\", \"donate_pending\": %s"
		       ", \"owner_mappings\": %" PRIu64 ", \"view_mappings\": %" PRIu64
		       ", \"writable_view_mappings\": %" PRIu64 ", \"view_fds\": %" PRIu64
		       ", \"owner_uid\": %u, \"owner_pid\": %d}",
		       i ? ", " : "", r->id, r->region_size, r->nr_chunks,
		       r->nr_fallback_chunks, r->min_order,
		       pin_state_name(r->state),
		       r->donate_pending ? "true" : "false",
		       r->owner_mappings, r->view_mappings,
		       r->writable_view_mappings, r->view_fds,
		       (unsigned)r->owner_uid, (int)r->owner_pid);
	}
	printf("]}\n");
}

static void ls_table(const struct pin_region_info *infos, size_t n)
{
	size_t i;

	printf("%-6s %10s %-14s %-9s %5s %5s %6s %4s %6s %7s\n", "ID",
	       "SIZE", "CHUNKS", "STATE", "OWNER", "VIEWS", "WVIEWS",
	       "VFDS", "UID", "PID");
	for (i = 0; i < n; i++) {
		const struct pin_region_info *r = &infos[i];
		char size[32], chunks[40], state[24];

		human(r->region_size, size, sizeof(size));
		if (r->nr_fallback_chunks)
			snprintf(chunks, sizeof(chunks),
				 "%" PRIu64 "+%" PRIu64 "fb", r->nr_chunks,
				 r->nr_fallback_chunks);
		else
			snprintf(chunks, sizeof(chunks), "%" PRIu64,
				 r->nr_chunks);
		snprintf(state, sizeof(state), "%s%s",
			 pin_state_name(r->state),
			 r->donate_pending ? "*" : "");
		printf("%-6" PRIu64 " %10s %-14s %-9s %5" PRIu64 " %5" PRIu64
		       " %6" PRIu64 " %4" PRIu64 " %6u %7d\n",
		       r->id, size, chunks, state, r->owner_mappings,
		       r->view_mappings, r->writable_view_mappings,
		       r->view_fds, (unsigned)r->owner_uid,
		       (int)r->owner_pid);
	}
	if (n == 0)
		printf("(no regions)\n");
}

static int cmd_ls(int json)
{
	struct pin_region_info *infos = NULL;
	struct pin_dev *dev;
	size_t cap = 0;
	int ret;

	ret = open_dev(&dev, 1, "ls");
	if (ret)
		return ret;
	/* Regions come and go: grow until one snapshot fits. */
	for (;;) {
		struct pin_region_info *p;

		ret = pin_dev_regions(dev, infos, cap);
		if (ret < 0) {
			fprintf(stderr, "pinctl ls: %s\n", pin_dev_error(dev));
			free(infos);
			pin_dev_close(dev);
			return EXIT_FAILED;
		}
		if ((size_t)ret <= cap)
			break;
		cap = (size_t)ret + 16;
		p = realloc(infos, cap * sizeof(*infos));
		if (!p) {
			fprintf(stderr, "pinctl ls: out of memory\n");
			free(infos);
			pin_dev_close(dev);
			return EXIT_FAILED;
		}
		infos = p;
		infos[0].size = sizeof(*infos);
	}
	if (json)
		ls_json(infos, (size_t)ret);
	else
		ls_table(infos, (size_t)ret);
	free(infos);
	pin_dev_close(dev);
	return 0;
}

/* A region id: 1 or more (the module never gives out 0). */
static int parse_id(const char *cmd, const char *s, uint64_t *id)
{
	char opt[32];

	snprintf(opt, sizeof(opt), "%s REGION-ID", cmd);
	return parse_u64(opt, s, 1, UINT64_MAX, id);
}

/*
 * The references outside any mapping (module ABI 2; none before): a JSON
 * list, or lines under the mappings. The kernel cannot name their holder.
 */
static void print_refs(struct pin_dev *dev, uint64_t id, int json)
{
	struct pin_ref_range rr[64] = { { .size = sizeof(struct pin_ref_range) } };
	char line[256];
	int n, i;

	n = pin_dev_region_refs(dev, id, rr, 64);
	if (n > 64)
		n = 64;
	if (json) {
		printf(", \"refs\": [");
		for (i = 0; i < n; i++)
			printf("%s{\"offset\": %" PRIu64 ", \"length\": %" PRIu64
			       ", \"refs\": %" PRIu64 ", \"pinned\": %" PRIu64
			       ", \"expected\": %" PRIu64 "}", i ? ", " : "",
			       rr[i].offset, rr[i].length, rr[i].refs,
			       rr[i].pinned, rr[i].expected);
		printf("]");
		return;
	}
	for (i = 0; i < n; i++) {
		pin_ref_format(&rr[i], line, sizeof(line));
		printf("  %s\n", line);
	}
}

/* Where a region's memory lies, node by node (module ABI 3). */
static int cmd_nodes(int json, const char *arg)
{
	uint64_t bytes[1024], id;
	struct pin_dev *dev;
	char size[32];
	int ret, n, i, first = 1;

	if (parse_id("nodes", arg, &id))
		return EXIT_USAGE;
	ret = open_dev(&dev, 1, "nodes");
	if (ret)
		return ret;
	n = pin_dev_region_nodes(dev, id, bytes, 1024);
	if (n < 0) {
		fprintf(stderr, "pinctl nodes: %s\n", pin_dev_error(dev));
		pin_dev_close(dev);
		return EXIT_FAILED;
	}
	if (n > 1024)
		n = 1024;
	if (json)
		printf("{\"region\": %" PRIu64 ", \"nodes\": {", id);
	else
		printf("region %" PRIu64 ", memory by NUMA node:\n", id);
	for (i = 0; i < n; i++) {
		if (!bytes[i])
			continue;
		if (json) {
			printf("%s\"%d\": %" PRIu64, first ? "" : ", ", i,
			       bytes[i]);
		} else {
			human(bytes[i], size, sizeof(size));
			printf("  node %d: %s\n", i, size);
		}
		first = 0;
	}
	if (json)
		printf("}}\n");
	pin_dev_close(dev);
	return 0;
}

static void holders_json(struct pin_dev *dev, uint64_t id,
			 const struct pin_holder *hs, size_t n)
{
	size_t i;

	printf("{\"region\": %" PRIu64 ", \"holders\": [", id);
	for (i = 0; i < n; i++) {
		char prot[4];

		prot_str(hs[i].prot, prot);
		printf("%s{\"pid\": %d, \"comm\": ", i ? ", " : "",
		       (int)hs[i].pid);
		json_str(stdout, hs[i].comm);
		printf(", \"kind\": \"%s\", ",
		       hs[i].kind == PIN_HOLDER_OWNER ? "owner" : "view");
		/* Withheld by the kernel (another user's process). */
		if (hs[i].start)
			printf("\"start\": %" PRIu64 ", \"end\": %" PRIu64,
			       hs[i].start, hs[i].start + hs[i].length);
		else
			printf("\"start\": null, \"end\": null");
		printf(", \"length\": %" PRIu64 ", \"offset\": %" PRIu64
		       ", \"prot\": \"%s\", \"maywrite\": %s}",
		       hs[i].length, hs[i].offset, prot,
		       hs[i].maywrite ? "true" : "false");
	}
	printf("]");
	print_refs(dev, id, 1);
	printf("}\n");
}

static void holders_text(struct pin_dev *dev, uint64_t id,
			 const struct pin_holder *hs, size_t n)
{
	size_t i;

	printf("region %" PRIu64 ": %zu mapping%s\n", id, n,
	       n == 1 ? "" : "s");
	for (i = 0; i < n; i++) {
		char line[160], len[32];

		pin_holder_format(&hs[i], line, sizeof(line));
		human(hs[i].length, len, sizeof(len));
		printf("  %s (%s)%s\n", line, len,
		       hs[i].maywrite ? " may write" : "");
	}
	print_refs(dev, id, 0);
}

static int cmd_holders(int json, const char *arg)
{
	struct pin_holder *hs = NULL;
	struct pin_dev *dev;
	size_t cap = 0;
	uint64_t id;
	int ret;

	if (parse_id("holders", arg, &id))
		return EXIT_USAGE;
	ret = open_dev(&dev, 1, "holders");
	if (ret)
		return ret;
	for (;;) {
		struct pin_holder *p;

		ret = pin_dev_region_holders(dev, id, hs, cap);
		if (ret < 0) {
			fprintf(stderr, "pinctl holders: %s\n",
				pin_dev_error(dev));
			free(hs);
			pin_dev_close(dev);
			return EXIT_FAILED;
		}
		if ((size_t)ret <= cap)
			break;
		cap = (size_t)ret + 16;
		p = realloc(hs, cap * sizeof(*hs));
		if (!p) {
			fprintf(stderr, "pinctl holders: out of memory\n");
			free(hs);
			pin_dev_close(dev);
			return EXIT_FAILED;
		}
		hs = p;
		hs[0].size = sizeof(*hs);
	}
	if (json)
		holders_json(dev, id, hs, (size_t)ret);
	else
		holders_text(dev, id, hs, (size_t)ret);
	free(hs);
	pin_dev_close(dev);
	return 0;
}

/* The service's table; exit 3 when no service answers at sock. */
static int cmd_cache(int json, const char *sock)
{
	const char *name = pin_cache_socket(sock);
	struct pin_cache_opts o = { .size = sizeof(o), .socket = name };
	size_t len = 64 << 10;
	char *buf = NULL, *n;
	int ret;

	do {
		n = realloc(buf, len *= 2);
		if (!n) {
			free(buf);
			fputs("pinctl: cache: out of memory\n", stderr);
			return EXIT_FAILED;
		}
		buf = n;
		ret = pin_cache_list(&o, buf, len);
	} while (ret >= 0 && (size_t)ret + 1 >= len && len < (64U << 20));
	if (ret < 0) {
		fprintf(stderr, "pinctl: cache: %s: %s\n", name, strerror(-ret));
		free(buf);
		return ret == -ENOENT || ret == -ECONNREFUSED ? EXIT_NODEV :
		       EXIT_FAILED;
	}
	if (json) {
		fputs("{\"socket\": ", stdout);
		json_str(stdout, name);
		cache_list_json(stdout, buf);
		fputs(", \"table\": ", stdout);
		json_str(stdout, buf);
		fputs("}\n", stdout);
	} else {
		fputs(buf, stdout);
	}
	free(buf);
	return 0;
}

/*
 * pinctl cdi generate [OPTIONS]: argv holds what follows "cdi"; sock: a
 * --socket given before it, else the tools' rule (pin_cache_socket).
 */
static int cmd_cdi(int argc, char **argv, const char *sock)
{
	const char *out = "-", *why;
	struct cdi_opts o = { 0 };
	struct passwd *pw;
	struct group *g;
	int i;

	if (argc < 1 || strcmp(argv[0], "generate")) {
		fputs("pinctl: cdi: the only subcommand is generate\n", stderr);
		args_try_help();
		return EXIT_USAGE;
	}
	for (i = 1; i < argc; i++) {
		const char *opt = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;

		if (strcmp(opt, "--output") && strcmp(opt, "--cdi-version") &&
		    strcmp(opt, "--socket")) {
			fprintf(stderr, "pinctl: cdi generate: unknown argument %s\n", opt);
			args_try_help();
			return EXIT_USAGE;
		}
		if (!val) {
			fprintf(stderr, "pinctl: cdi generate: %s needs a value\n", opt);
			return EXIT_USAGE;
		}
		i++;
		if (!strcmp(opt, "--output")) {
			out = val;
		} else if (!strcmp(opt, "--socket")) {
			sock = val;
		} else if (cdi_parse_version(val, &o.version)) {
			fprintf(stderr, "pinctl: cdi generate: --cdi-version: \"%s\" is not 0.5.0 or 0.7.0\n", val);
			return EXIT_USAGE;
		}
	}
	if (strcmp(out, "-") && !sock) {
		fputs("pinctl: cdi generate: --output needs --socket PATH, the socket containers will use (e.g. --socket " PIN_CACHE_SOCKET ")\n", stderr);
		return EXIT_USAGE;
	}
	o.socket = pin_cache_socket(sock);
	pw = getpwnam("pinmem-cached");
	o.service_uid = pw ? pw->pw_uid : (uid_t)-1;
	why = sockdir_problem(o.socket, o.service_uid);
	if (why) {
		fputs("pinctl: cdi generate: socket ", stderr);
		json_str(stderr, o.socket);
		fprintf(stderr, ": %s; containers get its directory bound whole, so use a directory of pinmem's own, as the default " SOCKDIR_DEFAULT " (--socket " PIN_CACHE_SOCKET ")\n", why);
		return EXIT_USAGE;
	}
	g = getgrnam("pinmem");
	if (!g) {
		fputs("pinctl: cdi generate: no group pinmem (the pinmem-dkms and pinmem-tools packages make it)\n", stderr);
		return EXIT_FAILED;
	}
	o.gid = g->gr_gid;
	return cdi_generate(out, &o) ? EXIT_FAILED : 0;
}

static int bad_command_line(const char *why)
{
	fprintf(stderr, "pinctl: %s\n", why);
	args_try_help();
	return EXIT_USAGE;
}

int main(int argc, char **argv)
{
	const char *cmd = NULL, *arg = NULL, *sock = NULL;
	int json = 0, i, extra = 0;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json")) {
			json = 1;
		} else if (!strcmp(argv[i], "--socket") ||
			   !strncmp(argv[i], "--socket=", 9)) {
			sock = argv[i][8] ? argv[i] + 9 : argv[++i];
			if (!sock)
				return bad_command_line("--socket needs a PATH");
		} else if (!strcmp(argv[i], "--version")) {
			printf("pinctl %s (libpin %s)\n", PIN_VERSION_STRING,
			       pin_version());
			return 0;
		} else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			fputs(usage_text, stdout);
			return 0;
		} else if (argv[i][0] == '-' && argv[i][1]) {
			fprintf(stderr, "pinctl: unknown option %s\n", argv[i]);
			args_try_help();
			return EXIT_USAGE;
		} else if (!cmd && !strcmp(argv[i], "cdi")) {
			return cmd_cdi(argc - i - 1, argv + i + 1, sock);
		} else if (cmd && !strcmp(cmd, "cache") && !arg &&
			   keep_is_subcommand(argv[i])) {
			return keep_main(argv[i], argc - i - 1, argv + i + 1, sock);
		} else if (!cmd) {
			cmd = argv[i];
		} else if (!arg) {
			arg = argv[i];
		} else {
			extra = 1;
		}
	}
	if (!cmd)
		return bad_command_line("no command (info, ls, holders, nodes, cache or cdi)");
	if (sock && strcmp(cmd, "cache"))
		return bad_command_line("--socket is for the cache command");
	if (sock && arg)
		return bad_command_line("cache: SOCKET given twice (operand and --socket)");
	if (!strcmp(cmd, "info") && !arg)
		return cmd_info(json);
	if (!strcmp(cmd, "ls") && !arg)
		return cmd_ls(json);
	if (!strcmp(cmd, "holders") && arg && !extra)
		return cmd_holders(json, arg);
	if (!strcmp(cmd, "nodes") && arg && !extra)
		return cmd_nodes(json, arg);
	if (!strcmp(cmd, "cache") && !extra)
		return cmd_cache(json, sock ? sock : arg);
	if (strcmp(cmd, "info") && strcmp(cmd, "ls") && strcmp(cmd, "holders") &&
	    strcmp(cmd, "nodes") && strcmp(cmd, "cache")) {
		fprintf(stderr, "pinctl: unknown command \"%s\"\n", cmd);
		args_try_help();
		return EXIT_USAGE;
	}
	return bad_command_line(arg ? "too many arguments" : "REGION-ID missing");
}
