/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * pinmem: kernel-arbitrated pinned host memory.
 *
 * The ABI between pinmem.ko and user space (libpin). Every struct is built
 * of __u64/__u32 fields with explicit padding; every reserved field and
 * every unknown flag bit must be zero (else EINVAL). Ioctl numbers foreign
 * to the fd they are issued on fail with ENOTTY.
 *
 * Structs grow at their end (ABI 6), as openat2(2)'s and clone3(2)'s do.
 * The ioctl number carries the size of the caller's struct (_IOC_SIZE):
 * a caller built against an older header passes a smaller struct, one
 * built against a newer header a larger one. The module serves every size
 * from the first published one (PINMEM_*_SIZE_VER0) up: fields past the
 * end of the caller's struct read as zero; bytes past the fields the
 * module knows must be zero (else E2BIG); it writes back only the bytes
 * both sides know and leaves the rest of the caller's struct as it was
 * (which fields a module fills, its ABI version says). A size below the
 * first published one is a foreign ioctl: ENOTTY. The records of LIST,
 * HOLDERS and REFS are sized the same way, by the caller's record_size.
 *
 * Three kinds of fd: the device fd (open("/dev/pinmem")), region fds (from
 * ALLOC; mmap of one is an owner mapping) and view fds (from VIEW; mmap of
 * one is a view mapping). Mappings are MAP_SHARED, except that since ABI 7
 * a view fd of a SEALED region may also be mapped MAP_PRIVATE: a
 * copy-on-write view whose writes go to the process's own anonymous
 * copies, never to the region; it counts as a view mapping (DONATE waits
 * for it) until it is unmapped. Which fd serves each ioctl, the mmap rules, each
 * ioctl's errors and every field's ABI version: Documentation/abi.md in the
 * pinmem source tree, the reference that this header is checked against.
 */
#ifndef _UAPI_PINMEM_H
#define _UAPI_PINMEM_H

#include <linux/ioctl.h>
#include <linux/types.h>

#define PINMEM_DEVICE_PATH	"/dev/pinmem"

/* ABI version of this header; the module serves libraries >= MIN_COMPAT. */
#define PINMEM_ABI_VERSION	7	/* 2: DONATE and SEAL count page references; EXPECT, REFS
					 * 3: ALLOC on a NUMA node; NODES
					 * 4: ALLOC_LAZY and POPULATE
					 * 5: FILL
					 * 6: structs of any size from the first
					 *    published; record_size
					 * 7: MAP_PRIVATE (copy-on-write) view
					 *    mappings of a SEALED region */
#define PINMEM_ABI_MIN_COMPAT	1

/* Regions are backed by chunks of this order (2 MiB with 4 KiB pages). */
#define PINMEM_CHUNK_ORDER	9
#define PINMEM_CHUNK_SIZE	(1ULL << 21)

#define PINMEM_IOC_MAGIC	0xB8

/* Region states (struct pinmem_region_info.state). */
#define PINMEM_STATE_OPEN	1	/* views may be read-only or read-write */
#define PINMEM_STATE_SEALED	2	/* views are read-only */
#define PINMEM_STATE_DONATED	3	/* no view mappings at all */

/* PINMEM_IOC_VERSION (device, region and view fds). */
struct pinmem_version {
	__u32 abi_version;	/* out: PINMEM_ABI_VERSION of the module */
	__u32 abi_min_compat;	/* out: oldest library ABI it serves */
	__u64 chunk_size;	/* out: PINMEM_CHUNK_SIZE */
};
#define PINMEM_VERSION_SIZE_VER0	16	/* first published: ABI 1 */

/* PINMEM_IOC_DEV_INFO (device fd): limits and totals. */
struct pinmem_dev_info {
	__u64 max_total_bytes;	/* module parameter; 0 = no module limit */
	__u64 max_region_bytes;	/* module parameter */
	__u64 total_bytes;	/* bytes of pages held by all regions */
	__u64 nr_regions;	/* live regions */
	__u64 nr_mappings;	/* live owner + view mappings */
	__u64 nr_view_fds;	/* live view files */
	__u64 reserved[2];	/* out: zero */
};
#define PINMEM_DEV_INFO_SIZE_VER0	64	/* first published: ABI 1 */

