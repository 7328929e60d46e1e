// SPDX-License-Identifier: MIT
/*
 * CUDA registration: cuMemHostRegister of owner and view mappings, through
 * a driver loaded at run time with dlopen, so libpin has no link-time CUDA
 * dependency and works (minus this file) where no driver is installed.
 *
 * The driver's entry points are looked up by the versioned names it exports
 * (cuMemHostRegister_v2 takes a size_t; the unversioned symbol is the old
 * 32-bit-size ABI). Every call runs with the primary context of the chosen
 * device pushed on the calling thread and popped again afterwards, so the
 * caller's own current context is left as it was. Registrations are
 * PORTABLE: pinned for every context in the process.
 *
 * Ranges go to the driver in pieces of at most PIN_CUDA_CHUNK_MAX (32 GiB),
 * cut at region offsets that are multiples of the piece size
 * (cuda_pieces.h); each piece is its own cuMemHostRegister, and
 * unregistering passes the very same bases. A registration is all its
 * pieces or nothing: a refused piece unregisters those before it. The
 * handle records each registration; the region or view mapping record
 * counts it (cuda_registered) so that free and unmap refuse with -EBUSY
 * until it is unregistered.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "internal.h"
#include "cuda_pieces.h"

#ifdef PIN_HAVE_CUDA_H
#include <cuda.h>
#else
/* The few driver API types and constants used here (ABI-stable). */
typedef int CUresult;
typedef int CUdevice;
typedef struct CUctx_st *CUcontext;
#define CUDA_SUCCESS				0
#define CUDA_ERROR_INVALID_VALUE		1
#define CUDA_ERROR_OUT_OF_MEMORY		2
#define CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED 712
#define CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED	713
#define CUDA_ERROR_NOT_PERMITTED		800
#define CUDA_ERROR_NOT_SUPPORTED		801
#define CU_MEMHOSTREGISTER_PORTABLE		0x01
#define CU_MEMHOSTREGISTER_DEVICEMAP		0x02
#define CU_MEMHOSTREGISTER_READ_ONLY		0x08
#endif

#define CUDA_DEFAULT_LIBRARY	"libcuda.so.1"
#define CUDA_TEST_CHUNK_ENV	"PIN_CUDA_TEST_CHUNK"
/* Piece sizes are multiples of the region's chunk (x86-64's huge page). */
#define CUDA_PIECE_ALIGN	(2ULL << 20)
#define CUDA_FLAGS		(PIN_CUDA_DEVICEMAP | PIN_CUDA_READ_ONLY)

typedef CUresult (*cu_init_fn)(unsigned int);
typedef CUresult (*cu_device_get_fn)(CUdevice *, int);
typedef CUresult (*cu_primary_retain_fn)(CUcontext *, CUdevice);
typedef CUresult (*cu_primary_release_fn)(CUdevice);
typedef CUresult (*cu_ctx_push_fn)(CUcontext);
typedef CUresult (*cu_ctx_pop_fn)(CUcontext *);
typedef CUresult (*cu_host_register_fn)(void *, size_t, unsigned int);
typedef CUresult (*cu_host_unregister_fn)(void *);
typedef CUresult (*cu_error_text_fn)(CUresult, const char **);
typedef CUresult (*cu_pci_bus_id_fn)(char *, int, CUdevice);

/* One range registered through the handle, in pieces (cuda_pieces.h). */
struct cuda_reg {
	struct cuda_reg *next;
	struct pin_region *region;	/* owner mapping of region, or */
	struct pin_view *view;		/* the view mapping at base */
	char *base;
	uint64_t length;
	uint64_t start;			/* region offset of base */
	uint64_t piece;			/* the piece size it was cut with */
	unsigned char *live;		/* bit i: piece i is registered */
};

struct pin_cuda {
	void *lib;
	CUdevice dev;
	CUcontext ctx;			/* retained primary context */
	int ctx_retained;
	uint64_t chunk_max;
	struct cuda_reg *regs;

	cu_init_fn init;
	cu_device_get_fn device_get;
	cu_primary_retain_fn primary_retain;
	cu_primary_release_fn primary_release;
	cu_ctx_push_fn ctx_push;
	cu_ctx_pop_fn ctx_pop;
	cu_host_register_fn host_register;
	cu_host_unregister_fn host_unregister;
	cu_error_text_fn error_name;	/* optional */
	cu_error_text_fn error_string;	/* optional */
	cu_pci_bus_id_fn pci_bus_id;	/* optional */

	char err[PIN_ERR_LEN];
};

