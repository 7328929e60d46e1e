// SPDX-License-Identifier: GPL-2.0
/*
 * A connection's life on the event loop: answered, handed a view, made to
 * wait, closed. Closing never closes the socket in this thread, nor a
 * file the client queued on it: the member's thread does (hand_socket).
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

/* A file a client's packet carried beyond the one kept: to its thread. */
void sink_drop(int fd, void *arg)
{
	member_took(arg, 1);
	member_drop_fd(arg, fd);
}

/*
 * Whether a socket its peer may no longer send on holds no file in
 * flight. Packets without fds are read away; asking for credentials tells
 * a packet of no bytes (it has them) from the end (none). A packet with
 * fds stops it: they are not received here.
 */
static int holds_no_file(int fd)
{
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(sizeof(struct ucred))];
	} ctl;
	const int on = 1;
	char byte;

	if (setsockopt(fd, SOL_SOCKET, SO_PASSCRED, &on, sizeof(on)))
		return 0;
	for (int i = 0; i < MAX_UNREAD; i++) {
		struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
		struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1,
				      .msg_control = ctl.buf,
				      .msg_controllen = sizeof(ctl.buf) };
		ssize_t n = recvmsg(fd, &msg, MSG_PEEK | MSG_DONTWAIT);

		if (n < 0 || (msg.msg_flags & MSG_CTRUNC))
			return 0;
		if (!CMSG_FIRSTHDR(&msg))
			return 1;	/* the end: nothing queued */
		msg.msg_controllen = sizeof(ctl.buf);
		if (recvmsg(fd, &msg, MSG_DONTWAIT) < 0)
			return 0;
	}
	return 0;
}

/*
 * Be done with a client's socket without closing it here: its peer may
 * send no more; one with files in flight goes to m's thread, whose close
 * releases them there, one without to the stray closer, whose closes
 * never wait (a member's thread can be stuck on another file).
 */
void hand_socket(struct loop *l, int fd, struct member *m)
{
	if (!m)
		m = l->stray;	/* counted there: no member, out of memory */
	if (shutdown(fd, SHUT_RDWR) == 0 && holds_no_file(fd)) {
		if (m != l->stray) {
			member_took(l->stray, 1);
			member_took(m, -1);
		}
		m = l->stray;
	}
	member_drop_fd(m, fd);
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
	conn_watch(l, c, 0);
	hand_socket(l, c->fd, c->member);
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
