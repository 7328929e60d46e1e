// SPDX-License-Identifier: MIT
/*
 * PIN_CUDA_LIBRARY naming a file that does not exist: pin_cuda_open fails
 * with -ENOENT, leaves no handle, and says which file and why (dlerror).
 */
#include "cuda-test.h"

int main(void)
{
	const char *path = "/nonexistent/pinmem-test/libcuda.so.1";
	struct pin_cuda *c = (struct pin_cuda *)1;
	char why[512] = "";
	struct pin_cuda_opts co = {
		.size = sizeof(co), .why = why, .why_len = sizeof(why),
	};

	setenv("PIN_CUDA_LIBRARY", path, 1);
	EXPECT(pin_cuda_open(&c, 0, &co), -ENOENT);
	CHECK(c == NULL, "handle left on failure");
	CHECK(strstr(why, "no CUDA driver") && strstr(why, path) &&
	      strstr(why, "cannot open shared object file"), "error '%s'", why);
	/* No options, or no why buffer, are allowed. */
	EXPECT(pin_cuda_open(&c, 0, NULL), -ENOENT);
	co.why = NULL;
	EXPECT(pin_cuda_open(&c, 0, &co), -ENOENT);
	/* A short buffer is truncated, terminated. */
	memset(why, 'x', sizeof(why));
	co.why = why;
	co.why_len = 8;
	EXPECT(pin_cuda_open(&c, 0, &co), -ENOENT);
	CHECK(strlen(why) == 7, "short buffer: '%s'", why);
	return 0;
}
