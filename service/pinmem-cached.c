// SPDX-License-Identifier: GPL-2.0
/*
 * pinmem-cached: one pinned copy of a checkpoint per host, shared by
 * every process that asks for it (Documentation/cache.md).
 *
 *   pinmem-cached [--socket PATH] [--budget SIZE] [--budget-ram PERCENT]
 *                 [--backend auto|device|portable] [--client-timeout S]
 *                 [--load-timeout S] [--max-clients N] [--tenant uid|cgroup|pod]
 *                 [--tenant-share PERCENT] [--user-clients N] [--user-loads N]
 *                 [--config FILE]
 *   pinmem-cached --list [--socket PATH]
 *   pinmem-cached --version
 *
 * Under systemd the socket comes from socket activation; otherwise it is
 * bound at PATH (default $PIN_CACHE_SOCKET, else /run/pinmem/cache.sock:
 * pin_cache_socket's rule, as for every client) and removed at exit.
 * Under systemd its entries outlive it in the service manager's fd store
 * (fdstore.c); elsewhere it starts empty.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <pin.h>

#include "lib/args.h"
#include "service.h"

#define CACHE_LIST_MAX	(64 << 10)
#define WARM_CONFIG	"/etc/pinmem/cached.conf"

static void usage(FILE *f)
{
	fputs("usage: pinmem-cached [--socket PATH] [--budget SIZE] [--budget-ram PERCENT]\n"
	      "                     [--backend auto|device|portable] [--client-timeout SECONDS]\n"
	      "                     [--load-timeout SECONDS] [--max-clients N]\n"
	      "                     [--tenant uid|cgroup|pod] [--tenant-share PERCENT]\n"
	      "                     [--user-clients N] [--user-loads N] [--config FILE]\n"
	      "       pinmem-cached --list [--socket PATH]\n"
	      "       pinmem-cached --version\n"
	      "SIZE takes K, M, G, T suffixes; the budget is the smaller of SIZE and\n"
	      "PERCENT (1..100) of RAM (default: 50% of RAM). SECONDS: 1..86400\n"
	      "(client default 10, load default 1800); --max-clients N: 1..1000000\n"
	      "(default 4096, at most half the fd limit). A tenant is a client's\n"
	      "uid, its cgroup, or its Kubernetes pod (--tenant, default uid). One\n"
	      "tenant may hold --tenant-share PERCENT of the budget (1..100, default\n"
	      "50; --user-share is the same option), keep --user-clients connections\n"
	      "open (default 64) and have --user-loads loads in flight (default 4).\n"
	      "--config FILE: checkpoints to keep loaded (default " WARM_CONFIG ",\n"
	      "when it exists), applied at start and on SIGHUP by pinctl cache warm.\n"
	      "Exit status: 0 ok, 1 failure, 2 usage error, 3 --list: no daemon there.\n", f);
}

static uint64_t ram_bytes(void)
{
	long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);

	return pages > 0 && psz > 0 ? (uint64_t)pages * (uint64_t)psz : 0;
}

static int list_entries(const char *path)
{
	struct pin_cache_opts o = { .size = sizeof(o), .socket = path };
	char *buf = malloc(CACHE_LIST_MAX);
	int n;

	if (!buf)
		return 1;
	n = pin_cache_list(&o, buf, CACHE_LIST_MAX);
	if (n < 0) {
		fprintf(stderr, "pinmem-cached --list: %s: %s\n",
			pin_cache_socket(path), buf[0] ? buf : strerror(-n));
		free(buf);
		return n == -ENOENT || n == -ECONNREFUSED ? TOOLS_EXIT_NODEV :
		       TOOLS_EXIT_FAILED;
	}
	fputs(buf, stdout);
	free(buf);
	return 0;
}

struct options {
	const char *socket;
	uint64_t budget;
	unsigned percent;
	int backend;
	int list;
	unsigned share_percent;
	struct loop_opts loop;
};

/*
 * The limits of a load and of one tenant, and the warm list: -EINVAL,
 * said on stderr.
 */
