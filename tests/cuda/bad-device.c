// SPDX-License-Identifier: MIT
/*
 * A device ordinal the driver does not have: -ENODEV naming cuDeviceGet
 * and CUDA_ERROR_INVALID_DEVICE; a negative ordinal: -EINVAL. Another
 * ordinal that exists (the double offers two devices here) works.
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
	setenv("CUDA_DOUBLE_DEVICES", "2", 1);
	EXPECT(pin_cuda_open(&c, 2, &co), -ENODEV);
	CHECK(c == NULL, "handle left on failure");
	CHECK(strstr(why, "cuDeviceGet(2): CUDA_ERROR_INVALID_DEVICE"),
	      "error '%s'", why);
	EXPECT(pin_cuda_open(&c, -1, &co), -EINVAL);
	CHECK(strstr(why, "device ordinal -1"), "error '%s'", why);
	EXPECT(pin_cuda_open(&c, 1, &co), 0);
	test_stats();
	pin_cuda_close(c);
	test_double_clean(test_stats());
	return 0;
}
