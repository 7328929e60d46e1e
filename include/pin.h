/* SPDX-License-Identifier: MIT */
/*
 * libpin: pinned host memory whose sharing and reuse the kernel arbitrates.
 *
 * Conventions, for every function below:
 *  - Functions returning int return 0 (or a count where said) on success
 *    and a negative errno value on failure; they never set errno for you.
 *  - Each handle (struct pin_dev, pin_region, pin_view, pin_cuda) keeps a
 *    description in words of its last failure: pin_*_error(). It stays
 *    valid until the next call on the same handle.
 *  - Distinct handles may be used from distinct threads at once; one handle
 *    must not be used from two threads at once. libpin has no global state.
 *  - Every object a function hands out has one owner: the caller, who ends
 *    it with the matching close/free call.
 *
 * Two backends serve the same API:
 *  - PIN_BACKEND_DEVICE: /dev/pinmem (pinmem.ko). The kernel counts every
 *    mapping and arbitrates seal/donate.
 *  - PIN_BACKEND_PORTABLE: memfd (MFD_HUGETLB when the pool has pages, else
 *    MADV_HUGEPAGE) with mlock. Seal is F_SEAL_WRITE; donate, publish,
 *    reopen and holders answer -EOPNOTSUPP: there is no kernel-arbitrated
 *    donation without the module.
 *    What differs there: the region id is the memfd's inode number; a view
 *    fd is the memfd reopened read-only (or read-write), so an imported
 *    view covers the whole region; mlock failure of the owner mapping is
 *    not fatal (pin_region_map succeeds, pin_region_error says so); sealing
 *    remaps the owner mapping read-only in place (memfd counts it as a
 *    writable mapping otherwise), and a later owner mapping is read-only;
 *    pin_region_info counts only this handle's owner mapping (views 0).
 */
#ifndef PIN_H
#define PIN_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Device ------------------------------------------------------------ */

struct pin_dev;

#define PIN_BACKEND_AUTO	0	/* the device when present, else portable */
#define PIN_BACKEND_DEVICE	1	/* /dev/pinmem or fail */
#define PIN_BACKEND_PORTABLE	2	/* memfd, even when the device exists */

/*
 * Open a backend. PIN_BACKEND_AUTO picks the device when /dev/pinmem can be
 * opened. The environment variable PIN_BACKEND=device|portable overrides
 * AUTO (for tests and tools). Errors: -ENOENT (DEVICE asked, no device),
 * -EPROTO (module ABI too old or too new for this library), -ENOMEM,
 * -EINVAL (unknown backend).
 * On failure *devp is NULL and nothing is left open.
 */
int pin_open(struct pin_dev **devp, int backend);
void pin_close(struct pin_dev *dev);
int pin_dev_backend(const struct pin_dev *dev);	/* PIN_BACKEND_DEVICE/_PORTABLE */
const char *pin_backend_name(int backend);		/* "device", "portable" */
const char *pin_dev_error(const struct pin_dev *dev);

struct pin_dev_info {
	int backend;
	uint32_t abi_version;		/* 0 on the portable backend */
	uint32_t abi_min_compat;
	uint64_t chunk_size;		/* 2 MiB */
	uint64_t max_total_bytes;	/* 0: no module limit */
	uint64_t max_region_bytes;	/* 0: no module limit */
	uint64_t total_bytes;		/* device-wide; 0 on portable */
	uint64_t nr_regions;
	uint64_t nr_mappings;
	uint64_t nr_view_fds;
};

int pin_dev_info(struct pin_dev *dev, struct pin_dev_info *info);

/* ---- Regions ----------------------------------------------------------- */

struct pin_region;

#define PIN_ALLOC_FALLBACK	(1U << 0)	/* allow chunks below 2 MiB */

#define PIN_STATE_OPEN		1
#define PIN_STATE_SEALED	2
#define PIN_STATE_DONATED	3

const char *pin_state_name(int state);	/* "open", "sealed", "donated" */

struct pin_region_info {
	uint64_t id;
	uint64_t size;
	int state;			/* PIN_STATE_* */
	int donate_pending;		/* a donate is waiting for views to drain */
	unsigned chunk_order;		/* 9 */
	unsigned min_order;		/* < chunk_order only after a fallback */
	uint64_t nr_chunks;
	uint64_t nr_fallback_chunks;
	uint64_t owner_mappings;
	uint64_t view_mappings;
	uint64_t writable_view_mappings;
	uint64_t view_fds;
	uid_t owner_uid;
	pid_t owner_pid;
};

/*
 * Allocate a zeroed, pinned region of at least size bytes (rounded up to a
 * page). Errors: -EINVAL (size 0 or over the per-region limit, flags),
 * -ENOSPC (device-wide limit), -ENOMEM (RLIMIT_MEMLOCK, cgroup, no huge
 * pages without PIN_ALLOC_FALLBACK), -EINTR.
 */
