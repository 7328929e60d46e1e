// SPDX-License-Identifier: MIT
/*
 * pin_fd_send/pin_fd_recv over a socketpair: the fd arrives close-on-exec
 * and refers to the same view (a forked child imports it, maps it
 * read-only and reads the bytes; it cannot map it writable). End of stream
 * is -ECONNRESET; a message without an fd, or with two (truncated control
 * data), is -EPROTO and leaves no fd behind.
 */
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test.h"

static int child(int sock)
{
	struct pin_dev *dev = t_open(0);
	struct pin_view *v;
	unsigned char *p;
	void *w;
	int fd;

	CHECK_OK(pin_fd_recv(sock, &fd), "recv");
	EXPECT_TRUE(fcntl(fd, F_GETFD) & FD_CLOEXEC);
	CHECK_OK(pin_view_import(dev, fd, &v), pin_dev_error(dev));
	close(fd);
	EXPECT_EQ(pin_view_writable(v), 0);
	EXPECT_EQ(pin_view_length(v), MiB(2));
	EXPECT_EQ(pin_view_map(v, PROT_READ | PROT_WRITE, &w), -EACCES);
	CHECK_OK(pin_view_map(v, PROT_READ, (void **)&p), pin_view_error(v));
	t_check(p, MiB(2), 11, "child view");
	CHECK_OK(pin_view_unmap(v, p), pin_view_error(v));
	pin_view_close(v);
	pin_dev_close(dev);
	return 0;
}

int main(void)
{
	struct pin_dev *dev;
	struct pin_region *r;
	struct pin_view *v;
	unsigned char *own;
	int sv[2], fd, status, before, p2[2];
	pid_t pid;

	/* Fork first: the child owns nothing of ours (clean leak checks). */
	EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	pid = fork();
	if (pid < 0)
		FAIL("fork: %s", strerror(errno));
	if (pid == 0) {
		close(sv[0]);
		_exit(child(sv[1]));
	}
	close(sv[1]);
	dev = t_open(0);
	CHECK_OK(pin_region_create(dev, MiB(2), NULL, &r), pin_dev_error(dev));
	CHECK_OK(pin_region_map(r, (void **)&own), pin_region_error(r));
	t_fill(own, MiB(2), 11);
	CHECK_OK(pin_view_create(r, 0, MiB(2), 0, &v), pin_region_error(r));
	CHECK_OK(pin_fd_send(sv[0], pin_view_fd(v)), "send");
	EXPECT_EQ(waitpid(pid, &status, 0), pid);
	EXPECT_TRUE(WIFEXITED(status));
	EXPECT_EQ(WEXITSTATUS(status), 0);
	close(sv[0]);

	/* Local edge cases on a fresh pair. */
	EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	before = t_count_fds();
	EXPECT_EQ(write(sv[0], "x", 1), 1);	/* a byte without an fd */
	EXPECT_EQ(pin_fd_recv(sv[1], &fd), -EPROTO);
	EXPECT_EQ(fd, -1);
	{
		/* Two fds in one message: pin_fd_recv has room for one. */
		char byte = 'y';
		struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
		union {
			struct cmsghdr a;
			char b[CMSG_SPACE(2 * sizeof(int))];
		} ctl;
		struct msghdr msg;
		struct cmsghdr *c;

		EXPECT_EQ(pipe(p2), 0);
		memset(&ctl, 0, sizeof(ctl));
		memset(&msg, 0, sizeof(msg));
		msg.msg_iov = &iov;
		msg.msg_iovlen = 1;
		msg.msg_control = ctl.b;
		msg.msg_controllen = sizeof(ctl.b);
		c = CMSG_FIRSTHDR(&msg);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(2 * sizeof(int));
		memcpy(CMSG_DATA(c), p2, sizeof(p2));
		EXPECT_EQ(sendmsg(sv[0], &msg, 0), 1);
		close(p2[0]);
		close(p2[1]);
		EXPECT_EQ(pin_fd_recv(sv[1], &fd), -EPROTO);
		EXPECT_EQ(fd, -1);
	}
	EXPECT_EQ(t_count_fds(), before);	/* nothing received was kept */
	CHECK_OK(pin_fd_send(sv[0], pin_region_fd(r)), "send region fd");
	CHECK_OK(pin_fd_recv(sv[1], &fd), "recv region fd");
	EXPECT_TRUE(fd >= 0);
	close(fd);
	close(sv[0]);
	EXPECT_EQ(pin_fd_recv(sv[1], &fd), -ECONNRESET);
	close(sv[1]);

	pin_view_close(v);
	CHECK_OK(pin_region_close(r), "free");
	pin_dev_close(dev);
	return 0;
}
