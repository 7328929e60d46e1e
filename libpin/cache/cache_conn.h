/* SPDX-License-Identifier: MIT */
/*
 * The client's side of one exchange with pinmem-cached, under a deadline:
 * connect, send one request, receive its reply. A service that accepts
 * and never answers (frozen, or not a service at all) costs the client
 * the deadline, not its life. Internal to libpin.
 */
#ifndef PIN_CACHE_CONN_H
#define PIN_CACHE_CONN_H

#include <stddef.h>
#include <stdint.h>

#include "cache_proto.h"

/* The deadline when neither the options nor $PIN_CACHE_TIMEOUT set one. */
#define CACHE_TIMEOUT_MS	5000
/* The longest heartbeat interval a client honours beyond its deadline. */
#define CACHE_WAIT_MAX_MS	60000

/*
 * One request and its reply. In: the request (type, payload, the fd it
 * carries or -1) and the deadline. Out: the decoded reply (never a WAIT:
 * those restart the deadline and are read past), its fd or -1, whether
 * the connection was made (a failure before it: no service), and the
 * connection itself after a reply: the service holds a LOAD's entry
 * until it closes, so the caller maps the view before cache_call_end.
 */
struct cache_call {
	unsigned type;
	const void *payload;
	size_t payload_len;
	int fd;
	int timeout_ms;
	struct cache_msg msg;
	int rep_fd;
	int connected;
	int sock;		/* after a reply, until cache_call_end */
	uint8_t *rep;		/* msg's text points into it */
};

/*
 * The deadline in ms: opt_ms when > 0, else $PIN_CACHE_TIMEOUT (seconds,
 * a decimal fraction allowed; ignored unless a number > 0), else
 * CACHE_TIMEOUT_MS.
 */
int cache_timeout_ms(int opt_ms);
/*
 * Connect to the service at path, send k's request, receive its reply.
 * 0: k->msg holds it (LOAD, LIST or ERROR, checked by cache_proto_decode);
 * -ETIMEDOUT: the connection was not accepted, or no reply came, within
 * the deadline; other -errno as the socket calls give them. Release
 * with cache_call_end, whatever it returned, and before calling again.
 */
int cache_call(const char *path, struct cache_call *k);
void cache_call_end(struct cache_call *k);

#endif /* PIN_CACHE_CONN_H */
