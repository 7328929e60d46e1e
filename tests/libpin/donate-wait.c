// SPDX-License-Identifier: MIT
/*
 * donate with a timeout: -ETIMEDOUT (after at least the timeout) while a
 * view stays mapped; success once another process's view goes away, and
 * while it waits that process cannot map a new view (-EBUSY); -EINTR when a
 * signal arrives during an unbounded wait.
 */
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "test.h"

static void on_alarm(int sig)
{
	(void)sig;
}

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

int main(void)
{
	struct pin_dev *dev = t_open(PIN_BACKEND_DEVICE);
	struct pin_region_info info = PIN_INIT(struct pin_region_info);
	struct sigaction sa;
	struct pin_region *r;
	struct pin_view *v;
	long long t0, waited;
	void *p, *q;
	int status, go[2];
	pid_t pid;

	CHECK_OK(pin_region_create(dev, MiB(2), NULL, &r), pin_dev_error(dev));
	CHECK_OK(pin_view_create(r, 0, MiB(2), 0, &v), pin_region_error(r));
	CHECK_OK(pin_view_map(v, PROT_READ, &p), pin_view_error(v));

	t0 = now_ms();
	EXPECT_EQ(pin_region_donate(r, 200), -ETIMEDOUT);
	waited = now_ms() - t0;
	if (waited < 190)
		FAIL("donate(200) gave up after %lld ms", waited);
	EXPECT_CONTAINS(pin_region_error(r), "has 1 view mapping: pid ");
	EXPECT_CONTAINS(pin_region_error(r), "after waiting 200 ms");
	CHECK_OK(pin_region_info(r, &info), pin_region_error(r));
	EXPECT_EQ(info.state, PIN_STATE_OPEN);
	EXPECT_EQ(info.donate_pending, 0);

	/* Interrupted: SIGALRM without SA_RESTART during an unbounded wait. */
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_alarm;
	EXPECT_EQ(sigaction(SIGALRM, &sa, NULL), 0);
	alarm(1);
	EXPECT_EQ(pin_region_donate(r, -1), -EINTR);
	EXPECT_CONTAINS(pin_region_error(r), "interrupted");

	/*
	 * A child inherits the mapping; we drop ours and wait. The child,
	 * told the wait has begun, tries a new mapping (refused: a donate
	 * waits), then exits, which drains the last view.
	 */
	EXPECT_EQ(pipe(go), 0);
	pid = fork();
	if (pid < 0)
		FAIL("fork: %s", strerror(errno));
	if (pid == 0) {
		char c;
		int ret;

		close(go[1]);
		if (read(go[0], &c, 1) != 1)
			_exit(3);
		usleep(300 * 1000);	/* let the parent enter the wait */
		CHECK_OK(pin_region_info(r, &info), "child info");
		if (!info.donate_pending)
			_exit(4);
		ret = pin_view_map(v, PROT_READ, &q);
		_exit(ret == -EBUSY ? 0 : 2);
	}
	close(go[0]);
	CHECK_OK(pin_view_unmap(v, p), pin_view_error(v));
	EXPECT_EQ(write(go[1], "g", 1), 1);
	t0 = now_ms();
	CHECK_OK(pin_region_donate(r, 10000), pin_region_error(r));
	waited = now_ms() - t0;
	EXPECT_EQ(waitpid(pid, &status, 0), pid);
	EXPECT_TRUE(WIFEXITED(status));
	EXPECT_EQ(WEXITSTATUS(status), 0);
	if (waited < 250)
		FAIL("donate returned after %lld ms, before the child's view went", waited);
	close(go[1]);
	CHECK_OK(pin_region_info(r, &info), pin_region_error(r));
	EXPECT_EQ(info.state, PIN_STATE_DONATED);

	pin_view_close(v);
	CHECK_OK(pin_region_close(r), "free");
	pin_dev_close(dev);
	return 0;
}
