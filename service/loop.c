// SPDX-License-Identifier: GPL-2.0
/*
 * pinmem-cached's event loop: one thread, epoll, non-blocking sockets.
 * A connection asks one question: a LOAD is answered at once from memory,
 * joins the load of its file already running (single flight), or starts
 * one in a thread; a LIST is answered and the connection closed. Whatever
 * a client does (garbage, too much, nothing, leaving mid-request) ends
 * its own connection only.
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

enum conn_state { CONN_NEW, CONN_WAITING, CONN_HOLDING };

struct conn {
	int kind;			/* WATCH_CONN; first, as in struct watch */
	int fd;
	struct conn *prev, *next;
	enum conn_state state;
	struct entry *entry;		/* waited for, or handed over */
	uint64_t deadline_ns;		/* 0: none (waiting for a load) */
	pid_t pid;
};

enum { WATCH_LISTEN, WATCH_DONE, WATCH_SIGNAL, WATCH_CONN };

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
	unsigned nconns;
	int stop;
	uint8_t *rep;			/* CACHE_MAX_REPLY bytes */
	struct watch *lws;		/* the listening sockets' watches */
	int nlws;
	uint64_t paused_until_ns;	/* out of fds: not accepting until */
};

static void conn_close(struct loop *l, struct conn *c)
{
	if (c->entry && c->state == CONN_WAITING)
		c->entry->waiters--;
	if (c->entry && c->state == CONN_HOLDING)
		c->entry->handoffs--;
	c->entry = NULL;
	if (c->prev)
		c->prev->next = c->next;
	else
		l->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	close(c->fd);	/* leaves the epoll set with it */
	c->fd = -1;
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

/* Answer with an error and end the connection. */
static void conn_error(struct loop *l, struct conn *c, int err,
		       const char *text)
{
	int n = cache_proto_encode_error(l->rep, CACHE_MAX_REPLY, err, text);

	if (n > 0)
		cache_msg_send(c->fd, l->rep, (size_t)n, -1, MSG_DONTWAIT);
	conn_close(l, c);
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
		c->state = CONN_NEW;
	}
	if (n < 0 || cache_msg_send(c->fd, l->rep, (size_t)n,
				    pin_view_fd(e->view), MSG_DONTWAIT)) {
		conn_close(l, c);
		return;
	}
	c->state = CONN_HOLDING;
	c->entry = e;
	e->handoffs++;
	c->deadline_ns = now_ns() + (uint64_t)l->o->client_timeout_ms * 1000000;
	store_touch(l->s, e);
}

/* A new entry for the file at fd: room for it, then a loading thread. */
static void start_load(struct loop *l, struct conn *c, int fd,
		       const struct cache_key *k)
{
	uint64_t charge = ((uint64_t)k->size + (2U << 20) - 1) & ~((2ULL << 20) - 1);
	char why[1024], link[64];
	struct entry *e;
	ssize_t n;
	int ret;

	ret = store_make_room(l->s, charge, why, sizeof(why));
	if (ret) {
		close(fd);
		conn_error(l, c, -ret, why);
		return;
	}
	e = store_add(l->s, k, charge);
	if (!e) {
		close(fd);
		conn_error(l, c, ENOMEM, "out of memory");
		return;
	}
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	n = readlink(link, e->name, sizeof(e->name) - 1);
	e->name[n > 0 ? n : 0] = '\0';
	e->file_fd = fd;
	ret = load_start(l->s, e);
	if (ret) {
		store_remove(l->s, e);	/* closes fd */
		conn_error(l, c, -ret, "cannot start a loading thread");
		return;
	}
	c->state = CONN_WAITING;
	c->entry = e;
	c->deadline_ns = 0;
	e->waiters++;
}

static void handle_load(struct loop *l, struct conn *c, int fd)
{
	struct cache_key k;
	struct entry *e;
	char why[256];
	int ret;

	ret = key_of_fd(fd, &k, why, sizeof(why));
	if (ret) {
		close(fd);
		conn_error(l, c, -ret, why);
		return;
	}
	e = store_find(l->s, &k);
	if (e && e->state == ENTRY_READY) {
		close(fd);
		conn_hand_over(l, c, e, 0);
	} else if (e) {
		close(fd);
		c->state = CONN_WAITING;
		c->entry = e;
		c->deadline_ns = 0;
		e->waiters++;
	} else {
		start_load(l, c, fd, &k);
	}
}

static void handle_list(struct loop *l, struct conn *c)
{
	static const size_t hdr = sizeof(struct cache_hdr);
	char *text = (char *)l->rep + hdr;
	int n = store_list(l->s, text, CACHE_MAX_REPLY - hdr);
	struct cache_hdr h = {
		.magic = CACHE_MAGIC, .version = CACHE_VERSION,
		.type = CACHE_REP_LIST, .length = (uint32_t)n,
	};

	memcpy(l->rep, &h, hdr);
	cache_msg_send(c->fd, l->rep, hdr + (size_t)n, -1, MSG_DONTWAIT);
	conn_close(l, c);
}