/* PINMEM_IOC_ALLOC flags */
/* Allow chunks smaller than 2 MiB when order-9 pages cannot be had. */
#define PINMEM_ALLOC_FALLBACK	(1U << 0)
/* ABI 3: every chunk from NUMA node `node` (else ENOMEM). */
#define PINMEM_ALLOC_NODE	(1U << 1)
/* ABI 3: with ALLOC_NODE, `node` is only preferred: others may serve. */
#define PINMEM_ALLOC_ANY_NODE	(1U << 2)
/* ABI 4: charge now, allocate the chunks later with POPULATE. */
#define PINMEM_ALLOC_LAZY	(1U << 3)
#define PINMEM_ALLOC_FLAGS	(PINMEM_ALLOC_FALLBACK | PINMEM_ALLOC_NODE | \
				 PINMEM_ALLOC_ANY_NODE | PINMEM_ALLOC_LAZY)

/*
 * PINMEM_IOC_ALLOC (device fd). size is rounded up to a whole page; the
 * pages come in 2 MiB chunks (the last one may be partly unused, and is
 * charged whole). Without ALLOC_NODE the chunks follow the caller's
 * mempolicy (node must be 0). With ALLOC_NODE node must be an online
 * node (else EINVAL); a node without memory, or too little free on it,
 * fails with ENOMEM unless ALLOC_ANY_NODE is given. ALLOC_ANY_NODE
 * without ALLOC_NODE: EINVAL. Errors: EINVAL (size 0, size >
 * max_region_bytes, flags, node, reserved), ENOSPC (module's
 * max_total_bytes would be exceeded), ENOMEM (RLIMIT_MEMLOCK, memory
 * cgroup, no order-9 pages without FALLBACK, node), EINTR (fatal signal
 * while allocating).
 *
 * ALLOC_LAZY (ABI 4) takes the RLIMIT_MEMLOCK and max_total_bytes charges
 * for the whole size but allocates no chunk: POPULATE allocates them, a
 * range at a time, so that a loader can read into the first part while
 * the rest is still being allocated. Until a chunk is populated, touching
 * it through a mapping is SIGBUS (GUP: EFAULT), and VIEW and SEAL fail
 * with ENODATA until every chunk is. Chunks are order 9 only, so
 * ALLOC_LAZY with ALLOC_FALLBACK is EINVAL; ALLOC_NODE and ANY_NODE hold
 * for every POPULATE.
 */
struct pinmem_alloc {
	__u64 size;		/* in */
	__u32 flags;		/* in: PINMEM_ALLOC_* */
	__s32 fd;		/* out: region fd */
	__u64 region_id;	/* out: system-wide id, never reused */
	__s32 node;		/* in, ABI 3: NUMA node with ALLOC_NODE, else 0 */
	__u32 reserved;		/* in: zero */
};
#define PINMEM_ALLOC_SIZE_VER0	32	/* first published: ABI 1 */

/* PINMEM_IOC_INFO (region or view fd), and the records of PINMEM_IOC_LIST. */
struct pinmem_region_info {
	__u64 region_id;
	__u64 size;			/* bytes, page multiple */
	__u32 state;			/* PINMEM_STATE_* */
	__u32 flags;			/* PINMEM_INFO_* */
	__u32 chunk_order;		/* PINMEM_CHUNK_ORDER */
	__u32 min_order;		/* smallest order used (== chunk_order without fallback) */
	__u64 nr_chunks;		/* order-9 chunks */
	__u64 nr_fallback_chunks;	/* chunks of a smaller order */
	__u64 owner_mappings;
	__u64 view_mappings;
	__u64 writable_view_mappings;	/* view mappings that may write (VM_MAYWRITE) */
	__u64 view_fds;			/* live view files of this region */
	__u32 owner_uid;		/* user charged for the pages */
	__u32 owner_tgid;		/* process that allocated it */
	__u64 expected_refs;		/* ABI 2: references the owner declared (EXPECT) */
	__u64 outside_refs;		/* ABI 2: references beyond mappings and
					 * expectations found by the last
					 * refused DONATE or SEAL; 0 after one succeeds */
};
#define PINMEM_REGION_INFO_SIZE_VER0	104	/* first published: ABI 1 */

#define PINMEM_INFO_DONATE_PENDING	(1U << 0)	/* a DONATE is waiting */
#define PINMEM_INFO_REFS_HELD		(1U << 1)	/* ABI 2: outside_refs is not 0 */
#define PINMEM_INFO_UNPOPULATED		(1U << 2)	/* ABI 4: ALLOC_LAZY chunks missing;
							 * nr_chunks counts those populated */

