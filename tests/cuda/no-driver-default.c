// SPDX-License-Identifier: MIT
/*
 * Without PIN_CUDA_LIBRARY, pin_cuda_open loads libcuda.so.1; where the
 * machine has no driver it fails with -ENOENT naming libcuda.so.1.
 * Skips where a driver is installed.
 */
#include "cuda-test.h"

int main(void)
{
	struct pin_cuda *c = (struct pin_cuda *)1;
	char why[512] = "";
	struct pin_cuda_opts co = {
		.size = sizeof(co), .why = why, .why_len = sizeof(why),
	};
	void *h;

	unsetenv("PIN_CUDA_LIBRARY");
	h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (h) {
		dlclose(h);
		SKIP("this machine has libcuda.so.1");
	}
	EXPECT(pin_cuda_open(&c, 0, &co), -ENOENT);
	CHECK(c == NULL, "handle left on failure");
	CHECK(strstr(why, "dlopen(\"libcuda.so.1\")") &&
	      strstr(why, "libcuda.so.1: cannot open shared object file"),
	      "error '%s'", why);
	return 0;
}
