/* SPDX-License-Identifier: MIT */
/*
 * The record kept by the CUDA driver test double (cuda-double.c), read by
 * the tests through dlsym(handle, "cuda_double_stats").
 */
#ifndef CUDA_DOUBLE_H
#define CUDA_DOUBLE_H

#include <stddef.h>
#include <stdint.h>

#define CUDA_DOUBLE_LOG		64	/* calls kept in the log */
#define CUDA_DOUBLE_CHUNK_MAX	(32ULL << 30)	/* PIN_CUDA_CHUNK_MAX */

/* One cuMemHostRegister ('R') or cuMemHostUnregister ('U') call. */
struct cuda_double_call {
	char op;
	uintptr_t base;
	uint64_t size;		/* R only */
	unsigned flags;		/* R only */
	int result;		/* the CUresult returned */
};

struct cuda_double_stats {
	unsigned long init_calls;
	unsigned long register_calls;
	unsigned long unregister_calls;
	unsigned long live;		/* registrations in force */
	int primary_refs;		/* retained primary contexts */
	int ctx_depth;			/* contexts pushed on the stack */
	/* Calls that broke the driver's contract (a libpin bug). */
	unsigned long violations;
	char last_violation[256];
	size_t nr_calls;		/* R and U calls; log keeps the first */
	struct cuda_double_call log[CUDA_DOUBLE_LOG];
};

typedef const struct cuda_double_stats *(*cuda_double_stats_fn)(void);
/* 1 (and its flags) when one live registration holds [lo, hi), else 0. */
typedef int (*cuda_double_covers_fn)(uintptr_t lo, uintptr_t hi,
				     unsigned *flags);
/* Forget recorded violations (for the test that provokes them). */
typedef void (*cuda_double_clear_fn)(void);

#endif /* CUDA_DOUBLE_H */
