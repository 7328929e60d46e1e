// SPDX-License-Identifier: GPL-2.0
/*
 * liburing-faults.so: an LD_PRELOAD shim that makes io_uring completions
 * misbehave the way the kernel is allowed to, so that the I/O engine's
 * handling of short transfers, EAGAIN and EINTR can be tested.
 *
 * It interposes the liburing functions libpin calls through the PLT:
 *   io_uring_queue_init       starts counting completions of that ring at 0
 *   io_uring_submit_and_wait  calls the real one, then rewrites the
 *   __io_uring_get_cqe        results of completions not yet looked at
 *                             (the CQ ring is mapped writable); the
 *                             inline io_uring_peek_cqe that libpin uses
 *                             then reads the rewritten entries
 *   io_uring_submit           (with io_uring_submit_and_wait) first
 *                             notes each queued request (user_data ->
 *                             opcode, fd, buffer, length, offset)
 * The kernel did move all the bytes, so a smaller result is a real short
 * transfer (the rest must be moved again) and -EAGAIN / -EINTR for a
 * completed request must be resubmitted. So that an engine which does not
 * move the rest again is caught by the bytes, not only by its counters,
 * the bytes the rewritten result disowns are poisoned (0xa5): in the
 * buffer of a read, in the file (pwrite) for a write.
 *
 * Rules: URING_FAULTS (or uring_faults_set()) is a comma list of
 * KIND@FIRST[/PERIOD][xCOUNT]: fire on the FIRST-th completion of a ring
 * (1-based, counted per io_uring_queue_init), then every PERIOD
 * completions, COUNT times (default: once without PERIOD, else without
 * limit). KIND:
 *   short      res := half of res rounded down to 4096 (needs res >= 8192)
 *   oddshort   res := res / 2 - 1, not aligned (needs res >= 4)
 *   eagain     res := -EAGAIN (needs res > 0)
 *   eintr      res := -EINTR (needs res > 0)
 *   eio        res := -EIO (needs res > 0)
 *   zero       res := 0 (needs res > 0)
 *   wait-eintr io_uring_submit_and_wait returns -EINTR after doing its
 *              work (counted in calls, not completions)
 *   wait-eagain the same with -EAGAIN (the kernel short of resources)
 * A rule whose completion does not qualify fires on the next one that
 * does; one completion takes at most one fault. What was injected is
 * printed to stderr at exit; uring_faults_injected(KIND) answers how many
 * since the last uring_faults_set().
 *
 * It also interposes io_uring_register_buffers to see the geometry of
 * registered buffers: uring_faults_register(refuse) resets the record and,
 * with refuse set, makes every registration fail with -EOPNOTSUPP (as 6.1
 * refuses a pinmem mapping), so that no registered-buffer I/O reaches the
 * kernel; uring_faults_register_max_pages() answers the most 4 KiB pages
 * one registered buffer touched since (the kernel makes a bvec of each).
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <liburing.h>

enum { K_SHORT, K_ODDSHORT, K_EAGAIN, K_EINTR, K_EIO, K_ZERO, K_WAIT_EINTR,
       K_WAIT_EAGAIN,
       NKINDS };
static const char *const kind_names[NKINDS] = {
	"short", "oddshort", "eagain", "eintr", "eio", "zero", "wait-eintr",
	"wait-eagain",
};

#define MAX_RULES	16
#define MAX_RINGS	16
#define MAX_REQS	1024	/* user_data values noted */

struct req {
	int valid;
	int opcode;
	int fd;
	char *addr;
	unsigned len;
	unsigned long long off;
};

struct rule {
	int kind;
	unsigned long first, period, count;	/* count 0: no limit */
};

