// SPDX-License-Identifier: MIT
/*
 * A library that loads but is not a CUDA driver (libm here): -ENOSYS
 * naming the first missing entry point, nothing left loaded by libpin.
 */
#include "cuda-test.h"

int main(void)
{
	struct pin_cuda *c = (struct pin_cuda *)1;
	char why[512] = "";

	setenv("PIN_CUDA_LIBRARY", "libm.so.6", 1);
	EXPECT(pin_cuda_open(&c, 0, why, sizeof(why)), -ENOSYS);
	CHECK(c == NULL, "handle left on failure");
	CHECK(strstr(why, "libm.so.6 has no cuInit"), "error '%s'", why);
	return 0;
}
