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

/*
 * Open a backend. PIN_BACKEND_AUTO picks the device when /dev/pinmem exists
 * and the portable backend only when it does not (the module is not
 * loaded): a device this user may not open (-EACCES/-EPERM) or whose ABI
 * does not fit this library (-EPROTO) fails, it is never a silent
 * downgrade. The environment variable PIN_BACKEND=auto|device|portable
 * overrides AUTO (for tests and tools). Errors: -ENOENT (DEVICE asked, no
 * device), -EACCES/-EPERM, -EPROTO (module ABI too old or too new for this
 * library), -ENODEV (something else at /dev/pinmem), -ENOMEM, -EINVAL
 * (unknown backend, or a bad PIN_BACKEND).
 * On failure *devp is NULL and nothing is left open.
 */
int pin_open(struct pin_dev **devp, int backend);
/*
 * pin_open, and on failure why in words with the command that fixes it
 * (group membership, module version, "sudo modprobe pinmem") in why[len]
 * (cut to fit; may be NULL). Tools print it as it is.
 */
int pin_open_why(struct pin_dev **devp, int backend, char *why, size_t len);
/*
 * Which backend the handle uses and why, in words: "device /dev/pinmem:
 * pinmem.ko 0.2.0, ABI 1; ...", or "portable (memfd), no kernel
 * arbitration: /dev/pinmem is absent: the pinmem module is not loaded
 * (load it: sudo modprobe pinmem)". Valid while the handle is open.
 */
const char *pin_dev_backend_why(const struct pin_dev *dev);
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

/* With a node: prefer it, but let other nodes serve what it cannot. */
#define PIN_ALLOC_ANY_NODE	(1U << 1)

/*
 * pin_alloc on NUMA node `node` (>= 0): every chunk from that node, else
 * -ENOMEM (a node without memory, or too little free on it), unless
 * PIN_ALLOC_ANY_NODE. node -1 is pin_alloc: the caller's mempolicy.
 * -EINVAL: no such node online, or ANY_NODE with node -1. -EOPNOTSUPP:
 * the portable backend, or a module older than ABI 3.
 */
int pin_alloc_on_node(struct pin_dev *dev, uint64_t size, unsigned flags,
		      int node, struct pin_region **rp);

/*
 * Where the region's memory lies: bytes[n] (n < capacity) gets the bytes
 * on NUMA node n (whole 2 MiB chunks). Returns the number of node ids the
 * kernel has (so capacity 0 asks for it), or -EOPNOTSUPP (portable
 * backend, module before ABI 3).
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
 *  pin_seal:    -EBUSY while a writable view mapping exists, or references
 *               taken through one remain (O_DIRECT still writing); -EPERM
 *               if donated.
 *  pin_donate:  -EBUSY while a view mapping exists, or while references
 *               taken through views remain (see pin_refs; after a grace
 *               of about 63 ms for transient ones) (timeout_ms 0: no
 *               wait); with timeout_ms > 0 waits for both, then
 *               -ETIMEDOUT; -EINTR on a signal (io_uring completions do
 *               not interrupt it); timeout_ms < 0 waits without limit.
 *               The error text names the views, or the referenced bytes.
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
	uint64_t offset;	/* into the region */
	uint64_t length;
	uint64_t refs;
	uint64_t pinned;
	uint64_t expected;
};

/*
 * The referenced runs of a region (pin_refs) or of a region by id
 * (pin_dev_refs, visible as for pin_dev_holders). Fills up to cap runs,
 * returns how many exist; -EOPNOTSUPP on the portable backend or a
 * module before ABI 2.
 */