/* "CUDA_ERROR_OUT_OF_MEMORY (out of memory)", or the number alone. */
static const char *cu_describe(const struct pin_cuda *c, CUresult res,
			       char *buf, size_t len)
{
	const char *name = NULL, *text = NULL;

	if (c->error_name && c->error_name(res, &name) != CUDA_SUCCESS)
		name = NULL;
	if (c->error_string && c->error_string(res, &text) != CUDA_SUCCESS)
		text = NULL;
	if (name && text)
		snprintf(buf, len, "%s (%s)", name, text);
	else if (name)
		snprintf(buf, len, "%s", name);
	else
		snprintf(buf, len, "CUresult %d", (int)res);
	return buf;
}

static int cu_errno(CUresult res)
{
	switch ((int)res) {
	case CUDA_ERROR_INVALID_VALUE:
		return -EINVAL;
	case CUDA_ERROR_OUT_OF_MEMORY:
		return -ENOMEM;
	case CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED:
		return -EBUSY;
	case CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED:
		return -ENOENT;
	case CUDA_ERROR_NOT_PERMITTED:
		return -EPERM;
	case CUDA_ERROR_NOT_SUPPORTED:
		return -EOPNOTSUPP;
	}
	return -EIO;
}

static void *cu_sym(struct pin_cuda *c, const char *name, const char *alt)
{
	void *p = dlsym(c->lib, name);

	if (!p && alt)
		p = dlsym(c->lib, alt);
	return p;
}

/* Look up every entry point; -ENOSYS naming the first one missing. */
static int cu_load_symbols(struct pin_cuda *c, const char *path)
{
	static const struct {
		const char *name, *alt;
		size_t off;
	} req[] = {
		{ "cuInit", NULL, offsetof(struct pin_cuda, init) },
		{ "cuDeviceGet", NULL, offsetof(struct pin_cuda, device_get) },
		{ "cuDevicePrimaryCtxRetain", NULL,
		  offsetof(struct pin_cuda, primary_retain) },
		{ "cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease",
		  offsetof(struct pin_cuda, primary_release) },
		{ "cuCtxPushCurrent_v2", NULL,
		  offsetof(struct pin_cuda, ctx_push) },
		{ "cuCtxPopCurrent_v2", NULL,
		  offsetof(struct pin_cuda, ctx_pop) },
		{ "cuMemHostRegister_v2", NULL,
		  offsetof(struct pin_cuda, host_register) },
		{ "cuMemHostUnregister", NULL,
		  offsetof(struct pin_cuda, host_unregister) },
	};
	size_t i;

	for (i = 0; i < sizeof(req) / sizeof(req[0]); i++) {
		void *p = cu_sym(c, req[i].name, req[i].alt);

		if (!p)
			return pin__fail(c->err, -ENOSYS,
					 "CUDA driver %s has no %s", path,
					 req[i].name);
		/* POSIX: a function's address round-trips through void *. */
		memcpy((char *)c + req[i].off, &p, sizeof(p));
	}
	c->error_name = (cu_error_text_fn)cu_sym(c, "cuGetErrorName", NULL);
	c->error_string = (cu_error_text_fn)cu_sym(c, "cuGetErrorString",
						   NULL);
	c->pci_bus_id = (cu_pci_bus_id_fn)cu_sym(c, "cuDeviceGetPCIBusId",
						 NULL);
	return 0;
}

/* The piece size: PIN_CUDA_CHUNK_MAX unless a test asks for less. */
static int cuda_chunk_from_env(struct pin_cuda *c)
{
	const char *s = secure_getenv(CUDA_TEST_CHUNK_ENV);
	unsigned long long v;
	char *end;

	c->chunk_max = PIN_CUDA_CHUNK_MAX;
	if (!s || !*s)
		return 0;
	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || *end || v == 0 || v > PIN_CUDA_CHUNK_MAX ||
	    v % CUDA_PIECE_ALIGN)
		return pin__fail(c->err, -EINVAL,
				 "%s=%s: want a multiple of %llu bytes (the region's chunk), at most %llu",
				 CUDA_TEST_CHUNK_ENV, s,
				 (unsigned long long)CUDA_PIECE_ALIGN,
				 (unsigned long long)PIN_CUDA_CHUNK_MAX);
	c->chunk_max = v;
	return 0;
}

