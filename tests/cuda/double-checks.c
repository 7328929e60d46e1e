// SPDX-License-Identifier: MIT
/*
 * The driver test double itself refuses what the real driver refuses, so
 * that the other tests can fail: calls outside a context, unaligned or
 * oversized (> 32 GiB) ranges, missing PORTABLE, unmapped or read-only
 * memory without READ_ONLY, overlaps, unregistering a non-base. Each
 * refusal is counted as a violation; the record is cleared at the end.
 * A range over CUDA_DOUBLE_REGISTER_MAX is refused as a driver's own
 * limit, not a violation.
 */
#include <sys/mman.h>
#include <unistd.h>

#include "cuda-test.h"

typedef int (*reg_fn)(void *, size_t, unsigned int);
typedef int (*unreg_fn)(void *);
typedef int (*init_fn)(unsigned int);
typedef int (*get_fn)(int *, int);
typedef int (*retain_fn)(void **, int);
typedef int (*release_fn)(int);
typedef int (*push_fn)(void *);
typedef int (*pop_fn)(void **);

static void *h;

static void *sym(const char *name)
{
	void *p = dlsym(h, name);

	if (!p)
		FAIL("double has no %s", name);
	return p;
}

#define REFUSED(call, res, words)					\
	do {								\
		unsigned long v_ = s->violations;			\
		int r_ = (call);					\
		if (r_ != (res) || s->violations != v_ + 1 ||		\
		    !strstr(s->last_violation, (words)))		\
			FAIL("%s = %d, want %d; violation '%s'", #call,	\
			     r_, (res), s->last_violation);		\
	} while (0)

int main(void)
{
	const char *path = getenv("PIN_CUDA_LIBRARY");
	const struct cuda_double_stats *s;
	long page = sysconf(_SC_PAGESIZE);
	char limit[32];
	reg_fn reg;
	unreg_fn unreg;
	push_fn push;
	pop_fn pop;
	void *ctx, *popped, *rw, *ro, *none;
	int dev;

	if (!path)
		SKIP("PIN_CUDA_LIBRARY (the driver test double) not set");
	h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h)
		FAIL("dlopen %s: %s", path, dlerror());
	s = ((cuda_double_stats_fn)sym("cuda_double_stats"))();
	reg = (reg_fn)sym("cuMemHostRegister_v2");
	unreg = (unreg_fn)sym("cuMemHostUnregister");
	push = (push_fn)sym("cuCtxPushCurrent_v2");
	pop = (pop_fn)sym("cuCtxPopCurrent_v2");

	rw = mmap(NULL, 4 * page, PROT_READ | PROT_WRITE,
		  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ro = mmap(NULL, 4 * page, PROT_READ, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	/* 32 GiB + 2 pages of address space, never touched. */
	none = mmap(NULL, CUDA_DOUBLE_CHUNK_MAX + 2 * page, PROT_NONE,
		    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	CHECK(rw != MAP_FAILED && ro != MAP_FAILED && none != MAP_FAILED,
	      "mmap");

	REFUSED(reg(rw, page, 1), 3, "before cuInit");
	EXPECT(((init_fn)sym("cuInit"))(0), 0);
	EXPECT(((get_fn)sym("cuDeviceGet"))(&dev, 0), 0);
	REFUSED(reg(rw, page, 1), 201, "without a current context");
	EXPECT(((retain_fn)sym("cuDevicePrimaryCtxRetain"))(&ctx, dev), 0);
	EXPECT(push(ctx), 0);

	REFUSED(reg((char *)rw + 1, page, 1), 1, "not page-aligned");
	REFUSED(reg(rw, page + 1, 1), 1, "not page-aligned");
	REFUSED(reg(rw, 0, 1), 1, "not page-aligned");
	REFUSED(reg(none, CUDA_DOUBLE_CHUNK_MAX + page, 1), 1, "over 32 GiB");
	/* Exactly 32 GiB passes the size check and fails on the mapping. */
	REFUSED(reg(none, CUDA_DOUBLE_CHUNK_MAX, 1), 1, "is ---p, want rws");
	REFUSED(reg(rw, page, 0), 1, "flags 0");
	REFUSED(reg(rw, page, 1 | 0x4), 1, "flags 0x5");
	REFUSED(reg(ro, page, 1), 1, "is r--s, want rws");
	munmap((char *)rw + 3 * page, page);
	REFUSED(reg(rw, 4 * page, 1), 1, "is not mapped");

	EXPECT(reg(ro, page, 1 | 0x8), 0);	/* read-only, said so */
	snprintf(limit, sizeof(limit), "%ld", page);
	setenv("CUDA_DOUBLE_REGISTER_MAX", limit, 1);
	EXPECT(reg(rw, 2 * page, 1), 1);	/* over the driver's limit */
	CHECK(s->violations == 11 && s->live == 1,
	      "%lu violations, %lu live after the limit's refusal",
	      s->violations, s->live);
	unsetenv("CUDA_DOUBLE_REGISTER_MAX");
	EXPECT(reg(rw, 2 * page, 1), 0);
	REFUSED(reg((char *)rw + page, page, 1), 712, "overlaps");
	REFUSED(unreg((char *)rw + page), 713, "not the base");
	EXPECT(unreg(rw), 0);
	EXPECT(unreg(ro), 0);
	EXPECT(pop(&popped), 0);
	CHECK(popped == ctx, "popped %p, pushed %p", popped, ctx);
	REFUSED(pop(&popped), 201, "nothing pushed");
	EXPECT(((release_fn)sym("cuDevicePrimaryCtxRelease_v2"))(dev), 0);
	CHECK(s->violations == 14, "%lu violations counted", s->violations);
	((cuda_double_clear_fn)sym("cuda_double_clear_violations"))();
	test_double_clean(s);
	return 0;
}