int pin_alloc(struct pin_dev *dev, uint64_t size, unsigned flags,
	      struct pin_region **rp);

/*
 * Take a region fd (from another process, say). The handle owns a
 * duplicate of fd; the caller keeps fd. -EBADF/-EINVAL if fd is not a region
 * of this backend.
 */
int pin_region_import(struct pin_dev *dev, int fd, struct pin_region **rp);

/*
 * End the handle: unmap its owner mapping, close its fd. Views and view
 * mappings made from it stay valid (the kernel keeps the pages). -EBUSY,
 * and nothing is freed, while its owner mapping is registered with CUDA.
 */
int pin_region_free(struct pin_region *r);

int pin_region_fd(const struct pin_region *r);		/* owned by the handle */
uint64_t pin_region_size(const struct pin_region *r);
uint64_t pin_region_id(const struct pin_region *r);
const char *pin_region_error(const struct pin_region *r);

/*
 * The owner mapping: the whole region, read-write, made on first call and
 * kept by the handle (later calls return the same address).
 */
int pin_region_map(struct pin_region *r, void **addrp);
/* Unmap the owner mapping; -EBUSY while registered with CUDA. */
int pin_region_unmap(struct pin_region *r);

int pin_region_info(struct pin_region *r, struct pin_region_info *info);

/*
 * State changes (see DESIGN.md). On -EBUSY the region's error text names
 * the holders: pid, command, address range and protection.
 *  pin_seal:    -EBUSY while a writable view mapping exists; -EPERM if
 *               donated.
 *  pin_donate:  -EBUSY while a view mapping exists (timeout_ms 0: no wait);
 *               with timeout_ms > 0 waits, then -ETIMEDOUT; -EINTR on a
 *               signal; timeout_ms < 0 waits without limit.
 *  pin_publish: donated -> sealed, else -EPERM.
 *  pin_reopen:  donated -> open, else -EPERM.
 * On the portable backend donate/publish/reopen return -EOPNOTSUPP.
 */
int pin_seal(struct pin_region *r);
int pin_donate(struct pin_region *r, int timeout_ms);
int pin_publish(struct pin_region *r);
int pin_reopen(struct pin_region *r);

#define PIN_HOLDER_OWNER	1
#define PIN_HOLDER_VIEW		2

struct pin_holder {
	pid_t pid;
	int kind;		/* PIN_HOLDER_* */
	uint64_t start;		/* address in that process */
	uint64_t length;
	uint64_t offset;	/* into the region */
	int prot;		/* PROT_* */
	int maywrite;		/* counts as a writable mapping */
	char comm[16];
};

/*
 * Every mapping of the region. Fills up to cap records; returns the number
 * of mappings that exist (which may exceed cap). -EOPNOTSUPP on portable.
 */
int pin_holders(struct pin_region *r, struct pin_holder *holders, size_t cap);

/*
 * Format one holder as "pid 123 (python3) view 0x7f..-0x7f.. r-- at +0x0".
 * Returns the length written, -ENOSPC if buf was too small (cut short).
 */
int pin_holder_format(const struct pin_holder *h, char *buf, size_t len);

/*
 * Device-wide queries by region id (pinctl): the regions the caller may see
 * (its own uid, or all with CAP_SYS_ADMIN), ordered by id, and the mappings
 * of one of them. Both fill up to cap records and return the number that
 * exist (which may exceed cap). pin_dev_holders: -ENOENT for an id that is
 * unknown or not the caller's. -EOPNOTSUPP on portable.
 */
int pin_dev_list(struct pin_dev *dev, struct pin_region_info *infos,
		 size_t cap);
int pin_dev_holders(struct pin_dev *dev, uint64_t id,
		    struct pin_holder *holders, size_t cap);

/* ---- Views ------------------------------------------------------------- */

struct pin_view;

#define PIN_VIEW_WRITE	(1U << 0)	/* read-write; the region must be open */

/*
 * A view fd over [offset, offset + length) of the region; page multiples,
 * length > 0. Read-only unless PIN_VIEW_WRITE. Errors: -EINVAL (range,
 * flags), -EPERM (PIN_VIEW_WRITE and the region is not open).
 */
int pin_view_create(struct pin_region *r, uint64_t offset, uint64_t length,
		    unsigned flags, struct pin_view **vp);
/* Take a view fd; the handle owns a duplicate, the caller keeps fd. */
int pin_view_import(struct pin_dev *dev, int fd, struct pin_view **vp);
/* Close the view fd. Mappings made from it stay valid until unmapped. */
void pin_view_close(struct pin_view *v);

int pin_view_fd(const struct pin_view *v);
uint64_t pin_view_length(const struct pin_view *v);
uint64_t pin_view_offset(const struct pin_view *v);	/* into the region */
int pin_view_writable(const struct pin_view *v);
const char *pin_view_error(const struct pin_view *v);

