// SPDX-License-Identifier: MIT
/*
 * Passing region and view fds between processes: one fd per message over a
 * Unix socket (SCM_RIGHTS), received close-on-exec.
 */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "internal.h"

int pin_fd_send(int sock, int fd)
{
	char byte = 'P';

	if (sock < 0 || fd < 0)
		return -EBADF;
	return pin__scm_send(sock, &byte, 1, fd, 0);
}

#ifndef SCM_PIDFD
#define SCM_PIDFD	0x04	/* Linux 6.5: with SO_PASSPIDFD */
#endif

/* Whether a control message carries fds that the receiver now owns. */
static int carries_fds(const struct cmsghdr *c)
{
	return c->cmsg_level == SOL_SOCKET &&
	       (c->cmsg_type == SCM_RIGHTS || c->cmsg_type == SCM_PIDFD);
}

/*
 * Close every fd a message carried; used when it cannot be handed on.
 * Returns how many SCM_RIGHTS fds there were.
 */
static size_t close_all(struct msghdr *msg)
{
	struct cmsghdr *c;
	size_t rights = 0;

	for (c = CMSG_FIRSTHDR(msg); c; c = CMSG_NXTHDR(msg, c)) {
		size_t i, nfd;

		if (!carries_fds(c))
			continue;
		nfd = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (i = 0; i < nfd; i++) {
			int fd;

			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			close(fd);
		}
		if (c->cmsg_type == SCM_RIGHTS)
			rights += nfd;
	}
	return rights;
}

/*
 * The one fd of a message: exactly one SCM_RIGHTS with one fd. What a
 * socket adds by its options (SO_PASSCRED's credentials, SO_PASSPIDFD's
 * pidfd) is not part of the message: a pidfd is closed, credentials are
 * ignored. -EPROTO (and every carried fd closed) for anything else.
 */
static int the_fd(struct msghdr *msg, int *fdp)
{
	struct cmsghdr *c;
	int fd = -1, rights = 0;

	for (c = CMSG_FIRSTHDR(msg); c; c = CMSG_NXTHDR(msg, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		rights++;
		if (c->cmsg_len == CMSG_LEN(sizeof(int)))
			memcpy(&fd, CMSG_DATA(c), sizeof(int));
	}
	if (rights != 1 || fd < 0) {
		close_all(msg);
		return -EPROTO;
	}
	for (c = CMSG_FIRSTHDR(msg); c; c = CMSG_NXTHDR(msg, c)) {
		int pidfd;

		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_PIDFD &&
		    c->cmsg_len == CMSG_LEN(sizeof(int))) {
			memcpy(&pidfd, CMSG_DATA(c), sizeof(int));
			close(pidfd);
		}
	}
	*fdp = fd;
	return 0;
}

int pin_fd_recv(int sock, int *fdp)
{
	char byte;
	struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
	/* Room for the fd and for what socket options may add to it. */
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(sizeof(int)) +
			 CMSG_SPACE(sizeof(struct ucred)) +
			 CMSG_SPACE(sizeof(int))];
	} ctl;
	struct msghdr msg;
	ssize_t n;

	if (!fdp)
		return -EINVAL;
	*fdp = -1;
	if (sock < 0)
		return -EBADF;
	memset(&ctl, 0, sizeof(ctl));
	memset(&msg, 0, sizeof(msg));
	msg.msg_iov = &iov;
	msg.msg_iovlen = 1;
	msg.msg_control = ctl.buf;
	msg.msg_controllen = sizeof(ctl.buf);
	do
		n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	if (n == 0) {
		/*
		 * On a message socket a message of no bytes may still carry
		 * fds: that is not the end of the stream, and its fds must
		 * not leak into this process. (The end of a stream may carry
		 * SO_PASSCRED's credentials, and still is the end.)
		 */
		return close_all(&msg) ? -EPROTO : -ECONNRESET;
	}
	if (msg.msg_flags & MSG_CTRUNC) {
		/* More fds than one: the kernel dropped the rest; keep none. */
		close_all(&msg);
		return -EPROTO;
	}
	return the_fd(&msg, fdp);
}
