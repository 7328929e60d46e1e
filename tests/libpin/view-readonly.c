// SPDX-License-Identifier: MIT
/*
 * A read-only view refuses a writable mapping (-EACCES), and a store
 * through its read-only mapping faults (SIGSEGV in a child).
 */
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test.h"

int main(void)
{
	struct pin_dev *dev = t_open(0);
	struct pin_region *r;
	struct pin_view *v;
	volatile unsigned char *p;
	void *w = (void *)1;
	int status;
	pid_t pid;

	CHECK_OK(pin_region_create(dev, MiB(2), NULL, &r), pin_dev_error(dev));
	CHECK_OK(pin_view_create(r, 0, MiB(2), 0, &v), pin_region_error(r));
	EXPECT_EQ(pin_view_map(v, PROT_READ | PROT_WRITE, &w), -EACCES);
	EXPECT_TRUE(w == NULL);
	EXPECT_CONTAINS(pin_view_error(v), "read-only");
	EXPECT_EQ(pin_view_map(v, PROT_WRITE, &w), -EINVAL);
	CHECK_OK(pin_view_map(v, PROT_READ, (void **)&p), pin_view_error(v));
	/* Cannot be made writable afterwards either. */
	EXPECT_EQ(mprotect((void *)p, MiB(2), PROT_READ | PROT_WRITE), -1);
	EXPECT_EQ(errno, EACCES);

	pid = fork();
	if (pid < 0)
		FAIL("fork: %s", strerror(errno));
	if (pid == 0) {
		signal(SIGSEGV, SIG_DFL);	/* not a sanitizer's handler */
		p[0] = 1;
		_exit(0);
	}
	EXPECT_EQ(waitpid(pid, &status, 0), pid);
	EXPECT_TRUE(WIFSIGNALED(status));
	EXPECT_EQ(WTERMSIG(status), SIGSEGV);
	EXPECT_EQ(p[0], 0);

	CHECK_OK(pin_view_unmap(v, (void *)p), pin_view_error(v));
	pin_view_close(v);
	CHECK_OK(pin_region_close(r), "free");
	pin_dev_close(dev);
	return 0;
}
