// SPDX-License-Identifier: GPL-2.0
/*
 * A connection's life on the event loop: answered, handed a view, made to
 * wait, closed. Closing never closes, in this thread, a file the client
 * queued on the socket (discard_socket).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "loop.h"
#include "cache_proto.h"

uint64_t after_ms(uint64_t ms)
{
	return now_ns() + ms * 1000000ULL;
}

void sink_drop(int fd, void *arg)
{
	member_drop_fd(arg, fd);
}

/*
 * Close a client's socket without closing, in this thread, a file the
 * client queued on it: stop it sending, take every packet still queued
 * (their fds go to the member's thread), then close.
 */
void discard_socket(int fd, struct member *m)
{
	struct cache_fd_sink sink = { sink_drop, m };
	uint8_t buf[64];
	size_t len;
	int pfd, ret, i;

	shutdown(fd, SHUT_RD);
	for (i = 0; m && i < MAX_DRAIN; i++) {
		ret = cache_msg_recv(fd, buf, sizeof(buf), &len, &pfd,
				     MSG_DONTWAIT, &sink);
		member_drop_fd(m, pfd);
		if (ret == -EAGAIN || ret == -ECONNRESET || ret == -ENOTCONN)
			break;
	}
	close(fd);
}

void room_unlink(struct loop *l, struct conn *c)
{
	struct conn **pp = &l->rooms;

	while (*pp && *pp != c)
		pp = &(*pp)->room_next;
	if (*pp)
		*pp = c->room_next;
	c->room_next = NULL;
}

void conn_close(struct loop *l, struct conn *c)
{
	if (c->entry && c->state == CONN_WAITING)
		c->entry->waiters--;
	if (c->entry && c->state == CONN_HOLDING)
		c->entry->handoffs--;
	if (c->state == CONN_ROOM) {
		room_unlink(l, c);
		member_drop_fd(c->member, c->file_fd);
	}
	c->entry = NULL;
	if (c->prev)
		c->prev->next = c->next;
	else
		l->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	discard_socket(c->fd, c->member);	/* leaves the epoll set */
	c->fd = -1;
	c->member->conns--;
	l->nconns--;
	/* Events of this batch may still name it: freed after the batch. */
	c->next = l->dead;
	l->dead = c;
}

void free_dead(struct loop *l)
{
	while (l->dead) {
		struct conn *c = l->dead;

		l->dead = c->next;
		free(c);
	}
}

struct conn *conn_by_id(struct loop *l, uint64_t id)
{
	for (struct conn *c = l->conns; c; c = c->next)
		if (c->id == id)
			return c;
	return NULL;
}

/* Answer with an error and end the connection. */
void conn_error(struct loop *l, struct conn *c, int err,
		       const char *text)
{
	int n = cache_proto_encode_error(l->rep, CACHE_MAX_REPLY, err, text);

	if (n > 0)
		cache_msg_send(c->fd, l->rep, (size_t)n, -1, MSG_DONTWAIT);
	conn_close(l, c);
}

/* Still working on it: for a client that waits with a deadline. */
void send_wait(struct loop *l, struct conn *c)
{
	struct cache_rep_wait w = { .interval_ms = BEAT_MS };
	int n = cache_proto_encode(l->rep, CACHE_MAX_REPLY, CACHE_REP_WAIT,
				   &w, sizeof(w));

	if (n > 0)
		cache_msg_send(c->fd, l->rep, (size_t)n, -1, MSG_DONTWAIT);
	c->beat_ns = after_ms(BEAT_MS);
}

/* Hand a ready entry's view over; the connection holds it until it goes. */
void conn_hand_over(struct loop *l, struct conn *c, struct entry *e,
			   int fresh)
{
	struct cache_rep_load r = {
		.entry_id = e->id,
		.file_size = (uint64_t)e->key.size,
		.view_length = e->view_length,
		.backend = (uint32_t)pin_dev_backend(e->dev),
		.flags = (fresh ? CACHE_LOAD_FRESH : 0) |
			 (e->aligned ? CACHE_LOAD_ALIGNED : 0),
	};
	int n = cache_proto_encode(l->rep, CACHE_MAX_REPLY, CACHE_REP_LOAD,
				   &r, sizeof(r));

	if (c->state == CONN_WAITING) {
		e->waiters--;
		c->entry = NULL;
	}
	c->state = CONN_NEW;
	c->beat_ns = 0;
	if (e->aligned && !c->aligned_ok) {
		conn_error(l, c, EOPNOTSUPP, "this copy has its tensors on 64 bytes, which this client (older than the service) cannot read: load privately");
		return;
	}
	if (n < 0 || cache_msg_send(c->fd, l->rep, (size_t)n,
				    pin_view_fd(e->view), MSG_DONTWAIT)) {
		conn_close(l, c);
		return;
	}
	c->state = CONN_HOLDING;
	c->entry = e;
	e->handoffs++;
	entry_saw(e, c->pid, c->uid);
	c->deadline_ns = after_ms((uint64_t)l->o->client_timeout_ms);
	store_touch(l->s, e);
}

void conn_join(struct loop *l, struct conn *c, struct entry *e)
{
	c->state = CONN_WAITING;
	c->entry = e;
	c->deadline_ns = after_ms((uint64_t)l->o->load_timeout_ms);
	e->waiters++;
}
