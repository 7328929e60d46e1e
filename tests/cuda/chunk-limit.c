// SPDX-License-Identifier: MIT
/*
 * The piece size is exactly 32 GiB unless a test lowers it; the test knob
 * PIN_CUDA_TEST_CHUNK accepts multiples of 2 MiB (the region's chunk) up
 * to 32 GiB and nothing else (-EINVAL, named in the error text).
 */
#include "cuda-test.h"

static void bad(const char *value)
{
	struct pin_cuda *c = (struct pin_cuda *)1;
	char why[512] = "";
	struct pin_cuda_opts co = {
		.size = sizeof(co), .why = why, .why_len = sizeof(why),
	};

	setenv("PIN_CUDA_TEST_CHUNK", value, 1);
	EXPECT(pin_cuda_open(&c, 0, &co), -EINVAL);
	CHECK(c == NULL, "handle left on failure");
	CHECK(strstr(why, "PIN_CUDA_TEST_CHUNK"), "%s: error '%s'", value, why);
}

int main(void)
{
	const struct cuda_double_stats *s;
	struct pin_cuda *c;

	CHECK(PIN_CUDA_CHUNK_MAX == 34359738368ULL, "PIN_CUDA_CHUNK_MAX %llu",
	      (unsigned long long)PIN_CUDA_CHUNK_MAX);
	unsetenv("PIN_CUDA_TEST_CHUNK");
	c = test_cuda();
	s = test_stats();	/* keeps the double loaded to the end */
	CHECK(pin_cuda_chunk_max(c) == PIN_CUDA_CHUNK_MAX, "default chunk %llu",
	      (unsigned long long)pin_cuda_chunk_max(c));
	pin_cuda_close(c);

	setenv("PIN_CUDA_TEST_CHUNK", "34359738368", 1);
	c = test_cuda();
	CHECK(pin_cuda_chunk_max(c) == PIN_CUDA_CHUNK_MAX, "chunk %llu",
	      (unsigned long long)pin_cuda_chunk_max(c));
	pin_cuda_close(c);

	bad("34361835520");	/* 32 GiB + 2 MiB */
	bad("68719476736");	/* 64 GiB */
	bad("6295552");		/* 6 MiB + 4 KiB: a page multiple */
	bad("1048576");		/* 1 MiB */
	bad("0");
	bad("4097");
	bad("4k");
	test_double_clean(s);
	return 0;
}
