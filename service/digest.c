// SPDX-License-Identifier: GPL-2.0
/*
 * A file keyed by its bytes (key.c: FUSE and network file systems, whose
 * stat is a server's word) is read whole and hashed before the loop looks
 * it up, in a thread of its own: the reads take as long as the file's
 * server likes, and a member's other fds must not wait behind them. The
 * thread hands the loop the keyed event again, the digest in its key, and
 * the fd with it (or, on failure, to the member's thread to be closed).
 */
#include <stdlib.h>
#include <string.h>

#include "service.h"

struct digest_job {
	struct events *ev;
	struct member *m;	/* kept by its loads count until the event */
	struct event *e;
};

static void *digest_thread(void *arg)
{
	struct digest_job *j = arg;
	struct event *e = j->e;
	int ret = key_hash_fd(e->fd, &e->key, e->why, sizeof(e->why));

	if (ret) {
		e->err = -ret;
		member_drop_fd(j->m, e->fd);
		e->fd = -1;
	}
	events_post(j->ev, e);
	free(j);
	return NULL;
}

/* Hash the keyed fd in a thread; the fd is the thread's from here on. */
int digest_start(struct events *ev, const struct event *kev,
		 struct member *m)
{
	struct digest_job *j = calloc(1, sizeof(*j));
	int ret;

	if (!j)
		return -1;
	j->ev = ev;
	j->m = m;
	j->e = event_new(EV_KEYED);
	j->e->conn_id = kev->conn_id;
	memcpy(j->e->tenant, kev->tenant, sizeof(j->e->tenant));
	j->e->fd = kev->fd;
	j->e->key = kev->key;
	j->e->digested = 1;
	memcpy(j->e->name, kev->name, sizeof(j->e->name));
	ret = thread_detached(digest_thread, j);
	if (ret) {
		free(j->e);
		free(j);
	}
	return ret;
}
