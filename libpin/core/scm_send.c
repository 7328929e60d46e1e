// SPDX-License-Identifier: MIT
/*
 * Sending one message with at most one fd (SCM_RIGHTS) on a Unix socket:
 * pin_fd_send()'s and the checkpoint cache's, client and service alike.
 * pinmem-cached compiles this file into itself, as it does the cache's
 * protocol, since libpin.so exports no pin__ name.
 */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include "internal.h"

int pin__scm_send(int sock, const void *buf, size_t len, int fd, int flags)
{
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(sizeof(int))];
	} ctl;
	struct msghdr msg;
	ssize_t n;

	memset(&msg, 0, sizeof(msg));
	msg.msg_iov = &iov;
	msg.msg_iovlen = 1;
	if (fd >= 0) {
		struct cmsghdr *c;

		memset(&ctl, 0, sizeof(ctl));
		msg.msg_control = ctl.buf;
		msg.msg_controllen = sizeof(ctl.buf);
		c = CMSG_FIRSTHDR(&msg);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &fd, sizeof(int));
	}
	do
		n = sendmsg(sock, &msg, MSG_NOSIGNAL | flags);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	return (size_t)n == len ? 0 : -EIO;
}