static int parse_limit(int c, const char *arg, struct options *o)
{
	uint64_t v;

	switch (c) {
	case 'C':
		o->loop.config = arg;
		o->loop.config_given = 1;
		break;
	case 'T':
		if (parse_u64("--load-timeout", arg, 1, 86400, &v))
			return -EINVAL;
		o->loop.load_timeout_ms = (int)v * 1000;
		break;
	case 'u':
		if (parse_u64("--tenant-share", arg, 1, 100, &v))
			return -EINVAL;
		o->share_percent = (unsigned)v;
		break;
	case 'c':
		if (parse_u64("--user-clients", arg, 1, 1000000, &v))
			return -EINVAL;
		o->loop.member.max_clients = (unsigned)v;
		break;
	default:
		if (parse_u64("--user-loads", arg, 1, 1024, &v))
			return -EINVAL;
		o->loop.member.max_loads = (unsigned)v;
		break;
	}
	return 0;
}

static int parse_tenant(const char *arg, struct options *o)
{
	int kind = tenant_kind_parse(arg);

	if (kind < 0) {
		fprintf(stderr, "pinmem-cached: --tenant: \"%s\" is not uid, cgroup or pod\n",
			arg);
		return -EINVAL;
	}
	o->loop.tenant = (enum tenant_kind)kind;
	return 0;
}

static int parse_args(int argc, char **argv, struct options *o)
{
	static const struct option lopts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "budget", required_argument, NULL, 'b' },
		{ "budget-ram", required_argument, NULL, 'r' },
		{ "backend", required_argument, NULL, 'B' },
		{ "client-timeout", required_argument, NULL, 't' },
		{ "max-clients", required_argument, NULL, 'm' },
		{ "load-timeout", required_argument, NULL, 'T' },
		{ "tenant", required_argument, NULL, 'K' },
		{ "tenant-share", required_argument, NULL, 'u' },
		{ "user-share", required_argument, NULL, 'u' },
		{ "user-clients", required_argument, NULL, 'c' },
		{ "user-loads", required_argument, NULL, 'L' },
		{ "config", required_argument, NULL, 'C' },
		{ "list", no_argument, NULL, 'l' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	uint64_t v;
	int c;

	argv[0] = (char *)"pinmem-cached";	/* getopt's words start with it */
	while ((c = getopt_long(argc, argv, "", lopts, NULL)) != -1) {
		switch (c) {
		case 's': o->socket = optarg; break;
		case 'b':
			if (parse_size("--budget", optarg, 1ULL << 20, 1ULL << 50,
				       &o->budget))
				return -EINVAL;
			break;
		case 'r':
			if (parse_u64("--budget-ram", optarg, 1, 100, &v))
				return -EINVAL;
			o->percent = (unsigned)v;
			break;
		case 'B':
			o->backend = !strcmp(optarg, "device") ? PIN_BACKEND_DEVICE :
				     !strcmp(optarg, "portable") ? PIN_BACKEND_PORTABLE :
				     !strcmp(optarg, "auto") ? PIN_BACKEND_AUTO : -1;
			if (o->backend < 0) {
				fprintf(stderr, "pinmem-cached: --backend: \"%s\" is not auto, device or portable\n",
					optarg);
				return -EINVAL;
			}
			break;
		case 't':
			if (parse_u64("--client-timeout", optarg, 1, 86400, &v))
				return -EINVAL;
			o->loop.client_timeout_ms = (int)v * 1000;
			break;
		case 'm':
			if (parse_u64("--max-clients", optarg, 1, 1000000, &v))
				return -EINVAL;
			o->loop.max_clients = (unsigned)v;
			break;
		case 'T': case 'u': case 'c': case 'L': case 'C':
			if (parse_limit(c, optarg, o))
				return -EINVAL;
			break;
		case 'K':
			if (parse_tenant(optarg, o))
				return -EINVAL;
			break;
		case 'l': o->list = 1; break;
		case 'h': usage(stdout); exit(0);
		case 'V':
			printf("pinmem-cached %s (libpin %s)\n", PIN_VERSION_STRING,
			       pin_version());
			exit(0);
		default: return -EINVAL;
		}
	}
	if (optind == argc)
		return 0;
	fprintf(stderr, "pinmem-cached: unexpected argument \"%s\"\n", argv[optind]);
	return -EINVAL;
}

/*
 * Every connection and every entry holds fds (an entry three: its device,
 * region and view): raise the soft limit to the hard one, and keep the
 * connections to half of it.
 */
