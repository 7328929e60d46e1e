// SPDX-License-Identifier: GPL-2.0
/*
 * Members: one tenant's share of the service (tenant.c). Each has its
 * own thread for the fds its clients pass: keying one (fcntl, fstat,
 * statfs, readlink) and closing one can block for as long as the client
 * likes (a FUSE file whose server never answers, a TCP socket lingering
 * on a zero window), so neither happens on the event loop, and a member whose fds block
 * stalls only its own queue. Its connections' sockets are closed here
 * too: closing one releases the files still queued on it. The thread
 * runs while its queue has jobs and ends when it is empty. The member
 * counts every fd of its clients the process holds, from the loop's
 * accept or receive to this thread's close: the loop stops reading a
 * member that holds too many.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "service.h"

struct fd_job {
	struct fd_job *next;
	int fd;
	int key;		/* 1: key it for the loop; 0: close it */
	uint64_t conn_id;
};

/*
 * Key a client's fd and tell the loop; the fd goes with the event.
 * Returns 1 when the fd was closed here instead.
 */
static int key_job(struct member *m, struct fd_job *j)
{
	struct event *ev = event_new(EV_KEYED);
	char link[64], name[NAME_LEN];
	ssize_t n;
	int ret;

	ev->conn_id = j->conn_id;
	memcpy(ev->tenant, m->tenant, sizeof(ev->tenant));
	ret = key_of_fd(j->fd, &ev->key, ev->why, sizeof(ev->why));
	if (ret) {
		/* The answer first: the close may never return. */
		ev->err = -ret;
		events_post(m->ev, ev);
		close(j->fd);
		return 1;
	}
	ev->fd = j->fd;
	snprintf(link, sizeof(link), "/proc/self/fd/%d", j->fd);
	n = readlink(link, name, sizeof(name) - 1);
	escape_name(name, n > 0 ? (size_t)n : 0, ev->name, sizeof(ev->name));
	events_post(m->ev, ev);
	return 0;
}

static void *member_thread(void *arg)
{
	struct member *m = arg;
	struct fd_job *j;
	int closed;

	for (;;) {
		pthread_mutex_lock(&m->lock);
		j = m->jobs;
		if (!j) {
			m->running = 0;
			pthread_mutex_unlock(&m->lock);
			return NULL;
		}
		m->jobs = j->next;
		if (!m->jobs)
			m->last = NULL;
		pthread_mutex_unlock(&m->lock);
		closed = 1;
		if (j->key)
			closed = key_job(m, j);
		else
			close(j->fd);
		free(j);
		pthread_mutex_lock(&m->lock);
		m->queued--;
		m->fds -= (unsigned)closed;
		pthread_mutex_unlock(&m->lock);
	}
}

/* Start the thread if jobs wait and none runs; m->lock held. */
static void kick(struct member *m)
{
	if (m->running || !m->jobs)
		return;
	/* On failure the jobs wait; the next job or the sweep tries again. */
	if (!thread_detached(member_thread, m))
		m->running = 1;
}

static void queue(struct member *m, int fd, int key, uint64_t conn_id)
{
	struct fd_job *j;

	while (!(j = calloc(1, sizeof(*j))))
		usleep(10000);	/* an fd must never be lost: it is a client's */
	j->fd = fd;
	j->key = key;
	j->conn_id = conn_id;
	pthread_mutex_lock(&m->lock);
	if (m->last)
		m->last->next = j;
	else
		m->jobs = j;
	m->last = j;
	m->queued++;
	kick(m);
	pthread_mutex_unlock(&m->lock);
}

void member_key(struct member *m, int fd, uint64_t conn_id)
{
	queue(m, fd, 1, conn_id);
}

void member_drop_fd(struct member *m, int fd)
{
	if (fd >= 0)
		queue(m, fd, 0, 0);
}

/* n more (or fewer) of the member's fds (sockets, files) in the process. */
void member_took(struct member *m, int n)
{
	pthread_mutex_lock(&m->lock);
	m->fds += (unsigned)n;
	pthread_mutex_unlock(&m->lock);
}

unsigned member_fds(struct member *m)
{
	unsigned n;

	pthread_mutex_lock(&m->lock);
	n = m->fds;
	pthread_mutex_unlock(&m->lock);
	return n;
}

unsigned member_pending(struct member *m)
{
	unsigned n;

	pthread_mutex_lock(&m->lock);
	n = m->queued;
	pthread_mutex_unlock(&m->lock);
	return n;
}

/* The member of tenant, made on first use; NULL only out of memory. */
struct member *member_get(struct member **list, const char *tenant,
			  struct events *ev)
{
	struct member *m;

	for (m = *list; m; m = m->next)
		if (!strcmp(m->tenant, tenant))
			return m;
	m = calloc(1, sizeof(*m));
	if (!m)
		return NULL;
	snprintf(m->tenant, sizeof(m->tenant), "%s", tenant);
	m->ev = ev;
	pthread_mutex_init(&m->lock, NULL);
	m->next = *list;
	*list = m;
	return m;
}

/* Forget members with nothing left; start threads that failed to start. */
void members_sweep(struct member **list)
{
	struct member **pp = list, *m;

	while ((m = *pp)) {
		int idle;

		pthread_mutex_lock(&m->lock);
		kick(m);
		idle = !m->running && !m->queued && !m->fds && !m->conns &&
		       !m->loads && !m->bytes;
		pthread_mutex_unlock(&m->lock);
		if (!idle) {
			pp = &m->next;
			continue;
		}
		*pp = m->next;
		pthread_mutex_destroy(&m->lock);
		free(m);
	}
}

/*
 * At exit: members whose thread has finished (given a second to) are
 * freed; one stuck on a client's file, or with a load still running
 * (whose thread will hand it the file's fd), is left to the process's end.
 */
void members_fini(struct member **list)
{
	for (int i = 0; i < 100; i++) {
		int busy = 0;

		for (struct member *m = *list; m; m = m->next) {
			pthread_mutex_lock(&m->lock);
			busy |= m->running;
			pthread_mutex_unlock(&m->lock);
		}
		if (!busy)
			break;
		usleep(10000);
	}
	while (*list) {
		struct member *m = *list;

		pthread_mutex_lock(&m->lock);
		if (m->running || m->loads) {
			pthread_mutex_unlock(&m->lock);
			list = &m->next;
			continue;
		}
		pthread_mutex_unlock(&m->lock);
		*list = m->next;
		pthread_mutex_destroy(&m->lock);
		free(m);
	}
}
