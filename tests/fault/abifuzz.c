// SPDX-License-Identifier: GPL-2.0
/*
 * ABI fuzzer with a reference model. Several worker processes, each with
 * its own seed derived from the run's seed, drive the whole ABI on their
 * own regions: ALLOC, VIEW, mmap, munmap (whole and partial), mremap,
 * mprotect splits, madvise, fork (children that exit at once or linger),
 * SCM_RIGHTS fd passing, close, SEAL, DONATE (with and without WAIT, woken
 * by children dying), PUBLISH, REOPEN, HOLDERS, LIST, and reads and writes
 * through the mappings. After each operation the touched region's INFO,
 * HOLDERS and data are compared with the model (abifuzz-model.h); at the
 * end every module total must be back at its baseline.
 *
 * An operation is a kind and three random numbers, interpreted against the
 * model's state when it runs, so any subsequence of a failing run is a run
 * too: a failure is replayed in fresh processes with ops removed until no
 * single op can go, and the short sequence is printed.
 *
 *   abifuzz [-s SEED] [-n OPS] [-w WORKERS] [-u UID [-g GID] [-m BYTES]]
 *   PINMEM_FUZZ_SEED, PINMEM_FUZZ_OPS (default 200000 in all), _WORKERS (4)
 *   -u (PINMEM_FUZZ_UID): worker w runs as uid UID + w in group GID
 *   (_GID) with RLIMIT_MEMLOCK BYTES (_MEMLOCK, default 8 MiB); the
 *   caller, root, first makes a region of its own and one of another user
 *   that no worker may see or change (abifuzz-user.c).
 * Output is TAP: one test, "ok 1 - abifuzz seed S: N ops".
 */
#include "abifuzz-model.h"

static const char *const op_names[OP_NR] = {
	"alloc", "view", "map_owner", "map_view", "unmap", "unmap_head",
	"mremap_shrink", "mremap_grow", "split", "madv_dontneed",
	"madv_dontfork", "fork_exit", "fork_linger", "reap", "pass_fd",
	"close", "seal", "donate", "donate_wait", "publish", "reopen",
	"holders", "list", "write", "read", "foreign",
};

/* Relative frequencies; ALLOC (2 MiB zeroed) is the expensive one. */
static const unsigned int op_weight[OP_NR] = {
	[OP_ALLOC] = 2, [OP_VIEW] = 6, [OP_MAP_OWNER] = 5, [OP_MAP_VIEW] = 8,
	[OP_UNMAP] = 7, [OP_UNMAP_HEAD] = 3, [OP_MREMAP_SHRINK] = 3,
	[OP_MREMAP_GROW] = 1, [OP_SPLIT] = 3, [OP_MADV_DONTNEED] = 2,
	[OP_MADV_DONTFORK] = 2, [OP_FORK_EXIT] = 1, [OP_FORK_LINGER] = 1,
	[OP_REAP] = 1, [OP_PASS_FD] = 3, [OP_CLOSE] = 6, [OP_SEAL] = 4,
	[OP_DONATE] = 4, [OP_DONATE_WAIT] = 2, [OP_PUBLISH] = 3,
	[OP_REOPEN] = 3, [OP_HOLDERS] = 4, [OP_LIST] = 2, [OP_WRITE] = 10,
	[OP_READ] = 10, [OP_FOREIGN] = 2,
};

/* Set in main before the workers fork (abifuzz -u); NULL otherwise. */
static const struct fuzz_user *fuzz_user;

