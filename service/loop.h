/* SPDX-License-Identifier: GPL-2.0 */
/*
 * pinmem-cached's connections, as the event loop (loop.c), the requests
 * that wait for room (room.c) and the connection primitives (conn.c)
 * share them. Everything here runs on the loop's thread alone.
 */
#ifndef PINMEM_CACHED_LOOP_H
#define PINMEM_CACHED_LOOP_H

#include "service.h"

#define BEAT_MS		1000U	/* CACHE_REP_WAIT at least this often */
#define TICK_MS		250	/* the loop's wake-up for deadlines, beats */
/* SCM_MAX_FD: the most fds one packet can carry, all installed at once. */
#define PACKET_FDS	253
/* Free fd slots below which no client socket is read or accepted. */
#define FD_MARGIN	(2 * PACKET_FDS)
/* The service's own fds beyond those counted: threads' files, LISTs. */
#define FD_SLACK	64
/* Packets a socket done with can hold: read away, when they carry no fd. */
#define MAX_UNREAD	1024

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
	int watched;			/* in the epoll set: read when readable */
	int aligned_ok;			/* reads CACHE_LOAD_ALIGNED images */
	unsigned keep_op;		/* a KEEP's CACHE_KEEP_*, or 0 */
	uint64_t keep_set;
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
	struct member *stray;		/* closes sockets of no member (ENOMEM) */
	unsigned fd_limit;		/* RLIMIT_NOFILE */
	unsigned fd_base;		/* the service's own at the start */
	unsigned nconns;
	uint64_t next_id;
	int stop;
	uint8_t *rep;			/* CACHE_MAX_REPLY bytes */
	struct watch *lws;		/* the listening sockets' watches */
	int nlws;
	uint64_t paused_until_ns;	/* out of fds: not accepting until */
};

/* conn.c */
uint64_t after_ms(uint64_t ms);
void sink_drop(int fd, void *arg);
void hand_socket(struct loop *l, int fd, struct member *m);
void room_unlink(struct loop *l, struct conn *c);
void conn_close(struct loop *l, struct conn *c);
void free_dead(struct loop *l);
struct conn *conn_by_id(struct loop *l, uint64_t id);
void conn_error(struct loop *l, struct conn *c, int err, const char *text);
void send_wait(struct loop *l, struct conn *c);
void conn_hand_over(struct loop *l, struct conn *c, struct entry *e,
		    int fresh);
void conn_join(struct loop *l, struct conn *c, struct entry *e);

/* flow.c */
int flow_init(struct loop *l);
int fds_room(struct loop *l);
int member_over(const struct loop *l, struct member *m);
int may_read(struct loop *l, struct conn *c);
void conn_watch(struct loop *l, struct conn *c, int on);
void pause_accepting(struct loop *l);
void resume_accepting(struct loop *l);
void flow(struct loop *l);

/* warm.c */
void handle_keep(struct loop *l, struct conn *c, unsigned op, uint64_t set,
		 int fd);
int keep_refused(struct loop *l, struct conn *c, struct event *ev);
void keep_entry(struct loop *l, struct conn *c, struct entry *e);
const struct member_opts *keep_room(struct loop *l, struct conn *c,
				    struct room *r, struct member_opts *tmp);
void kept_loaded(struct entry *e);
void warm_config_apply(struct loop *l);

/* room.c */
void keyed(struct loop *l, struct event *ev);
void retry_rooms(struct loop *l);

#endif /* PINMEM_CACHED_LOOP_H */
