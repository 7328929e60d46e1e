/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The ABI fuzzer's reference model (abifuzz-model.c): what today's ABI
 * (PINMEM_ABI_VERSION 1) promises for each operation, and the objects one
 * worker holds: regions, fds, mappings, lingering children.
 */
#ifndef ABIFUZZ_MODEL_H
#define ABIFUZZ_MODEL_H

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <uapi/pinmem.h>

enum op_kind {
	OP_ALLOC, OP_VIEW, OP_MAP_OWNER, OP_MAP_VIEW, OP_UNMAP, OP_UNMAP_HEAD,
	OP_MREMAP_SHRINK, OP_MREMAP_GROW, OP_SPLIT, OP_MADV_DONTNEED,
	OP_MADV_DONTFORK, OP_FORK_EXIT, OP_FORK_LINGER, OP_REAP, OP_PASS_FD,
	OP_CLOSE, OP_SEAL, OP_DONATE, OP_DONATE_WAIT, OP_PUBLISH, OP_REOPEN,
	OP_HOLDERS, OP_LIST, OP_WRITE, OP_READ, OP_FOREIGN, OP_NR
};

/* A kind and three random numbers, read against the model when run. */
struct op {
	uint32_t kind, a, b, c;
};


/* The model's objects and helpers, shared by abifuzz-model.c and -ops.c. */
#define NR	6	/* regions */
#define NF	24	/* fds */
#define NV	40	/* mappings */
#define NC	3	/* lingering children */
#define MAXPG	24	/* pages per region */
#define NIDS	4096	/* region ids remembered for the final leak check */
#define PGSZ	4096UL

struct region {
	int live;
	uint64_t id;
	unsigned int pages;
	uint32_t state;
	uint64_t data[MAXPG];	/* the first word of each page */
};

struct fdobj {
	int used, fd, r, view, write, file;
	unsigned int off, pages;	/* of a view, in region pages */
};

struct vma {
	int used, r, view, maywrite, prot, dontfork, file;
	char *addr;
	unsigned int pages, base;
};

struct child {
	pid_t pid;
	struct fdobj f[NF];
	struct vma v[NV];
};

/*
 * A worker run as an unprivileged user (abifuzz -u): its RLIMIT_MEMLOCK
 * in bytes, and ids of regions other users hold, which it must never see.
 */
#define NFOREIGN 4
#define CHUNK	(2UL << 20)	/* ALLOC charges whole chunks */

struct fuzz_user {
	uid_t uid;		/* 0: workers run as the caller */
	gid_t gid;
	uint64_t memlock;
	uint64_t foreign[NFOREIGN];
	int nforeign;
};

struct model {
	const struct fuzz_user *user;	/* NULL unless unprivileged */
	long refused, probes;	/* ALLOCs refused (ENOMEM), by-id probes */
	int dev, sock[2], next_file, nids;
	struct region R[NR];
	struct fdobj F[NF];
	struct vma V[NV];
	struct child C[NC];
	uint64_t ids[NIDS];
};

#define FAIL(...) do { snprintf(why, len, __VA_ARGS__); return -1; } while (0)

struct counts {
	uint64_t owner, views, writable, view_fds, refs;
};

/* Index of the (a mod count)-th object matching, or -1. */
#define PICK(arr, n, a, cond) ({					\
	int __cnt = 0, __res = -1, __k;					\
	for (__k = 0; __k < (n); __k++)					\
		if ((arr)[__k].used && (cond))				\
			__cnt++;					\
	if (__cnt) {							\
		int __want = (a) % __cnt;				\
		for (__k = 0; __k < (n); __k++)				\
			if ((arr)[__k].used && (cond) && !__want--) {	\
				__res = __k;				\
				break;					\
			}						\
	}								\
	__res; })

int free_slot_f(struct model *m);
int free_slot_v(struct model *m);
struct counts counts_of(struct model *m, int r);
void settle(struct model *m);
int check_region(struct model *m, int r, char *why, size_t len);
int expect(int want, int got, const char *what, char *why, size_t len);
void add_vma(struct model *m, int vi, char *addr, int fi, int prot,
	     int maywrite);

#define FAIL(...) do { snprintf(why, len, __VA_ARGS__); return -1; } while (0)

struct model *model_new(int dev, const struct fuzz_user *user);
int live_regions(const struct model *m);
/* In unprivileged mode: LIST shows exactly this worker's live regions. */
int check_own_list(struct model *m, char *why, size_t len);
int op_foreign(struct model *m, const struct op *op, char *why, size_t len);
int user_become(const struct fuzz_user *u, uid_t uid);
int user_memlock_back(int dev, const struct fuzz_user *u);
int user_victims_make(int dev, struct fuzz_user *u, int nworkers);
int user_victims_check(void);
/* Run one op and compare; 0, or -1 with the mismatch in why. */
int model_step(struct model *m, const struct op *op, char *why, size_t len);
/* Release everything; checks that the regions went away. */
int model_finish(struct model *m, char *why, size_t len);
void model_free(struct model *m);
void op_describe(const struct op *op, char *buf, size_t len);

static inline double model_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

#endif /* ABIFUZZ_MODEL_H */