static uint64_t splitmix(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static struct op gen_op(uint64_t *rng)
{
	unsigned int total = 0, r;
	struct op op;
	int k;

	for (k = 0; k < OP_NR; k++)
		total += op_weight[k];
	r = splitmix(rng) % total;
	for (k = 0; r >= op_weight[k]; k++)
		r -= op_weight[k];
	op.kind = k;
	op.a = splitmix(rng);
	op.b = splitmix(rng);
	op.c = splitmix(rng);
	return op;
}

void op_describe(const struct op *op, char *buf, size_t len)
{
	snprintf(buf, len, "%s(%u, %u, %u)", op_names[op->kind],
		 op->a % 1000, op->b % 1000, op->c % 1000);
}

/*
 * Run ops[0..n) in this process on a fresh model; 0 if every result
 * matched, else 1 + the index of the first op that did not (its message in
 * *why). Everything is released at the end either way. verbose: 1 prints
 * each op, 0 the worker's tallies, -1 (the reduction's tries) nothing.
 */
static long run_ops(int dev, const struct op *ops, long n, char *why,
		    size_t wlen, int verbose)
{
	struct model *m = model_new(dev, fuzz_user);
	long i, bad = 0;

	if (!m) {
		snprintf(why, wlen, "cannot set up the model");
		return 1;
	}
	for (i = 0; i < n && !bad; i++) {
		if (verbose > 0) {
			char d[96];

			op_describe(&ops[i], d, sizeof(d));
			printf("#   %ld: %s\n", i, d);
		}
		if (model_step(m, &ops[i], why, wlen))
			bad = i + 1;
	}
	if (m->user && verbose >= 0)
		printf("# uid %u: %ld ALLOCs refused at RLIMIT_MEMLOCK as predicted, %ld by-id queries\n",
		       getuid(), m->refused, m->probes);
	fflush(stdout);	/* the worker ends in _exit */
	/* Always release (lingering children too); judge it if all else passed. */
	if (bad) {
		char ignored[256];

		model_finish(m, ignored, sizeof(ignored));
	} else if (model_finish(m, why, wlen)) {
		bad = n + 1;
	}
	model_free(m);
	return bad;
}

/* run_ops in a child, so that each try starts from a clean process. */
static long run_ops_child(int dev, const struct op *ops, long n)
{
	pid_t pid = fork();
	char why[256];
	int st;

	if (pid < 0)
		return -1;
	if (pid == 0) {
		long bad = run_ops(dev, ops, n, why, sizeof(why), -1);

		_exit(bad ? 1 : 0);
	}
	if (waitpid(pid, &st, 0) != pid)
		return -1;
	return !(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

/* Remove ops while the failure stays: chunks first, then single ops. */
static long reduce(int dev, struct op *ops, long n)
{
	struct op *tmp = malloc(sizeof(*ops) * (n + 1));
	int tries = 0;

	if (!tmp)
		return n;
	for (long chunk = n / 2; chunk >= 1 && tries < 400; chunk /= 2) {
		for (long at = 0; at + chunk <= n && tries < 400;) {
			long m = 0;

			for (long i = 0; i < n; i++)
				if (i < at || i >= at + chunk)
					tmp[m++] = ops[i];
			tries++;
			if (run_ops_child(dev, tmp, m) == 1) {
				memcpy(ops, tmp, sizeof(*ops) * m);
				n = m;
			} else {
				at += chunk;
			}
		}
	}
	free(tmp);
	printf("# reduced to %ld ops in %d tries\n", n, tries);
	return n;
}

/* A worker: nops generated ops, then the reduction of a failure. */
static int worker(int dev, uint64_t seed, long nops)
{
	struct op *ops = calloc(nops, sizeof(*ops));
	uint64_t rng = seed;
	char why[256];
	long bad;

	if (!ops)
		return 2;
	for (long i = 0; i < nops; i++)
		ops[i] = gen_op(&rng);
	bad = run_ops(dev, ops, nops, why, sizeof(why), 0);
	if (!bad) {
		free(ops);
		return fuzz_user && user_memlock_back(dev, fuzz_user);
	}
	printf("# worker seed %llu: op %ld: %s\n", (unsigned long long)seed,
	       bad - 1, why);
	bad = reduce(dev, ops, bad > nops ? nops : bad);
	printf("# shortest sequence found (%ld ops), replayed:\n", bad);
	if (run_ops(dev, ops, bad, why, sizeof(why), 1))
		printf("#   -> %s\n", why);
	else
		printf("#   -> passed on replay (the failure depends on timing)\n");
	fflush(stdout);
	free(ops);
	return 1;
}

static long env_long(const char *name, long def)
{
	const char *v = getenv(name);

	return v && *v ? strtol(v, NULL, 0) : def;
}

int main(int argc, char **argv)
{
	uint64_t seed = env_long("PINMEM_FUZZ_SEED", 0);
	long nops = env_long("PINMEM_FUZZ_OPS", 200000);
	int nworkers = env_long("PINMEM_FUZZ_WORKERS", 4);
	struct fuzz_user user = {
		.uid = env_long("PINMEM_FUZZ_UID", 0),
		.gid = env_long("PINMEM_FUZZ_GID", 0),
		.memlock = env_long("PINMEM_FUZZ_MEMLOCK", 8 << 20),
	};
	struct pinmem_dev_info base, now;
	pid_t pids[64];
	int opt, dev, failed = 0;
	double t0;

	while ((opt = getopt(argc, argv, "s:n:w:u:g:m:")) != -1) {
		if (opt == 's')
			seed = strtoull(optarg, NULL, 0);
		else if (opt == 'n')
			nops = strtol(optarg, NULL, 0);
		else if (opt == 'w')
			nworkers = atoi(optarg);
		else if (opt == 'u')
			user.uid = strtoul(optarg, NULL, 0);
		else if (opt == 'g')
			user.gid = strtoul(optarg, NULL, 0);
		else if (opt == 'm')
			user.memlock = strtoull(optarg, NULL, 0);
		else
			return 2;
	}
	if (!seed)
		seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
	if (nworkers < 1 || nworkers > 64)
		nworkers = 4;
	printf("TAP version 13\n1..1\n# abifuzz: seed %llu, %ld ops, %d workers "
	       "(rerun: PINMEM_FUZZ_SEED=%llu)\n", (unsigned long long)seed,
	       nops, nworkers, (unsigned long long)seed);
	fflush(stdout);
	dev = open(PINMEM_DEVICE_PATH, O_RDWR | O_CLOEXEC);
	if (dev < 0 || ioctl(dev, PINMEM_IOC_DEV_INFO, &base)) {
		printf("ok 1 # SKIP no %s\n", PINMEM_DEVICE_PATH);
		return 0;
	}
	if (user.uid) {
		printf("# workers as uids %u-%u, group %u, RLIMIT_MEMLOCK %llu\n",
		       user.uid, user.uid + nworkers - 1, user.gid,
		       (unsigned long long)user.memlock);
		if (getuid() || user_victims_make(dev, &user, nworkers) ||
		    ioctl(dev, PINMEM_IOC_DEV_INFO, &base)) {
			printf("not ok 1 - abifuzz -u needs root to set up\n");
			return 1;
		}
		fuzz_user = &user;
		fflush(stdout);	/* or each worker prints these lines again */
	}
	t0 = model_now();
	for (int w = 0; w < nworkers; w++) {
		uint64_t s = seed + w;

		pids[w] = fork();
		if (pids[w] == 0 && user.uid) {
			close(dev);
			dev = user_become(&user, user.uid + w);
			if (dev < 0)
				_exit(1);
		}
		if (pids[w] == 0)
			_exit(worker(dev, splitmix(&s), nops / nworkers));
	}
	for (int w = 0; w < nworkers; w++) {
		int st;

		if (pids[w] < 0 || waitpid(pids[w], &st, 0) != pids[w] ||
		    !WIFEXITED(st) || WEXITSTATUS(st)) {
			printf("# worker %d failed\n", w);
			failed = 1;
		}
	}
	for (int i = 0; i < 500; i++) {
		if (ioctl(dev, PINMEM_IOC_DEV_INFO, &now))
			break;
		if (now.nr_regions == base.nr_regions &&
		    now.total_bytes == base.total_bytes &&
		    now.nr_mappings == base.nr_mappings &&
		    now.nr_view_fds == base.nr_view_fds)
			break;
		usleep(10000);
	}
	if (now.nr_regions != base.nr_regions ||
	    now.total_bytes != base.total_bytes ||
	    now.nr_mappings != base.nr_mappings ||
	    now.nr_view_fds != base.nr_view_fds) {
		printf("# totals not back at the end: regions %llu bytes %llu "
		       "mappings %llu view fds %llu\n", now.nr_regions,
		       now.total_bytes, now.nr_mappings, now.nr_view_fds);
		failed = 1;
	}
	if (user.uid && user_victims_check())
		failed = 1;
	printf("# abifuzz: %ld ops in %.1f s\n", nops / nworkers * nworkers,
	       model_now() - t0);
	printf("%s 1 - abifuzz seed %llu: %ld ops\n", failed ? "not ok" : "ok",
	       (unsigned long long)seed, nops / nworkers * nworkers);
	return failed;
}
