// SPDX-License-Identifier: GPL-2.0
/*
 * pinmem-cached's event loop: one thread, epoll, non-blocking sockets.
 * A connection asks one question. A LOAD's fd goes to its member's thread
 * to be keyed; the answer comes back as an event, and the request is
 * answered at once from memory, joins the load of its file already
 * running (single flight), waits for evictions to make room, or starts a
 * load in a thread. A LIST is answered by a thread of its own. Whatever a
 * client does (garbage, too much, nothing, an fd whose close blocks,
 * leaving mid-request) ends its own connection only, and the loop calls
 * nothing that can block on it.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "service.h"
#include "cache_proto.h"

#define BEAT_MS		1000U	/* CACHE_REP_WAIT at least this often */
#define TICK_MS		250	/* the loop's wake-up for deadlines, beats */
#define MAX_DRAIN	100000	/* packets read from a closing connection */

enum conn_state {
	CONN_NEW,		/* no request yet */
	CONN_KEYING,		/* its fd with the member's thread */
	CONN_ROOM,		/* keyed; waiting for evictions to make room */
	CONN_WAITING,		/* for a load */
	CONN_LISTING,		/* for the LIST's thread */
	CONN_HOLDING,		/* handed the view; until the client goes */
};

struct conn {
	int kind;			/* WATCH_CONN; first, as in struct watch */
	int fd;
	struct conn *prev, *next;
	struct conn *room_next;		/* the FIFO of CONN_ROOM */
	enum conn_state state;
	uint64_t id;
	struct member *member;
	struct entry *entry;		/* waited for, or handed over */
	uint64_t deadline_ns;
	uint64_t beat_ns;		/* the next CACHE_REP_WAIT; 0: not asked */
	int heartbeat;
	pid_t pid;
	uid_t uid;
	/* CONN_ROOM: the keyed file, not yet loading. */
	int file_fd;
	struct cache_key key;
	char name[NAME_LEN];
	uint64_t since_ns;
};

enum { WATCH_LISTEN, WATCH_EVENTS, WATCH_SIGNAL, WATCH_CONN };

struct watch {
	int kind;
	int fd;
};

struct loop {
	struct store *s;
	const struct loop_opts *o;
	int ep;
	struct conn *conns;
	struct conn *dead;		/* closed during this batch */
	struct conn *rooms;		/* CONN_ROOM, oldest first */
	struct member *members;
	unsigned nconns;
	uint64_t next_id;
	int stop;
	uint8_t *rep;			/* CACHE_MAX_REPLY bytes */
	struct watch *lws;		/* the listening sockets' watches */
	int nlws;
	uint64_t paused_until_ns;	/* out of fds: not accepting until */
};

static uint64_t after_ms(uint64_t ms)
{
	return now_ns() + ms * 1000000ULL;
}

static void sink_drop(int fd, void *arg)
{
	member_drop_fd(arg, fd);
}

/*
 * Close a client's socket without closing, in this thread, a file the
 * client queued on it: stop it sending, take every packet still queued
 * (their fds go to the member's thread), then close.
 */
static void discard_socket(int fd, struct member *m)
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

static void room_unlink(struct loop *l, struct conn *c)
{
	struct conn **pp = &l->rooms;

	while (*pp && *pp != c)
		pp = &(*pp)->room_next;
	if (*pp)
		*pp = c->room_next;
	c->room_next = NULL;
}

static void conn_close(struct loop *l, struct conn *c)
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

static void free_dead(struct loop *l)
{
	while (l->dead) {
		struct conn *c = l->dead;

		l->dead = c->next;
		free(c);
	}
}

static struct conn *conn_by_id(struct loop *l, uint64_t id)
{
	for (struct conn *c = l->conns; c; c = c->next)
		if (c->id == id)
			return c;
	return NULL;
}

/* Answer with an error and end the connection. */
static void conn_error(struct loop *l, struct conn *c, int err,
		       const char *text)
{
	int n = cache_proto_encode_error(l->rep, CACHE_MAX_REPLY, err, text);

	if (n > 0)
		cache_msg_send(c->fd, l->rep, (size_t)n, -1, MSG_DONTWAIT);
	conn_close(l, c);
}