struct ring_state {
	struct io_uring *ring;
	unsigned seen;			/* CQ index up to which we looked */
	unsigned long completions;	/* ordinal of the last one */
	unsigned long waits;		/* submit_and_wait calls */
	unsigned long due[MAX_RULES];	/* next ordinal each rule fires at */
	unsigned long fired[MAX_RULES];
	struct req reqs[MAX_REQS];
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct rule rules[MAX_RULES];
static int nrules;
static struct ring_state rings[MAX_RINGS];
static unsigned long injected[NKINDS], total[NKINDS];
static unsigned long poisoned, poison_failed;

static int parse(const char *spec, struct rule *out, int *n)
{
	char *copy, *tok, *save = NULL;
	int ret = 0;

	*n = 0;
	if (!spec || !*spec)
		return 0;
	copy = strdup(spec);
	if (!copy)
		return -ENOMEM;
	for (tok = strtok_r(copy, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		char *at = strchr(tok, '@'), *end;
		struct rule r = { .kind = -1 };
		int k;

		if (!at || *n == MAX_RULES) {
			ret = -EINVAL;
			break;
		}
		*at = 0;
		for (k = 0; k < NKINDS; k++)
			if (!strcmp(tok, kind_names[k]))
				r.kind = k;
		r.first = strtoul(at + 1, &end, 10);
		if (*end == '/')
			r.period = strtoul(end + 1, &end, 10);
		r.count = r.period ? 0 : 1;
		if (*end == 'x')
			r.count = strtoul(end + 1, &end, 10);
		if (r.kind < 0 || !r.first || *end) {
			ret = -EINVAL;
			break;
		}
		if (!r.period)
			r.period = 1;	/* xCOUNT alone: consecutive */
		out[(*n)++] = r;
	}
	free(copy);
	return ret;
}

static void reset_ring(struct ring_state *rs, struct io_uring *ring)
{
	int i;

	memset(rs, 0, sizeof(*rs));
	rs->ring = ring;
	rs->seen = ring ? __atomic_load_n(ring->cq.khead, __ATOMIC_ACQUIRE) : 0;
	for (i = 0; i < nrules; i++)
		rs->due[i] = rules[i].first;
}

/* Replace the rules (NULL or "": none); resets the counts. 0 or -EINVAL. */
int uring_faults_set(const char *spec)
{
	struct rule r[MAX_RULES];
	int n, ret, i;

	ret = parse(spec, r, &n);
	if (ret)
		return ret;
	pthread_mutex_lock(&lock);
	memcpy(rules, r, sizeof(r));
	nrules = n;
	memset(injected, 0, sizeof(injected));
	for (i = 0; i < MAX_RINGS; i++)
		if (rings[i].ring)
			reset_ring(&rings[i], rings[i].ring);
	pthread_mutex_unlock(&lock);
	return 0;
}

/*
 * How many faults of kind were injected since the last set; -1: no kind.
 * "poisoned" and "poison-failed": ranges poisoned or not, in all.
 */
long uring_faults_injected(const char *kind)
{
	long v = -1;
	int k;

	pthread_mutex_lock(&lock);
	for (k = 0; k < NKINDS; k++)
		if (!strcmp(kind, kind_names[k]))
			v = (long)injected[k];
	if (!strcmp(kind, "poisoned"))
		v = (long)poisoned;
	if (!strcmp(kind, "poison-failed"))
		v = (long)poison_failed;
	pthread_mutex_unlock(&lock);
	return v;
}

static struct ring_state *ring_find(struct io_uring *ring, int make)
{
	int i;

	for (i = 0; i < MAX_RINGS; i++)
		if (rings[i].ring == ring)
			return &rings[i];
	if (!make)
		return NULL;
	for (i = 0; i < MAX_RINGS; i++)
		if (!rings[i].ring) {
			reset_ring(&rings[i], ring);
			return &rings[i];
		}
	fprintf(stderr, "uring-faults: more than %d rings at once\n",
		MAX_RINGS);
	abort();
}

static int qualifies(int kind, int res)
{
	switch (kind) {
	case K_SHORT:
		return res >= 8192;
	case K_ODDSHORT:
		return res >= 4;
	case K_WAIT_EINTR:
	case K_WAIT_EAGAIN:
		return 0;
	default:
		return res > 0;
	}
}

/* Is rule i due at ordinal n (and not used up)? */
static int due(struct ring_state *rs, int i, unsigned long n)
{
	return n >= rs->due[i] &&
	       (!rules[i].count || rs->fired[i] < rules[i].count);
}

static void fire(struct ring_state *rs, int i, unsigned long n)
{
	rs->fired[i]++;
	rs->due[i] = n + rules[i].period;
	injected[rules[i].kind]++;
	total[rules[i].kind]++;
}

/* Note the requests queued but not yet handed to the kernel. */
static void note_sqes(struct io_uring *ring)
{
	struct ring_state *rs;
	unsigned i;

	pthread_mutex_lock(&lock);
	if (nrules) {
		rs = ring_find(ring, 1);
		for (i = ring->sq.sqe_head; i != ring->sq.sqe_tail; i++) {
			struct io_uring_sqe *sqe =
				&ring->sq.sqes[i & ring->sq.ring_mask];
			struct req *q;

			if (sqe->user_data >= MAX_REQS)
				continue;
			q = &rs->reqs[sqe->user_data];
			q->valid = 1;
			q->opcode = sqe->opcode;
			q->fd = sqe->fd;
			q->addr = (char *)(uintptr_t)sqe->addr;
			q->len = sqe->len;
			q->off = sqe->off;
		}
	}
	pthread_mutex_unlock(&lock);
}

/* Bytes [from, to) of the request the kernel moved are now disowned. */
static void poison(struct ring_state *rs, struct io_uring_cqe *cqe, int from,
		   int to)
{
	struct req *q;
	void *junk;

	if (cqe->user_data >= MAX_REQS || from >= to)
		return;
	q = &rs->reqs[cqe->user_data];
	if (!q->valid || (unsigned)to > q->len) {
		poison_failed++;
		return;
	}
	switch (q->opcode) {
	case IORING_OP_READ:
	case IORING_OP_READ_FIXED:
		memset(q->addr + from, 0xa5, (size_t)(to - from));
		poisoned++;
		return;
	case IORING_OP_WRITE:
	case IORING_OP_WRITE_FIXED:
		/* Aligned, for an O_DIRECT fd. */
		if (posix_memalign(&junk, 4096, (size_t)(to - from))) {
			poison_failed++;
			return;
		}
		memset(junk, 0xa5, (size_t)(to - from));
		if (pwrite(q->fd, junk, (size_t)(to - from),
			   (off_t)(q->off + (unsigned)from)) == to - from)
			poisoned++;
		else
			poison_failed++;
		free(junk);
		return;
	default:
		poison_failed++;
	}
}

static void rewrite(struct io_uring_cqe *cqe, struct ring_state *rs)
{
	unsigned long n = ++rs->completions;
	int i, res = cqe->res;

	for (i = 0; i < nrules; i++) {
		int k = rules[i].kind;

		if (!due(rs, i, n) || !qualifies(k, cqe->res))
			continue;
		switch (k) {
		case K_SHORT:
			cqe->res = (cqe->res / 2) & ~4095;
			break;
		case K_ODDSHORT:
			cqe->res = cqe->res / 2 - 1;
			break;
		case K_EAGAIN:
			cqe->res = -EAGAIN;
			break;
		case K_EINTR:
			cqe->res = -EINTR;
			break;
		case K_EIO:
			cqe->res = -EIO;
			break;
		case K_ZERO:
			cqe->res = 0;
			break;
		}
		fire(rs, i, n);
		poison(rs, cqe, cqe->res > 0 ? cqe->res : 0, res);
		return;
	}
}

/* Look at the completions that arrived since the last look. */
static void scan(struct io_uring *ring)
{
	struct ring_state *rs;
	unsigned head, tail, i;

	pthread_mutex_lock(&lock);
	if (nrules) {
		rs = ring_find(ring, 1);
		head = __atomic_load_n(ring->cq.khead, __ATOMIC_ACQUIRE);
		tail = __atomic_load_n(ring->cq.ktail, __ATOMIC_ACQUIRE);
		if ((int)(rs->seen - head) < 0 || (int)(tail - rs->seen) < 0)
			rs->seen = head;
		for (i = rs->seen; i != tail; i++)
			rewrite(&ring->cq.cqes[i & ring->cq.ring_mask], rs);
		rs->seen = tail;
	}
	pthread_mutex_unlock(&lock);
}

static void *real(const char *name)
{
	void *f = dlsym(RTLD_NEXT, name);

	if (!f) {
		fprintf(stderr, "uring-faults: no %s: %s\n", name, dlerror());
		abort();
	}
	return f;
}

int io_uring_queue_init(unsigned entries, struct io_uring *ring,
			unsigned flags)
{
	static int (*fn)(unsigned, struct io_uring *, unsigned);
	int ret;

	if (!fn)
		fn = real("io_uring_queue_init");
	ret = fn(entries, ring, flags);
	if (ret == 0) {
		pthread_mutex_lock(&lock);
		reset_ring(ring_find(ring, 1), ring);
		pthread_mutex_unlock(&lock);
	}
	return ret;
}

void io_uring_queue_exit(struct io_uring *ring)
{
	static void (*fn)(struct io_uring *);
	struct ring_state *rs;

	if (!fn)
		fn = real("io_uring_queue_exit");
	pthread_mutex_lock(&lock);
	rs = ring_find(ring, 0);
	if (rs)
		memset(rs, 0, sizeof(*rs));
	pthread_mutex_unlock(&lock);
	fn(ring);
}

int io_uring_submit_and_wait(struct io_uring *ring, unsigned wait_nr)
{
	static int (*fn)(struct io_uring *, unsigned);
	struct ring_state *rs;
	int ret, i;

	if (!fn)
		fn = real("io_uring_submit_and_wait");
	note_sqes(ring);
	ret = fn(ring, wait_nr);
	scan(ring);
	if (ret < 0 || !nrules)
		return ret;
	pthread_mutex_lock(&lock);
	rs = ring_find(ring, 1);
	rs->waits++;
	for (i = 0; i < nrules; i++)
		if ((rules[i].kind == K_WAIT_EINTR ||
		     rules[i].kind == K_WAIT_EAGAIN) && due(rs, i, rs->waits)) {
			fire(rs, i, rs->waits);
			ret = rules[i].kind == K_WAIT_EINTR ? -EINTR : -EAGAIN;
			break;
		}
	pthread_mutex_unlock(&lock);
	return ret;
}

int io_uring_submit(struct io_uring *ring)
{
	static int (*fn)(struct io_uring *);

	if (!fn)
		fn = real("io_uring_submit");
	note_sqes(ring);
	return fn(ring);
}

int __io_uring_get_cqe(struct io_uring *ring, struct io_uring_cqe **cqe_ptr,
		       unsigned submit, unsigned wait_nr, sigset_t *sigmask)
{
	static int (*fn)(struct io_uring *, struct io_uring_cqe **, unsigned,
			 unsigned, sigset_t *);
	int ret;

	if (!fn)
		fn = real("__io_uring_get_cqe");
	ret = fn(ring, cqe_ptr, submit, wait_nr, sigmask);
	scan(ring);
	return ret;
}

static struct {
	int refuse;
	unsigned long max_pages;
} reg;

void uring_faults_register(int refuse)
{
	pthread_mutex_lock(&lock);
	reg.refuse = refuse;
	reg.max_pages = 0;
	pthread_mutex_unlock(&lock);
}

unsigned long uring_faults_register_max_pages(void)
{
	unsigned long n;

	pthread_mutex_lock(&lock);
	n = reg.max_pages;
	pthread_mutex_unlock(&lock);
	return n;
}

int io_uring_register_buffers(struct io_uring *ring, const struct iovec *iov,
			      unsigned nr_iovecs)
{
	static int (*fn)(struct io_uring *, const struct iovec *, unsigned);
	unsigned long pages;
	unsigned i;
	int refuse;

	if (!fn)
		fn = real("io_uring_register_buffers");
	pthread_mutex_lock(&lock);
	for (i = 0; i < nr_iovecs; i++) {
		pages = ((unsigned long)iov[i].iov_base % 4096 +
			 iov[i].iov_len + 4095) / 4096;
		if (pages > reg.max_pages)
			reg.max_pages = pages;
	}
	refuse = reg.refuse;
	pthread_mutex_unlock(&lock);
	return refuse ? -EOPNOTSUPP : fn(ring, iov, nr_iovecs);
}

__attribute__((constructor)) static void init(void)
{
	const char *spec = getenv("URING_FAULTS");

	if (uring_faults_set(spec)) {
		fprintf(stderr, "uring-faults: bad URING_FAULTS=%s\n", spec);
		abort();
	}
}

__attribute__((destructor)) static void report(void)
{
	int k;

	fprintf(stderr, "uring-faults: injected in all");
	for (k = 0; k < NKINDS; k++)
		fprintf(stderr, " %s=%lu", kind_names[k], total[k]);
	fprintf(stderr, "; poisoned %lu ranges, %lu could not be", poisoned,
		poison_failed);
	fputc('\n', stderr);
}
