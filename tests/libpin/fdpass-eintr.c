// SPDX-License-Identifier: MIT
/*
 * pin_fd_recv restarts when a signal (handler installed without
 * SA_RESTART) interrupts its wait, and still returns the fd sent after.
 */
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test.h"

static volatile sig_atomic_t got;

static void on_usr1(int sig)
{
	(void)sig;
	got = 1;
}

int main(void)
{
	struct sigaction sa;
	int sv[2], fd, status, pfd[2];
	char c;
	pid_t pid, parent = getpid();

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_usr1;	/* no SA_RESTART: recvmsg gets EINTR */
	EXPECT_EQ(sigaction(SIGUSR1, &sa, NULL), 0);
	EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	EXPECT_EQ(pipe(pfd), 0);
	pid = fork();
	if (pid < 0)
		FAIL("fork: %s", strerror(errno));
	if (pid == 0) {
		close(sv[0]);
		usleep(200 * 1000);
		kill(parent, SIGUSR1);
		usleep(200 * 1000);
		_exit(pin_fd_send(sv[1], pfd[1]) ? 1 : 0);
	}
	close(sv[1]);
	CHECK_OK(pin_fd_recv(sv[0], &fd), "recv across a signal");
	EXPECT_EQ(got, 1);
	EXPECT_EQ(waitpid(pid, &status, 0), pid);
	EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	/* It is the pipe's write end: a byte through it arrives. */
	EXPECT_EQ(write(fd, "z", 1), 1);
	EXPECT_EQ(read(pfd[0], &c, 1), 1);
	EXPECT_EQ(c, 'z');
	close(fd);
	close(pfd[0]);
	close(pfd[1]);
	close(sv[0]);
	return 0;
}
