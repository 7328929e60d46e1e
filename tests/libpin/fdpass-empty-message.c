// SPDX-License-Identifier: MIT
/*
 * pin_fd_recv on a message socket: a message of no bytes that carries an
 * fd is not the end of the stream. It is refused with -EPROTO and its fd is
 * closed (no fd leaks into the receiver); a real end of stream is still
 * -ECONNRESET.
 */
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "test.h"

/* Send a zero-byte message carrying fd. */
static void send_empty_with_fd(int sock, int fd)
{
	union {
		struct cmsghdr a;
		char b[CMSG_SPACE(sizeof(int))];
	} ctl;
	struct msghdr msg;
	struct cmsghdr *c;

	memset(&ctl, 0, sizeof(ctl));
	memset(&msg, 0, sizeof(msg));
	msg.msg_control = ctl.b;
	msg.msg_controllen = sizeof(ctl.b);
	c = CMSG_FIRSTHDR(&msg);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &fd, sizeof(int));
	EXPECT_EQ(sendmsg(sock, &msg, 0), 0);
}

int main(void)
{
	int sv[2], p[2], fd, before;

	EXPECT_EQ(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
	EXPECT_EQ(pipe(p), 0);
	before = t_count_fds();
	send_empty_with_fd(sv[0], p[0]);
	EXPECT_EQ(pin_fd_recv(sv[1], &fd), -EPROTO);
	EXPECT_EQ(fd, -1);
	EXPECT_EQ(t_count_fds(), before);	/* the carried fd was closed */

	/* The socket still works, and its end is still -ECONNRESET. */
	CHECK_OK(pin_fd_send(sv[0], p[1]), "send");
	CHECK_OK(pin_fd_recv(sv[1], &fd), "recv");
	EXPECT_TRUE(fcntl(fd, F_GETFD) & FD_CLOEXEC);
	close(fd);
	close(sv[0]);
	EXPECT_EQ(pin_fd_recv(sv[1], &fd), -ECONNRESET);
	EXPECT_EQ(fd, -1);
	close(sv[1]);
	close(p[0]);
	close(p[1]);
	return 0;
}