static int cuda_start(struct pin_cuda *c, int device)
{
	const char *path = secure_getenv("PIN_CUDA_LIBRARY");
	void *nodelete;
	char what[160];
	CUresult res;
	int err;

	if (device < 0)
		return pin__fail(c->err, -EINVAL, "device ordinal %d", device);
	err = cuda_chunk_from_env(c);
	if (err)
		return err;
	if (!path || !*path)
		path = CUDA_DEFAULT_LIBRARY;
	c->lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!c->lib) {
		const char *why = dlerror();

		return pin__fail(c->err, -ENOENT,
				 "no CUDA driver: dlopen(\"%s\") failed (%s)",
				 path, why ? why : "no reason given");
	}
	err = cu_load_symbols(c, path);
	if (err)
		return err;
	/*
	 * A driver that has run cuInit has threads and exit handlers of its
	 * own: unloading it is not safe. From here on it stays loaded for
	 * the life of the process (as if linked), whatever dlclose says.
	 */
	nodelete = dlopen(path, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
	if (nodelete)
		dlclose(nodelete);
	res = c->init(0);
	if (res != CUDA_SUCCESS)
		return pin__fail(c->err, -ENODEV, "cuInit: %s",
				 cu_describe(c, res, what, sizeof(what)));
	res = c->device_get(&c->dev, device);
	if (res != CUDA_SUCCESS)
		return pin__fail(c->err, -ENODEV, "cuDeviceGet(%d): %s", device,
				 cu_describe(c, res, what, sizeof(what)));
	res = c->primary_retain(&c->ctx, c->dev);
	if (res != CUDA_SUCCESS)
		return pin__fail(c->err, -ENODEV,
				 "cuDevicePrimaryCtxRetain(device %d): %s",
				 device, cu_describe(c, res, what, sizeof(what)));
	c->ctx_retained = 1;
	return 0;
}

int pin_cuda_open(struct pin_cuda **cp, int device,
		  const struct pin_cuda_opts *opts)
{
	struct pin_cuda_opts o;
	struct pin_cuda *c;
	int err;

	if (cp)
		*cp = NULL;
	err = pin__opts_in(&o, sizeof(o), opts, PIN__CUDA_OPTS_SIZE);
	if (err)
		return err;	/* the size is wrong: why may not be there */
	pin__why(o.why, o.why_len, "");
	if (!cp || o.flags) {
		pin__why(o.why, o.why_len, "pin_cuda_open: no handle pointer, or unknown flags");
		return -EINVAL;
	}
	*cp = NULL;
	c = calloc(1, sizeof(*c));
	if (!c) {
		pin__why(o.why, o.why_len, "pin_cuda_open: out of memory");
		return -ENOMEM;
	}
	err = cuda_start(c, device);
	if (err) {
		pin__why(o.why, o.why_len, c->err);
		pin_cuda_close(c);
		return err;
	}
	*cp = c;
	return 0;
}

static CUresult cuda_push(struct pin_cuda *c)
{
	return c->ctx_push(c->ctx);
}

/* Pops the context cuda_push pushed; it cannot fail unless the stack was
 * tampered with between the two, and then there is nothing to undo. */
static void cuda_pop(struct pin_cuda *c)
{
	CUcontext popped;

	(void)c->ctx_pop(&popped);
}

static uint64_t cuda_nr_pieces(const struct cuda_reg *reg)
{
	return pin__cuda_nr_pieces(reg->start, reg->length, reg->piece);
}

static char *cuda_piece_base(const struct cuda_reg *reg, uint64_t i,
			     uint64_t *len)
{
	uint64_t off;

	pin__cuda_piece(reg->start, reg->length, reg->piece, i, &off, len);
	return reg->base + off;
}

/*
 * Unregister the pieces of [0, n) of reg still registered, every one of
 * them even when some fail (those stay marked live, for another try); the
 * first failure is reported.
 */
static int cuda_unregister_pieces(struct pin_cuda *c, struct cuda_reg *reg,
				  uint64_t n)
{
	char what[160];
	CUresult res;
	uint64_t i, len;
	int err = 0;

	for (i = 0; i < n; i++) {
		char *p = cuda_piece_base(reg, i, &len);

		if (!(reg->live[i / 8] & (1U << (i % 8))))
			continue;	/* undone by an earlier try */
		res = c->host_unregister(p);
		if (res == CUDA_SUCCESS)
			reg->live[i / 8] &= ~(1U << (i % 8));
		else if (!err)
			err = pin__fail(c->err, cu_errno(res),
					"cuMemHostUnregister(%p), piece %llu of %llu at offset %llu: %s",
					(void *)p, (unsigned long long)i + 1,
					(unsigned long long)n,
					(unsigned long long)(p - reg->base),
					cu_describe(c, res, what, sizeof(what)));
	}
	return err;
}

