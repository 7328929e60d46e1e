// SPDX-License-Identifier: MIT
/*
 * cuInit failing (the double returns CUDA_ERROR_NO_DEVICE on request):
 * pin_cuda_open fails with -ENODEV, names cuInit and the CUresult, and
 * leaves no context retained.
 */
#include "cuda-test.h"

int main(void)
{
	struct pin_cuda *c = (struct pin_cuda *)1;
	char why[512] = "";
	struct pin_cuda_opts co = {
		.size = sizeof(co), .why = why, .why_len = sizeof(why),
	};

	if (!getenv("PIN_CUDA_LIBRARY"))
		SKIP("PIN_CUDA_LIBRARY (the driver test double) not set");
	setenv("CUDA_DOUBLE_INIT_RESULT", "100", 1);
	EXPECT(pin_cuda_open(&c, 0, &co), -ENODEV);
	CHECK(c == NULL, "handle left on failure");
	CHECK(strstr(why, "cuInit: CUDA_ERROR_NO_DEVICE (no CUDA-capable device is detected)"),
	      "error '%s'", why);
	/* Past cuInit the driver stays loaded; nothing may stay retained. */
	test_double_clean(test_stats());
	return 0;
}
