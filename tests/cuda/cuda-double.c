// SPDX-License-Identifier: MIT
/*
 * TEST DOUBLE of the CUDA driver (libcuda.so.1), for the libpin tests on
 * machines without a GPU. It is not a driver: it pins nothing and talks to
 * no device. It exports the entry points libpin/cuda.c looks up, CHECKS
 * every argument against the driver's contract, and records the calls:
 *
 *  - cuInit(0) before anything else (else CUDA_ERROR_NOT_INITIALIZED);
 *  - device ordinals in [0, CUDA_DOUBLE_DEVICES) (default 1);
 *  - cuMemHostRegister_v2/cuMemHostUnregister only with a retained primary
 *    context current (pushed), every push popped;
 *  - register: base and size page-aligned, 0 < size <= 32 GiB (libpin's
 *    PIN_CUDA_CHUNK_MAX: a larger call is a libpin bug), flags
 *    PORTABLE plus only DEVICEMAP/READ_ONLY, no overlap with a live
 *    registration, the whole range mapped shared and readable (and writable
 *    unless READ_ONLY) per /proc/self/maps, and one byte of every page
 *    readable through process_vm_readv (get_user_pages, as the driver's
 *    pinning does);
 *  - unregister: base exactly a live registration's base;
 *  - at exit (or unload): no registration live, no context retained or
 *    pushed, no violation; otherwise it says so on stderr and _exit(97).
 *
 * A call that breaks the contract fails with the CUresult the driver would
 * return and counts as a violation (a libpin bug). Failures on request:
 *   CUDA_DOUBLE_INIT_RESULT=N     cuInit returns N
 *   CUDA_DOUBLE_FAIL_REGISTER=K   the K-th cuMemHostRegister (from 1)
 *                                 returns CUDA_ERROR_OUT_OF_MEMORY
 *   CUDA_DOUBLE_FAIL_UNREGISTER=K the K-th cuMemHostUnregister (from 1)
 *                                 returns CUDA_ERROR_INVALID_VALUE, the
 *                                 registration left in force
 *   CUDA_DOUBLE_REGISTER_MAX=B    a cuMemHostRegister of more than B bytes
 *                                 returns CUDA_ERROR_INVALID_VALUE, as
 *                                 drivers refuse ranges of 512 GiB and
 *                                 more (and some hosts far less): a
 *                                 driver's limit, not a violation
 * Tests read the record with dlsym(h, "cuda_double_stats"), and ask
 * whether a live registration covers a range, and with which flags, with
 * cuda_double_covers.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "cuda-double.h"

typedef int CUresult;
typedef int CUdevice;
typedef struct CUctx_st *CUcontext;

#define CUDA_SUCCESS				0
#define CUDA_ERROR_INVALID_VALUE		1
#define CUDA_ERROR_OUT_OF_MEMORY		2
#define CUDA_ERROR_NOT_INITIALIZED		3
#define CUDA_ERROR_NO_DEVICE			100
#define CUDA_ERROR_INVALID_DEVICE		101
#define CUDA_ERROR_INVALID_CONTEXT		201
#define CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED 712
#define CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED	713

#define PORTABLE	0x01
#define DEVICEMAP	0x02
#define READ_ONLY	0x08

#define MAX_DEVICES	4
#define MAX_DEPTH	16
#define MAX_LIVE	1024

#define EXPORT __attribute__((visibility("default")))

struct ctx_st {
	int device;
};
struct CUctx_st;

struct live_reg {
	uintptr_t base;
	uint64_t size;
	unsigned flags;
};

/* A test double may keep process-wide state: it stands in for one. */
static struct {
	struct cuda_double_stats s;
	int initialised;
	int nr_devices;
	struct ctx_st primary[MAX_DEVICES];
	int refs[MAX_DEVICES];
	struct ctx_st *stack[MAX_DEPTH];
	struct live_reg live[MAX_LIVE];
} d;

