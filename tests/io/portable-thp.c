// SPDX-License-Identifier: GPL-2.0
/*
 * Where shmem THP is "advise", portable regions get huge pages: one from
 * pin_region_create() and mapped, and one filled by the loader. Where it
 * is "never" (the control) they get none, so the check can tell. The test
 * sets the top knob itself and puts it back, so it runs only where that
 * is allowed and harmless: in the test guests (run-tests guest says so).
 *   portable-thp DIR guest
 */
#include <sys/mman.h>

#include "io-test.h"

#define KNOB	"/sys/kernel/mm/transparent_hugepage/shmem_enabled"
#define SIZE	(8u << 20)

static char knob_was[32];

static int knob_get(char *mode, size_t len)
{
	char line[256], *open, *close;
	FILE *f = fopen(KNOB, "re");
	int ok = 0;

	if (f && fgets(line, sizeof(line), f)) {
		open = strchr(line, '[');
		close = open ? strchr(open, ']') : NULL;
		if (close && (size_t)(close - open) <= len) {
			snprintf(mode, len, "%.*s", (int)(close - open - 1),
				 open + 1);
			ok = 1;
		}
	}
	if (f)
		fclose(f);
	return ok;
}

static void knob_set(const char *mode)
{
	FILE *f = fopen(KNOB, "we");

	CHECK(f && fputs(mode, f) >= 0 && fclose(f) == 0, "writing %s to %s",
	      mode, KNOB);
}

static void knob_restore(void)
{
	if (knob_was[0])
		knob_set(knob_was);
}

/* kB of the mapping at addr that huge PMDs map (smaps), or -1. */
static long long pmd_mapped_kb(const void *addr)
{
	char line[256], want[32];
	long long kb = -1, v;
	FILE *f = fopen("/proc/self/smaps", "re");
	int in = 0;

	CHECK(f, "/proc/self/smaps");
	snprintf(want, sizeof(want), "%lx-", (unsigned long)addr);
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, want, strlen(want))) {
			in = 1;
		} else if (in && sscanf(line, "ShmemPmdMapped: %lld kB", &v) == 1) {
			kb = v;
			break;
		}
	}
	fclose(f);
	return kb;
}

/*
 * Read a page of every 2 MiB, so that the mapping maps what is there
 * (ASan makes mlock a no-op, and this test is built with it).
 */
static void touch(const void *p, uint64_t len)
{
	uint64_t off;

	for (off = 0; off < len; off += 2u << 20)
		(void)*(const volatile char *)((const char *)p + off);
}

/* Huge-mapped kB of a fresh pin_region_create()'d region, mapped. */
static long long alloc_kb(struct pin_dev *dev)
{
	struct pin_region *r;
	void *p;
	long long kb;

	CHECK(pin_region_create(dev, SIZE, NULL, &r) == 0, "%s", pin_dev_error(dev));
	CHECK(pin_region_map(r, &p) == 0, "%s", pin_region_error(r));
	touch(p, SIZE);
	kb = pmd_mapped_kb(p);
	pin_region_close(r);
	return kb;
}

/* Huge-mapped kB of the region a load of path filled. */
static long long load_kb(struct pin_dev *dev, const char *path)
{
	struct pin_st *ld = pin_st_create();
	void *p;
	long long kb;

	CHECK(ld, "memory");
	CHECK(pin_st_load(ld, dev, path, NULL) == 0, "%s", pin_st_error(ld));
	CHECK(pin_region_map(pin_st_region(ld, 0), &p) == 0, "map");
	touch(p, SIZE);
	kb = pmd_mapped_kb(p);
	pin_st_close(ld);
	return kb;
}

int main(int argc, char **argv)
{
	uint64_t shape[1] = { SIZE };
	struct pin_st_tensor t = {
		.size = sizeof(struct pin_st_tensor),
		.name = "w", .dtype = PIN_DT_U8, .ndim = 1, .shape = shape,
		.nbytes = SIZE,
	};
	long long a_advise, l_advise, a_never, l_never;
	struct pin_dev *dev;
	struct pin_st *ck;
	char path[4096];
	uint8_t *data;

	if (argc < 3 || strcmp(argv[2], "guest"))
		SKIP("sets the machine's shmem THP mode: test guests only");
	if (!knob_get(knob_was, sizeof(knob_was)))
		SKIP("no %s (a kernel without THP)", KNOB);
	atexit(knob_restore);
	CHECK(pin_dev_open(&dev, PIN_BACKEND_PORTABLE, NULL) == 0, "portable backend");
	data = malloc(SIZE);
	ck = pin_st_create();
	CHECK(data && ck, "memory");
	fill(data, SIZE, 5);
	t.data = data;
	snprintf(path, sizeof(path), "%s/portable-thp-%d.safetensors",
		 test_dir(argc, argv), (int)getpid());
	CHECK(pin_st_save(ck, path, &t, 1, NULL, NULL, 0, NULL) == 0, "%s",
	      pin_st_error(ck));

	knob_set("advise");
	a_advise = alloc_kb(dev);
	l_advise = load_kb(dev, path);
	knob_set("never");
	a_never = alloc_kb(dev);
	l_never = load_kb(dev, path);
	printf("# huge-mapped kB of %u: advise: alloc %lld, load %lld; never: alloc %lld, load %lld\n",
	       SIZE >> 10, a_advise, l_advise, a_never, l_never);
	CHECK(a_never == 0 && l_never == 0,
	      "huge pages under \"never\": the check cannot tell");
	CHECK(a_advise > 0, "pin_region_create under \"advise\": no huge page");
	CHECK(l_advise > 0, "a load under \"advise\": no huge page");

	pin_dev_close(dev);
	pin_st_close(ck);
	unlink(path);
	free(data);
	printf("ok\n");
	return 0;
}