int pin_refs(struct pin_region *r, struct pin_ref_range *ranges, size_t cap);
int pin_dev_refs(struct pin_dev *dev, uint64_t id,
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
int pin_send_fd(int sock, int fd);
/*
 * Receives one fd (O_CLOEXEC) into *fdp. -ECONNRESET on end of stream;
 * -EPROTO (and nothing kept open) for a message that carried no fd, more
 * than one, or had its control data truncated. Restarts on EINTR.
 */
int pin_recv_fd(int sock, int *fdp);

/* ---- Checkpoint I/O ---------------------------------------------------- */

/*
 * io_uring file I/O straight into pinned memory (or any memory): many
 * requests in flight, O_DIRECT where the filesystem allows it, a buffered
 * fallback where it refuses (reported, never silent), registered (fixed)
 * buffers where the kernel accepts them for the mapping.
 *
 * Reads move the aligned superset of the wanted byte range: file bytes
 * [file_off & ~(PIN_IO_ALIGN-1), roundup(file_off + len, PIN_IO_ALIGN)) are
 * read into the destination starting at its first byte, so the wanted
 * bytes land (file_off % PIN_IO_ALIGN) bytes in. The layout is the same on
 * the O_DIRECT and the buffered path. The destination must have room for
 * the whole superset (pin_io_span) and, for O_DIRECT, start on a
 * PIN_IO_ALIGN boundary (a region offset that is a page multiple does);
 * otherwise the call falls back to buffered reads and says so. Bytes of
 * the superset beyond end of file are left as they were.
 */
#define PIN_IO_ALIGN		4096U

#define PIN_IO_BUFFERED		(1U << 0)	/* never O_DIRECT */
#define PIN_IO_NO_FIXED		(1U << 1)	/* never register fixed buffers */
#define PIN_IO_PIN_FIRST	(1U << 2)	/* loads: pin all of the region
						 * before the first read (no
						 * overlap; to compare) */
#define PIN_IO_NO_KERNEL_FILL	(1U << 3)	/* loads, device backend: read
						 * through the mapping with
						 * io_uring, not the module's
						 * FILL (to compare) */

#define PIN_IO_DEFAULT_QUEUE_DEPTH	16U
#define PIN_IO_DEFAULT_REQUEST_SIZE	(4U << 20)
#define PIN_IO_MAX_QUEUE_DEPTH		256U
#define PIN_IO_MAX_REQUEST_SIZE		(64U << 20)

/*
 * A request answered EAGAIN or EINTR is sent again: the first 64 times at
 * once, then after a 1 ms pause each; one answered so more than this many
 * times in a row (about a second) fails the call with that error.
 */
#define PIN_IO_MAX_RETRIES		1000U

/* Called now and then as requests complete: done of total bytes so far. */
typedef void (*pin_io_progress_fn)(void *arg, uint64_t done, uint64_t total);

/* All fields zero (or a NULL opts pointer) means: defaults, O_DIRECT. */
struct pin_io_opts {
	unsigned queue_depth;		/* requests in flight, 1..256; 0: default */
	uint32_t request_size;		/* bytes, multiple of PIN_IO_ALIGN,
					 * up to 64 MiB; 0: default */
	unsigned flags;			/* PIN_IO_* */
	pin_io_progress_fn progress;	/* may be NULL */
	void *progress_arg;
};

/*
 * What one call did. Every I/O call fills the whole struct (it does not
 * add to earlier contents); on failure error[] says which file, which
 * offset and why.
 */
struct pin_io_stats {
	uint64_t bytes;			/* file bytes moved: the superset,
					 * less what lies past end of file */
	uint64_t ns;			/* wall time of the call */
	uint64_t io_ns;			/* of which moving bytes (no open,
					 * parse, allocation or seal) */
	uint64_t requests;		/* requests completed */
	uint64_t short_ios;		/* short transfers resubmitted */
	uint64_t retries;		/* EAGAIN/EINTR resubmissions */
	uint32_t queue_depth;		/* what was used */
	uint32_t request_size;
	int direct;			/* 1: every byte moved with O_DIRECT */
	int fixed_buffers;		/* 1: registered buffers were used */
	char fallback_reason[192];	/* why not O_DIRECT / not fixed, or "" */
	char error[512];		/* set on failure */
};

/* Bytes of destination a read of [file_off, file_off + len) needs. */
uint64_t pin_io_span(uint64_t file_off, uint64_t len);

/*
 * Read the aligned superset of [file_off, file_off + len) of path into
 * buf (buf_len bytes, >= pin_io_span). Returns the offset into buf of
 * file_off (>= 0), or a negative errno: -EINVAL (arguments, buf_len too
 * small), -EIO (end of file before file_off + len: the file is shorter),
 * -ESTALE (the file changed size during the read), or the open/read
 * error. stats may be NULL.
 */
int pin_io_read(void *buf, uint64_t buf_len, const char *path,
		uint64_t file_off, uint64_t len, const struct pin_io_opts *opts,
		struct pin_io_stats *stats);

/*
 * The same into a region at region_off (a multiple of PIN_IO_ALIGN), through
 * its owner mapping (made if needed). The region must be open for writing by
 * its owner (not sealed on the portable backend). Errors as pin_io_read,
 * also described by pin_region_error().
 */
int pin_read_file(struct pin_region *r, uint64_t region_off, const char *path,
		  uint64_t file_off, uint64_t len,
		  const struct pin_io_opts *opts, struct pin_io_stats *stats);

/*
 * Write len bytes from buf to path at file_off (a multiple of
 * PIN_IO_ALIGN), creating the file (mode 0644) if needed, never truncating
 * it below file_off + len. O_DIRECT straight from buf where it is
 * PIN_IO_ALIGN-aligned, else from aligned bounce buffers; buffered where
 * O_DIRECT is refused; fsync before returning. buf may have any alignment. Returns 0 or a negative errno (-EINVAL, open/write errors).
 */
int pin_io_write(const void *buf, uint64_t len, const char *path,
		 uint64_t file_off, const struct pin_io_opts *opts,
		 struct pin_io_stats *stats);

/* The same from a region's bytes [region_off, region_off + len). */
int pin_write_file(struct pin_region *r, uint64_t region_off, const char *path,
		   uint64_t file_off, uint64_t len,
		   const struct pin_io_opts *opts, struct pin_io_stats *stats);

/* ---- safetensors ------------------------------------------------------- */

/*
 * The safetensors format (huggingface/safetensors): an 8-byte little-endian
 * header length N (<= 100,000,000), N bytes of UTF-8 JSON (an object that
 * starts with '{', padded with trailing spaces), then the data section.
 * Every tensor entry is {"dtype", "shape", "data_offsets": [begin, end]}
 * relative to the data section; "__metadata__" is a map of strings.
 *
 * The reader is strict: every rule it checks is named in the error text
 * together with the file and tensor. A struct pin_st (a checkpoint) is
 * both the result and the context: it holds the tensors, the regions
 * they were loaded into, I/O stats and the text of the last failure.
 */

enum pin_dtype {
	PIN_DT_INVALID = 0,
	PIN_DT_BOOL, PIN_DT_U8, PIN_DT_I8, PIN_DT_F8_E5M2, PIN_DT_F8_E4M3,
	PIN_DT_F8_E8M0, PIN_DT_I16, PIN_DT_U16, PIN_DT_F16, PIN_DT_BF16,
	PIN_DT_I32, PIN_DT_U32, PIN_DT_F32, PIN_DT_F64, PIN_DT_I64, PIN_DT_U64,
	PIN_DT_C64, PIN_DT_F4, PIN_DT_F6_E2M3, PIN_DT_F6_E3M2,
	PIN_DT_COUNT
};

const char *pin_dtype_name(int dtype);		/* "F32"; NULL if unknown */
int pin_dtype_from_name(const char *name);	/* PIN_DT_*, or PIN_DT_INVALID */
/* Bits per element (4 for F4, 6 for F6_*, 64 for C64); 0 if unknown. */
unsigned pin_dtype_bits(int dtype);

struct pin_st;		/* a checkpoint: tensors, regions, stats, last error */

/*
 * One tensor. Pointers are owned by the checkpoint and valid until
 * pin_st_free. For a loaded checkpoint, region/region_offset/data say
 * where the bytes are (data = owner mapping + region_offset); for a
 * parsed-only one, region and data are NULL and file_offset says where
 * the bytes are in the file. For pin_st_save, set name, dtype, ndim,
 * shape, nbytes and either data (any memory) or region+region_offset.
 */
struct pin_st_tensor {
	const char *name;
	int dtype;			/* PIN_DT_* */
	unsigned ndim;
	const uint64_t *shape;		/* ndim entries */
	uint64_t nbytes;
	struct pin_region *region;
	uint64_t region_offset;
	void *data;
	uint64_t file_offset;		/* absolute offset in its file */
	unsigned file_index;		/* which shard (pin_st_file_path) */
};

#define PIN_ST_MAX_HEADER	100000000ULL

/* A new, empty checkpoint; NULL on ENOMEM. */
struct pin_st *pin_st_new(void);
/* Free tensors and every region the checkpoint loaded. NULL is a no-op. */
void pin_st_free(struct pin_st *ck);
const char *pin_st_error(const struct pin_st *ck);

/*
 * Parse (validate) the header of one safetensors file without reading the
 * data section. -EINVAL for a rule violation, a truncated file included
 * (the error names the file, the tensor and the rule), -ESTALE if the file
 * shrinks while being read, open/read errors otherwise. The checkpoint
 * must be empty (-EBUSY if not).
 */
int pin_st_parse_file(struct pin_st *ck, const char *path);
/*
 * Parse a whole file image held in memory (8-byte length, header, data);
 * name is used in error texts. Tensors' data point into buf.
 */
int pin_st_parse_buffer(struct pin_st *ck, const void *buf, uint64_t len,
			const char *name);

/*
 * Load a .safetensors file, or every shard named by a
 * *.safetensors.index.json ("weight_map": tensor -> file, relative to the
 * index; every entry must be in the file it names and every tensor of a
 * shard in the map), into pinned regions of dev: one region per file, the
 * file's data section read once, with O_DIRECT where allowed, in large
 * requests. Each region is sealed when its file is loaded. On failure the
 * checkpoint is left empty. The checkpoint must be empty (-EBUSY).
 * opts->progress, if set, sees done/total bytes over the whole checkpoint.
 * Errors: -EINVAL (format rule, truncated file), -ESTALE (a file changed
 * size during the load), -EIO (end of file where data should be),
 * allocation/seal/IO errors.
 */
int pin_st_load(struct pin_st *ck, struct pin_dev *dev, const char *path,
		const struct pin_io_opts *opts);

/*
 * Load one .safetensors file into r, a region the caller owns (and keeps
 * owning), at region_off (a multiple of PIN_IO_ALIGN): its header is read
 * and checked, and the data section's aligned superset (pin_io_span) is
 * read with the same engine as pin_st_load (io_uring, O_DIRECT where
 * allowed) into [region_off, region_off + span) through r's owner
 * mapping. The wanted bytes start (data start % PIN_IO_ALIGN) bytes in;
 * the tensors' region, region_offset and data say where. r must be open
 * or donated (its owner writes; e.g. DONATED then pin_reopen) and is left
 * in its state: seal it when the caller is done. pin_st_region() of the
 * checkpoint is NULL (it does not own r); r must outlive the checkpoint's
 * use of its tensors. Errors: -EINVAL (offset, an index file, format
 * rules), -EPERM (r is sealed), -ENOSPC (does not fit), -EBUSY (ck not
 * empty), and pin_st_load's.
 */
int pin_st_load_into(struct pin_st *ck, struct pin_region *r,
		     uint64_t region_off, const char *path,
		     const struct pin_io_opts *opts);
/*
 * Hand the region file i was loaded into (by pin_st_load) over to the
 * caller, who frees it with pin_region_free; the checkpoint's tensors go
 * on pointing into it. NULL if there is none or it was taken already.
 */
struct pin_region *pin_st_take_region(struct pin_st *ck, size_t i);

size_t pin_st_count(const struct pin_st *ck);
/* Tensor i in file order (shard by shard, by offset); -ERANGE past the end. */
int pin_st_tensor(const struct pin_st *ck, size_t i, struct pin_st_tensor *out);
/* Tensor by name; -ENOENT if absent. */
int pin_st_find(const struct pin_st *ck, const char *name,
		struct pin_st_tensor *out);
size_t pin_st_metadata_count(const struct pin_st *ck);
/* __metadata__ entry i (of the first file, then the index's "metadata"). */
int pin_st_metadata(const struct pin_st *ck, size_t i, const char **key,
		    const char **value);
size_t pin_st_file_count(const struct pin_st *ck);
const char *pin_st_file_path(const struct pin_st *ck, size_t i);
/* The region file i was loaded into (owned by the checkpoint), or NULL. */
struct pin_region *pin_st_region(const struct pin_st *ck, size_t i);
/* Sum over the files: bytes, ns, requests; direct/fixed only if all were. */
int pin_st_stats(const struct pin_st *ck, struct pin_io_stats *stats);

/*
 * Where the last load's time went, summed over its files: allocating the
 * regions (on the device backend the kernel zeroes and pins the chunks
 * here), making them present and locked (pin: on the portable backend a
 * helper thread does this step by step while the reads run, so pin and
 * transfer overlap; where the module FILLs a device region, each step is
 * allocated and read in one call, and pin is the same time as transfer),
 * moving the bytes (stats.io_ns, the reads from first to last, waits for
 * pinned memory included) and sealing. The rest of
 * stats.ns is opening, parsing and bookkeeping. All zero after a save or a
 * failed load's unreached phases.
 */
struct pin_st_phases {
	uint64_t alloc_ns;
	uint64_t pin_ns;
	uint64_t transfer_ns;
	uint64_t seal_ns;
};

int pin_st_phases(const struct pin_st *ck, struct pin_st_phases *phases);

/*
 * The last load, step by step (each file's data span is pinned and read in
 * steps of a few MiB): when each step's pinning began and ended and when
 * its first read went out and its last came back (CLOCK_MONOTONIC ns; a
 * device region of a module before ABI 4 is pinned whole, in ALLOC; with
 * flag PIN_ST_STEP_KERNEL_FILL the module allocated and read the step in
 * one call, and the pin times are the read's). offset is into the file's
 * aligned data span, file the index of pin_st_file_path.
 */
#define PIN_ST_STEP_KERNEL_FILL	(1U << 0)	/* pinned and read in one
						 * call by the module (FILL):
						 * the pin times are the read's */

struct pin_st_step {
	uint32_t file;
	uint32_t flags;			/* PIN_ST_STEP_* */
	uint64_t offset;
	uint64_t length;
	uint64_t pin_begin_ns;
	uint64_t pin_end_ns;
	uint64_t read_begin_ns;
	uint64_t read_end_ns;
};

/*
 * Copy up to cap steps of the last load into steps (NULL with cap 0 to
 * count them); returns how many steps there are, or -EINVAL.
 */
int pin_st_timeline(const struct pin_st *ck, struct pin_st_step *steps,
		    size_t cap);

/*
 * Write tensors (in the order given, back to back) and metadata (nmeta
 * key/value pairs, keys unique, may be 0) to path as a safetensors file
 * whose header is padded with spaces so the data section starts at a
 * multiple of 4096. The data goes out with O_DIRECT where allowed, to a
 * temporary name in the same directory that is fsynced and renamed over
 * path, then the directory is fsynced: path holds either the old file or
 * the complete new one. ck is the context: its error text and stats
 * (pin_st_stats) describe this save; its tensors are not touched.
 * Errors: -EINVAL (bad name, dtype, shape/nbytes mismatch, duplicate),
 * I/O errors.
 */
int pin_st_save(struct pin_st *ck, const char *path,
		const struct pin_st_tensor *tensors, size_t n,
		const char *const *meta_keys, const char *const *meta_values,
		size_t nmeta, const struct pin_io_opts *opts);

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
 * The NUMA node of c's GPU (cuDeviceGetPCIBusId, then pin_pci_numa_node),
 * for pin_alloc_on_node: -1 when the platform says none, -ENOSYS (the
 * driver lacks cuDeviceGetPCIBusId), -EIO (it failed), -ENOENT.
 */
int pin_cuda_numa_node(struct pin_cuda *c);

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
