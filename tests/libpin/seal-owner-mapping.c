// SPDX-License-Identifier: MIT
/*
 * Sealing with the owner mapping in place. Device: the owner mapping is not
 * constrained by the state and stays writable. Portable: seal succeeds by
 * remapping the owner mapping read-only at the same address with the same
 * bytes, and a store to it then faults.
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
	unsigned char *own;
	void *again;
	int status;
	pid_t pid;

	CHECK_OK(pin_region_create(dev, MiB(2), NULL, &r), pin_dev_error(dev));
	CHECK_OK(pin_region_map(r, (void **)&own), pin_region_error(r));
	t_fill(own, MiB(2), 3);
	CHECK_OK(pin_region_seal(r), pin_region_error(r));
	CHECK_OK(pin_region_map(r, &again), pin_region_error(r));
	EXPECT_TRUE(again == own);
	t_check(own, MiB(2), 3, "owner after seal");

	pid = fork();
	if (pid < 0)
		FAIL("fork: %s", strerror(errno));
	if (pid == 0) {
		signal(SIGSEGV, SIG_DFL);	/* not a sanitizer's handler */
		own[0] = 0xaa;
		_exit(own[0] == 0xaa ? 0 : 1);
	}
	EXPECT_EQ(waitpid(pid, &status, 0), pid);
	if (pin_dev_backend(dev) == PIN_BACKEND_DEVICE) {
		EXPECT_TRUE(WIFEXITED(status));
		EXPECT_EQ(WEXITSTATUS(status), 0);
		EXPECT_EQ(own[0], 0xaa);	/* shared: the child's store shows */
	} else {
		EXPECT_TRUE(WIFSIGNALED(status));
		EXPECT_EQ(WTERMSIG(status), SIGSEGV);
		t_check(own, MiB(2), 3, "owner after refused store");
		/* A fresh owner mapping of a sealed memfd is read-only too. */
		CHECK_OK(pin_region_unmap(r), pin_region_error(r));
		CHECK_OK(pin_region_map(r, (void **)&own), pin_region_error(r));
		t_check(own, MiB(2), 3, "new owner mapping");
	}
	CHECK_OK(pin_region_close(r), "free");
	pin_dev_close(dev);
	return 0;
}
