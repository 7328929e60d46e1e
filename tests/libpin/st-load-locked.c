// SPDX-License-Identifier: MIT
/*
 * A checkpoint loaded on the portable backend is locked in memory when
 * pin_st_load returns: the loader fills an owner mapping it made present
 * without locking it, and the seal that ends the load locks every page.
 * /proc/self/smaps must show the sealed owner mapping wholly resident and
 * locked, and the bytes must be the file's. With PIN_ST_LOAD_OPEN the
 * owner mapping is the writable one the load read into: resident, locked,
 * "rw-s" in /proc/self/maps, the tensors' data in it, and the region's
 * only mapping. Skipped on the device backend (the kernel pins a region's
 * pages; mlock does not apply) and under ASan (its mlock does nothing).
 */
#include <stdint.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "test.h"

#define TENSOR_BYTES	(3u << 20)

/* Size:, Rss: and Locked: (kB) of the smaps entry starting at addr. */
static int smaps_of(const void *addr, long *size, long *rss, long *locked)
{
	char line[512];
	int in = 0, found = 0;
	FILE *f = fopen("/proc/self/smaps", "re");

	if (!f)
		FAIL("/proc/self/smaps: %s", strerror(errno));
	while (fgets(line, sizeof(line), f)) {
		unsigned long start, end;

		/* A mapping's first line: "start-end perms ..." */
		if (sscanf(line, "%lx-%lx ", &start, &end) == 2) {
			in = start == (unsigned long)addr;
			found |= in;
			continue;
		}
		if (!in)
			continue;
		sscanf(line, "Size: %ld kB", size);
		sscanf(line, "Rss: %ld kB", rss);
		sscanf(line, "Locked: %ld kB", locked);
	}
	fclose(f);
	return found;
}

/* How many mappings of the file fd has; the perms of the one at addr. */
static int mappings_of(int fd, const void *addr, char perms[5])
{
	char line[512], p[5];
	unsigned long start, ino;
	struct stat sb;
	int n = 0;
	FILE *f = fopen("/proc/self/maps", "re");

	if (!f || fstat(fd, &sb))
		FAIL("/proc/self/maps: %s", strerror(errno));
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%lx-%*x %4s %*x %*x:%*x %lu", &start, p,
			   &ino) != 3 || ino != (unsigned long)sb.st_ino)
			continue;
		n++;
		if (start == (unsigned long)addr)
			memcpy(perms, p, 5);
	}
	fclose(f);
	return n;
}

static void load_locked(struct pin_dev *dev, const char *path, unsigned flags)
{
	struct pin_st_load_opts lo = { .size = sizeof(lo), .flags = flags };
	struct pin_st_tensor t = PIN_INIT(struct pin_st_tensor);
	struct pin_io_stats st = PIN_INIT(struct pin_io_stats);
	long size = -1, rss = -1, locked = -1;
	struct pin_st *ck = pin_st_create();
	char perms[5] = "";
	struct pin_region *r;
	char *map;

	CHECK_OK(pin_st_load(ck, dev, path, &lo), pin_st_error(ck));
	CHECK_OK(pin_st_stats(ck, &st), pin_st_error(ck));
	CHECK_OK(pin_st_find(ck, "w", &t), pin_st_error(ck));
	EXPECT_EQ(t.nbytes, TENSOR_BYTES);
	t_check(t.data, TENSOR_BYTES, 1, "the loaded tensor");
	r = pin_st_region(ck, 0);
	EXPECT_TRUE(r != NULL);
	CHECK_OK(pin_region_map(r, (void **)&map), pin_region_error(r));
	EXPECT_TRUE(smaps_of(map, &size, &rss, &locked));
	printf("# flags 0x%x, owner mapping %p: Size %ld kB, Rss %ld kB, Locked %ld kB\n",
	       flags, map, size, rss, locked);
	printf("# fixed_buffers %d, why: %s\n", st.fixed_buffers,
	       st.fallback_reason);
	EXPECT_TRUE(size > 0);
	EXPECT_EQ(rss, size);
	EXPECT_EQ(locked, size);
	EXPECT_EQ(mappings_of(pin_region_fd(r), map, perms), 1);
	printf("# owner mapping %s\n", perms);
	if (flags & PIN_ST_LOAD_OPEN) {
		EXPECT_TRUE(!strcmp(perms, "rw-s"));
		EXPECT_TRUE((char *)t.data == map + t.region_offset);
		map[t.region_offset] ^= 0xff;	/* the tensor sees the write */
		EXPECT_EQ(((unsigned char *)t.data)[0],
			  (unsigned char)(map[t.region_offset]));
	} else {
		EXPECT_TRUE(!strcmp(perms, "r--s"));
	}
	pin_st_close(ck);
}

int main(void)
{
	struct pin_dev *dev;
	char path[64];
	int fd;

#ifdef __SANITIZE_ADDRESS__
	SKIP("ASan's mlock does nothing: run the plain build");
#endif
	dev = t_open(PIN_BACKEND_PORTABLE);
	fd = t_st_memfd(path, sizeof(path), TENSOR_BYTES, 1);
	load_locked(dev, path, 0);
	load_locked(dev, path, PIN_ST_LOAD_OPEN);
	pin_dev_close(dev);
	close(fd);
	return 0;
}
