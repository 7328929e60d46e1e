// SPDX-License-Identifier: GPL-2.0
/*
 * A load pins under its reads: pin_st_timeline shows the data span in
 * steps, no step read before it was pinned, and (portable backend with
 * small pages, or the device with module ABI 4's ALLOC_LAZY: pinning is
 * done step by step there) the reads under way before the pinning is
 * done, the pinning of step k + 1 begun before the reads of step k came
 * back; with module ABI 5 the device's steps are the module's FILLs, each
 * pinning and reading its step, several under way at once, and with
 * PIN_IO_NO_KERNEL_FILL the io_uring path as with ABI 4; with
 * PIN_IO_PIN_FIRST, all of it pinned before the first read. The
 * data is the file's, the region sealed, its pages locked; a
 * save leaves no timeline and bad arguments are refused.
 *   st-overlap DIR
 */
#include <sys/mman.h>

#include "io-test.h"

#define SIZE	(64u << 20)
#define REQ	(1u << 20)

/* Bytes this process has locked (VmLck), or -1. */
static long long locked_bytes(void)
{
	char line[256];
	long long kb = -1;
	FILE *f = fopen("/proc/self/status", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmLck: %lld kB", &kb) == 1)
			break;
	fclose(f);
	return kb < 0 ? -1 : kb * 1024;
}

/* Whether mlock shows in VmLck here (ASan makes mlock a no-op). */
static int mlock_counts(void)
{
	static char page[4096] __attribute__((aligned(4096)));
	long long before = locked_bytes();
	int counts;

	if (mlock(page, sizeof(page)))
		return 0;
	counts = locked_bytes() > before;
	munlock(page, sizeof(page));
	return counts;
}

/*
 * kfill: every step made by the module's FILL, which pins and reads it in
 * one call (its pin and read times are the same), several at a time.
 */
static int check_steps(const struct pin_st_step *s, int n, int overlap,
		       int kfill)
{
	uint64_t covered = 0;
	int k, ahead = 0;

	for (k = 0; k < n; k++) {
		CHECK(s[k].offset == covered, "step %d at %llu, expected %llu",
		      k, (unsigned long long)s[k].offset,
		      (unsigned long long)covered);
		covered += s[k].length;
		CHECK(s[k].pin_begin_ns && s[k].pin_end_ns >= s[k].pin_begin_ns,
		      "step %d: pin times", k);
		CHECK_EQ(s[k].flags, kfill ? PIN_ST_STEP_KERNEL_FILL : 0u);
		if (kfill)
			CHECK(s[k].read_begin_ns == s[k].pin_begin_ns &&
			      s[k].read_end_ns == s[k].pin_end_ns,
			      "step %d: FILL's read and pin times differ", k);
		else
			CHECK(s[k].read_begin_ns >= s[k].pin_end_ns,
			      "step %d read %lld ns before it was pinned", k,
			      (long long)(s[k].pin_end_ns -
					  s[k].read_begin_ns));
		CHECK(s[k].read_end_ns > s[k].read_begin_ns,
		      "step %d: read times", k);
		if (k + 1 < n && s[k + 1].pin_begin_ns < s[k].read_end_ns)
			ahead++;
	}
	CHECK(covered >= SIZE, "steps cover %llu bytes of %u",
	      (unsigned long long)covered, SIZE);
	printf("# %d steps of %llu bytes; pinning of k+1 began before reads of k ended at %d of %d; reads began %.3f ms before pinning ended\n",
	       n, (unsigned long long)s[0].length, ahead, n - 1,
	       ((double)s[n - 1].pin_end_ns - (double)s[0].read_begin_ns) /
	       1e6);
	return !overlap || (s[0].read_begin_ns < s[n - 1].pin_end_ns &&
			    ahead > 0);
}

/*
 * Load path and check its steps; where they must overlap, load again
 * (up to TRIES loads) until a load shows it: the reads and the pinning
 * run in threads of their own, and a busy host may run one of them
 * through before the other starts. A loader that does not overlap
 * fails every try.
 */
#define TRIES 5
static struct pin_st *load_overlapping(struct pin_dev *dev, const char *path,
				       const struct pin_st_load_opts *lo,
				       int stepwise, int kfill)
{
	struct pin_st_step steps[64] = { { .size = sizeof(struct pin_st_step) } };
	struct pin_st *ld = NULL;
	int n, try;

	for (try = 1; try <= TRIES; try++) {
		if (ld)
			pin_st_close(ld);
		ld = pin_st_create();
		CHECK(pin_st_load(ld, dev, path, lo) == 0, "%s",
		      pin_st_error(ld));
		n = pin_st_timeline(ld, NULL, 0);
		CHECK(n > 1 && n <= 64, "%d steps", n);
		CHECK_EQ(pin_st_timeline(ld, steps, 64), n);
		if (check_steps(steps, n, stepwise, kfill))
			return ld;
		printf("# load %d of %d: the pinning ran through before the reads (or no step ahead); again\n",
		       try, TRIES);
	}
	CHECK(0, "%d loads, none with the reads under way before the pinning was done and a step pinned ahead of its reads",
	      TRIES);
	return ld;
}

int main(int argc, char **argv)
{
	char path[4096];
	uint64_t shape[1] = { SIZE };
	uint8_t *data = malloc(SIZE);
	struct pin_st_tensor t = {
		.size = sizeof(struct pin_st_tensor),
		.name = "w", .dtype = PIN_DT_U8, .ndim = 1, .shape = shape,
		.nbytes = SIZE, .data = data,
	};
	struct pin_io_opts o = { .size = sizeof(struct pin_io_opts), .request_size = REQ };
	struct pin_st_load_opts lo = { .size = sizeof(lo), .io = &o };
	struct pin_st *ck = pin_st_create(), *ld;
	struct pin_st_step steps[64] = { { .size = sizeof(struct pin_st_step) } };
	struct pin_region_info ri = PIN_INIT(struct pin_region_info);
	struct pin_dev_info di = PIN_INIT(struct pin_dev_info);
	struct pin_st_tensor got = PIN_INIT(struct pin_st_tensor);
	struct pin_dev *dev;
	long long lck;
	int n, portable, stepwise, kfill;

	CHECK(data && ck, "memory");
	snprintf(path, sizeof(path), "%s/st-overlap-%d.safetensors",
		 test_dir(argc, argv), (int)getpid());
	fill(data, SIZE, 7);
	CHECK(pin_st_save(ck, path, &t, 1, NULL, NULL, 0, NULL) == 0, "%s",
	      pin_st_error(ck));
	CHECK_EQ(pin_st_timeline(ck, steps, 64), 0);
	CHECK_EQ(pin_st_timeline(ck, NULL, 1), -EINVAL);
	CHECK_EQ(pin_st_timeline(NULL, steps, 64), -EINVAL);

	CHECK_EQ(pin_dev_open(&dev, PIN_BACKEND_AUTO, NULL), 0);
	portable = pin_dev_backend(dev) == PIN_BACKEND_PORTABLE;
	CHECK_EQ(pin_dev_info(dev, &di), 0);
	ld = pin_st_create();
	CHECK(pin_st_load(ld, dev, path, &lo) == 0, "%s", pin_st_error(ld));
	CHECK_EQ(pin_region_info(pin_st_region(ld, 0), &ri), 0);
	pin_st_close(ld);
	/* hugetlb pages, and a device region of a module before ABI 4, are
	 * allocated up front; the rest is pinned step by step. */
	stepwise = portable ? ri.min_order == 0 : di.abi_version >= 4;
	kfill = !portable && di.abi_version >= 5;
	ld = load_overlapping(dev, path, &lo, stepwise, kfill);
	CHECK_EQ(pin_region_info(pin_st_region(ld, 0), &ri), 0);
	printf("# %s: %s\n", portable ? "portable" : "device",
	       kfill ? "filled by the module, steps in parallel" :
	       stepwise ? "pinned step by step" : "pinned up front");
	CHECK_EQ(ri.state, PIN_STATE_SEALED);
	CHECK_EQ(pin_st_find(ld, "w", &got), 0);
	CHECK(!memcmp(got.data, data, SIZE), "the loaded bytes differ");
	lck = locked_bytes();
	if (portable && geteuid() == 0 && mlock_counts())
		CHECK(lck >= SIZE, "%lld bytes locked, want %u", lck, SIZE);
	else
		printf("# locked pages not checked (not root, or mlock intercepted by the sanitizer)\n");

	pin_st_close(ld);

	if (kfill) {
		/* The module's FILL declined: io_uring reads, step by step. */
		o.flags = PIN_IO_NO_KERNEL_FILL;
		ld = load_overlapping(dev, path, &lo, 1, 0);
		printf("# device, PIN_IO_NO_KERNEL_FILL: pinned step by step\n");
		CHECK_EQ(pin_st_find(ld, "w", &got), 0);
		CHECK(!memcmp(got.data, data, SIZE),
		      "the loaded bytes differ (no kernel fill)");
		pin_st_close(ld);
	}

	/* PIN_IO_PIN_FIRST: all of it pinned before the first read. */
	o.flags = PIN_IO_PIN_FIRST;
	ld = pin_st_create();
	CHECK(pin_st_load(ld, dev, path, &lo) == 0, "%s", pin_st_error(ld));
	n = pin_st_timeline(ld, steps, 64);
	CHECK(n > 0 && n <= 64, "%d steps", n);
	CHECK(steps[n - 1].pin_end_ns <= steps[0].read_begin_ns,
	      "PIN_IO_PIN_FIRST: the pinning ended %lld ns after the first read",
	      (long long)(steps[n - 1].pin_end_ns - steps[0].read_begin_ns));
	CHECK_EQ(pin_st_find(ld, "w", &got), 0);
	CHECK(!memcmp(got.data, data, SIZE), "the loaded bytes differ (pin first)");
	pin_st_close(ld);
	pin_dev_close(dev);
	pin_st_close(ck);
	unlink(path);
	free(data);
	printf("ok\n");
	return 0;
}