static void fit_fd_limit(struct loop_opts *o)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl))
		return;
	rl.rlim_cur = rl.rlim_max;
	setrlimit(RLIMIT_NOFILE, &rl);
	getrlimit(RLIMIT_NOFILE, &rl);
	if (rl.rlim_cur != RLIM_INFINITY && o->max_clients > rl.rlim_cur / 2)
		o->max_clients = rl.rlim_cur / 2 > 16 ? (unsigned)(rl.rlim_cur / 2) : 16;
}

/* The backend the loads will use, asked once so that a wrong one fails now. */
static int pick_backend(int want, char *why, size_t len)
{
	struct pin_dev *dev;
	int ret = pin_dev_open(&dev, want, &(struct pin_dev_opts){ .size = sizeof(struct pin_dev_opts), .why = why, .why_len = len });

	if (ret)
		return ret;
	snprintf(why, len, "%s", pin_dev_backend_why(dev));
	ret = pin_dev_backend(dev);
	pin_dev_close(dev);
	return ret;
}

/*
 * Listen (on systemd's sockets, else at the socket pin_cache_socket
 * names), serve until SIGTERM or SIGINT, and say so at both ends; a
 * socket file bound here is removed at exit.
 */
static int serve(struct options *o, uint64_t budget, int backend,
		 const char *why)
{
	const char *path = NULL;
	static const char *const tenants[] = { "uid", "cgroup", "pod" };
	char b[32], share[32];
	struct store s;
	struct fdstore fds;
	struct stat bound;
	int lfds[16], n, ret;

	fdstore_init(&fds);
	fdstore_collect(&fds);
	n = listen_fds_from_systemd(lfds, 16);
	if (n == 0) {
		path = pin_cache_socket(o->socket);
		lfds[0] = listen_on_path(path, &bound);
		n = lfds[0] < 0 ? lfds[0] : 1;
	}
	if (n < 0) {
		fprintf(stderr, "pinmem-cached: cannot listen on %s: %s\n",
			path ? path : "the sockets systemd passed",
			strerror(-n));
		return 1;
	}
	ret = store_init(&s, budget, backend);
	if (ret)
		return 1;
	s.tenant = o->loop.tenant;
	s.fdstore = &fds;
	human_bytes(budget, b, sizeof(b));
	human_bytes(o->loop.member.share, share, sizeof(share));
	fprintf(stderr, "pinmem-cached: serving at %s, budget %s (one tenant's share %s; a tenant is a %s), %s\n",
		path ? path : "the sockets systemd passed", b, share,
		tenants[o->loop.tenant], why);
	ret = loop_run(&s, lfds, n, &o->loop);
	store_fini(&s);
	if (ret)
		fprintf(stderr, "pinmem-cached: %s\n", strerror(-ret));
	if (path && !listen_path_remove(path, &bound))
		fprintf(stderr, "pinmem-cached: stopped; %s removed\n", path);
	else
		fprintf(stderr, "pinmem-cached: stopped\n");
	return ret ? 1 : 0;
}

int main(int argc, char **argv)
{
	struct options o = {
		.share_percent = 50,
		.loop = {
			.client_timeout_ms = 10000, .load_timeout_ms = 1800000,
			.max_clients = 4096,
			.member = { .max_clients = 64, .max_loads = 4,
				    .max_pending_fds = 64 },
			.config = WARM_CONFIG,
		},
	};
	char why[512];
	uint64_t budget;
	int backend;

	if (parse_args(argc, argv, &o)) {
		args_try_help();
		return ARGS_EXIT_USAGE;
	}
	if (o.list)
		return list_entries(o.socket);
	budget = ram_bytes() / 100 * (o.percent ? o.percent : 50);
	if (o.budget && (o.budget < budget || !o.percent))
		budget = o.budget;
	o.loop.member.share = budget * o.share_percent / 100;
	fit_fd_limit(&o.loop);
	if (tenant_kind_usable(o.loop.tenant, why, sizeof(why))) {
		fprintf(stderr, "pinmem-cached: %s\n", why);
		return 1;
	}
	backend = pick_backend(o.backend, why, sizeof(why));
	if (backend < 0) {
		fprintf(stderr, "pinmem-cached: %s\n", why);
		return 1;
	}
	return serve(&o, budget, backend, why);
}
