/* SPDX-License-Identifier: MIT */
/*
 * libpin: safetensors checkpoints, parsed, loaded into pinned regions and
 * saved with the I/O engine of pin_io.h.
 *
 * Part of libpin's public API: pin.h includes it, and the conventions at
 * the top of pin.h hold here too. Programs include <pin.h>; this header
 * also compiles on its own.
 */
#ifndef PIN_ST_H
#define PIN_ST_H

#include <stddef.h>
#include <stdint.h>

#include "pin_io.h"	/* struct pin_io_opts, pin_io_stats; PIN_IO_ALIGN */

#ifdef __cplusplus
extern "C" {
#endif

struct pin_dev;		/* pin.h */
struct pin_region;	/* pin.h */
struct pin_region_opts;	/* pin.h */

/*
 * The safetensors format (huggingface/safetensors): an 8-byte little-endian
 * header length N (<= 100,000,000), N bytes of UTF-8 JSON (an object that
 * starts with '{', padded with trailing spaces), then the data section.
 * Every tensor entry is {"dtype", "shape", "data_offsets": [begin, end]}
 * relative to the data section; "__metadata__" is a map of strings (or
 * null: none, as MLX writes it).
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
	PIN_DT_F8_E4M3FNUZ, PIN_DT_F8_E5M2FNUZ,
	PIN_DT_COUNT
};

const char *pin_dtype_name(int dtype);		/* "F32"; NULL if unknown */
int pin_dtype_from_name(const char *name);	/* PIN_DT_*, or PIN_DT_INVALID */
/* Bits per element (4 for F4, 6 for F6_*, 64 for C64); 0 if unknown. */
unsigned pin_dtype_bits(int dtype);

struct pin_st;		/* a checkpoint: tensors, regions, stats, last error */

/*
 * One tensor. Pointers are owned by the checkpoint and valid until
 * pin_st_close. For a loaded checkpoint, region/region_offset/data say
 * where the bytes are (data = owner mapping + region_offset); for a
 * parsed-only one, region and data are NULL and file_offset says where
 * the bytes are in the file. For pin_st_save, set name, dtype, ndim,
 * shape, nbytes and either data (any memory) or region+region_offset.
 */
struct pin_st_tensor {
	uint32_t size;			/* set by the caller */
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
struct pin_st *pin_st_create(void);
/* Free tensors and every region the checkpoint loaded. NULL is a no-op. */
void pin_st_close(struct pin_st *ck);
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
 * pin_st_load: each file's region holds the whole file from its first byte
 * (header included), not only the data section, so that the region is a
 * copy of the file itself: pinmem-cached hands such regions out. Tensors'
 * region_offset then counts from the start of the file. With
 * pin_st_load_into the image goes to region_off, and a file that does not
 * fit the caller's region is refused before anything is read (-ENOSPC):
 * pinmem-cached sizes the region by the file it was asked about.
 */
#define PIN_ST_LOAD_WHOLE_FILE	(1U << 0)
/*
 * pin_st_load: leave each region OPEN instead of sealing it, for a caller
 * that owns the loaded regions alone and maps them writable (the Python
 * binding's torch loads: writable tensors in pinned, CUDA-registered
 * memory that no other process maps). Each region's owner mapping
 * (pin_region_map) is then writable and, on the portable backend, the
 * very mapping the load read into and locked, so that using it costs no
 * further fault or lock. pin_st_load_into leaves the caller's region in
 * its state either way.
 */
#define PIN_ST_LOAD_OPEN	(1U << 1)

/*
 * PIN_ST_LOAD_ALIGN: every tensor's data starts at a region offset that is
 * a multiple of PIN_ST_ALIGN (64 bytes: what JAX's CPU client and SIMD
 * code need to use memory in place), whatever the file's layout. The
 * tensors keep their file order; each goes to the first multiple of
 * PIN_ST_ALIGN at or after the end of the one before (the first: at or
 * after the data section's start), so a tensor the file already has
 * aligned, with none misaligned before it, stays where the read put it.
 * The data section is read as without the flag, then each tensor that
 * must move is moved inside the region (memmove, last first) and the
 * padding zeroed, before the seal; the region is sized for the padding
 * (pin_st_load_into: -ENOSPC where r has no room for it). What was moved
 * is in pin_st_phases (align_bytes, align_ns). The layout depends on
 * the header alone.
 */
#define PIN_ST_LOAD_ALIGN	(1U << 2)
#define PIN_ST_ALIGN		64

/*
 * Options of pin_st_load and pin_st_load_into; NULL: none. region places
 * the regions pin_st_load allocates (PIN_REGION_NODE, with
 * PIN_REGION_ANY_NODE or not, on either backend: beside the GPU the
 * checkpoint is for, pin_cuda_numa_node); io tunes the reads; either may
 * be NULL.
 */
struct pin_st_load_opts {
	uint32_t size;			/* sizeof(struct pin_st_load_opts) */
	uint32_t flags;			/* PIN_ST_LOAD_WHOLE_FILE, _OPEN, _ALIGN */
	const struct pin_region_opts *region;
	const struct pin_io_opts *io;
};

/*
 * Load a .safetensors file, or every shard named by a
 * *.safetensors.index.json ("weight_map": tensor -> file, relative to the
 * index; every entry must be in the file it names and every tensor of a
 * shard in the map), into pinned regions of dev: one region per file, the
 * file's data section read once, with O_DIRECT where allowed, in large
 * requests. Each region is sealed when its file is loaded (unless
 * PIN_ST_LOAD_OPEN). On failure the
 * checkpoint is left empty. The checkpoint must be empty (-EBUSY).
 * opts->io->progress, if set, sees done/total bytes over the whole
 * checkpoint.
 * Errors: -EINVAL (format rule, truncated file), -ESTALE (a file changed
 * size during the load), -EIO (end of file where data should be),
 * allocation/seal/IO errors; -EINVAL also for region flags other than
 * PIN_REGION_NODE and PIN_REGION_ANY_NODE, a node < 0 or not online.
 */
int pin_st_load(struct pin_st *ck, struct pin_dev *dev, const char *path,
		const struct pin_st_load_opts *opts);

/*
 * Load one .safetensors file into r, a region the caller owns (and keeps
 * owning), at region_off (a multiple of PIN_IO_ALIGN): its header is read
 * and checked, and the data section's aligned superset (pin_file_span) is
 * read with the same engine as pin_st_load (io_uring, O_DIRECT where
 * allowed) into [region_off, region_off + span) through r's owner
 * mapping. The wanted bytes start (data start % PIN_IO_ALIGN) bytes in;
 * the tensors' region, region_offset and data say where. r must be open
 * or donated (its owner writes; e.g. DONATED then pin_region_reopen) and
 * is left in its state: seal it when the caller is done. pin_st_region() of the
 * checkpoint is NULL (it does not own r); r must outlive the checkpoint's
 * use of its tensors. Errors: -EINVAL (offset, an index file, format
 * rules), -EPERM (r is sealed), -ENOSPC (does not fit), -EBUSY (ck not
 * empty; also opts->region set), and pin_st_load's.
 */
int pin_st_load_into(struct pin_st *ck, struct pin_region *r,
		     uint64_t region_off, const char *path,
		     const struct pin_st_load_opts *opts);
/*
 * Hand the region file i was loaded into (by pin_st_load) over to the
 * caller, who frees it with pin_region_close; the checkpoint's tensors go
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
 * here), making them present and locked (pin: on the portable backend
 * helper threads do this step by step while the reads run, so pin and
 * transfer overlap; where the module FILLs a device region, each step is
 * allocated and read in one call, and pin is the same time as transfer),
 * moving the bytes (stats.io_ns, the reads from first to last, waits for
 * pinned memory included) and sealing. The rest of
 * stats.ns is opening, parsing and bookkeeping. All zero after a save or a
 * failed load's unreached phases.
 */
struct pin_st_phases {
	uint32_t size;			/* set by the caller */
	uint64_t alloc_ns;
	uint64_t pin_ns;
	uint64_t transfer_ns;
	uint64_t seal_ns;
	/* PIN_ST_LOAD_ALIGN: bytes moved to aligned places, time it took */
	uint64_t align_bytes;
	uint64_t align_ns;
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
	uint32_t size;			/* set by the caller (element 0) */
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

#ifdef __cplusplus
}
#endif

#endif /* PIN_ST_H */
