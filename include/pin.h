/* SPDX-License-Identifier: MIT */
/*
 * libpin: pinned host memory whose sharing and reuse the kernel arbitrates.
 *
 * This header holds devices, regions, page references, views and fd
 * passing, and includes the rest of the API, a header per concern:
 * pin_io.h (checkpoint I/O), pin_st.h (safetensors), pin_cuda.h (CUDA
 * registration) and pin_cache.h (checkpoints shared through pinmem-cached).
 * Programs include <pin.h>.
 *
 * Conventions, for every function below and in those headers:
 *  - Names are pin_<object>_<verb>: pin_dev_*, pin_region_*, pin_view_*,
 *    pin_st_* (checkpoints), pin_cuda_*, pin_file_* (plain memory to and
 *    from files), pin_fd_*. A handle is made by _open, _create or
 *    _import and ended by _close.
 *  - Functions returning int return 0 (or a count where said) on success
 *    and a negative errno value on failure; they never set errno for you.
 *  - Error text, one way: each handle (struct pin_dev, pin_region,
 *    pin_view, pin_st, pin_cuda) keeps a description in words of its last
 *    failure, pin_<kind>_error(handle), valid until the next call on the
 *    same handle. A call that has no handle to keep it (pin_dev_open and
 *    pin_cuda_open failing before there is one, pin_file_read,
 *    pin_file_write) writes it to the why buffer of its options (why,
 *    why_len bytes with the NUL, cut to fit; NULL: none), "" on success.
 *  - Extensible structs: a struct that may grow begins with uint32_t size,
 *    which the caller sets to sizeof the struct it was compiled with:
 *    `struct pin_region_opts o = PIN_INIT(struct pin_region_opts);` (the
 *    other fields zero), or a designated initializer with .size first.
 *    Options (in): NULL means every default; a size below the struct's
 *    size in 1.0 is -EINVAL; bytes past the fields this libpin knows must
 *    be zero, else -E2BIG (an option it cannot honour is never ignored).
 *    Results (out): a size below 1.0's is -EINVAL; libpin fills the fields
 *    it knows, zeroes the bytes past them up to size and leaves size as it
 *    was. Arrays: the size of element 0 is the stride of the whole array
 *    (the others need not be set); libpin sets it in each element it
 *    fills.
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
 *    pin_region_info counts only this handle's owner mapping (views 0);
 *    on a hugetlb memfd views must be 2 MiB aligned (-EINVAL otherwise).
 */
#ifndef PIN_H
#define PIN_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "pin_version.h"	/* PIN_VERSION_MAJOR/_MINOR/_PATCH/_STRING */

