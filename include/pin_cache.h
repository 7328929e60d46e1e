/* SPDX-License-Identifier: MIT */
/*
 * libpin: one pinned copy of a checkpoint per host, shared by every
 * process that asks pinmem-cached (Documentation/cache.md) for it.
 *
 * Part of libpin's public API: pin.h includes it, and the conventions at
 * the top of pin.h hold here too. Programs include <pin.h>; this header
 * also compiles on its own.
 *
 * The caller opens the checkpoint itself, so its own permissions decide,
 * and passes the open fd: the service keys what it holds by the file's
 * identity (device, inode, size, change and modification times), never by
 * a path, loads it once into a sealed region and hands every asker a
 * read-only view of it. What a caller gets is a struct pin_st over that
 * view: the same tensors pin_st_load would give, read-only, in memory
 * shared with every other caller of the same file.
 */
#ifndef PIN_CACHE_H
#define PIN_CACHE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct pin_st;		/* pin_st.h */

#define PIN_CACHE_SOCKET	"/run/pinmem/cache.sock"

/*
 * The service's socket, by the one rule every program of pinmem follows:
 * path when given (a --socket option), else $PIN_CACHE_SOCKET when set
 * and not empty, else PIN_CACHE_SOCKET. Never NULL.
 */
const char *pin_cache_socket(const char *path);

/* Fail when the service cannot be reached instead of loading privately. */
#define PIN_CACHE_NO_FALLBACK	(1U << 0)

struct pin_cache_ck;

/* Options of pin_cache_open and pin_cache_list; NULL: all defaults. */
struct pin_cache_opts {
	uint32_t size;			/* sizeof(struct pin_cache_opts) */
	uint32_t flags;			/* PIN_CACHE_NO_FALLBACK */
	const char *socket;		/* NULL: pin_cache_socket(NULL) */
	char *why;			/* on failure, why; may be NULL */
	size_t why_len;
	/* Added after 1.0 (a caller built with 1.0 gets the default): */
	int timeout_ms;			/* each request's deadline; 0:
					 * $PIN_CACHE_TIMEOUT, else
					 * PIN_CACHE_TIMEOUT_MS */
};

/*
 * A request's deadline when neither timeout_ms nor $PIN_CACHE_TIMEOUT
 * (seconds, "2.5" allowed) sets one. It covers connecting (a service
 * whose backlog is full) and each wait for a word from the service; a
 * service that is still loading says so every interval and restarts it.
 */
#define PIN_CACHE_TIMEOUT_MS	5000

/*
 * Ask the service for the safetensors file open at fd (a regular file
 * opened for reading; the caller keeps fd). The reply's view is mapped
 * read-only (a mapping the kernel counts: the service cannot evict the
 * entry while it exists) and its header parsed into *ckp.
 *
 * When no service answers (no socket, refused, gone mid-request, no
 * word from it within the deadline: opts->timeout_ms) the file is
 * loaded privately with pin_st_load (backend PIN_BACKEND_AUTO)
 * unless PIN_CACHE_NO_FALLBACK; pin_cache_shared says which happened and
 * pin_cache_how why. libpin prints nothing: warning the user is the
 * caller's to do. Errors the service reports about the file itself (a
 * format rule, -EIO, -ESTALE, -ENOSPC over its budget, -EACCES for an fd
 * not open for reading) are returned, with the service's words in
 * opts->why, and are never retried privately except -ENOSPC. -EINVAL for
 * options of a size below 1.0's or unknown flags, -E2BIG for fields this
 * libpin does not know. On failure *ckp is NULL.
 */
int pin_cache_open(int fd, const struct pin_cache_opts *opts,
		   struct pin_cache_ck **ckp);

/*
 * As pin_cache_open, for the checkpoint at path: a safetensors file, or a
 * sharded checkpoint's *.index.json, whose shards this process opens (its
 * own permissions decide) and asks the service for one by one. The
 * tensors of every shard come back in one struct pin_st, as pin_st_load
 * would give them (pin_st_file_path names each shard), the weight map
 * held to what the shards hold. Shared or private is all or nothing: when
 * the service cannot serve a shard (gone, no room), what it served is
 * unmapped and the whole checkpoint is loaded privately. pin_cache_entry
 * then names the first shard's entry. -EINVAL for a NULL path; the
 * index's own errors as pin_st_load's.
 */
int pin_cache_open_path(const char *path, const struct pin_cache_opts *opts,
			struct pin_cache_ck **ckp);

/* The tensors (valid until pin_cache_close); read-only when shared. */
const struct pin_st *pin_cache_st(const struct pin_cache_ck *c);
/* 1: served by the service (shared), 0: loaded privately. */
int pin_cache_shared(const struct pin_cache_ck *c);
/*
 * In words: "shared: entry 3 of pinmem-cached (device backend), loaded
 * by this request", "private: no service at /run/pinmem/cache.sock
 * (No such file or directory); loaded into this process alone" or
 * "private: the service at /run/pinmem/cache.sock did not answer within
 * 5.0 s; loaded into this process alone".
 */
const char *pin_cache_how(const struct pin_cache_ck *c);
/* The service's entry id (0 when private; sharded: the first shard's). */
uint64_t pin_cache_entry(const struct pin_cache_ck *c);
/* Unmap the view (or free the private load) and the tensors. NULL: no-op. */
void pin_cache_close(struct pin_cache_ck *c);

/*
 * The service's entries (at opts->socket) as a table (one line each: id,
 * size, age, idle, clients with pid and command, and why one cannot be
 * evicted), into buf[len], NUL-terminated, cut to fit. Returns the text's
 * length, or -errno (-ENOENT/-ECONNREFUSED: no service; -ETIMEDOUT: no
 * answer within the deadline, as pin_cache_open's).
 */
int pin_cache_list(const struct pin_cache_opts *opts, char *buf, size_t len);

/*
 * Keeping a checkpoint loaded, for operators (root and the service's own
 * user; others get -EPERM): a kept entry is never evicted for room, only
 * when an operator stops keeping it. op: PIN_CACHE_PIN keeps the file open
 * at fd (loading it now when it is not loaded); PIN_CACHE_UNPIN stops
 * keeping it (an ordinary entry again; -ENOENT when not loaded);
 * PIN_CACHE_WARM keeps it for warm list number set (one application of a
 * config file: pinctl cache warm), and PIN_CACHE_WARM_END (fd -1) stops
 * keeping what warm lists other than set kept. Returns 0 or -errno
 * (-ENOSPC: kept entries would exceed the budget), the service's words in
 * opts->why. opts as for pin_cache_list.
 */
#define PIN_CACHE_PIN		1U
#define PIN_CACHE_UNPIN		2U
#define PIN_CACHE_WARM		3U
#define PIN_CACHE_WARM_END	4U
int pin_cache_keep(int fd, unsigned op, uint64_t set,
		   const struct pin_cache_opts *opts);

#ifdef __cplusplus
}
#endif

#endif /* PIN_CACHE_H */
