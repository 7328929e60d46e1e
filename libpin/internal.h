/* SPDX-License-Identifier: MIT */
/*
 * libpin internals shared by the library's files. Not installed.
 *
 * Each handle owns its fd(s) and mappings; nothing points from one handle
 * to another, so a region handle may be freed while its views live on, and
 * the device handle may be closed before its regions.
 */
#ifndef LIBPIN_INTERNAL_H
#define LIBPIN_INTERNAL_H

#include <linux/types.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>

#include "pin.h"

#define PIN_ERR_LEN	1024	/* bytes of last-error text per handle */

struct pin_dev {
	int backend;		/* PIN_BACKEND_DEVICE or _PORTABLE */
	int fd;			/* /dev/pinmem, -1 on portable */
	uint32_t abi_version;
	uint32_t abi_min_compat;
	uint64_t chunk_size;
	char err[PIN_ERR_LEN];
	char why[PIN_ERR_LEN];	/* which backend, and why (pin_dev_backend_why) */
};

/* A declaration in force, to be taken back by pin__refs_release. */
struct pin__refs_hold {
	struct pin_region *region;
	const void *addr;
	uint64_t len;
	unsigned flags;
	int active;
};
/* Where a portable region's pages are to come from (numa_place.c). */
#define PIN__MAX_NODES	1024	/* MAX_NUMNODES of x86-64 and arm64 */
struct pin__place {
	int node;		/* -1: the thread's own policy */
	int mode;		/* MPOL_BIND, MPOL_PREFERRED or MPOL_DEFAULT */
};

/* A thread's mempolicy while it allocates for a place, to put back. */
struct pin__place_scope {
	int saved;
	int mode;
	unsigned long mask[PIN__MAX_NODES / (8 * sizeof(unsigned long))];
};

struct pin_region {
	int backend;
	int fd;			/* region fd (device) or memfd (portable) */
	uint64_t id;
	uint64_t size;
	void *map;		/* owner mapping, NULL until pin_region_map */
	int map_prot;		/* its protection */
	int unlocked;		/* portable: map not mlock()ed yet (loader) */
	int cuda_registered;	/* registrations of map in force (cuda.c) */
	struct pin__refs_hold cuda_hold;	/* its declaration (refs.c) */
	int hugetlb;		/* portable: MFD_HUGETLB memfd */
	int lazy;		/* device: ALLOC_LAZY, chunks still to
				 * come with POPULATE (fill.c) */
	pid_t owner_pid;	/* portable: allocating process, 0 if imported */
	struct pin__place place;	/* portable: where the loader's steps
					 * allocate (numa_place.c) */
	char err[PIN_ERR_LEN];
};

/* One mapping made by pin_view_map. */
struct pin_view_mapping {
	void *addr;
	int prot;
	int cuda_registered;	/* registrations in force (cuda.c) */
};

struct pin_view {
	int backend;
	int fd;
	uint64_t region_id;
	uint64_t offset;	/* into the region */
	uint64_t length;
	int writable;
	struct pin_view_mapping *maps;
	size_t nr_maps;
	size_t cap_maps;
	char err[PIN_ERR_LEN];
};

#pragma GCC visibility push(hidden)

/*
 * ext.c: extensible structs (the conventions in pin.h). The size of a
 * struct in 1.0 runs to the end of its last 1.0 field; it stays so when
 * the struct grows.
 */
#define PIN__SIZE_1_0(type, last) \
	(offsetof(type, last) + sizeof(((type *)0)->last))
