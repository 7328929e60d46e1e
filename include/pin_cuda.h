/* SPDX-License-Identifier: MIT */
/*
 * libpin: CUDA registration of owner and view mappings, through the CUDA
 * driver loaded at run time.
 *
 * Part of libpin's public API: pin.h includes it, and the conventions at
 * the top of pin.h hold here too. Programs include <pin.h>; this header
 * also compiles on its own.
 */
#ifndef PIN_CUDA_H
#define PIN_CUDA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct pin_region;	/* pin.h */
struct pin_view;	/* pin.h */

/*
 * cuMemHostRegister of owner and view mappings, through the CUDA driver
 * loaded at run time: libpin has no link-time CUDA dependency. A handle
 * holds the loaded driver and the retained primary context of one device;
 * every driver call runs with that context pushed and pops it again, so the
 * caller's current context is untouched. Registrations are PORTABLE (pinned
 * for every context of the process) and made of pieces of at most
 * PIN_CUDA_CHUNK_MAX bytes, one cuMemHostRegister each, cut at region
 * offsets that are multiples of the piece size (so on chunk and huge page
 * boundaries); unregistering passes the same bases. A registration is
 * every piece or none. Where the device reports
 * CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM, the
 * mapping's own addresses work on the device across pieces; a
 * cuMemHostGetDevicePointer is per piece and covers that piece alone
 * (libpin asks for none). While registered, pin_region_close,
 * pin_region_unmap and pin_view_unmap of that mapping return -EBUSY.
 * Unregister a view's mappings before pin_view_close of that view.
 */
struct pin_cuda;

#define PIN_CUDA_DEVICEMAP	(1U << 0)	/* + CU_MEMHOSTREGISTER_DEVICEMAP */
#define PIN_CUDA_READ_ONLY	(1U << 1)	/* + CU_MEMHOSTREGISTER_READ_ONLY */

/*
 * The largest range handed to one cuMemHostRegister call: 32 GiB. Drivers
 * refuse a range of 512 GiB or more, and on some hosts fail now and then
 * above about 96 GiB; a third of that leaves a margin and costs nothing
 * (pinning is paid per page; 1 TiB is 32 calls). A multiple of every huge
 * page size (2 MiB, 1 GiB).
 */
#define PIN_CUDA_CHUNK_MAX	(32ULL << 30)

/* Options of pin_cuda_open; NULL: none. */
struct pin_cuda_opts {
	uint32_t size;			/* sizeof(struct pin_cuda_opts) */
	uint32_t flags;			/* none yet: 0 */
	char *why;			/* on failure, why; may be NULL */
	size_t why_len;
};

/*
 * Load the driver and retain the primary context of device ordinal device
 * (0 for the first GPU). The driver is dlopen("libcuda.so.1"), or the file
 * named by the environment variable PIN_CUDA_LIBRARY. For tests only,
 * PIN_CUDA_TEST_CHUNK=BYTES (a multiple of 2 MiB, the region's chunk, at
 * most PIN_CUDA_CHUNK_MAX) lowers the piece size so that pieces show on
 * small regions.
 * Errors: -ENOENT (no driver: dlopen failed; the text names the file and
 * dlerror()), -ENOSYS (the driver lacks an entry point), -ENODEV (cuInit,
 * cuDeviceGet or the primary context failed; the text names the CUresult),
 * -EINVAL (device < 0, bad PIN_CUDA_TEST_CHUNK, opts), -E2BIG (opts),
 * -ENOMEM. On failure *cp is NULL and opts->why says why in words. A
 * driver that got as
 * far as cuInit stays loaded for the life of the process (unloading a CUDA
 * driver is not safe); one that failed to load or lacks an entry point
 * does not.
 */
int pin_cuda_open(struct pin_cuda **cp, int device,
		  const struct pin_cuda_opts *opts);
/* Unregister what is still registered through c, release, unload. */
void pin_cuda_close(struct pin_cuda *c);
const char *pin_cuda_error(const struct pin_cuda *c);
/* The piece size in force: PIN_CUDA_CHUNK_MAX unless a test lowered it. */
uint64_t pin_cuda_chunk_max(const struct pin_cuda *c);

/*
 * The NUMA node of c's GPU (cuDeviceGetPCIBusId, then pin_pci_numa_node),
 * for pin_region_create's PIN_REGION_NODE: -1 when the platform says
 * none, -ENOSYS (the driver lacks cuDeviceGetPCIBusId), -EIO (it failed),
 * -ENOENT.
 */
int pin_cuda_numa_node(struct pin_cuda *c);

/*
 * Register the region's owner mapping (made by pin_region_map if there is
 * none yet). flags: PIN_CUDA_DEVICEMAP, PIN_CUDA_READ_ONLY (implied when
 * the owner mapping is read-only). If a piece fails, the pieces before it
 * are unregistered again. Errors: -EINVAL (flags), -EBUSY (already
 * registered), the mapping's errors, and the driver's CUresult as an
 * errno: INVALID_VALUE -EINVAL, OUT_OF_MEMORY -ENOMEM,
 * HOST_MEMORY_ALREADY_REGISTERED -EBUSY, NOT_PERMITTED -EPERM,
 * NOT_SUPPORTED -EOPNOTSUPP, others -EIO; pin_cuda_error(c) names the
 * CUresult, the piece ("piece K of N at offset B of L bytes") and its
 * address and length.
 */
int pin_cuda_register(struct pin_cuda *c, struct pin_region *r,
		      unsigned flags);
/*
 * Unregisters every piece, also past one the driver refuses (the first
 * refusal is returned and named); refused pieces stay registered, and
 * another call tries those alone. -ENOENT if r is not registered through c.
 */
int pin_cuda_unregister(struct pin_cuda *c, struct pin_region *r);

/*
 * The same for the view mapping at addr (made by pin_view_map of v).
 * PIN_CUDA_READ_ONLY is implied for a mapping without PROT_WRITE.
 * -EINVAL if addr is not such a mapping; on unregister -ENOENT if it is
 * not registered through c.
 */
int pin_cuda_register_view(struct pin_cuda *c, struct pin_view *v,
			   void *addr, unsigned flags);
int pin_cuda_unregister_view(struct pin_cuda *c, struct pin_view *v,
			     void *addr);

#ifdef __cplusplus
}
#endif

#endif /* PIN_CUDA_H */