/*
 * Make a new view mapping of the whole view; prot is PROT_READ or
 * PROT_READ|PROT_WRITE. Each call is its own mapping, counted by the
 * kernel until pin_view_unmap (or munmap, or exit).
 * Errors: -EBUSY (donated, or a donate waits), -EPERM (write, not open),
 * -EACCES (write through a read-only view).
 */
int pin_view_map(struct pin_view *v, int prot, void **addrp);
/* Unmap a mapping made by pin_view_map; -EBUSY while CUDA-registered. */
int pin_view_unmap(struct pin_view *v, void *addr);

/* ---- Passing fds between processes (SCM_RIGHTS over a Unix socket) ----- */

/* Sends one fd with a one-byte message; restarts on EINTR. */
int pin_send_fd(int sock, int fd);
/*
 * Receives one fd (O_CLOEXEC) into *fdp. -ECONNRESET on end of stream;
 * -EPROTO (and nothing kept open) for a message that carried no fd, more
 * than one, or had its control data truncated. Restarts on EINTR.
 */
int pin_recv_fd(int sock, int *fdp);

/* ---- CUDA registration ------------------------------------------------- */

/*
 * cuMemHostRegister of owner and view mappings, through the CUDA driver
 * loaded at run time: libpin has no link-time CUDA dependency. A handle
 * holds the loaded driver and the retained primary context of one device;
 * every driver call runs with that context pushed and pops it again, so the
 * caller's current context is untouched. Registrations are PORTABLE (pinned
 * for every context of the process) and split into chunks of at most
 * PIN_CUDA_CHUNK_MAX bytes, one cuMemHostRegister each; unregistering
 * passes the same bases. While registered, pin_region_free,
 * pin_region_unmap and pin_view_unmap of that mapping return -EBUSY.
 * Unregister a view's mappings before pin_view_close of that view.
 */
struct pin_cuda;

#define PIN_CUDA_DEVICEMAP	(1U << 0)	/* + CU_MEMHOSTREGISTER_DEVICEMAP */
#define PIN_CUDA_READ_ONLY	(1U << 1)	/* + CU_MEMHOSTREGISTER_READ_ONLY */

/* The largest range handed to one cuMemHostRegister call: 64 GiB. */
#define PIN_CUDA_CHUNK_MAX	(64ULL << 30)

/*
 * Load the driver and retain the primary context of device ordinal device
 * (0 for the first GPU). The driver is dlopen("libcuda.so.1"), or the file
 * named by the environment variable PIN_CUDA_LIBRARY. For tests only,
 * PIN_CUDA_TEST_CHUNK=BYTES (a page multiple, at most PIN_CUDA_CHUNK_MAX)
 * lowers the chunk size so that chunking shows on small regions.
 * Errors: -ENOENT (no driver: dlopen failed; the text names the file and
 * dlerror()), -ENOSYS (the driver lacks an entry point), -ENODEV (cuInit,
 * cuDeviceGet or the primary context failed; the text names the CUresult),
 * -EINVAL (device < 0, bad PIN_CUDA_TEST_CHUNK), -ENOMEM.
 * On failure *cp is NULL and, if errbuf is not NULL, the reason in words
 * is written there (at most errlen bytes, with NUL). A driver that got as
 * far as cuInit stays loaded for the life of the process (unloading a CUDA
 * driver is not safe); one that failed to load or lacks an entry point
 * does not.
 */
int pin_cuda_open(struct pin_cuda **cp, int device, char *errbuf,
		  size_t errlen);
/* Unregister what is still registered through c, release, unload. */
void pin_cuda_close(struct pin_cuda *c);
const char *pin_cuda_error(const struct pin_cuda *c);
/* The chunk size in force: PIN_CUDA_CHUNK_MAX unless a test lowered it. */
uint64_t pin_cuda_chunk_max(const struct pin_cuda *c);

/*
 * Register the region's owner mapping (made by pin_region_map if there is
 * none yet). flags: PIN_CUDA_DEVICEMAP, PIN_CUDA_READ_ONLY (implied when
 * the owner mapping is read-only). If a chunk fails, the chunks before it
 * are unregistered again. Errors: -EINVAL (flags), -EBUSY (already
 * registered), the mapping's errors, and the driver's CUresult as an
 * errno: INVALID_VALUE -EINVAL, OUT_OF_MEMORY -ENOMEM,
 * HOST_MEMORY_ALREADY_REGISTERED -EBUSY, NOT_PERMITTED -EPERM,
 * NOT_SUPPORTED -EOPNOTSUPP, others -EIO; pin_cuda_error(c) names the
 * CUresult and the chunk.
 */
int pin_cuda_register(struct pin_cuda *c, struct pin_region *r,
		      unsigned flags);
/* -ENOENT if r is not registered through c. */
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

#endif /* PIN_H */