/* PINMEM_IOC_VIEW flags */
#define PINMEM_VIEW_WRITE	(1U << 0)	/* read-write view fd (region must be OPEN) */
#define PINMEM_VIEW_FLAGS	PINMEM_VIEW_WRITE

/*
 * PINMEM_IOC_VIEW (region fd). offset and length must be page multiples,
 * length non-zero, offset + length within the region (else EINVAL).
 * A read-write view when the region is not OPEN: EPERM. (ABI 4) Any view
 * while chunks of an ALLOC_LAZY region are not populated: ENODATA.
 */
struct pinmem_view {
	__u64 offset;		/* in: bytes into the region */
	__u64 length;		/* in: bytes */
	__u32 flags;		/* in: PINMEM_VIEW_* */
	__s32 fd;		/* out: view fd */
	__u64 reserved;		/* in: zero */
};
#define PINMEM_VIEW_SIZE_VER0	32	/* first published: ABI 1 */

/* PINMEM_IOC_VIEW_INFO (view fd). */
struct pinmem_view_info {
	__u64 region_id;
	__u64 offset;
	__u64 length;
	__u32 flags;		/* PINMEM_VIEW_* it was created with */
	__u32 pad;
	__u64 reserved[2];	/* out: zero */
};
#define PINMEM_VIEW_INFO_SIZE_VER0	48	/* first published: ABI 1 */

/* Holder kinds */
#define PINMEM_HOLDER_OWNER	1
#define PINMEM_HOLDER_VIEW	2

/* Holder flags */
#define PINMEM_HOLDER_MAYWRITE	(1U << 0)	/* counts as a writable mapping */
#define PINMEM_HOLDER_ADDR_HIDDEN (1U << 1)	/* start withheld (is 0) */
/* ABI 7: a copy-on-write view mapping (MAP_PRIVATE of a view fd) */
#define PINMEM_HOLDER_PRIVATE	(1U << 2)

/* One mapping of a region. prot is PROT_READ|PROT_WRITE|PROT_EXEC bits. */
struct pinmem_holder {
	__u32 tgid;		/* in the caller's pid namespace; 0 if not visible */
	__u32 kind;		/* PINMEM_HOLDER_* */
	__u64 start;		/* user address of the mapping, or 0 */
	__u64 length;		/* bytes */
	__u64 offset;		/* bytes into the region of its first page */
	__u32 prot;
	__u32 flags;		/* PINMEM_HOLDER_* */
	char comm[16];		/* NUL-terminated */
};
#define PINMEM_HOLDER_SIZE_VER0	56	/* first published: ABI 1 */

/*
 * PINMEM_IOC_HOLDERS (device fd with region_id; region or view fd with
 * region_id 0, else EINVAL). Fills up to capacity records at holders_ptr
 * and sets count to the number of mappings that exist; count > capacity
 * means the list was cut short, and is the only way it is: the records
 * filled are min(count, capacity). No call fills more than 2^20 records
 * (LIST and REFS alike): a larger capacity counts as 2^20. On the device
 * fd the caller must own the region (same uid) or have CAP_SYS_ADMIN, else
 * ENOENT as for an unknown id (or id 0). Mappings that keep changing
 * while they are counted never make it fail: every mapping that exists
 * from the start of the call to its end is in the answer, and one made or
 * removed meanwhile may or may not be (count counts what is there). A
 * holder outside the caller's pid namespace has tgid 0 and an empty comm.
 * The start address of a mapping in another process is shown under
 * /proc/PID/maps' rule: to CAP_SYS_PTRACE in the initial user namespace,
 * or when the holder has a pid in the caller's pid namespace, the caller's
 * fsuid and fsgid equal every uid and gid of the holder and the holder is
 * dumpable; to others it is 0 with PINMEM_HOLDER_ADDR_HIDDEN set; length,
 * offset, prot and the rest are shown to all.
 *
 * record_size (ABI 6; LIST and REFS alike): the size of the caller's
 * records, which are written record_size bytes apart, each with the bytes
 * both sides know (the rest of a larger record is left as it was). 0 (as
 * callers before ABI 6 pass) is the first published size; other sizes
 * below it: EINVAL.
 */