#define PIN__DEV_OPTS_SIZE	PIN__SIZE_1_0(struct pin_dev_opts, why_len)
#define PIN__REGION_OPTS_SIZE	PIN__SIZE_1_0(struct pin_region_opts, node)
#define PIN__IO_OPTS_SIZE	PIN__SIZE_1_0(struct pin_io_opts, why_len)
#define PIN__ST_LOAD_OPTS_SIZE	PIN__SIZE_1_0(struct pin_st_load_opts, io)
#define PIN__CUDA_OPTS_SIZE	PIN__SIZE_1_0(struct pin_cuda_opts, why_len)
#define PIN__DEV_INFO_SIZE	PIN__SIZE_1_0(struct pin_dev_info, nr_view_fds)
#define PIN__REGION_INFO_SIZE	PIN__SIZE_1_0(struct pin_region_info, owner_pid)
#define PIN__HOLDER_SIZE	PIN__SIZE_1_0(struct pin_holder, comm)
#define PIN__REF_RANGE_SIZE	PIN__SIZE_1_0(struct pin_ref_range, expected)
#define PIN__IO_STATS_SIZE	PIN__SIZE_1_0(struct pin_io_stats, fallback_reason)
#define PIN__ST_TENSOR_SIZE	PIN__SIZE_1_0(struct pin_st_tensor, file_index)
#define PIN__ST_PHASES_SIZE	PIN__SIZE_1_0(struct pin_st_phases, seal_ns)
#define PIN__ST_STEP_SIZE	PIN__SIZE_1_0(struct pin_st_step, read_end_ns)

/*
 * Copy the caller's options into dst (dst_size bytes, the library's
 * struct): NULL gives zeros with size set; -EINVAL below min_size,
 * -E2BIG for a set byte past dst_size.
 */
int pin__opts_in(void *dst, size_t dst_size, const void *src,
		 size_t min_size);
/*
 * A result struct, or one the caller hands back (pin_holder_format):
 * -EINVAL when NULL or its size is below min_size.
 */
int pin__out_check(const void *dst, size_t min_size);
/* Write src (src_size bytes) into the caller's dst, keeping its size. */
void pin__out_put(void *dst, const void *src, size_t src_size);
/* A result array: element 0's size is the stride (0 when cap is 0). */
int pin__array_stride(const void *arr, size_t cap, size_t min_size,
		      size_t *stride);
/* Write element i of a result array, its size set to stride. */
void pin__array_put(void *arr, size_t stride, size_t i, const void *src,
		    size_t src_size);
/*
 * What an I/O call did, as the I/O layers keep it: struct pin_io_stats'
 * fields and the failure's text, which the public calls hand on as pin.h
 * says (io.c).
 */
struct pin__io_stats {
	uint64_t bytes;
	uint64_t ns;
	uint64_t io_ns;
	uint64_t requests;
	uint64_t short_ios;
	uint64_t retries;
	uint32_t queue_depth;
	uint32_t request_size;
	int direct;
	int fixed_buffers;
	char fallback_reason[192];
	char error[512];
};
/* Write st into the caller's stats (its size checked before). */
void pin__io_stats_put(struct pin_io_stats *out,
		       const struct pin__io_stats *st);

/*
 * An array the caller passes in, as the library's elements in a new
 * *copy (free it): -EINVAL for element 0's size, -E2BIG for a set byte
 * past the library's fields, -ENOMEM.
 */
int pin__array_in(const void *arr, size_t n, size_t elem_size,
		  size_t min_size, void **copy);
/* A handle-less call's failure text into the caller's why buffer. */
void pin__why(char *why, size_t len, const char *text);

