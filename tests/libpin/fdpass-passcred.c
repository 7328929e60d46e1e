// SPDX-License-Identifier: MIT
/*
 * pin_fd_recv on a socket whose receiver set SO_PASSCRED (and SO_PASSPIDFD
 * where the kernel has it): the kernel adds credentials (and a pidfd) to
 * every message. The fd still arrives, nothing else is left open in the
 * receiver, and the end of the stream is still -ECONNRESET. Stream and
 * message sockets both.
 */
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test.h"

#ifndef SO_PASSPIDFD
#define SO_PASSPIDFD	76	/* Linux 6.5 */
#endif

/* One fd over a socket of type whose receiver passes credentials. */
static int one_type(int type, const char *name)
{
	int sv[2], p[2], fd, before, one = 1, pidfd;
	struct stat a, b;

	EXPECT_EQ(socketpair(AF_UNIX, type | SOCK_CLOEXEC, 0, sv), 0);
	EXPECT_EQ(setsockopt(sv[1], SOL_SOCKET, SO_PASSCRED, &one, sizeof(one)), 0);
	pidfd = !setsockopt(sv[1], SOL_SOCKET, SO_PASSPIDFD, &one, sizeof(one));
	EXPECT_EQ(pipe(p), 0);
	before = t_count_fds();

	CHECK_OK(pin_fd_send(sv[0], p[0]), name);
	CHECK_OK(pin_fd_recv(sv[1], &fd), name);
	EXPECT_TRUE(fd >= 0);
	EXPECT_TRUE(fcntl(fd, F_GETFD) & FD_CLOEXEC);
	EXPECT_EQ(fstat(fd, &a), 0);
	EXPECT_EQ(fstat(p[0], &b), 0);
	EXPECT_TRUE(a.st_ino == b.st_ino && a.st_dev == b.st_dev);
	close(fd);
	EXPECT_EQ(t_count_fds(), before);	/* no pidfd or other fd left over */

	close(sv[0]);
	EXPECT_EQ(pin_fd_recv(sv[1], &fd), -ECONNRESET);
	EXPECT_EQ(fd, -1);
	EXPECT_EQ(t_count_fds(), before - 1);
	close(sv[1]);
	close(p[0]);
	close(p[1]);
	printf("# %s: SO_PASSCRED%s\n", name,
	       pidfd ? " + SO_PASSPIDFD" : " (SO_PASSPIDFD not in this kernel)");
	return 0;
}

int main(void)
{
	one_type(SOCK_STREAM, "stream");
	one_type(SOCK_SEQPACKET, "seqpacket");
	return 0;
}
