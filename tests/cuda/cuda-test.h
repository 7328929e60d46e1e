/* SPDX-License-Identifier: MIT */
/*
 * Helpers for the CUDA registration tests: each test is one program that
 * exits 0 (pass), 77 (skip) or 1 (fail), saying why on stderr. The suite
 * points PIN_CUDA_LIBRARY at the driver test double and picks the backend
 * with PIN_BACKEND.
 */
#ifndef CUDA_TEST_H
#define CUDA_TEST_H

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pin.h"
#include "cuda-double.h"

#define MiB (1ULL << 20)

#define FAIL(...)							\
	do {								\
		fprintf(stderr, "%s:%d: FAIL: ", __FILE__, __LINE__);	\
		fprintf(stderr, __VA_ARGS__);				\
		fprintf(stderr, "\n");					\
		exit(1);						\
	} while (0)

#define SKIP(...)							\
	do {								\
		fprintf(stderr, "SKIP: ");				\
		fprintf(stderr, __VA_ARGS__);				\
		fprintf(stderr, "\n");					\
		exit(77);						\
	} while (0)

/* A call returning int: must give exactly want. */
#define EXPECT(call, want)						\
	do {								\
		int got_ = (call);					\
		if (got_ != (want))					\
			FAIL("%s = %d (%s), want %d (%s)", #call, got_,	\
			     strerror(got_ < 0 ? -got_ : got_), (want),	\
			     strerror((want) < 0 ? -(want) : (want)));	\
	} while (0)

/* cond must hold; else fail with the condition and the message. */
#define CHECK(cond, ...)						\
	do {								\
		if (!(cond)) {						\
			fprintf(stderr, "%s:%d: FAIL: %s: ", __FILE__,	\
				__LINE__, #cond);			\
			fprintf(stderr, __VA_ARGS__);			\
			fprintf(stderr, "\n");				\
			exit(1);					\
		}							\
	} while (0)

static inline struct pin_dev *test_dev(void)
{
	struct pin_dev *dev;
	int err = pin_dev_open(&dev, PIN_BACKEND_AUTO, NULL);

	if (err == -ENOENT)
		SKIP("no backend: %s", strerror(-err));
	if (err)
		FAIL("pin_dev_open: %s", strerror(-err));
	return dev;
}

static inline struct pin_region *test_region(struct pin_dev *dev,
					      uint64_t size)
{
	const struct pin_region_opts fallback = {
		.size = sizeof(fallback), .flags = PIN_REGION_FALLBACK,
	};
	struct pin_region *r;
	int err = pin_region_create(dev, size, &fallback, &r);

	if (err)
		FAIL("pin_region_create(%llu): %s", (unsigned long long)size,
		     pin_dev_error(dev));
	return r;
}

static inline struct pin_cuda *test_cuda(void)
{
	struct pin_cuda *c;
	char why[512];
	struct pin_cuda_opts co = {
		.size = sizeof(co), .why = why, .why_len = sizeof(why),
	};
	int err;

	if (!getenv("PIN_CUDA_LIBRARY"))
		SKIP("PIN_CUDA_LIBRARY (the driver test double) not set");
	err = pin_cuda_open(&c, 0, &co);
	if (err)
		FAIL("pin_cuda_open: %d: %s", err, why);
	return c;
}

/* The double's record; the double stays loaded until exit. */
static inline const struct cuda_double_stats *test_stats(void)
{
	const char *path = getenv("PIN_CUDA_LIBRARY");
	void *h = path ? dlopen(path, RTLD_NOW | RTLD_NOLOAD) : NULL;
	cuda_double_stats_fn fn;

	if (!h)
		FAIL("the driver double %s is not loaded", path ? path : "");
	fn = (cuda_double_stats_fn)dlsym(h, "cuda_double_stats");
	if (!fn)
		FAIL("%s is not the driver test double", path);
	return fn();
}

/* After the test: nothing live, nothing retained, no contract broken. */
static inline void test_double_clean(const struct cuda_double_stats *s)
{
	if (s->live || s->primary_refs || s->ctx_depth || s->violations)
		FAIL("double: %lu live, %d retained, %d pushed, %lu violations (%s)",
		     s->live, s->primary_refs, s->ctx_depth, s->violations,
		     s->last_violation);
}

#endif /* CUDA_TEST_H */