/* error.c: write the text, return err (a negative errno) for tail calls. */
int pin__fail(char *buf, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
int pin__vfail(char *buf, int err, const char *fmt, va_list ap)
	__attribute__((format(printf, 3, 0)));
/* strerror_r into a caller buffer, thread-safe. */
const char *pin__strerror(int err, char *buf, size_t len);

/* Find the mapping record of addr in v; NULL if v did not make it. */
struct pin_view_mapping *pin__view_mapping(struct pin_view *v, void *addr);

/*
 * scm_send.c: send len bytes of buf as one message on sock, with fd
 * (SCM_RIGHTS) unless it is negative; MSG_NOSIGNAL and flags; 0, -EIO
 * when fewer bytes went, or -errno.
 */
int pin__scm_send(int sock, const void *buf, size_t len, int fd, int flags);

/* Device ioctl wrapper: 0 or -errno, restarting on EINTR only if asked. */
int pin__ioctl(int fd, unsigned long req, void *arg);

/*
 * pin_region_create for pin__fill_from_file: a portable small-page region comes
 * without its pages (the fill allocates and locks them in one pass).
 */
int pin__alloc_to_fill(struct pin_dev *dev, uint64_t size, unsigned flags,
		       int node, struct pin_region **rp);

/* portable.c */
int pin__portable_alloc(struct pin_dev *dev, uint64_t size,
			struct pin_region *r, int lazy);

/* numa_place.c */
/* Check node and flags (PIN_REGION_ANY_NODE) for size bytes; fill place. */
int pin__place_portable(char *err, int node, unsigned flags, uint64_t size,
			struct pin__place *place);
/* Bind the calling thread to place until pin__place_leave; -errno. */
int pin__place_enter(const struct pin__place *place,
		     struct pin__place_scope *s);
void pin__place_leave(struct pin__place_scope *s);
/* pin_region_nodes of a portable region. */
int pin__portable_nodes(struct pin_region *r, uint64_t *bytes,
			unsigned capacity);
int pin__portable_import(struct pin_dev *dev, int fd, struct pin_region *r);
int pin__portable_sealed(int fd);
int pin__portable_seal(struct pin_region *r);
int pin__portable_view(struct pin_region *r, uint64_t offset,
		       uint64_t length, unsigned flags, struct pin_view *v);
int pin__portable_view_import(struct pin_dev *dev, int fd,
			      struct pin_view *v);
int pin__portable_info(struct pin_region *r, struct pin_region_info *info);
int pin__portable_unsupported(char *err, const char *what);
int pin__fallocate(int fd, uint64_t off, uint64_t len);

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ	22	/* Linux 5.14 */
#endif
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE	23
#endif

/* shmem_thp.c */
#define PIN_THP_SYSFS	"/sys/kernel/mm/transparent_hugepage"
int pin__shmem_thp_advise(const char *thp_dir);

/* records.c */
/*
 * A record query (LIST, HOLDERS, REFS): its ioctl and struct, whose array
 * pointer, capacity and count fields are at ptr, capacity and count;
 * records of rec_size bytes; put() hands record i on into the caller's
 * array of stride bytes (pin__array_put).
 */
struct pin__records {
	unsigned long req;
	void *arg;
	__u64 *ptr;
	__u32 *capacity;
	const __u32 *count;
	size_t rec_size;
	void (*put)(void *out, size_t stride, size_t i, const void *rec);
};
/* The records, up to cap of them, into out; their count or -errno. */
int pin__records(int fd, const struct pin__records *q, void *out,
		 size_t stride, size_t cap);

/* dev.c: struct pinmem_region_info -> struct pin_region_info */
void pin__info_from_uapi(struct pin_region_info *info, const void *uinfo);

/* holders.c */
/* HOLDERS on fd (region or view fd with id 0, device fd with an id). */
/* Fills holders as an array of stride bytes (pin__array_put). */
int pin__holders_ioctl(int fd, uint64_t id, void *holders, size_t stride,
		       size_t cap);
/* Append the holders of r that keep op from succeeding to r->err. */
void pin__explain_busy(struct pin_region *r, const char *op, int writable_only);

/* refs.c */
/*
 * Declare (add) or take back libpin's own registration of [addr, +len)
 * if it lies in r's owner mapping; returns 1 when a declaration was made.
 */
int pin__refs_declare(struct pin_region *r, const void *addr, uint64_t len,
		      unsigned flags, int add);
void pin__refs_hold(struct pin__refs_hold *h, struct pin_region *r,
		    const void *addr, uint64_t len, unsigned flags);
void pin__refs_release(struct pin__refs_hold *h);
/* Append the referenced ranges of r to r->err at off; how many there are. */
int pin__explain_refs(struct pin_region *r, size_t off);

#pragma GCC visibility pop

#endif /* LIBPIN_INTERNAL_H */
