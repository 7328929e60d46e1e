// SPDX-License-Identifier: MIT
/*
 * A driver that takes at most 4 MiB per cuMemHostRegister call
 * (CUDA_DOUBLE_REGISTER_MAX), as real drivers take less than 512 GiB and
 * on some hosts fail above about 100 GiB. In one call an 18 MiB region is
 * refused, with -EINVAL naming the piece, its offset and the CUresult,
 * nothing left registered. In 4 MiB pieces (PIN_CUDA_TEST_CHUNK) every
 * call is within the limit, every byte is registered, and unregistering
 * undoes every piece.
 */
#include "cuda-test.h"

static void refused_whole(struct pin_dev *dev)
{
	struct pin_region *r = test_region(dev, 18 * MiB);
	const struct cuda_double_stats *s;
	struct pin_cuda *c;

	unsetenv("PIN_CUDA_TEST_CHUNK");
	c = test_cuda();
	s = test_stats();
	EXPECT(pin_cuda_register(c, r, 0), -EINVAL);
	CHECK(strstr(pin_cuda_error(c), "piece 1 of 1 at offset 0 of 18874368 bytes") &&
	      strstr(pin_cuda_error(c), "CUDA_ERROR_INVALID_VALUE"),
	      "error: %s", pin_cuda_error(c));
	CHECK(s->live == 0 && s->violations == 0, "%lu live, %lu violations",
	      s->live, s->violations);
	EXPECT(pin_cuda_unregister(c, r), -ENOENT);
	pin_cuda_close(c);
	EXPECT(pin_region_close(r), 0);
}

int main(void)
{
	struct pin_dev *dev = test_dev();
	struct pin_region *r;
	const struct cuda_double_stats *s;
	struct pin_cuda *c;
	cuda_double_covers_fn covers;
	uintptr_t base, next;
	unsigned long i, first;
	void *addr;

	setenv("CUDA_DOUBLE_REGISTER_MAX", "4194304", 1);
	refused_whole(dev);

	setenv("PIN_CUDA_TEST_CHUNK", "4194304", 1);
	r = test_region(dev, 18 * MiB);
	c = test_cuda();
	s = test_stats();
	covers = (cuda_double_covers_fn)dlsym(
		dlopen(getenv("PIN_CUDA_LIBRARY"), RTLD_NOW | RTLD_NOLOAD),
		"cuda_double_covers");
	CHECK(covers, "no cuda_double_covers");
	first = s->nr_calls;
	EXPECT(pin_cuda_register(c, r, 0), 0);
	EXPECT(pin_region_map(r, &addr), 0);
	base = next = (uintptr_t)addr;
	CHECK(s->nr_calls - first == 5, "%lu calls", s->nr_calls - first);
	for (i = first; i < s->nr_calls; i++) {
		const struct cuda_double_call *l = &s->log[i];

		CHECK(l->op == 'R' && l->result == 0 && l->base == next &&
		      l->size <= 4 * MiB, "call %lu: %c %#lx+%#llx -> %d", i,
		      l->op, (unsigned long)l->base,
		      (unsigned long long)l->size, l->result);
		CHECK(covers(l->base, l->base + l->size, NULL),
		      "piece %#lx not live", (unsigned long)l->base);
		next += l->size;
	}
	CHECK(next == base + 18 * MiB, "registered up to %#lx of %#lx",
	      (unsigned long)next, (unsigned long)(base + 18 * MiB));
	CHECK(s->live == 5, "%lu live", s->live);
	EXPECT(pin_region_unmap(r), -EBUSY);
	EXPECT(pin_cuda_unregister(c, r), 0);
	CHECK(s->live == 0 && s->nr_calls - first == 10,
	      "%lu live after unregistering, %lu calls", s->live,
	      s->nr_calls - first);
	pin_cuda_close(c);
	test_double_clean(s);
	EXPECT(pin_region_close(r), 0);
	pin_dev_close(dev);
	return 0;
}
