// SPDX-License-Identifier: GPL-2.0
/*
 * A device load (module ABI 4) populates its lazy region step by step (ABI
 * 5: FILLs it); if the kernel has no 2 MiB pages left for a step (POPULATE
 * or FILL: ENOMEM), the load starts again into a region allocated whole,
 * which may fall back to smaller chunks, and says so in fallback_reason.
 * The ENOMEM is forced by this program's own ioctl(), which libpin (linked
 * statically) calls: the second POPULATE, or FILL, fails. Device backend
 * only; skipped elsewhere.
 *   st-populate-enomem DIR
 */
#include <dlfcn.h>
#include <stdarg.h>
#include <sys/ioctl.h>

#include <uapi/pinmem.h>

#include "io-test.h"

#define SIZE	(48u << 20)

static unsigned long fail_req;	/* the ioctl made to fail */
static int calls;		/* calls of it seen */
static int fail_at;		/* the call that fails, 0: none */

int ioctl(int fd, unsigned long req, ...)
{
	static int (*real)(int, unsigned long, ...);
	va_list ap;
	void *arg;

	va_start(ap, req);
	arg = va_arg(ap, void *);
	va_end(ap);
	if (!real)
		real = (int (*)(int, unsigned long, ...))dlsym(RTLD_NEXT, "ioctl");
	if (req == fail_req && ++calls == fail_at) {
		errno = ENOMEM;
		return -1;
	}
	return real(fd, req, arg);
}

/* Load path with the second call of req failing with ENOMEM. */
static void load_failing(struct pin_dev *dev, const char *path,
			 const uint8_t *data, unsigned long req,
			 const char *name, unsigned flags)
{
	struct pin_io_opts o = { .size = sizeof(struct pin_io_opts), .flags = flags };
	struct pin_st_load_opts lo = { .size = sizeof(lo), .io = &o };
	struct pin_region_info ri = PIN_INIT(struct pin_region_info);
	struct pin_io_stats st = PIN_INIT(struct pin_io_stats);
	struct pin_st_tensor got = PIN_INIT(struct pin_st_tensor);
	struct pin_st *ld = pin_st_create();

	CHECK(ld, "memory");
	fail_req = req;
	calls = 0;
	fail_at = 2;
	CHECK(pin_st_load(ld, dev, path, &lo) == 0, "%s", pin_st_error(ld));
	CHECK(calls >= 2, "%d %s calls: the load was not lazy", calls, name);
	CHECK_EQ(pin_st_stats(ld, &st), 0);
	CHECK(strstr(st.fallback_reason, "no 2 MiB pages left while loading"),
	      "fallback_reason \"%s\"", st.fallback_reason);
	CHECK_EQ(pin_region_info(pin_st_region(ld, 0), &ri), 0);
	CHECK_EQ(ri.state, PIN_STATE_SEALED);
	CHECK(ri.nr_chunks + ri.nr_fallback_chunks >= SIZE >> 21,
	      "%llu chunks", (unsigned long long)ri.nr_chunks);
	CHECK_EQ(pin_st_find(ld, "w", &got), 0);
	CHECK(!memcmp(got.data, data, SIZE), "the loaded bytes differ");
	printf("# %s %d failed; loaded again into a region allocated whole: \"%s\"\n",
	       name, fail_at, st.fallback_reason);
	fail_req = 0;
	pin_st_close(ld);
}

int main(int argc, char **argv)
{
	char path[4096];
	uint64_t shape[1] = { SIZE };
	uint8_t *data;
	struct pin_st_tensor t = {
		.size = sizeof(struct pin_st_tensor),
		.name = "w", .dtype = PIN_DT_U8, .ndim = 1, .shape = shape,
		.nbytes = SIZE,
	};
	struct pin_st *ck;
	struct pin_dev_info di = PIN_INIT(struct pin_dev_info);
	struct pin_dev *dev;

	if (pin_dev_open(&dev, PIN_BACKEND_DEVICE, NULL)) {
		printf("SKIP: no /dev/pinmem here\n");
		return 77;
	}
	CHECK_EQ(pin_dev_info(dev, &di), 0);
	if (di.abi_version < 4) {
		printf("SKIP: module ABI %u has no ALLOC_LAZY\n", di.abi_version);
		pin_dev_close(dev);
		return 77;
	}
	data = malloc(SIZE);
	ck = pin_st_create();
	CHECK(data && ck, "memory");
	t.data = data;
	snprintf(path, sizeof(path), "%s/st-populate-enomem-%d.safetensors",
		 test_dir(argc, argv), (int)getpid());
	fill(data, SIZE, 3);
	CHECK(pin_st_save(ck, path, &t, 1, NULL, NULL, 0, NULL) == 0, "%s",
	      pin_st_error(ck));

	load_failing(dev, path, data, PINMEM_IOC_POPULATE, "POPULATE",
		     PIN_IO_NO_KERNEL_FILL);
	if (di.abi_version >= 5)
		load_failing(dev, path, data, PINMEM_IOC_FILL, "FILL", 0);
	else
		printf("# module ABI %u has no FILL: not tried\n",
		       di.abi_version);

	pin_dev_close(dev);
	pin_st_close(ck);
	unlink(path);
	free(data);
	printf("ok\n");
	return 0;
}
