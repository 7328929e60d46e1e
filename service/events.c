// SPDX-License-Identifier: GPL-2.0
/*
 * What the service's threads hand its event loop: a queue of events under
 * a mutex, and an eventfd that wakes the loop. A thread posts and forgets;
 * the loop takes every event after reading the eventfd.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "service.h"

int events_init(struct events *ev)
{
	ev->head = ev->tail = NULL;
	ev->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (ev->efd < 0)
		return -errno;
	pthread_mutex_init(&ev->lock, NULL);
	return 0;
}

/* At exit: events no one took are freed; an fd in one is left open. */
void events_fini(struct events *ev)
{
	struct event *e;

	while ((e = events_take(ev)))
		event_free(e);
	close(ev->efd);
	pthread_mutex_destroy(&ev->lock);
}

void events_post(struct events *ev, struct event *e)
{
	uint64_t one = 1;

	e->next = NULL;
	pthread_mutex_lock(&ev->lock);
	if (ev->tail)
		ev->tail->next = e;
	else
		ev->head = e;
	ev->tail = e;
	pthread_mutex_unlock(&ev->lock);
	if (write(ev->efd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		perror("pinmem-cached: eventfd");
}

/* The oldest event, or NULL. */
struct event *events_take(struct events *ev)
{
	struct event *e;

	pthread_mutex_lock(&ev->lock);
	e = ev->head;
	if (e) {
		ev->head = e->next;
		if (!ev->head)
			ev->tail = NULL;
	}
	pthread_mutex_unlock(&ev->lock);
	return e;
}

/*
 * Events are allocated by the thread that posts them. Out of memory, a
 * thread waits and tries again: an event lost would leave a client or an
 * entry waiting forever.
 */
struct event *event_new(enum event_kind kind)
{
	struct event *e;

	while (!(e = calloc(1, sizeof(*e))))
		usleep(10000);
	e->kind = kind;
	e->fd = -1;
	return e;
}

/* A thread nobody joins: it posts what it did and ends. */
int thread_detached(void *(*fn)(void *), void *arg)
{
	pthread_attr_t attr;
	pthread_t t;
	int ret;

	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	ret = pthread_create(&t, &attr, fn, arg);
	pthread_attr_destroy(&attr);
	return -ret;
}

void event_free(struct event *e)
{
	if (e)
		free(e->text);
	free(e);
}
