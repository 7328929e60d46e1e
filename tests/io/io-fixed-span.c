// SPDX-License-Identifier: GPL-2.0
/*
 * No registered buffer of 65536 pages or more: the geometry that corrupts
 * kernel memory on Linux 6.1 and 6.12 (bio->bi_vcnt wraps, see
 * Documentation/kernel-bug-fixed-vcnt.md) is never handed to the kernel.
 *
 * Runs under the liburing-faults.so shim, which records the pages each
 * registered buffer touches and refuses every registration (-EOPNOTSUPP),
 * so that no registered-buffer I/O reaches the kernel even where this test
 * runs on an affected one: the reads go the plain way and must still be
 * right, and the fallback must be said. Spans of 1 GiB and more, the reported
 * 512 MiB + 766 layout, request sizes from 4 KiB to the maximum, and a
 * buffer that does not start on a page boundary (one page more per buffer;
 * the buffered path). Writes register request-sized bounce buffers only.
 *   LD_PRELOAD=build/tests/io/liburing-faults.so io-fixed-span DIR
 */
#include <dlfcn.h>
#include <sys/mman.h>

#include "io-test.h"

#define PAGES_MAX	65535UL	/* bvecs bio->bi_vcnt can count */

static void (*reg_set)(int refuse);
static unsigned long (*reg_max_pages)(void);

/* A sparse file: O_DIRECT reads of holes are cheap and return zeros. */
static void make_sparse(const char *path, uint64_t size)
{
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);

	CHECK(fd >= 0, "create %s: %s", path, strerror(errno));
	CHECK(ftruncate(fd, (off_t)size) == 0, "ftruncate: %s", strerror(errno));
	close(fd);
}

/* A few non-zero bytes where a read ends, so that content is checked. */
static void mark(const char *path, uint64_t end)
{
	int fd = open(path, O_RDWR);

	CHECK(fd >= 0, "open %s: %s", path, strerror(errno));
	CHECK(pwrite(fd, "pinmem", 6, (off_t)(end - 6)) == 6, "pwrite");
	close(fd);
}

static void read_span(const char *path, uint64_t off, uint64_t len,
		      unsigned request_size, size_t misalign)
{
	uint64_t span = pin_file_span(off, len);
	char why[512];
	struct pin_io_opts o = { .size = sizeof(struct pin_io_opts), .why = why, .why_len = sizeof(why),
				 .request_size = request_size };
	struct pin_io_stats st = PIN_INIT(struct pin_io_stats);
	size_t map_len = span + 4096;
	unsigned long pages;
	char *map, *buf;
	int at;

	map = mmap(NULL, map_len, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	CHECK(map != MAP_FAILED, "mmap %llu: %s", (unsigned long long)map_len,
	      strerror(errno));
	buf = map + misalign;
	mark(path, off + len);
	reg_set(1);
	memset(&st, 0, sizeof(st));
	st.size = sizeof(st);
	at = pin_file_read(buf, span, path, off, len, &o, &st);
	CHECK(at >= 0, "pin_file_read of %llu bytes at %llu: %s",
	      (unsigned long long)len, (unsigned long long)off, why);
	pages = reg_max_pages();
	printf("# span %llu MiB + %llu, requests of %u KiB, buffer +%zu: "
	       "largest registered buffer %lu pages, direct %d; %s\n",
	       (unsigned long long)(span >> 20),
	       (unsigned long long)(span & ((1u << 20) - 1)),
	       request_size >> 10, misalign, pages, st.direct,
	       st.fallback_reason);
	CHECK(pages <= PAGES_MAX, "a registered buffer of %lu pages (over %lu)",
	      pages, PAGES_MAX);
	if (st.direct)
		CHECK(pages > 0, "O_DIRECT without trying registered buffers");
	CHECK(!st.fixed_buffers, "the shim refused registration, yet fixed");
	CHECK(strstr(st.fallback_reason, "refused by the kernel"),
	      "the refusal is not said: '%s'", st.fallback_reason);
	CHECK(!memcmp(buf + at + len - 6, "pinmem", 6), "the last bytes differ");
	CHECK(buf[at] == 0 && buf[at + len / 2] == 0, "a hole read as non-zero");
	munmap(map, map_len);
}

int main(int argc, char **argv)
{
	const char *dir = test_dir(argc, argv);
	const uint64_t mib = 1ULL << 20;
	char path[4096];

	reg_set = (void (*)(int))dlsym(RTLD_DEFAULT, "uring_faults_register");
	reg_max_pages = (unsigned long (*)(void))dlsym(RTLD_DEFAULT,
				"uring_faults_register_max_pages");
	if (!reg_set || !reg_max_pages)
		FAIL("run with LD_PRELOAD=.../build/tests/io/liburing-faults.so");
	if (!dir_has_odirect(dir))
		SKIP("%s refuses O_DIRECT: no registered buffers are tried", dir);
	snprintf(path, sizeof(path), "%s/io-fixed-span-%d.bin", dir,
		 (int)getpid());
	make_sparse(path, 1100 * mib + 766);

	/* the report: 512 MiB of tensors from byte 766 (65537 + 65536 pages) */
	read_span(path, 766, 512 * mib, PIN_IO_DEFAULT_REQUEST_SIZE, 0);
	/* 256 MiB + 4 KiB: 65537 pages, the smallest span that wrapped */
	read_span(path, 766, 256 * mib, PIN_IO_DEFAULT_REQUEST_SIZE, 0);
	/* more than io_uring's 1 GiB per buffer; small, odd, largest requests */
	read_span(path, 0, 1100 * mib, 64 << 10, 0);
	read_span(path, 12345, 300 * mib, 3 * 4096, 0);
	read_span(path, 0, 700 * mib, PIN_IO_MAX_REQUEST_SIZE, 0);
	/* a destination off the page boundary touches one page more */
	read_span(path, 766, 300 * mib, PIN_IO_DEFAULT_REQUEST_SIZE, 512);
	unlink(path);
	printf("ok: no registered buffer over %lu pages\n", PAGES_MAX);
	return 0;
}
