// SPDX-License-Identifier: GPL-2.0
/*
 * What the event loop reads, and when. A client's packet can carry 253
 * fds, and the files of those the kernel cannot install into a full fd
 * table are released by the thread that reads the packet, the loop,
 * where a release can block (a lingering socket's close). So the loop
 * accepts and reads only while the process has FD_MARGIN free slots, and
 * reads a member's connections only while that member holds fewer fds
 * than its bound (its connections and its pending fds): over it, what the
 * member sends stays queued in its sockets, in flight on its own account,
 * until its thread has closed enough.
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <sys/epoll.h>
#include <sys/resource.h>

#include "loop.h"

static unsigned own_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *de;
	unsigned n = 0;

	if (!d)
		return FD_SLACK;
	while ((de = readdir(d)))
		n += de->d_name[0] != '.';
	closedir(d);
	return n;
}

/* The fd limit, the service's own fds, and the closer of stray sockets. */
int flow_init(struct loop *l)
{
	struct rlimit rl;

	l->fd_limit = 1024;
	if (!getrlimit(RLIMIT_NOFILE, &rl))
		l->fd_limit = rl.rlim_cur > UINT_MAX ? UINT_MAX :
			      (unsigned)rl.rlim_cur;
	l->fd_base = own_fds();
	/* The margin, and room for a packet's fds over it, at the least. */
	if (l->fd_limit < l->fd_base + FD_SLACK + FD_MARGIN + PACKET_FDS) {
		fprintf(stderr, "pinmem-cached: an open-file limit of %u leaves no room for clients' fds (%u needed at least): raise it (LimitNOFILE=, ulimit -Hn)\n",
			l->fd_limit, l->fd_base + FD_SLACK + FD_MARGIN + PACKET_FDS);
		return -EMFILE;
	}
	return member_get(&l->stray, "", &l->s->ev) ? 0 : -ENOMEM;
}

/* Whether the process can take a packet's fds and still have as many. */
int fds_room(struct loop *l)
{
	uint64_t used = l->fd_base + FD_SLACK + 3ULL * l->s->count +
			member_fds(l->stray);

	for (struct member *m = l->members; m; m = m->next)
		used += member_fds(m);
	return used + FD_MARGIN <= l->fd_limit;
}

/* Whether m holds as many fds as one member may make the process hold. */
int member_over(const struct loop *l, struct member *m)
{
	const struct member_opts *mo = &l->o->member;

	return member_fds(m) >= mo->max_clients + mo->max_pending_fds;
}

int may_read(struct loop *l, struct conn *c)
{
	return fds_room(l) && !member_over(l, c->member);
}

/* Watch c for packets (on), or leave it unread in its socket (off). */
void conn_watch(struct loop *l, struct conn *c, int on)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP,
				  .data.ptr = c };

	if (c->fd < 0 || c->watched == !!on)
		return;
	if (on)
		c->watched = !epoll_ctl(l->ep, EPOLL_CTL_ADD, c->fd, &ev);
	else if (!epoll_ctl(l->ep, EPOLL_CTL_DEL, c->fd, NULL))
		c->watched = 0;
}

/*
 * Out of fds: stop watching the listening sockets for a while (else a
 * pending connection wakes the loop at once, forever); sweep resumes.
 */
void pause_accepting(struct loop *l)
{
	for (int i = 0; i < l->nlws; i++)
		epoll_ctl(l->ep, EPOLL_CTL_DEL, l->lws[i].fd, NULL);
	l->paused_until_ns = now_ns() + 100 * 1000000ULL;
}

void resume_accepting(struct loop *l)
{
	for (int i = 0; i < l->nlws; i++) {
		struct epoll_event ev = { .events = EPOLLIN,
					  .data.ptr = &l->lws[i] };

		epoll_ctl(l->ep, EPOLL_CTL_ADD, l->lws[i].fd, &ev);
	}
	l->paused_until_ns = 0;
}

/* Before each wait: read whom the fds allow, accept while there is room. */
void flow(struct loop *l)
{
	int room = fds_room(l);

	if (!room && !l->paused_until_ns)
		pause_accepting(l);
	for (struct conn *c = l->conns; c; c = c->next)
		conn_watch(l, c, room && !member_over(l, c->member));
}