struct pinmem_holders {
	__u64 region_id;	/* in */
	__u64 holders_ptr;	/* in: struct pinmem_holder[capacity] */
	__u32 capacity;		/* in */
	__u32 count;		/* out */
	__u32 record_size;	/* in, ABI 6: sizeof(struct pinmem_holder) */
	__u32 reserved;		/* in: zero */
};
#define PINMEM_HOLDERS_SIZE_VER0	32	/* first published: ABI 1 */

/*
 * PINMEM_IOC_LIST (device fd): the regions the caller may see (its own uid,
 * or all with CAP_SYS_ADMIN), ordered by id. Same capacity, count and
 * record_size rules as for HOLDERS.
 */
struct pinmem_list {
	__u64 regions_ptr;	/* in: struct pinmem_region_info[capacity] */
	__u32 capacity;		/* in */
	__u32 count;		/* out */
	__u32 record_size;	/* in, ABI 6: sizeof(struct pinmem_region_info) */
	__u32 reserved;		/* in: zero */
};
#define PINMEM_LIST_SIZE_VER0	24	/* first published: ABI 1 */

/* DONATE flags */
#define PINMEM_DONATE_WAIT	(1U << 0)	/* wait up to timeout_ms for views and references to drain */
#define PINMEM_DONATE_FLAGS	PINMEM_DONATE_WAIT

/*
 * PINMEM_IOC_SEAL, _DONATE, _PUBLISH, _REOPEN (region fd).
 *
 *  SEAL:    OPEN -> SEALED. EBUSY while a writable view mapping exists,
 *           or (ABI 2) while page references taken through writable view
 *           mappings remain (after a grace of about 63 ms for transient
 *           ones; meanwhile writable view mappings fail with EBUSY).
 *           Already SEALED: 0. DONATED: EPERM. (ABI 4) ENODATA while
 *           chunks of an ALLOC_LAZY region are not populated.
 *  DONATE:  OPEN or SEALED -> DONATED. EBUSY while a view mapping exists,
 *           or (ABI 2) while a page the views mapped is referenced beyond
 *           its mappings and what the owner declared (see EXPECT): a pipe
 *           holding vmsplice'd pages, O_DIRECT in flight, a registration.
 *           Without WAIT references get a grace of about 63 ms before
 *           EBUSY. With PINMEM_DONATE_WAIT: ETIMEDOUT after timeout_ms
 *           (0: no limit), never sooner: as with poll(), at least
 *           timeout_ms of CLOCK_MONOTONIC pass between the call and the
 *           ETIMEDOUT (later by the timer slack and scheduling), whatever
 *           the tick. EINTR on a signal (io_uring task work arriving
 *           meanwhile is no signal: the wait goes on, and the work runs on
 *           the return to user space). While it waits, new view mappings
 *           fail with EBUSY. Already DONATED: 0. REFS says which bytes are
 *           still referenced.
 *  PUBLISH: DONATED -> SEALED; from any other state EPERM.
 *  REOPEN:  DONATED -> OPEN; from any other state EPERM.
 * flags and timeout_ms must be zero except for DONATE (timeout_ms only
 * with PINMEM_DONATE_WAIT).
 */
struct pinmem_transition {
	__u32 flags;
	__u32 timeout_ms;
	__u64 reserved;
};
#define PINMEM_TRANSITION_SIZE_VER0	16	/* first published: ABI 1 */

/*
 * The owner's references (ABI 2). On a chunk a view has mapped since the
 * last DONATE, the only references beyond the mappings that DONATE (and,
 * for writable views, SEAL) accept are those the owner declared with
 * PINMEM_IOC_EXPECT (region fd only), whenever they were taken: a CUDA or
 * io_uring registration over the owner mapping, made before or after
 * views exist, is declared before registering and removed after
 * unregistering. Nothing else is ever allowed: no reference taken through
 * a view outlives a successful DONATE or SEAL, however the owner's own
 * references came and went. An undeclared owner reference on such a chunk
 * holds DONATE up like any other (transients: the grace; WAIT: until it
 * ends). A declaration the owner no longer uses is room for that many
 * references: remove it when the registration ends.
 *  PER_PAGE:  one reference per page of the range (cuMemHostRegister,
 *             AF_XDP, RDMA: one pin per 4 KiB page).
 *  PER_CHUNK: one reference per chunk the range touches (io_uring fixed
 *             buffers, which keep one pin per 2 MiB folio from 6.12 on).
 * Exactly one of them; with REMOVE a declaration is taken back. On a
 * fallback chunk of order 0 a pin counts 1024 references and is declared
 * so. offset and length: page multiples, length non-zero, within the
 * region (else EINVAL); removing more than is declared on any chunk:
 * EINVAL; more than PINMEM_EXPECT_MAX references declared on one chunk:
 * ENOSPC. Nothing changes on an error. Declarations end with the region.
 */
