// SPDX-License-Identifier: MIT
/*
 * The checkpoint cache's packets on the socket: one SOCK_SEQPACKET packet
 * per message with at most one fd (SCM_RIGHTS). Anything a packet carries
 * beyond what the receiver may keep is closed here, so a hostile peer
 * cannot leave fds behind in the service.
 */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "internal.h"
#include "cache_proto.h"

int cache_msg_send(int sock, const void *buf, size_t len, int fd, int flags)
{
	return pin__scm_send(sock, buf, len, fd, flags);
}

/* SCM_MAX_FD of the kernel: the most fds one packet can carry. */
#define MAX_PACKET_FDS	253

static void drop_fd(const struct cache_fd_sink *sink, int fd)
{
	if (sink)
		sink->drop(fd, sink->arg);
	else
		close(fd);
}

/* Take the fds of a received packet: keep one in *fdp, drop the rest. */
static int take_fds(struct msghdr *msg, int *fdp,
		    const struct cache_fd_sink *sink)
{
	struct cmsghdr *c;
	int count = 0;

	for (c = CMSG_FIRSTHDR(msg); c; c = CMSG_NXTHDR(msg, c)) {
		size_t nfd, i;

		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		nfd = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (i = 0; i < nfd; i++) {
			int fd;

			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			if (count++ == 0)
				*fdp = fd;
			else
				drop_fd(sink, fd);
		}
	}
	if (count > 1) {
		drop_fd(sink, *fdp);
		*fdp = -1;
		return -EPROTO;
	}
	return 0;
}

int cache_msg_recv(int sock, void *buf, size_t cap, size_t *lenp, int *fdp,
		   int flags, const struct cache_fd_sink *sink)
{
	struct iovec iov = { .iov_base = buf, .iov_len = cap };
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(MAX_PACKET_FDS * sizeof(int))];
	} ctl;
	struct msghdr msg;
	ssize_t n;
	int ret;

	*fdp = -1;
	*lenp = 0;
	memset(&msg, 0, sizeof(msg));
	memset(&ctl, 0, sizeof(ctl));
	msg.msg_iov = &iov;
	msg.msg_iovlen = 1;
	msg.msg_control = ctl.buf;
	msg.msg_controllen = sizeof(ctl.buf);
	do
		n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC | flags);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	ret = take_fds(&msg, fdp, sink);
	/*
	 * The buffer holds as many fds as a packet can carry: a truncation
	 * means the kernel could not install them all (a full fd table).
	 * Not the sender's fault; the packet is refused all the same.
	 */
	if (msg.msg_flags & MSG_CTRUNC)
		ret = -EMFILE;
	if (!ret && (msg.msg_flags & MSG_TRUNC))
		ret = -EMSGSIZE;
	if (!ret && n == 0)
		ret = -ECONNRESET;
	if (ret && *fdp >= 0) {
		drop_fd(sink, *fdp);
		*fdp = -1;
	}
	*lenp = (size_t)n;
	return ret;
}
