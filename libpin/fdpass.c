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

int pin_send_fd(int sock, int fd)
{
	char byte = 'P';
	struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(sizeof(int))];
	} ctl;
	struct msghdr msg;
	struct cmsghdr *c;
	ssize_t n;

	if (sock < 0 || fd < 0)
		return -EBADF;
	memset(&ctl, 0, sizeof(ctl));
	memset(&msg, 0, sizeof(msg));
	msg.msg_iov = &iov;
	msg.msg_iovlen = 1;
	msg.msg_control = ctl.buf;
	msg.msg_controllen = sizeof(ctl.buf);
	c = CMSG_FIRSTHDR(&msg);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &fd, sizeof(int));
	do
		n = sendmsg(sock, &msg, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	return n == 1 ? 0 : -EIO;
}

/* Close every fd a message carried; used when it cannot be handed on. */
static void close_all(struct msghdr *msg)
{
	struct cmsghdr *c;

	for (c = CMSG_FIRSTHDR(msg); c; c = CMSG_NXTHDR(msg, c)) {
		size_t i, nfd;

		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		nfd = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (i = 0; i < nfd; i++) {
			int fd;

			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			close(fd);
		}
	}
}

int pin_recv_fd(int sock, int *fdp)
{
	char byte;
	struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(sizeof(int))];
	} ctl;
	struct msghdr msg;
	struct cmsghdr *c;
	ssize_t n;
	int fd;

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
		 * not leak into this process.
		 */
		if (msg.msg_controllen) {
			close_all(&msg);
			return -EPROTO;
		}
		return -ECONNRESET;
	}
	if (msg.msg_flags & MSG_CTRUNC) {
		/* More fds than one: the kernel dropped the rest; keep none. */
		close_all(&msg);
		return -EPROTO;
	}
	c = CMSG_FIRSTHDR(&msg);
	if (!c || c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS ||
	    c->cmsg_len != CMSG_LEN(sizeof(int))) {
		close_all(&msg);
		return -EPROTO;	/* a message without exactly one fd */
	}
	memcpy(&fd, CMSG_DATA(c), sizeof(int));
	*fdp = fd;
	return 0;
}