#define PINMEM_EXPECT_PER_PAGE	(1U << 0)
#define PINMEM_EXPECT_PER_CHUNK	(1U << 1)
#define PINMEM_EXPECT_REMOVE	(1U << 2)
#define PINMEM_EXPECT_FLAGS	(PINMEM_EXPECT_PER_PAGE | \
				 PINMEM_EXPECT_PER_CHUNK | PINMEM_EXPECT_REMOVE)
#define PINMEM_EXPECT_MAX	(64U << 10)	/* per chunk: 128 whole-chunk PER_PAGE */

struct pinmem_expect {
	__u64 offset;		/* in: bytes into the region */
	__u64 length;		/* in: bytes */
	__u32 flags;		/* in: PINMEM_EXPECT_* */
	__u32 pad;		/* in: zero */
	__u64 reserved;		/* in: zero */
};
#define PINMEM_EXPECT_SIZE_VER0	32	/* first published: ABI 2 */

/*
 * One run of chunks referenced beyond their mappings and what the owner
 * may hold. refs counts every reference beyond the page table entries
 * (pinned of them are FOLL_PIN DMA pins; the rest plain references:
 * vmsplice, 6.1's O_DIRECT); expected is the owner's share (present
 * before any view, or declared). The kernel cannot say who holds them.
 */
struct pinmem_ref_range {
	__u64 offset;		/* bytes into the region, chunk aligned */
	__u64 length;		/* bytes (the last chunk may end at the size) */
	__u64 refs;
	__u64 pinned;
	__u64 expected;
	__u64 reserved;		/* out: zero */
};
#define PINMEM_REF_RANGE_SIZE_VER0	48	/* first published: ABI 2 */

/*
 * PINMEM_IOC_REFS (device fd with region_id, visible as for HOLDERS;
 * region or view fd with region_id 0). A fresh look, without waiting, at
 * the chunks views have mapped since the region was last donated; fills up
 * to capacity runs and sets count to the number found (record_size as for
 * HOLDERS).
 */
struct pinmem_refs {
	__u64 region_id;	/* in */
	__u64 ranges_ptr;	/* in: struct pinmem_ref_range[capacity] */
	__u32 capacity;		/* in */
	__u32 count;		/* out */
	__u32 record_size;	/* in, ABI 6: sizeof(struct pinmem_ref_range) */
	__u32 reserved;		/* in: zero */
};
#define PINMEM_REFS_SIZE_VER0	32	/* first published: ABI 2 */

/*
 * PINMEM_IOC_NODES (ABI 3; device fd with region_id, visible as for
 * HOLDERS; region or view fd with region_id 0): where the region's memory
 * lies. Fills bytes[n] (n < capacity) with the bytes of the region's
 * chunks on NUMA node n (whole chunks: the last one counts whole) and
 * sets count to the number of node ids the kernel has (nr_node_ids).
 */
struct pinmem_nodes {
	__u64 region_id;	/* in */
	__u64 bytes_ptr;	/* in: __u64[capacity] */
	__u32 capacity;		/* in */
	__u32 count;		/* out */
	__u64 reserved;		/* in: zero */
};
#define PINMEM_NODES_SIZE_VER0	32	/* first published: ABI 3 */

/*
 * PINMEM_IOC_POPULATE (ABI 4, region fd): allocate the chunks of an
 * ALLOC_LAZY region that hold bytes [offset, offset + length), on several
 * CPUs for a large range, charged to the caller's memory cgroup. Chunks
 * already there are kept; on a region not made lazy, or fully populated,
 * it does nothing and returns 0. offset and length must be page
 * multiples, length non-zero, within the region (else EINVAL). ENOMEM
 * (memory, node, cgroup) and EINTR (fatal signal) keep the chunks
 * allocated before the failure: a retry allocates only the rest. EBUSY,
 * at once and with nothing allocated: a FILL is reading into a chunk of
 * the range.
 */
struct pinmem_populate {
	__u64 offset;		/* in: bytes into the region */
	__u64 length;		/* in: bytes */
	__u64 reserved[2];	/* in: zero */
};
#define PINMEM_POPULATE_SIZE_VER0	32	/* first published: ABI 4 */