/* Still working on it: for a client that waits with a deadline. */
static void send_wait(struct loop *l, struct conn *c)
{
	struct cache_rep_wait w = { .interval_ms = BEAT_MS };
	int n = cache_proto_encode(l->rep, CACHE_MAX_REPLY, CACHE_REP_WAIT,
				   &w, sizeof(w));

	if (n > 0)
		cache_msg_send(c->fd, l->rep, (size_t)n, -1, MSG_DONTWAIT);
	c->beat_ns = after_ms(BEAT_MS);
}

/* Hand a ready entry's view over; the connection holds it until it goes. */
static void conn_hand_over(struct loop *l, struct conn *c, struct entry *e,
			   int fresh)
{
	struct cache_rep_load r = {
		.entry_id = e->id,
		.file_size = (uint64_t)e->key.size,
		.view_length = e->view_length,
		.backend = (uint32_t)pin_dev_backend(e->dev),
		.flags = fresh ? CACHE_LOAD_FRESH : 0,
	};
	int n = cache_proto_encode(l->rep, CACHE_MAX_REPLY, CACHE_REP_LOAD,
				   &r, sizeof(r));

	if (c->state == CONN_WAITING) {
		e->waiters--;
		c->entry = NULL;
	}
	c->state = CONN_NEW;
	c->beat_ns = 0;
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

static void conn_join(struct loop *l, struct conn *c, struct entry *e)
{
	c->state = CONN_WAITING;
	c->entry = e;
	c->deadline_ns = after_ms((uint64_t)l->o->load_timeout_ms);
	e->waiters++;
}

/* Room is there: a new entry, charged to the member, and its thread. */
static void start_load(struct loop *l, struct conn *c, uint64_t charge)
{
	struct entry *e = store_add(l->s, &c->key, charge, c->member);
	int fd = c->file_fd;

	room_unlink(l, c);
	c->state = CONN_NEW;
	c->file_fd = -1;
	if (!e) {
		member_drop_fd(c->member, fd);
		conn_error(l, c, ENOMEM, "out of memory");
		return;
	}
	memcpy(e->name, c->name, sizeof(e->name));
	e->file_fd = fd;
	if (load_start(l->s, e)) {
		member_drop_fd(c->member, fd);
		store_forget(l->s, e);
		conn_error(l, c, EAGAIN, "cannot start a loading thread");
		return;
	}
	c->member->loads++;
	conn_join(l, c, e);
}

/* An earlier connection waiting for room for the same file: wait behind. */
static int room_queued_before(struct loop *l, struct conn *c)
{
	for (struct conn *o = l->rooms; o && o != c; o = o->room_next)
		if (key_equal(&o->key, &c->key))
			return 1;
	return 0;
}

/* A keyed file with no entry: room for it now, later, or never. */
static void try_room(struct loop *l, struct conn *c)
{
	const struct member_opts *mo = &l->o->member;
	uint64_t charge = ((uint64_t)c->key.size + (2U << 20) - 1) &
			  ~((2ULL << 20) - 1);
	struct room r = { charge, c->member, c->since_ns };
	struct entry *e = store_find(l->s, &c->key);
	char why[1024];
	int fd, ret;

	if (e || room_queued_before(l, c)) {
		if (e) {
			room_unlink(l, c);
			fd = c->file_fd;
			c->file_fd = -1;
			member_drop_fd(c->member, fd);
			c->state = CONN_NEW;
			if (e->state == ENTRY_READY)
				conn_hand_over(l, c, e, 0);
			else
				conn_join(l, c, e);
		}
		return;
	}
	if (c->member->loads >= mo->max_loads) {
		snprintf(why, sizeof(why), "busy: your user has %u loads in flight, the most one user may have",
			 c->member->loads);
		conn_error(l, c, EAGAIN, why);
		return;
	}
	ret = room_plan(l->s, &r, mo);
	if (ret == 0) {
		start_load(l, c, charge);
	} else if (ret < 0) {
		room_refusal(l->s, &r, mo, c->uid, why, sizeof(why));
		conn_error(l, c, ENOSPC, why);
	}
}

/* Every connection waiting for room asks again, oldest first. */
static void retry_rooms(struct loop *l)
{
	struct conn *c = l->rooms, *next;

	while (c) {
		next = c->room_next;
		try_room(l, c);
		c = next;
	}
}

static void room_wait(struct loop *l, struct conn *c, const struct event *ev)
{
	struct conn **pp = &l->rooms;

	c->state = CONN_ROOM;
	c->file_fd = ev->fd;
	c->key = ev->key;
	memcpy(c->name, ev->name, sizeof(c->name));
	c->since_ns = now_ns();
	c->deadline_ns = after_ms((uint64_t)l->o->load_timeout_ms);
	while (*pp)
		pp = &(*pp)->room_next;
	*pp = c;
	try_room(l, c);
}

/* The member's thread keyed a LOAD's fd. */
static void keyed(struct loop *l, struct event *ev)
{
	struct member *m = member_get(&l->members, ev->uid, &l->s->ev);
	struct conn *c = conn_by_id(l, ev->conn_id);
	struct entry *e;

	if (!c || c->state != CONN_KEYING) {
		member_drop_fd(m, ev->fd);	/* the asker is gone */
		return;
	}
	if (ev->err) {
		conn_error(l, c, ev->err, ev->why);
		return;
	}
	e = store_find(l->s, &ev->key);
	if (!e) {
		room_wait(l, c, ev);
		return;
	}
	member_drop_fd(c->member, ev->fd);
	if (e->state == ENTRY_READY)
		conn_hand_over(l, c, e, 0);
	else
		conn_join(l, c, e);
}

static void handle_load(struct loop *l, struct conn *c,
			const struct cache_msg *msg, int fd)
{
	if (member_pending(c->member) >= l->o->member.max_pending_fds) {
		member_drop_fd(c->member, fd);
		conn_error(l, c, EAGAIN, "busy: too many of your user's files are still being opened or closed");
		return;
	}
	c->state = CONN_KEYING;
	c->heartbeat = !!(msg->u.load.flags & CACHE_REQ_HEARTBEAT);
	c->deadline_ns = after_ms((uint64_t)l->o->client_timeout_ms);
	member_key(c->member, fd, c->id);
	if (c->heartbeat)
		send_wait(l, c);
}

static void handle_list(struct loop *l, struct conn *c)
{
	if (list_start(l->s, c->id, c->uid)) {
		conn_error(l, c, ENOMEM, "cannot start the list");
		return;
	}
	c->state = CONN_LISTING;
	c->deadline_ns = after_ms((uint64_t)l->o->client_timeout_ms);
}

static void listed(struct loop *l, struct event *ev)
{
	static const size_t hdr = sizeof(struct cache_hdr);
	struct conn *c = conn_by_id(l, ev->conn_id);
	size_t n = ev->len < CACHE_MAX_REPLY - hdr ? ev->len :
		   CACHE_MAX_REPLY - hdr;
	struct cache_hdr h = {
		.magic = CACHE_MAGIC, .version = CACHE_VERSION,
		.type = CACHE_REP_LIST, .length = (uint32_t)n,
	};

	if (!c || c->state != CONN_LISTING)
		return;
	if (ev->err) {
		conn_error(l, c, ev->err, "cannot list");
		return;
	}
	memcpy(l->rep, &h, hdr);
	memcpy(l->rep + hdr, ev->text, n);
	cache_msg_send(c->fd, l->rep, hdr + n, -1, MSG_DONTWAIT);
	conn_close(l, c);
}

/* A packet from a connection. */
static void conn_readable(struct loop *l, struct conn *c)
{
	struct cache_fd_sink sink = { sink_drop, c->member };
	uint8_t req[CACHE_MAX_REQUEST];
	struct cache_msg msg;
	const char *why = "";
	size_t len;
	int fd, ret;

	ret = cache_msg_recv(c->fd, req, sizeof(req), &len, &fd, MSG_DONTWAIT,
			     &sink);
	if (ret == -EAGAIN)
		return;
	if (ret || c->state != CONN_NEW) {
		/* Gone, or speaking out of turn: either ends it. */
		member_drop_fd(c->member, fd);
		if (ret == -EMSGSIZE || ret == -EPROTO)
			conn_error(l, c, -ret, ret == -EMSGSIZE ?
				   "request too long" : "more than one fd");
		else
			conn_close(l, c);
		return;
	}
	ret = cache_proto_decode(req, len, fd >= 0, &msg, &why);
	if (ret) {
		member_drop_fd(c->member, fd);
		conn_error(l, c, -ret, why);
	} else if (msg.type == CACHE_REQ_LOAD) {
		handle_load(l, c, &msg, fd);
	} else if (msg.type == CACHE_REQ_LIST) {
		handle_list(l, c);
	} else {
		member_drop_fd(c->member, fd);
		conn_error(l, c, EPROTO, "not a request");
	}
}

/* Answer every connection waiting for e; forget e if its load failed. */
static void loaded(struct loop *l, struct entry *e)
{
	struct conn *c, *next;

	l->s->loads++;
	e->member->loads--;
	e->state = ENTRY_READY;
	for (c = l->conns; c; c = next) {
		next = c->next;
		if (c->state != CONN_WAITING || c->entry != e)
			continue;
		if (e->err)
			conn_error(l, c, e->err, e->errtext);
		else
			conn_hand_over(l, c, e, 1);
	}
	if (e->err) {
		fprintf(stderr, "pinmem-cached: load of %s failed: %s\n",
			e->name, e->errtext);
		store_forget(l->s, e);
	}
}

static void take_events(struct loop *l)
{
	struct event *ev;
	uint64_t n;

	if (read(l->s->ev.efd, &n, sizeof(n)) < 0 && errno != EAGAIN)
		perror("pinmem-cached: eventfd");
	while ((ev = events_take(&l->s->ev))) {
		switch (ev->kind) {
		case EV_KEYED:
			keyed(l, ev);
			break;
		case EV_LOADED:
			loaded(l, ev->entry);
			retry_rooms(l);
			break;
		case EV_EVICTED:
			evict_done(l->s, ev);
			retry_rooms(l);
			break;
		case EV_LISTED:
			listed(l, ev);
			break;
		}
		event_free(ev);
	}
}

/*
 * Out of fds: stop watching the listening sockets for a while (else a
 * pending connection wakes the loop at once, forever); sweep resumes.
 */
static void pause_accepting(struct loop *l)
{
	for (int i = 0; i < l->nlws; i++)
		epoll_ctl(l->ep, EPOLL_CTL_DEL, l->lws[i].fd, NULL);
	l->paused_until_ns = after_ms(100);
}

static void resume_accepting(struct loop *l)
{
	for (int i = 0; i < l->nlws; i++) {
		struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &l->lws[i] };

		epoll_ctl(l->ep, EPOLL_CTL_ADD, l->lws[i].fd, &ev);
	}
	l->paused_until_ns = 0;
}

