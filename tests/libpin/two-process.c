// SPDX-License-Identifier: MIT
/*
 * Two processes: this one allocates, fills and seals a region and hands a
 * read-only view fd over a Unix socket; a second program (this binary,
 * exec'd by its argv[0] with --reader) receives it, imports it, checks the bytes, and
 * cannot map it writable.
 */
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test.h"

static int reader(int sock)
{
	struct pin_dev *dev = t_open(0);
	struct pin_view *v;
	unsigned char *p;
	void *w = (void *)1;
	int fd;

	CHECK_OK(pin_fd_recv(sock, &fd), "recv");
	CHECK_OK(pin_view_import(dev, fd, &v), pin_dev_error(dev));
	close(fd);
	CHECK_OK(pin_view_map(v, PROT_READ, (void **)&p), pin_view_error(v));
	t_check(p, MiB(4), 77, "reader");
	EXPECT_EQ(pin_view_map(v, PROT_READ | PROT_WRITE, &w), -EACCES);
	EXPECT_TRUE(w == NULL);
	CHECK_OK(pin_view_unmap(v, p), pin_view_error(v));
	pin_view_close(v);
	pin_dev_close(dev);
	EXPECT_EQ(write(sock, "k", 1), 1);
	return 0;
}

int main(int argc, char **argv)
{
	struct pin_dev *dev;
	struct pin_region *r;
	struct pin_view *v;
	unsigned char *own;
	char sockarg[16], ack;
	int sv[2], status;
	pid_t pid;

	if (argc == 3 && !strcmp(argv[1], "--reader"))
		return reader(atoi(argv[2]));

	dev = t_open(0);
	CHECK_OK(pin_region_create(dev, MiB(4), NULL, &r), pin_dev_error(dev));
	CHECK_OK(pin_region_map(r, (void **)&own), pin_region_error(r));
	t_fill(own, MiB(4), 77);
	CHECK_OK(pin_region_seal(r), pin_region_error(r));
	CHECK_OK(pin_view_create(r, 0, MiB(4), 0, &v), pin_region_error(r));

	/* The reader's end must survive exec; ours need not. */
	EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	EXPECT_EQ(fcntl(sv[0], F_SETFD, FD_CLOEXEC), 0);
	snprintf(sockarg, sizeof(sockarg), "%d", sv[1]);
	pid = fork();
	if (pid < 0)
		FAIL("fork: %s", strerror(errno));
	if (pid == 0) {
		execl(argv[0], argv[0], "--reader", sockarg,
		      (char *)NULL);
		_exit(127);
	}
	close(sv[1]);
	CHECK_OK(pin_fd_send(sv[0], pin_view_fd(v)), "send");
	EXPECT_EQ(read(sv[0], &ack, 1), 1);
	EXPECT_EQ(waitpid(pid, &status, 0), pid);
	EXPECT_TRUE(WIFEXITED(status));
	EXPECT_EQ(WEXITSTATUS(status), 0);
	close(sv[0]);

	pin_view_close(v);
	CHECK_OK(pin_region_close(r), "free");
	pin_dev_close(dev);
	return 0;
}