/*
 * PINMEM_IOC_FILL (ABI 5, region fd): allocate the chunks of an ALLOC_LAZY
 * region that hold bytes [offset, offset + length) and read them from the
 * file fd at file_offset before any mapping can see them: no zeroing of
 * what the read writes (unless the kernel zeroes every allocation,
 * init_on_alloc=1), no page of the range taken through a mapping. Bytes of
 * those chunks that the read does not reach (end of file, the last chunk
 * past length) are zeroed. offset must be a multiple of the chunk size;
 * length non-zero and a multiple of it unless the range ends at the end of
 * the region. fd must be open for reading, a regular file or a block
 * device; an O_DIRECT fd reads direct, under its alignment rules (else
 * EINVAL from the file system). On success bytes is what the read returned
 * (less than length only at the end of the file) and every chunk of the
 * range is populated; on any error none of them is. Errors: EINVAL (range,
 * flags, reserved, file type), EBADF (fd not open for reading), EEXIST (a
 * chunk of the range is populated, by POPULATE, FILL or ALLOC), EBUSY
 * (another FILL is reading into a chunk of the range: the chunks are
 * claimed before they are allocated, so FILLs never hold more memory than
 * the region's charge), ENOMEM (as POPULATE), EINTR (fatal signal), EFAULT
 * (bytes could not be written back; nothing is populated), and the read's
 * own errors (EIO...).
 */
struct pinmem_fill {
	__s32 fd;		/* in: the file to read */
	__u32 flags;		/* in: zero */
	__u64 file_offset;	/* in: where in the file */
	__u64 offset;		/* in: bytes into the region */
	__u64 length;		/* in: bytes */
	__u64 bytes;		/* out: bytes read */
	__u64 reserved[2];	/* in: zero */
};
#define PINMEM_FILL_SIZE_VER0	56	/* first published: ABI 5 */

#define PINMEM_IOC_VERSION	_IOR(PINMEM_IOC_MAGIC, 0x00, struct pinmem_version)
#define PINMEM_IOC_DEV_INFO	_IOR(PINMEM_IOC_MAGIC, 0x01, struct pinmem_dev_info)
#define PINMEM_IOC_ALLOC	_IOWR(PINMEM_IOC_MAGIC, 0x02, struct pinmem_alloc)
#define PINMEM_IOC_LIST		_IOWR(PINMEM_IOC_MAGIC, 0x03, struct pinmem_list)
#define PINMEM_IOC_HOLDERS	_IOWR(PINMEM_IOC_MAGIC, 0x04, struct pinmem_holders)
#define PINMEM_IOC_INFO		_IOR(PINMEM_IOC_MAGIC, 0x10, struct pinmem_region_info)
#define PINMEM_IOC_VIEW		_IOWR(PINMEM_IOC_MAGIC, 0x11, struct pinmem_view)
#define PINMEM_IOC_VIEW_INFO	_IOR(PINMEM_IOC_MAGIC, 0x12, struct pinmem_view_info)
#define PINMEM_IOC_POPULATE	_IOW(PINMEM_IOC_MAGIC, 0x13, struct pinmem_populate)
#define PINMEM_IOC_FILL		_IOWR(PINMEM_IOC_MAGIC, 0x14, struct pinmem_fill)
#define PINMEM_IOC_SEAL		_IOW(PINMEM_IOC_MAGIC, 0x20, struct pinmem_transition)
#define PINMEM_IOC_DONATE	_IOW(PINMEM_IOC_MAGIC, 0x21, struct pinmem_transition)
#define PINMEM_IOC_PUBLISH	_IOW(PINMEM_IOC_MAGIC, 0x22, struct pinmem_transition)
#define PINMEM_IOC_REOPEN	_IOW(PINMEM_IOC_MAGIC, 0x23, struct pinmem_transition)
#define PINMEM_IOC_EXPECT	_IOW(PINMEM_IOC_MAGIC, 0x30, struct pinmem_expect)
#define PINMEM_IOC_REFS		_IOWR(PINMEM_IOC_MAGIC, 0x31, struct pinmem_refs)
#define PINMEM_IOC_NODES	_IOWR(PINMEM_IOC_MAGIC, 0x32, struct pinmem_nodes)

#endif /* _UAPI_PINMEM_H */