/* Register reg's range piece by piece; on failure none stays registered. */
static int cuda_register_pieces(struct pin_cuda *c, struct cuda_reg *reg,
				unsigned int cuflags)
{
	uint64_t i, len, n = cuda_nr_pieces(reg);
	char what[160];
	CUresult res;

	res = cuda_push(c);
	if (res != CUDA_SUCCESS)
		return pin__fail(c->err, cu_errno(res), "cuCtxPushCurrent: %s",
				 cu_describe(c, res, what, sizeof(what)));
	for (i = 0; i < n; i++) {
		char *p = cuda_piece_base(reg, i, &len);
		int err;

		res = c->host_register(p, len, cuflags);
		if (res == CUDA_SUCCESS) {
			reg->live[i / 8] |= 1U << (i % 8);
			continue;
		}
		err = cu_errno(res);
		cuda_unregister_pieces(c, reg, i);
		pin__fail(c->err, err,
			  "cuMemHostRegister(%p, %llu bytes, flags 0x%x), piece %llu of %llu at offset %llu of %llu bytes: %s%s",
			  (void *)p, (unsigned long long)len, cuflags,
			  (unsigned long long)i + 1, (unsigned long long)n,
			  (unsigned long long)(p - reg->base),
			  (unsigned long long)reg->length,
			  cu_describe(c, res, what, sizeof(what)),
			  i ? "; the pieces before it are unregistered" : "");
		cuda_pop(c);
		return err;
	}
	cuda_pop(c);
	return 0;
}

static int cuda_unregister_all(struct pin_cuda *c, struct cuda_reg *reg)
{
	char what[160];
	CUresult res;
	int err;

	res = cuda_push(c);
	if (res != CUDA_SUCCESS)
		return pin__fail(c->err, cu_errno(res), "cuCtxPushCurrent: %s",
				 cu_describe(c, res, what, sizeof(what)));
	err = cuda_unregister_pieces(c, reg, cuda_nr_pieces(reg));
	cuda_pop(c);
	return err;
}

static unsigned int cuda_flags(unsigned flags, int writable)
{
	unsigned int cuflags = CU_MEMHOSTREGISTER_PORTABLE;

	if (flags & PIN_CUDA_DEVICEMAP)
		cuflags |= CU_MEMHOSTREGISTER_DEVICEMAP;
	if ((flags & PIN_CUDA_READ_ONLY) || !writable)
		cuflags |= CU_MEMHOSTREGISTER_READ_ONLY;
	return cuflags;
}

static void cuda_reg_free(struct cuda_reg *reg)
{
	free(reg->live);
	free(reg);
}

static struct cuda_reg *cuda_find(struct pin_cuda *c, struct pin_region *r,
				  struct pin_view *v, void *addr,
				  struct cuda_reg ***linkp)
{
	struct cuda_reg **link, *reg;

	for (link = &c->regs; (reg = *link); link = &reg->next) {
		if (r && reg->region == r)
			break;
		if (v && reg->view == v && reg->base == addr)
			break;
	}
	if (linkp)
		*linkp = link;
	return reg;
}

/*
 * Register [base, base + length), at region offset start, and record it
 * in c.
 */
static int cuda_add(struct pin_cuda *c, struct pin_region *r,
		    struct pin_view *v, void *base, uint64_t start,
		    uint64_t length, unsigned int cuflags)
{
	struct cuda_reg *reg;
	int err;

	reg = calloc(1, sizeof(*reg));
	if (reg)
		reg->live = calloc(pin__cuda_nr_pieces(start, length,
						       c->chunk_max) / 8 + 1, 1);
	if (!reg || !reg->live) {
		free(reg);
		return pin__fail(c->err, -ENOMEM, "registration record");
	}
	reg->region = r;
	reg->view = v;
	reg->base = base;
	reg->length = length;
	reg->start = start;
	reg->piece = c->chunk_max;
	err = cuda_register_pieces(c, reg, cuflags);
	if (err) {
		cuda_reg_free(reg);
		return err;
	}
	reg->next = c->regs;
	c->regs = reg;
	return 0;
}

int pin_cuda_register(struct pin_cuda *c, struct pin_region *r,
		      unsigned flags)
{
	void *addr;
	int err;

	if (!c || !r)
		return -EINVAL;
	if (flags & ~CUDA_FLAGS)
		return pin__fail(c->err, -EINVAL, "unknown flags 0x%x",
				 flags & ~CUDA_FLAGS);
	if (r->cuda_registered)
		return pin__fail(c->err, -EBUSY,
				 "region %llu: owner mapping already registered",
				 (unsigned long long)r->id);
	err = pin_region_map(r, &addr);
	if (err)
		return pin__fail(c->err, err, "region %llu: owner mapping: %s",
				 (unsigned long long)r->id, r->err);
	/* The owner's registration: declared to the kernel (refs.c). */
	pin__refs_hold(&r->cuda_hold, r, addr, r->size, PIN_EXPECT_PER_PAGE);
	err = cuda_add(c, r, NULL, addr, 0, r->size,
		       cuda_flags(flags, !!(r->map_prot & PROT_WRITE)));
	if (err) {
		pin__refs_release(&r->cuda_hold);
		return err;
	}
	r->cuda_registered++;
	return 0;
}

