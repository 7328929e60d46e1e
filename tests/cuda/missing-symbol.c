// SPDX-License-Identifier: MIT
/*
 * A library that loads but is not a CUDA driver (glibc's libanl here):
 * -ENOSYS naming the first missing entry point, and the library is
 * unloaded again.
 */
#include "cuda-test.h"

int main(void)
{
	struct pin_cuda *c = (struct pin_cuda *)1;
	char why[512] = "";
	struct pin_cuda_opts co = {
		.size = sizeof(co), .why = why, .why_len = sizeof(why),
	};

	if (dlopen("libanl.so.1", RTLD_NOW | RTLD_NOLOAD))
		SKIP("libanl.so.1 is already loaded in this process");
	setenv("PIN_CUDA_LIBRARY", "libanl.so.1", 1);
	EXPECT(pin_cuda_open(&c, 0, &co), -ENOSYS);
	CHECK(c == NULL, "handle left on failure");
	CHECK(strstr(why, "libanl.so.1 has no cuInit"), "error '%s'", why);
	CHECK(dlopen("libanl.so.1", RTLD_NOW | RTLD_NOLOAD) == NULL,
	      "libanl.so.1 left loaded");
	return 0;
}