#ifdef __cplusplus
extern "C" {
#endif

/* An extensible struct with its size set and every other field zero. */
#define PIN_INIT(type)	((type){ .size = sizeof(type) })

/*
 * The version of the libpin that is running, "MAJOR.MINOR.PATCH" (the
 * macros give the version compiled against). The project has one version:
 * libpin's, pinmem.ko's (/sys/module/pinmem/version), the tools'.
 */
const char *pin_version(void);

/* ---- Device ------------------------------------------------------------ */

struct pin_dev;

#define PIN_BACKEND_AUTO	0	/* the device when present, else portable */
#define PIN_BACKEND_DEVICE	1	/* /dev/pinmem or fail */
#define PIN_BACKEND_PORTABLE	2	/* memfd, even when the device exists */

/* Options of pin_dev_open; NULL: none. */
struct pin_dev_opts {
	uint32_t size;			/* sizeof(struct pin_dev_opts) */
	uint32_t flags;			/* none yet: 0 */
	char *why;			/* on failure, why; may be NULL */
	size_t why_len;
};

/*
 * Open a backend. PIN_BACKEND_AUTO picks the device when /dev/pinmem exists
 * and the portable backend only when it does not (the module is not
 * loaded): a device this user may not open (-EACCES/-EPERM) or whose ABI
 * does not fit this library (-EPROTO) fails, it is never a silent
 * downgrade. The environment variable PIN_BACKEND=auto|device|portable
 * overrides AUTO (for tests and tools). Errors: -ENOENT (DEVICE asked, no
 * device), -EACCES/-EPERM, -EPROTO (module ABI too old or too new for this
 * library), -ENODEV (something else at /dev/pinmem), -ENOMEM, -EINVAL
 * (unknown backend, or a bad PIN_BACKEND, opts), -E2BIG (opts).
 * On failure *devp is NULL, nothing is left open, and opts->why says why
 * in words with the command that fixes it (group membership, module
 * version, "sudo modprobe pinmem"); tools print it as it is.
 */
int pin_dev_open(struct pin_dev **devp, int backend,
		 const struct pin_dev_opts *opts);
/*
 * Which backend the handle uses and why, in words: "device /dev/pinmem:
 * pinmem.ko 0.2.0, ABI 1; ...", or "portable (memfd), no kernel
 * arbitration: /dev/pinmem is absent: the pinmem module is not loaded
 * (load it: sudo modprobe pinmem)". Valid while the handle is open.
 */
const char *pin_dev_backend_why(const struct pin_dev *dev);
void pin_dev_close(struct pin_dev *dev);
int pin_dev_backend(const struct pin_dev *dev);	/* PIN_BACKEND_DEVICE/_PORTABLE */
const char *pin_backend_name(int backend);		/* "device", "portable" */
const char *pin_dev_error(const struct pin_dev *dev);

struct pin_dev_info {
	uint32_t size;			/* set by the caller */
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

#define PIN_REGION_FALLBACK	(1U << 0)	/* allow chunks below 2 MiB */
#define PIN_REGION_ANY_NODE	(1U << 1)	/* with PIN_REGION_NODE: prefer
						 * the node, let others serve
						 * what it cannot */
#define PIN_REGION_NODE		(1U << 2)	/* place on opts->node */

/*
 * Options of pin_region_create; NULL: none (2 MiB chunks only, the
 * caller's mempolicy).
 */
struct pin_region_opts {
	uint32_t size;			/* sizeof(struct pin_region_opts) */
	uint32_t flags;			/* PIN_REGION_* */
	int32_t node;			/* NUMA node, with PIN_REGION_NODE */
};

#define PIN_STATE_OPEN		1
#define PIN_STATE_SEALED	2
#define PIN_STATE_DONATED	3

const char *pin_state_name(int state);	/* "open", "sealed", "donated" */

struct pin_region_info {
	uint32_t size;			/* set by the caller */
	uint64_t id;
	uint64_t region_size;		/* bytes, as pin_region_size */
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
 * pages without PIN_REGION_FALLBACK), -EINTR, -E2BIG (opts).
 *
 * With PIN_REGION_NODE, on NUMA node opts->node (>= 0): every chunk from
 * that node, else -ENOMEM (a node without memory, or too little free on
 * it), unless PIN_REGION_ANY_NODE. Without PIN_REGION_NODE: the caller's
 * mempolicy. -EINVAL: no such node online, or ANY_NODE without NODE.
 * -EOPNOTSUPP: a module older than ABI 3. On the portable backend the
 * allocating thread is bound to the node (MPOL_BIND, or MPOL_PREFERRED
 * with ANY_NODE) for the time of the allocation: a node without memory,
 * or with less in all than size, is -ENOMEM, but one that runs short
 * meets the kernel's reclaim and OOM killer, as numactl --membind does.
 */
int pin_region_create(struct pin_dev *dev, uint64_t size,
		      const struct pin_region_opts *opts,
		      struct pin_region **rp);

/*
 * Where the region's memory lies: bytes[n] (n < capacity) gets the bytes
 * on NUMA node n (whole 2 MiB chunks; on the portable backend whole pages,
 * read with move_pages(2), pages not yet allocated on no node). Returns
 * the number of node ids the kernel has (so capacity 0 asks for it), or
 * -EOPNOTSUPP (module before ABI 3).
 */
int pin_region_nodes(struct pin_region *r, uint64_t *bytes,
		     unsigned capacity);
/* The same by region id (its owner's uid, or CAP_SYS_ADMIN; else -ENOENT). */
int pin_dev_region_nodes(struct pin_dev *dev, uint64_t region_id,
			 uint64_t *bytes, unsigned capacity);

/*
 * The NUMA node of a PCI device, from /sys/bus/pci/devices/ID/numa_node;
 * bus_id as CUDA or lspci write it ("00000000:3B:00.0", "3b:00.0").
 * -1 when the platform says none; -EINVAL (malformed), -ENOENT (no such
 * device). pin_cuda_numa_node does this for a CUDA device.
 */
int pin_pci_numa_node(const char *bus_id);

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
int pin_region_close(struct pin_region *r);

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
 * State changes (see Documentation/design.md). On -EBUSY the region's error text names
 * the holders: pid, command, address range and protection.
 *  pin_region_seal: -EBUSY while a writable view mapping exists, or
 *      references taken through one remain (O_DIRECT still writing);
 *      -EPERM if donated.
 *  pin_region_donate: -EBUSY while a view mapping exists, or while
 *      references taken through views remain (see pin_region_refs; after
 *      a grace of about 63 ms for transient ones) (timeout_ms 0: no
 *      wait); with timeout_ms > 0 waits for both, then -ETIMEDOUT, never
 *      before timeout_ms have passed (CLOCK_MONOTONIC, as poll()); -EINTR
 *      on a signal (io_uring completions do not interrupt it);
 *      timeout_ms < 0 waits without limit. The error text names the
 *      views, or the referenced bytes.
 *  pin_region_publish: donated -> sealed, else -EPERM.
 *  pin_region_reopen: donated -> open, else -EPERM.
 * On the portable backend donate/publish/reopen return -EOPNOTSUPP.
 */
int pin_region_seal(struct pin_region *r);
int pin_region_donate(struct pin_region *r, int timeout_ms);
int pin_region_publish(struct pin_region *r);
int pin_region_reopen(struct pin_region *r);

#define PIN_HOLDER_OWNER	1
#define PIN_HOLDER_VIEW		2

struct pin_holder {
	uint32_t size;		/* set by the caller (element 0) */
	pid_t pid;
	int kind;		/* PIN_HOLDER_* */
	uint64_t start;		/* address in that process; 0: withheld
				 * (another user's process, see below) */
	uint64_t length;
	uint64_t offset;	/* into the region */
	int prot;		/* PROT_* */
	int maywrite;		/* counts as a writable mapping */
	char comm[16];
};

/*
 * Every mapping of the region. Fills up to cap records; returns the number
 * of mappings that exist (which may exceed cap). -EOPNOTSUPP on portable.
 * The kernel withholds (start 0) the address of a mapping in a process of
 * another user unless the caller has CAP_SYS_PTRACE.
 */
int pin_region_holders(struct pin_region *r, struct pin_holder *holders,
		       size_t cap);

/*
 * Format one holder as "pid 123 (python3) view 0x7f..-0x7f.. r-- at +0x0".
 * Returns the length written, -ENOSPC if buf was too small (cut short).
 */
int pin_holder_format(const struct pin_holder *h, char *buf, size_t len);

/*
 * Device-wide queries by region id (pinctl): the regions the caller may see
 * (its own uid, or all with CAP_SYS_ADMIN), ordered by id, and the mappings
 * of one of them. Both fill up to cap records and return the number that
 * exist (which may exceed cap). pin_dev_region_holders: -ENOENT for an
 * id that is unknown or not the caller's. -EOPNOTSUPP on portable.
 */
int pin_dev_regions(struct pin_dev *dev, struct pin_region_info *infos,
		    size_t cap);
int pin_dev_region_holders(struct pin_dev *dev, uint64_t id,
			   struct pin_holder *holders, size_t cap);

/* ---- Page references ---------------------------------------------------- */

/*
 * Besides view mappings, a donation waits for page references taken
 * through views that outlive them (module ABI 2): a pipe holding
 * vmsplice'd pages, O_DIRECT in flight, an io_uring fixed buffer, a CUDA
 * registration of a view. The owner's own references never block when
 * they were taken before any view mapped those bytes; long-term ones it
 * takes later over its owner mapping are declared with pin_region_expect
 * (libpin does so itself for pin_cuda_register and for the fixed buffers
 * of its reads), declared before registering, removed after:
 *  PIN_EXPECT_PER_PAGE   one reference per 4 KiB page of the range
 *                        (cuMemHostRegister, AF_XDP, RDMA);
 *  PIN_EXPECT_PER_CHUNK  one per 2 MiB chunk the range touches (io_uring
 *                        fixed buffers);
 *  PIN_EXPECT_REMOVE     with one of them: take a declaration back.
 * offset and length are page multiples within the region. -EINVAL for
 * nonsense or removing more than was declared, -ENOSPC past the kernel's
 * bound per chunk, -EOPNOTSUPP on the portable backend or a module
 * before ABI 2.
 */
#define PIN_EXPECT_PER_PAGE	(1U << 0)
#define PIN_EXPECT_PER_CHUNK	(1U << 1)
#define PIN_EXPECT_REMOVE	(1U << 2)

int pin_region_expect(struct pin_region *r, uint64_t offset, uint64_t length,
		      unsigned flags);

/*
 * A run of the region's bytes referenced beyond their mappings and what
 * the owner may hold: refs references, pinned of them DMA pins
 * (FOLL_PIN), expected the owner's share. The kernel cannot say who holds
 * them, only where and how.
 */
struct pin_ref_range {
	uint32_t size;		/* set by the caller (element 0) */
	uint64_t offset;	/* into the region */
	uint64_t length;
	uint64_t refs;
	uint64_t pinned;
	uint64_t expected;
};

/*
 * The referenced runs of a region (pin_region_refs) or of a region by id
 * (pin_dev_region_refs, visible as for pin_dev_region_holders). Fill up
 * to cap runs, return how many exist; -EOPNOTSUPP on the portable
 * backend or a module before ABI 2.
 */
int pin_region_refs(struct pin_region *r, struct pin_ref_range *ranges,
		    size_t cap);
int pin_dev_region_refs(struct pin_dev *dev, uint64_t id,
			struct pin_ref_range *ranges, size_t cap);

/*
 * Format one run as "bytes [0 MiB, 2 MiB) referenced outside any mapping:
 * 512 DMA pins (an io_uring fixed buffer, a CUDA registration or O_DIRECT
 * through a view that is gone?)". Returns the length, -ENOSPC if cut.
 */
int pin_ref_format(const struct pin_ref_range *rr, char *buf, size_t len);

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
int pin_fd_send(int sock, int fd);
/*
 * Receives one fd (O_CLOEXEC) into *fdp. -ECONNRESET on end of stream;
 * -EPROTO (and nothing kept open) for a message that carried no fd, more
 * than one, or had its control data truncated. Restarts on EINTR.
 */
int pin_fd_recv(int sock, int *fdp);

#ifdef __cplusplus
}
#endif

/* The rest of the API, a header per concern; each compiles on its own. */
#include "pin_io.h"	/* checkpoint I/O */
#include "pin_st.h"	/* safetensors */
#include "pin_cuda.h"	/* CUDA registration */
#include "pin_cache.h"	/* one copy per host, from pinmem-cached */

#endif /* PIN_H */