int pin_cuda_unregister(struct pin_cuda *c, struct pin_region *r)
{
	struct cuda_reg **link, *reg;
	int err;

	if (!c || !r)
		return -EINVAL;
	reg = cuda_find(c, r, NULL, NULL, &link);
	if (!reg)
		return pin__fail(c->err, -ENOENT,
				 "region %llu is not registered through this handle",
				 (unsigned long long)r->id);
	err = cuda_unregister_all(c, reg);
	if (err)
		return err;
	*link = reg->next;
	cuda_reg_free(reg);
	r->cuda_registered--;
	pin__refs_release(&r->cuda_hold);
	return 0;
}

int pin_cuda_register_view(struct pin_cuda *c, struct pin_view *v,
			   void *addr, unsigned flags)
{
	struct pin_view_mapping *m;
	int err;

	if (!c || !v)
		return -EINVAL;
	if (flags & ~CUDA_FLAGS)
		return pin__fail(c->err, -EINVAL, "unknown flags 0x%x",
				 flags & ~CUDA_FLAGS);
	m = pin__view_mapping(v, addr);
	if (!m)
		return pin__fail(c->err, -EINVAL,
				 "%p is not a mapping made by pin_view_map of this view",
				 addr);
	if (m->cuda_registered)
		return pin__fail(c->err, -EBUSY,
				 "view mapping %p already registered", addr);
	err = cuda_add(c, NULL, v, addr, v->offset, v->length,
		       cuda_flags(flags, !!(m->prot & PROT_WRITE)));
	if (err)
		return err;
	m->cuda_registered++;
	return 0;
}

int pin_cuda_unregister_view(struct pin_cuda *c, struct pin_view *v,
			     void *addr)
{
	struct cuda_reg **link, *reg;
	struct pin_view_mapping *m;
	int err;

	if (!c || !v)
		return -EINVAL;
	reg = cuda_find(c, NULL, v, addr, &link);
	if (!reg)
		return pin__fail(c->err, -ENOENT,
				 "view mapping %p is not registered through this handle",
				 addr);
	err = cuda_unregister_all(c, reg);
	if (err)
		return err;
	*link = reg->next;
	cuda_reg_free(reg);
	m = pin__view_mapping(v, addr);
	if (m)
		m->cuda_registered--;
	return 0;
}

void pin_cuda_close(struct pin_cuda *c)
{
	if (!c)
		return;
	while (c->regs) {
		struct cuda_reg *reg = c->regs;

		if (reg->region)
			pin_cuda_unregister(c, reg->region);
		else
			pin_cuda_unregister_view(c, reg->view, reg->base);
		if (c->regs == reg) {
			/* The driver refused; forget it so close ends. */
			c->regs = reg->next;
			if (reg->region) {
				reg->region->cuda_registered--;
			} else {
				struct pin_view_mapping *m;

				m = pin__view_mapping(reg->view, reg->base);
				if (m)
					m->cuda_registered--;
			}
			cuda_reg_free(reg);
		}
	}
	if (c->ctx_retained)
		c->primary_release(c->dev);
	if (c->lib)
		dlclose(c->lib);
	free(c);
}

const char *pin_cuda_error(const struct pin_cuda *c)
{
	return c ? c->err : "no CUDA handle";
}

uint64_t pin_cuda_chunk_max(const struct pin_cuda *c)
{
	return c ? c->chunk_max : 0;
}

int pin_cuda_numa_node(struct pin_cuda *c)
{
	char id[32], what[128];
	CUresult res;
	int node;

	if (!c)
		return -EINVAL;
	if (!c->pci_bus_id)
		return pin__fail(c->err, -ENOSYS,
				 "the CUDA driver has no cuDeviceGetPCIBusId");
	res = c->pci_bus_id(id, sizeof(id), c->dev);
	if (res != CUDA_SUCCESS)
		return pin__fail(c->err, -EIO, "cuDeviceGetPCIBusId: %s",
				 cu_describe(c, res, what, sizeof(what)));
	id[sizeof(id) - 1] = 0;
	node = pin_pci_numa_node(id);
	if (node < -1)
		return pin__fail(c->err, node, "NUMA node of GPU %s (sysfs)",
				 id);
	return node;
}
