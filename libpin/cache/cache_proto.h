/* SPDX-License-Identifier: MIT */
/*
 * The checkpoint cache's wire protocol (pinmem-cached and pin_cache_*):
 * one message per SOCK_SEQPACKET packet, a fixed header then a payload of
 * the type's size, native byte order (both ends are on one host).
 *
 * Shared by libpin's client and the service, which compiles these files
 * into itself; no name here leaves libpin.so (see libpin.map).
 */
#ifndef PIN_CACHE_PROTO_H
#define PIN_CACHE_PROTO_H

#include <stddef.h>
#include <stdint.h>

#define CACHE_MAGIC		0x53434d50U	/* "PMCS" */
#define CACHE_VERSION		1U

#define CACHE_REQ_LOAD		1U	/* + the checkpoint's fd */
#define CACHE_REQ_LIST		2U
#define CACHE_REQ_KEEP		3U	/* + the checkpoint's fd, but WARM_END */
#define CACHE_REP_LOAD		0x81U	/* + a read-only view fd */
#define CACHE_REP_LIST		0x82U
#define CACHE_REP_WAIT		0x83U	/* still working on it: wait on */
#define CACHE_REP_DONE		0x84U	/* KEEP's UNPIN, WARM_END: what was done */
#define CACHE_REP_ERROR		0xffU

/* Requests are small; a packet longer than this is refused whole. */
#define CACHE_MAX_REQUEST	256U
/* Replies: a list of entries is cut to fit (and says so). */
#define CACHE_MAX_REPLY		(64U << 10)

struct cache_hdr {
	uint32_t magic;
	uint16_t version;
	uint16_t type;
	uint32_t length;	/* payload bytes after the header */
	uint32_t reserved;	/* 0 */
};

struct cache_req_load {
	uint32_t flags;		/* CACHE_REQ_* */
	uint32_t reserved;	/* 0 */
};

/*
 * The asker waits with a deadline: while its request is in progress the
 * service sends CACHE_REP_WAIT at once and then every interval, so that
 * a client can tell a long load from a service that does not answer.
 */
#define CACHE_REQ_HEARTBEAT	(1U << 0)
/*
 * The asker reads an image whose tensors were placed on 64 bytes
 * (CACHE_LOAD_ALIGNED below). A service answers a request without this
 * flag for such an image with EOPNOTSUPP: the asker loads privately.
 */
#define CACHE_REQ_ALIGNED	(1U << 1)

/*
 * Keeping an entry loaded, whatever the budget needs (an operator's:
 * root's or the service's own user's). PIN and WARM load the file when it
 * is not loaded and are answered as a LOAD; UNPIN and WARM_END with DONE.
 * WARM keeps the file for the warm list numbered set (a config file's
 * one application); WARM_END (no fd) stops keeping what other sets kept.
 */
#define CACHE_KEEP_PIN		1U
#define CACHE_KEEP_UNPIN	2U
#define CACHE_KEEP_WARM		3U
#define CACHE_KEEP_WARM_END	4U

struct cache_req_keep {
	uint32_t op;		/* CACHE_KEEP_* */
	uint32_t reserved;	/* 0 */
	uint64_t set;		/* WARM, WARM_END; else 0 */
};

struct cache_rep_wait {
	uint32_t interval_ms;	/* the next one comes within this */
	uint32_t reserved;	/* 0 */
};

#define CACHE_LOAD_FRESH	(1U << 0)	/* this request loaded it */
/*
 * The image holds the file's first data_start bytes (its header) as the
 * file has them, and each tensor where a PIN_ST_LOAD_WHOLE_FILE |
 * PIN_ST_LOAD_ALIGN load puts it (pin_st.h: in file order, each at the
 * first multiple of 64 at or after the end of the one before), all within
 * view_length; file_size is still the file's. Without it the image is the
 * file, byte for byte.
 */
#define CACHE_LOAD_ALIGNED	(1U << 1)

struct cache_rep_load {
	uint64_t entry_id;
	uint64_t file_size;	/* bytes of the file image at view offset 0 */
	uint64_t view_length;	/* page multiple >= file_size */
	uint32_t backend;	/* PIN_BACKEND_DEVICE or _PORTABLE */
	uint32_t flags;		/* CACHE_LOAD_* */
};

struct cache_rep_error {
	int32_t err;		/* a positive errno value */
	uint32_t reserved;	/* 0 */
	/* then the message text, not NUL-terminated, to the payload's end */
};

/* A decoded message: what the packet said, checked against its type. */
struct cache_msg {
	unsigned type;
	union {
		struct cache_req_load load;
		struct cache_req_keep keep;
		struct cache_rep_load rep_load;
		struct cache_rep_error error;
		struct cache_rep_wait wait;
	} u;
	const char *text;	/* LIST, DONE, ERROR: into the packet, not terminated */
	size_t text_len;
};

/*
 * Check and decode one packet of len bytes that carried nfds fds. Pure:
 * no I/O, no allocation. Returns 0, or -EPROTO (*why says which rule:
 * magic, version, length, reserved bits, payload size, fd count, unknown
 * type) or -EMSGSIZE (longer than CACHE_MAX_REQUEST / _REPLY for its
 * direction).
 */
int cache_proto_decode(const void *buf, size_t len, int nfds,
		       struct cache_msg *msg, const char **why);

/* Build a packet into buf (cap bytes); return its length or -ENOSPC. */
int cache_proto_encode(void *buf, size_t cap, unsigned type,
		       const void *payload, size_t payload_len);
/* An ERROR packet; text cut to fit CACHE_MAX_REPLY. */
int cache_proto_encode_error(void *buf, size_t cap, int err,
			     const char *text);

/*
 * Where the fds a receiver will not keep go. A client closes them; the
 * service must not (closing a file a client chose can block: a lingering
 * TCP socket, a FUSE file whose flush is never answered), so it hands
 * them to a thread of their own.
 */
struct cache_fd_sink {
	void (*drop)(int fd, void *arg);
	void *arg;
};

/*
 * One packet over a SOCK_SEQPACKET socket with at most one fd. send:
 * fd < 0 for none; MSG_NOSIGNAL, flags added (MSG_DONTWAIT for the
 * service). recv: *fdp gets the fd (close-on-exec) or -1; a packet longer
 * than cap is -EMSGSIZE, more than one fd -EPROTO (every fd dropped);
 * fds the kernel could not all install (a full fd table) -EMFILE; 0
 * bytes is -ECONNRESET (end of stream). Every fd a packet can carry
 * (SCM_MAX_FD) is received, so the kernel never closes one in the
 * receiver's context; those not kept go to sink (NULL: close). Both
 * restart on EINTR.
 */
int cache_msg_send(int sock, const void *buf, size_t len, int fd, int flags);
int cache_msg_recv(int sock, void *buf, size_t cap, size_t *lenp, int *fdp,
		   int flags, const struct cache_fd_sink *sink);

#endif /* PIN_CACHE_PROTO_H */