static CUresult violation(CUresult res, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static CUresult violation(CUresult res, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(d.s.last_violation, sizeof(d.s.last_violation), fmt, ap);
	va_end(ap);
	d.s.violations++;
	fprintf(stderr, "cuda-double: violation: %s\n", d.s.last_violation);
	return res;
}

static long env_long(const char *name, long dflt)
{
	const char *s = getenv(name);

	return s && *s ? strtol(s, NULL, 0) : dflt;
}

static void log_call(char op, uintptr_t base, uint64_t size, unsigned flags,
		     CUresult res)
{
	if (d.s.nr_calls < CUDA_DOUBLE_LOG) {
		struct cuda_double_call *c = &d.s.log[d.s.nr_calls];

		c->op = op;
		c->base = base;
		c->size = size;
		c->flags = flags;
		c->result = res;
	}
	d.s.nr_calls++;
}

static CUresult need_context(const char *fn)
{
	if (!d.initialised)
		return violation(CUDA_ERROR_NOT_INITIALIZED,
				 "%s before cuInit", fn);
	if (d.s.ctx_depth == 0)
		return violation(CUDA_ERROR_INVALID_CONTEXT,
				 "%s without a current context", fn);
	return CUDA_SUCCESS;
}

/* Every byte of [base, base + size) in shared VMAs with the wanted rights. */
static CUresult check_maps(uintptr_t base, uint64_t size, int want_write)
{
	uintptr_t cursor = base, end = base + size;
	char line[512];
	FILE *f = fopen("/proc/self/maps", "re");

	if (!f)
		return violation(CUDA_ERROR_INVALID_VALUE,
				 "cannot read /proc/self/maps");
	while (cursor < end && fgets(line, sizeof(line), f)) {
		uintptr_t lo, hi;
		char perms[8];

		if (sscanf(line, "%" SCNxPTR "-%" SCNxPTR " %7s", &lo, &hi,
			   perms) != 3 || hi <= cursor || lo > cursor)
			continue;
		if (perms[0] != 'r' || perms[3] != 's' ||
		    (want_write && perms[1] != 'w')) {
			fclose(f);
			return violation(CUDA_ERROR_INVALID_VALUE,
					 "register %#" PRIxPTR "+%#" PRIx64
					 ": VMA %#" PRIxPTR "-%#" PRIxPTR
					 " is %s, want r%ss",
					 base, size, lo, hi, perms,
					 want_write ? "w" : "-");
		}
		cursor = hi;
	}
	fclose(f);
	if (cursor < end)
		return violation(CUDA_ERROR_INVALID_VALUE,
				 "register %#" PRIxPTR "+%#" PRIx64
				 ": %#" PRIxPTR " is not mapped",
				 base, size, cursor);
	return CUDA_SUCCESS;
}

/* One byte of every page through get_user_pages (process_vm_readv). */
static CUresult check_gup(uintptr_t base, uint64_t size, long page)
{
	static char sink[1024];
	struct iovec local[1024], remote[1024];
	uint64_t off = 0;

	while (off < size) {
		size_t n = 0;
		ssize_t got;

		for (; n < 1024 && off < size; n++, off += page) {
			local[n].iov_base = &sink[n];
			local[n].iov_len = 1;
			remote[n].iov_base = (void *)(base + off);
			remote[n].iov_len = 1;
		}
		got = process_vm_readv(getpid(), local, n, remote, n, 0);
		if (got != (ssize_t)n)
			return violation(CUDA_ERROR_INVALID_VALUE,
					 "register %#" PRIxPTR "+%#" PRIx64
					 ": process_vm_readv read %zd of %zu pages near %#" PRIxPTR,
					 base, size, got, n,
					 base + off - n * page);
	}
	return CUDA_SUCCESS;
}

static CUresult check_register(uintptr_t base, uint64_t size, unsigned flags)
{
	long page = sysconf(_SC_PAGESIZE);
	CUresult res;
	int i;

	res = need_context("cuMemHostRegister");
	if (res)
		return res;
	if (base % page || size % page || size == 0)
		return violation(CUDA_ERROR_INVALID_VALUE,
				 "register %#" PRIxPTR "+%#" PRIx64
				 ": not page-aligned", base, size);
	if (size > CUDA_DOUBLE_CHUNK_MAX)
		return violation(CUDA_ERROR_INVALID_VALUE,
				 "register %#" PRIxPTR "+%#" PRIx64
				 ": over 32 GiB in one call", base, size);
	if (!(flags & PORTABLE) || (flags & ~(PORTABLE | DEVICEMAP | READ_ONLY)))
		return violation(CUDA_ERROR_INVALID_VALUE,
				 "register %#" PRIxPTR ": flags %#x", base,
				 flags);
	for (i = 0; i < MAX_LIVE; i++) {
		struct live_reg *l = &d.live[i];

		if (l->size && base < l->base + l->size &&
		    l->base < base + size)
			return violation(CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED,
					 "register %#" PRIxPTR "+%#" PRIx64
					 " overlaps %#" PRIxPTR "+%#" PRIx64,
					 base, size, l->base, l->size);
	}
	res = check_maps(base, size, !(flags & READ_ONLY));
	if (res)
		return res;
	return check_gup(base, size, page);
}

EXPORT CUresult cuInit(unsigned int flags)
{
	d.s.init_calls++;
	if (flags)
		return violation(CUDA_ERROR_INVALID_VALUE, "cuInit(%#x)",
				 flags);
	if (env_long("CUDA_DOUBLE_INIT_RESULT", 0))
		return (CUresult)env_long("CUDA_DOUBLE_INIT_RESULT", 0);
	d.nr_devices = (int)env_long("CUDA_DOUBLE_DEVICES", 1);
	if (d.nr_devices > MAX_DEVICES)
		d.nr_devices = MAX_DEVICES;
	d.initialised = 1;
	return d.nr_devices > 0 ? CUDA_SUCCESS : CUDA_ERROR_NO_DEVICE;
}

EXPORT CUresult cuDeviceGet(CUdevice *dev, int ordinal)
{
	if (!d.initialised)
		return violation(CUDA_ERROR_NOT_INITIALIZED,
				 "cuDeviceGet before cuInit");
	if (!dev)
		return violation(CUDA_ERROR_INVALID_VALUE, "cuDeviceGet(NULL)");
	if (ordinal < 0 || ordinal >= d.nr_devices)
		return CUDA_ERROR_INVALID_DEVICE;
	*dev = ordinal;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *ctx, CUdevice dev)
{
	if (!d.initialised)
		return violation(CUDA_ERROR_NOT_INITIALIZED,
				 "cuDevicePrimaryCtxRetain before cuInit");
	if (!ctx || dev < 0 || dev >= d.nr_devices)
		return violation(CUDA_ERROR_INVALID_VALUE,
				 "cuDevicePrimaryCtxRetain(%p, %d)",
				 (void *)ctx, dev);
	d.primary[dev].device = dev;
	d.refs[dev]++;
	d.s.primary_refs++;
	*ctx = (CUcontext)(void *)&d.primary[dev];
	return CUDA_SUCCESS;
}

EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
	if (dev < 0 || dev >= MAX_DEVICES || d.refs[dev] <= 0)
		return violation(CUDA_ERROR_INVALID_CONTEXT,
				 "cuDevicePrimaryCtxRelease(%d) not retained",
				 dev);
	d.refs[dev]--;
	d.s.primary_refs--;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxPushCurrent_v2(CUcontext ctx)
{
	struct ctx_st *c = (struct ctx_st *)(void *)ctx;

	if (c < &d.primary[0] || c >= &d.primary[MAX_DEVICES] ||
	    d.refs[c - d.primary] <= 0)
		return violation(CUDA_ERROR_INVALID_CONTEXT,
				 "cuCtxPushCurrent(%p): not a retained context",
				 (void *)ctx);
	if (d.s.ctx_depth == MAX_DEPTH)
		return violation(CUDA_ERROR_INVALID_VALUE,
				 "cuCtxPushCurrent: %d contexts pushed",
				 MAX_DEPTH);
	d.stack[d.s.ctx_depth++] = c;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxPopCurrent_v2(CUcontext *ctx)
{
	if (d.s.ctx_depth == 0)
		return violation(CUDA_ERROR_INVALID_CONTEXT,
				 "cuCtxPopCurrent with nothing pushed");
	d.s.ctx_depth--;
	if (ctx)
		*ctx = (CUcontext)(void *)d.stack[d.s.ctx_depth];
	return CUDA_SUCCESS;
}

EXPORT CUresult cuMemHostRegister_v2(void *p, size_t size, unsigned int flags)
{
	uintptr_t base = (uintptr_t)p;
	CUresult res;
	int i;

	d.s.register_calls++;
	res = check_register(base, size, flags);
	if (!res && env_long("CUDA_DOUBLE_REGISTER_MAX", 0) > 0 &&
	    size > (unsigned long)env_long("CUDA_DOUBLE_REGISTER_MAX", 0))
		res = CUDA_ERROR_INVALID_VALUE;
	if (!res && (unsigned long)env_long("CUDA_DOUBLE_FAIL_REGISTER", 0) ==
		    d.s.register_calls)
		res = CUDA_ERROR_OUT_OF_MEMORY;
	for (i = 0; !res && i < MAX_LIVE; i++) {
		if (!d.live[i].size) {
			d.live[i].base = base;
			d.live[i].size = size;
			d.live[i].flags = flags;
			d.s.live++;
			break;
		}
	}
	if (!res && i == MAX_LIVE)
		res = CUDA_ERROR_OUT_OF_MEMORY;
	log_call('R', base, size, flags, res);
	return res;
}

EXPORT CUresult cuMemHostUnregister(void *p)
{
	uintptr_t base = (uintptr_t)p;
	CUresult res;
	int i;

	d.s.unregister_calls++;
	res = need_context("cuMemHostUnregister");
	if (!res && (unsigned long)env_long("CUDA_DOUBLE_FAIL_UNREGISTER", 0) ==
		    d.s.unregister_calls) {
		log_call('U', base, 0, 0, CUDA_ERROR_INVALID_VALUE);
		return CUDA_ERROR_INVALID_VALUE;
	}
	for (i = 0; !res && i < MAX_LIVE; i++)
		if (d.live[i].size && d.live[i].base == base)
			break;
	if (!res && i == MAX_LIVE)
		res = violation(CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED,
				"unregister %#" PRIxPTR
				": not the base of a registration", base);
	if (!res) {
		d.live[i].size = 0;
		d.s.live--;
	}
	log_call('U', base, 0, 0, res);
	return res;
}

static const struct {
	CUresult res;
	const char *name, *text;
} errors[] = {
	{ CUDA_SUCCESS, "CUDA_SUCCESS", "no error" },
	{ CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE",
	  "invalid argument" },
	{ CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY",
	  "out of memory" },
	{ CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED",
	  "initialization error" },
	{ CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE",
	  "no CUDA-capable device is detected" },
	{ CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE",
	  "invalid device ordinal" },
	{ CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT",
	  "invalid device context" },
	{ CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED,
	  "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED",
	  "part or all of the requested memory range is already mapped" },
	{ CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED,
	  "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED",
	  "pointer does not correspond to a registered memory region" },
};

static CUresult error_text(CUresult res, const char **out, int name)
{
	size_t i;

	for (i = 0; i < sizeof(errors) / sizeof(errors[0]); i++) {
		if (errors[i].res == res) {
			*out = name ? errors[i].name : errors[i].text;
			return CUDA_SUCCESS;
		}
	}
	*out = NULL;
	return CUDA_ERROR_INVALID_VALUE;
}

EXPORT CUresult cuGetErrorName(CUresult res, const char **name)
{
	return error_text(res, name, 1);
}

EXPORT CUresult cuGetErrorString(CUresult res, const char **text)
{
	return error_text(res, text, 0);
}

EXPORT const struct cuda_double_stats *cuda_double_stats(void)
{
	return &d.s;
}

EXPORT int cuda_double_covers(uintptr_t lo, uintptr_t hi, unsigned *flags)
{
	int i;

	for (i = 0; i < MAX_LIVE; i++) {
		const struct live_reg *l = &d.live[i];

		if (l->size && l->base <= lo && hi <= l->base + l->size) {
			if (flags)
				*flags = l->flags;
			return 1;
		}
	}
	return 0;
}

EXPORT void cuda_double_clear_violations(void)
{
	d.s.violations = 0;
	d.s.last_violation[0] = '\0';
}

__attribute__((destructor)) static void cuda_double_at_exit(void)
{
	if (!d.s.live && !d.s.primary_refs && !d.s.ctx_depth &&
	    !d.s.violations)
		return;
	fprintf(stderr,
		"cuda-double: at exit: %lu registrations live, %d contexts retained, %d pushed, %lu violations (last: %s)\n",
		d.s.live, d.s.primary_refs, d.s.ctx_depth, d.s.violations,
		d.s.last_violation);
	_exit(97);
}