/* Whether a new connection of m would pass a limit; what to say then. */
static const char *over_limits(struct loop *l, struct member *m)
{
	if (l->nconns >= l->o->max_clients)
		return "busy: the service has as many connections as it takes";
	if (m->conns >= l->o->member.max_clients)
		return "busy: your user has as many connections as one user may have";
	if (member_pending(m) >= l->o->member.max_pending_fds)
		return "busy: too many of your user's files are still being opened or closed";
	return NULL;
}

/* Refused at the door: told why, its socket discarded. */
static void refuse(struct loop *l, int fd, struct member *m, const char *why)
{
	int n = cache_proto_encode_error(l->rep, CACHE_MAX_REPLY, EAGAIN, why);

	if (n > 0)
		cache_msg_send(fd, l->rep, (size_t)n, -1, MSG_DONTWAIT);
	if (m)
		discard_socket(fd, m);
	else
		close(fd);	/* out of memory for a member: nothing queued yet */
}

static struct conn *conn_new(struct loop *l, int fd, const struct ucred *cr,
			     struct member *m)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP };
	struct conn *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->kind = WATCH_CONN;
	c->fd = fd;
	c->file_fd = -1;
	c->id = ++l->next_id;
	c->member = m;
	c->pid = cr->pid;
	c->uid = cr->uid;
	c->deadline_ns = after_ms((uint64_t)l->o->client_timeout_ms);
	ev.data.ptr = c;
	if (epoll_ctl(l->ep, EPOLL_CTL_ADD, fd, &ev)) {
		free(c);
		return NULL;
	}
	c->next = l->conns;
	if (l->conns)
		l->conns->prev = c;
	l->conns = c;
	l->nconns++;
	m->conns++;
	return c;
}