/* A packet from a connection. */
static void conn_readable(struct loop *l, struct conn *c)
{
	uint8_t req[CACHE_MAX_REQUEST];
	struct cache_msg msg;
	const char *why = "";
	size_t len;
	int fd, ret;

	ret = cache_msg_recv(c->fd, req, sizeof(req), &len, &fd, MSG_DONTWAIT,
			     NULL);
	if (ret == -EAGAIN)
		return;
	if (ret || c->state != CONN_NEW) {
		/* Gone, or speaking out of turn: either ends it. */
		if (fd >= 0)
			close(fd);
		if (ret == -EMSGSIZE || ret == -EPROTO)
			conn_error(l, c, -ret, ret == -EMSGSIZE ?
				   "request too long" : "more than one fd");
		else
			conn_close(l, c);
		return;
	}
	ret = cache_proto_decode(req, len, fd >= 0, &msg, &why);
	if (ret) {
		if (fd >= 0)
			close(fd);
		conn_error(l, c, -ret, why);
	} else if (msg.type == CACHE_REQ_LOAD) {
		handle_load(l, c, fd);
	} else if (msg.type == CACHE_REQ_LIST) {
		handle_list(l, c);
	} else {
		if (fd >= 0)
			close(fd);
		conn_error(l, c, EPROTO, "not a request");
	}
}

/* Answer every connection waiting for e; forget e if its load failed. */
static void load_done(struct loop *l, struct entry *e)
{
	struct conn *c, *next;

	l->s->loads++;
	e->state = ENTRY_READY;
	for (c = l->conns; c; c = next) {
		next = c->next;
		if (c->state != CONN_WAITING || c->entry != e)
			continue;
		if (e->err) {
			conn_error(l, c, e->err, e->errtext);
		} else {
			conn_hand_over(l, c, e, 1);
		}
	}
	if (e->err) {
		fprintf(stderr, "pinmem-cached: load of %s failed: %s\n",
			e->name, e->errtext);
		store_remove(l->s, e);
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
	l->paused_until_ns = now_ns() + 100000000ULL;
}

static void resume_accepting(struct loop *l)
{
	for (int i = 0; i < l->nlws; i++) {
		struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &l->lws[i] };

		epoll_ctl(l->ep, EPOLL_CTL_ADD, l->lws[i].fd, &ev);
	}
	l->paused_until_ns = 0;
}

static void accept_all(struct loop *l, int lfd)
{
	for (;;) {
		struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP };
		struct ucred cred;
		socklen_t cl = sizeof(cred);
		struct conn *c;
		int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd < 0 && (errno == EMFILE || errno == ENFILE))
			pause_accepting(l);
		if (fd < 0)
			return;	/* EAGAIN, or a client gone already */
		c = l->nconns < l->o->max_clients ? calloc(1, sizeof(*c)) : NULL;
		if (!c) {
			close(fd);	/* too many: this one is refused */
			continue;
		}
		c->kind = WATCH_CONN;
		c->fd = fd;
		c->deadline_ns = now_ns() + (uint64_t)l->o->client_timeout_ms * 1000000;
		if (!getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl))
			c->pid = cred.pid;
		ev.data.ptr = c;
		if (epoll_ctl(l->ep, EPOLL_CTL_ADD, fd, &ev)) {
			close(fd);
			free(c);
			continue;
		}
		c->next = l->conns;
		if (l->conns)
			l->conns->prev = c;
		l->conns = c;
		l->nconns++;
	}
}

/* Connections past their deadline: silent ones, and slow takers. */
static void sweep(struct loop *l)
{
	uint64_t now = now_ns();
	struct conn *c, *next;

	if (l->paused_until_ns && now > l->paused_until_ns)
		resume_accepting(l);
	for (c = l->conns; c; c = next) {
		next = c->next;
		if (c->deadline_ns && now > c->deadline_ns) {
			if (c->state == CONN_NEW)
				conn_error(l, c, ETIMEDOUT, "no request in time");
			else
				conn_close(l, c);
		}
	}
}

static void dispatch(struct loop *l, struct epoll_event *ev)
{
	struct watch *w = ev->data.ptr;
	struct entry *e;
	uint64_t n;

	switch (w->kind) {
	case WATCH_LISTEN:
		accept_all(l, w->fd);
		break;
	case WATCH_DONE:
		if (read(w->fd, &n, sizeof(n)) < 0 && errno != EAGAIN)
			perror("pinmem-cached: eventfd");
		while ((e = load_take_done(l->s)))
			load_done(l, e);
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
	ws[i++] = (struct watch){ WATCH_DONE, s->done_efd };
	ws[i++] = (struct watch){ WATCH_SIGNAL, signal_fd() };
	for (int j = 0; j < i && !ret; j++)
		ret = add_watch(&l, &ws[j]);
	while (!ret && !l.stop) {
		n = epoll_wait(l.ep, evs, 64, l.paused_until_ns ? 100 : 1000);
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
	close(ws[i - 1].fd);
	close(l.ep);
	free(l.rep);
	return ret;
}
