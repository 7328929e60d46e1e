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

#include "loop.h"
#include "cache_proto.h"

static void handle_load(struct loop *l, struct conn *c,
			const struct cache_msg *msg, int fd)
{
	if (member_pending(c->member) >= l->o->member.max_pending_fds) {
		member_drop_fd(c->member, fd);
		conn_error(l, c, EAGAIN, "busy: too many of your tenant's files are still being opened or closed");
		return;
	}
	c->state = CONN_KEYING;
	c->heartbeat = !!(msg->u.load.flags & CACHE_REQ_HEARTBEAT);
	c->aligned_ok = !!(msg->u.load.flags & CACHE_REQ_ALIGNED);
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
	if (fd >= 0)
		member_took(c->member, 1);
	if (ret == -EAGAIN)
		return;
	if (ret || c->state != CONN_NEW) {
		/* Gone, or speaking out of turn: either ends it. */
		member_drop_fd(c->member, fd);
		if (ret == -EMFILE)
			conn_error(l, c, EAGAIN, "busy: the service has no room for the files passed to it");
		else if (ret == -EMSGSIZE || ret == -EPROTO)
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
	} else if (msg.type == CACHE_REQ_KEEP) {
		handle_keep(l, c, msg.u.keep.op, msg.u.keep.set, fd);
	} else {
		member_drop_fd(c->member, fd);
		conn_error(l, c, EPROTO, "not a request");
	}
}

/*
 * Answer every connection waiting for e; forget e if its load failed.
 * Only the request that started the load is told it loaded the file.
 */
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
			conn_hand_over(l, c, e, c->id == e->loader);
	}
	kept_loaded(e);
	if (e->err) {
		fprintf(stderr, "pinmem-cached: load of %s failed: %s\n",
			e->name, e->errtext);
		store_forget(l->s, e);
	}
}

/* A refused eviction named the tenant that maps the entry: it pays. */
static void charge_holder(struct loop *l, struct event *ev)
{
	struct member *m;

	if (!ev->err || !ev->tenant[0])
		return;
	m = member_get(&l->members, ev->tenant, &l->s->ev);
	if (m && m != ev->entry->member)
		entry_charge_to(ev->entry, m);
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
			charge_holder(l, ev);
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

/* Whether a new connection of m would pass a limit; what to say then. */
static const char *over_limits(struct loop *l, struct member *m)
{
	if (l->nconns >= l->o->max_clients)
		return "busy: the service has as many connections as it takes";
	if (m->conns >= l->o->member.max_clients)
		return "busy: your tenant has as many connections as one tenant may have";
	if (member_pending(m) >= l->o->member.max_pending_fds ||
	    member_over(l, m))
		return "busy: too many of your tenant's files are still being opened or closed";
	return NULL;
}

/* Refused at the door, unread: told why, its socket to m's thread. */
static void refuse(struct loop *l, int fd, struct member *m, const char *why)
{
	int n = cache_proto_encode_error(l->rep, CACHE_MAX_REPLY, EAGAIN, why);

	if (n > 0)
		cache_msg_send(fd, l->rep, (size_t)n, -1, MSG_DONTWAIT);
	hand_socket(l, fd, m);
}

/*
 * The member of the client on fd: its tenant's (made on first use). A
 * client whose tenant cannot be told is refused, never put in another's.
 */
static const char *tenant_member(struct loop *l, int fd, struct ucred *cr,
				 struct member **m)
{
	socklen_t cl = sizeof(*cr);
	char tenant[TENANT_LEN];

	*m = NULL;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, cr, &cl))
		return "denied: the service cannot tell who you are (SO_PEERCRED)";
	if (tenant_of_peer(l->o->tenant, fd, cr, tenant, sizeof(tenant)))
		return cr->pid ? "denied: the service cannot read your process's cgroup (its tenant)" :
		       "denied: your process is in a pid namespace the service cannot see, so it cannot tell your tenant (cgroup)";
	*m = member_get(&l->members, tenant, &l->s->ev);
	return *m ? NULL : "out of memory";
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
	c->watched = 1;
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
		struct member *m = NULL;
		const char *why;
		int fd;

		if (!fds_room(l)) {
			pause_accepting(l);
			return;
		}
		fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0 && (errno == EMFILE || errno == ENFILE))
			pause_accepting(l);
		if (fd < 0)
			return;	/* EAGAIN, or a client gone already */
		why = tenant_member(l, fd, &cr, &m);
		member_took(m ? m : l->stray, 1);
		if (!why)
			why = over_limits(l, m);
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

	if (l->paused_until_ns && now > l->paused_until_ns && fds_room(l))
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

/* SIGHUP applies the warm list again; SIGTERM and SIGINT stop. */
static void signalled(struct loop *l, int fd)
{
	struct signalfd_siginfo si;

	while (read(fd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
		if (si.ssi_signo == SIGHUP)
			warm_config_apply(l);
		else
			l->stop = 1;
	}
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
		signalled(l, w->fd);
		break;
	default: {
		struct conn *c = (struct conn *)w;

		if (c->fd < 0)
			break;		/* closed earlier in this batch */
		if (!may_read(l, c))
			conn_watch(l, c, 0);	/* flow() watches it again */
		else if (ev->events & EPOLLIN)
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
	sigaddset(&set, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);
	signal(SIGCHLD, SIG_IGN);	/* warm.c's pinctl: reaped unwaited */
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
	if (!ret)
		ret = flow_init(&l);
	if (!ret)
		fdstore_restore(s, &l.members);
	if (!ret)
		warm_config_apply(&l);
	while (!ret && !l.stop) {
		flow(&l);
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
	members_fini(&l.stray);
	close(ws[i - 1].fd);
	close(l.ep);
	free(l.rep);
	return ret;
}