static void accept_all(struct loop *l, int lfd)
{
	for (;;) {
		struct ucred cr = { .pid = 0, .uid = (uid_t)-1 };
		socklen_t cl = sizeof(cr);
		struct member *m = NULL;
		const char *why;
		int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd < 0 && (errno == EMFILE || errno == ENFILE))
			pause_accepting(l);
		if (fd < 0)
			return;	/* EAGAIN, or a client gone already */
		if (!getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl))
			m = member_get(&l->members, cr.uid, &l->s->ev);
		why = m ? over_limits(l, m) : "out of memory";
		if (!why && !conn_new(l, fd, &cr, m))
			why = "out of memory";
		if (why)
			refuse(l, fd, m, why);
	}
}

static const char *late(enum conn_state st)
{
	switch (st) {
	case CONN_NEW:
		return "no request in time";
	case CONN_KEYING:
		return "the file did not answer in time (fstat of the fd you passed)";
	case CONN_ROOM:
		return "no room was made in time";
	case CONN_WAITING:
		return "the load did not finish in time";
	default:
		return "the service did not finish in time";
	}
}

/* Connections past their deadline, and beats for those that wait. */
static void sweep(struct loop *l)
{
	uint64_t now = now_ns();
	struct conn *c, *next;

	if (l->paused_until_ns && now > l->paused_until_ns)
		resume_accepting(l);
	for (c = l->conns; c; c = next) {
		next = c->next;
		if (c->deadline_ns && now > c->deadline_ns) {
			if (c->state == CONN_HOLDING)
				conn_close(l, c);
			else
				conn_error(l, c, ETIMEDOUT, late(c->state));
		} else if (c->heartbeat && c->beat_ns && now >= c->beat_ns &&
			   c->state != CONN_HOLDING && c->state != CONN_NEW) {
			send_wait(l, c);
		}
	}
	members_sweep(&l->members);
}

static void dispatch(struct loop *l, struct epoll_event *ev)
{
	struct watch *w = ev->data.ptr;

	switch (w->kind) {
	case WATCH_LISTEN:
		accept_all(l, w->fd);
		break;
	case WATCH_EVENTS:
		take_events(l);
		break;
	case WATCH_SIGNAL:
		l->stop = 1;
		break;
	default: {
		struct conn *c = (struct conn *)w;

		if (c->fd < 0)
			break;		/* closed earlier in this batch */
		if (ev->events & EPOLLIN)
			conn_readable(l, c);
		else
			conn_close(l, c);	/* HUP or ERR without data */
		break;
	}
	}
}

static int add_watch(struct loop *l, struct watch *w)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = w };

	return epoll_ctl(l->ep, EPOLL_CTL_ADD, w->fd, &ev) ? -errno : 0;
}

static int signal_fd(void)
{
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);
	return signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
}

int loop_run(struct store *s, const int *lfds, int nlfds,
	     const struct loop_opts *o)
{
	struct watch ws[16 + 2];
	struct epoll_event evs[64];
	struct loop l = { .s = s, .o = o };
	int i, n, ret = 0;

	l.rep = malloc(CACHE_MAX_REPLY);
	l.ep = epoll_create1(EPOLL_CLOEXEC);
	if (!l.rep || l.ep < 0 || nlfds > 16)
		return -ENOMEM;
	for (i = 0; i < nlfds; i++)
		ws[i] = (struct watch){ WATCH_LISTEN, lfds[i] };
	l.lws = ws;
	l.nlws = nlfds;
	ws[i++] = (struct watch){ WATCH_EVENTS, s->ev.efd };
	ws[i++] = (struct watch){ WATCH_SIGNAL, signal_fd() };
	for (int j = 0; j < i && !ret; j++)
		ret = add_watch(&l, &ws[j]);
	while (!ret && !l.stop) {
		n = epoll_wait(l.ep, evs, 64, TICK_MS);
		if (n < 0 && errno != EINTR)
			ret = -errno;
		for (int j = 0; j < n; j++)
			dispatch(&l, &evs[j]);
		sweep(&l);
		free_dead(&l);
	}
	while (l.conns)
		conn_close(&l, l.conns);
	free_dead(&l);
	members_fini(&l.members);
	close(ws[i - 1].fd);
	close(l.ep);
	free(l.rep);
	return ret;
}
