// SPDX-License-Identifier: GPL-2.0
/*
 * Does io_uring coalesce a pinmem mapping's 2 MiB chunks when the mapping is
 * registered as a fixed buffer? Prints TAP (run it in the guest, as root:
 * tests/guest.d/45-io-coalesce).
 *
 * User space cannot see how io_uring stores a registered buffer, so this
 * looks from inside the kernel, through the kprobe events of
 * uring-probes.c.
 *
 * Cases: a pinmem region of 4 chunks (8 MiB, no fallback chunks), whole
 * and a sub-range [1 MiB, 6 MiB) (as libpin registers a read's
 * destination, not chunk-aligned); as
 * controls, an 8 MiB memfd (4 KiB shmem pages while shmem THP is off) and
 * an 8 MiB anonymous mapping with MADV_HUGEPAGE (checked only when
 * /proc/self/smaps shows it entirely in THPs).
 *   fixed-coalesce
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <liburing.h>
#include <pin.h>

#include "uring-probes.h"

#define MIB		(1ul << 20)
#define CHUNK		(2 * MIB)
#define SIZE		(8 * MIB)
#define NR_CHUNKS	(SIZE / CHUNK)
#define NR_PAGES	(SIZE / 4096)
/* The READ_FIXED lands here: past the first bvec, so the 6.12 import takes
 * its segment-skip path, which relies on folio_shift. */
#define READ_OFF	(CHUNK + 4096)
#define READ_LEN	8192

static int test_no;
static int failures;

static void tap(bool ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void tap(bool ok, const char *fmt, ...)
{
	va_list ap;

	printf("%sok %d - ", ok ? "" : "not ", ++test_no);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	if (!ok)
		failures++;
	fflush(stdout);
}

static void skip(const char *name, const char *why)
{
	printf("ok %d - %s # SKIP %s\n", ++test_no, name, why);
	fflush(stdout);
}

/*
 * Register buf as fixed buffer 0 of a fresh ring; if that works, READ_FIXED
 * READ_LEN bytes of /dev/zero into buf + READ_OFF and check they landed.
 * Returns the registration's result; *read_ok says whether the read did.
 */
static int register_and_read(uint8_t *buf, size_t len, bool *read_ok, char *why,
			     size_t whylen)
{
	struct iovec iov = { .iov_base = buf, .iov_len = len };
	struct io_uring_cqe *cqe;
	struct io_uring_sqe *sqe;
	struct io_uring ring;
	int ret, reg, fd;
	size_t i;

	*read_ok = false;
	snprintf(why, whylen, "not run");
	ret = io_uring_queue_init(4, &ring, 0);
	if (ret) {
		snprintf(why, whylen, "io_uring_queue_init: %s", strerror(-ret));
		return ret;
	}
	reg = io_uring_register_buffers(&ring, &iov, 1);
	if (reg) {
		io_uring_queue_exit(&ring);
		return reg;
	}
	memset(buf + READ_OFF, 0xa5, READ_LEN);
	fd = open("/dev/zero", O_RDONLY | O_CLOEXEC);
	sqe = io_uring_get_sqe(&ring);
	if (fd < 0 || !sqe) {
		snprintf(why, whylen, "no /dev/zero or no sqe");
		goto out;
	}
	io_uring_prep_read_fixed(sqe, fd, buf + READ_OFF, READ_LEN, 0, 0);
	ret = io_uring_submit_and_wait(&ring, 1);
	if (ret != 1 || io_uring_peek_cqe(&ring, &cqe) || !cqe) {
		snprintf(why, whylen, "submit: %d", ret);
		goto out;
	}
	ret = cqe->res;
	io_uring_cqe_seen(&ring, cqe);
	if (ret != READ_LEN) {
		snprintf(why, whylen, "READ_FIXED res %d (%s)", ret,
			 ret < 0 ? strerror(-ret) : "short");
		goto out;
	}
	for (i = 0; i < READ_LEN && !buf[READ_OFF + i]; i++)
		;
	*read_ok = i == READ_LEN;
	if (*read_ok)
		snprintf(why, whylen, "read %d zero bytes at +%lu", READ_LEN,
			 (unsigned long)READ_OFF);
	else
		snprintf(why, whylen, "byte %zu not zero after the read", i);
out:
	if (fd >= 0)
		close(fd);
	ret = io_uring_unregister_buffers(&ring);
	if (ret)
		printf("# io_uring_unregister_buffers: %s\n", strerror(-ret));
	io_uring_queue_exit(&ring);
	return reg;
}

/* Whether the text of a THP knob selects never (e.g. "always [never]"). */
static bool knob_never(const char *path)
{
	char *s = read_text(path);
	bool never = s && strstr(s, "[never]");

	free(s);
	return never;
}

/* kB of AnonHugePages in /proc/self/smaps for the mapping starting at addr. */
static long anon_huge_kb(void *addr)
{
	char *s = read_text("/proc/self/smaps"), *p, head[32];
	long kb = -1;

	if (!s)
		return -1;
	snprintf(head, sizeof(head), "%lx-", (unsigned long)addr);
	for (p = s; p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
		if (!strncmp(p, head, strlen(head))) {
			p = strstr(p, "\nAnonHugePages:");
			if (p)
				kb = strtol(p + strlen("\nAnonHugePages:"), NULL, 10);
			break;
		}
	}
	free(s);
	return kb;
}

/* What the probes must show for one registration. */
struct want {
	unsigned long long len, nr_bvecs, folio_shift;
	unsigned long long bv0_off, bv0_len, bv1_len;
};

/* Whole buffers of 2 MiB folios, 4 KiB pages; a pinmem sub-range. */
static const struct want want_2m = { SIZE, NR_CHUNKS, 21, 0, CHUNK, CHUNK };
static const struct want want_4k = { SIZE, NR_PAGES, 12, 0, 4096, 4096 };
/* [1 MiB, 6 MiB) of the region: half of chunk 0, chunk 1, chunk 2. */
#define SUB_OFF		MIB
#define SUB_LEN		(5 * MIB)
static const struct want want_sub = { SUB_LEN, 3, 21, MIB, MIB, CHUNK };

/* The coalescing checks for one case; label names the expectation. */
static void check_case(const struct tracer *t, const char *name,
		       const struct seen *s, int reg, const struct want *w,
		       const char *label)
{
	if (!t->has_reg) {
		/* 6.1: what the READ_FIXED imported is all there is to see. */
		tap(reg == 0 && s->imp && s->imp_nr_bvecs == w->nr_bvecs &&
		    s->imp_bv0_len == w->bv0_len && s->imp_bv1_len == w->bv1_len,
		    "%s: stored as %s (io_import_fixed saw nr_bvecs=%llu "
		    "bvec[0]=%llu bvec[1]=%llu bytes)", name, label,
		    s->imp_nr_bvecs, s->imp_bv0_len, s->imp_bv1_len);
		return;
	}
	tap(s->reg && s->ret == 0 && reg == 0 && s->len == w->len &&
	    s->nr_bvecs == w->nr_bvecs && s->folio_shift == w->folio_shift &&
	    s->bv0_off == w->bv0_off && s->bv0_len == w->bv0_len &&
	    s->bv1_len == w->bv1_len,
	    "%s: registered as %s (saw: %s, nr_bvecs=%llu folio_shift=%llu "
	    "bvec[0]=%llu bytes at +%llu, bvec[1]=%llu bytes, acct_pages=%llu)",
	    name, label, s->reg ? "reg" : "no reg event", s->nr_bvecs,
	    s->folio_shift, s->bv0_len, s->bv0_off, s->bv1_len, s->acct_pages);
	tap(s->imp && s->imp_imu == s->imu && s->imp_nr_bvecs == w->nr_bvecs &&
	    s->imp_folio_shift == w->folio_shift,
	    "%s: the READ_FIXED imported that buffer (io_import_fixed saw "
	    "nr_bvecs=%llu folio_shift=%llu, %s imu)", name, s->imp_nr_bvecs,
	    s->imp_folio_shift, s->imp && s->imp_imu == s->imu ? "same" : "another or no");
}

int main(void)
{
	struct pin_region_info info = PIN_INIT(struct pin_region_info);
	struct tracer tr;
	struct pin_region *r;
	struct pin_dev *dev;
	struct utsname u;
	struct seen s;
	bool is61, traced = false, read_ok;
	char why[256];
	uint8_t *thp_raw, *thp;
	void *map;
	int ret, reg, mfd;
	long kb;

	setvbuf(stdout, NULL, _IOLBF, 0);
	uname(&u);
	is61 = !strncmp(u.release, "6.1.", 4);
	printf("# kernel %s\n", u.release);

	ret = tracer_start(&tr, u.release);
	traced = !ret;
	if (ret) {
		printf("# tracing unavailable: %s\n", tr.why);
		tracer_stop(&tr);
	}

	/* 1. The pinmem region. */
	ret = pin_dev_open(&dev, PIN_BACKEND_DEVICE, NULL);
	if (ret) {
		tap(false, "pinmem device: pin_dev_open: %s", strerror(-ret));
		goto controls;
	}
	ret = pin_region_create(dev, SIZE, NULL, &r);
	if (ret) {
		tap(false, "pinmem: 8 MiB region of 2 MiB chunks: %s", pin_dev_error(dev));
		pin_dev_close(dev);
		goto controls;
	}
	if (pin_region_info(r, &info) || pin_region_map(r, &map)) {
		tap(false, "pinmem: region info/map: %s", pin_region_error(r));
		goto free_region;
	}
	printf("# pinmem region: %" PRIu64 " chunks of 2 MiB, %" PRIu64
	       " fallback chunks, owner mapping %p\n", info.nr_chunks,
	       info.nr_fallback_chunks, map);
	if (traced)
		tracer_clear(&tr);
	reg = register_and_read(map, SIZE, &read_ok, why, sizeof(why));
	if (is61) {
		tap(reg == -EOPNOTSUPP,
		    "6.1: registering a pinmem mapping as a fixed buffer is refused with "
		    "EOPNOTSUPP (got %s)", reg ? strerror(-reg) : "success");
	} else {
		tap(reg == 0, "%s: registering a pinmem mapping as a fixed buffer is "
		    "accepted (got %s)", u.release, reg ? strerror(-reg) : "success");
	}
	if (reg)
		skip("pinmem: READ_FIXED through the registered mapping",
		     "registration refused");
	else
		tap(read_ok, "pinmem: READ_FIXED through the registered mapping (%s)", why);
	if (is61 && reg) {
		skip("pinmem: how io_uring stored the registered mapping",
		     "6.1 refused it: nothing is stored");
	} else if (traced) {
		tracer_read(&tr, &s);
		if (info.nr_chunks == NR_CHUNKS && !info.nr_fallback_chunks)
			check_case(&tr, "pinmem", &s, reg, &want_2m,
				   "4 bvecs of 2 MiB, one per chunk (coalesced)");
		else
			tap(false, "pinmem: region is not 4 whole 2 MiB chunks");
	} else {
		skip("pinmem: how io_uring stored the registered mapping", tr.why);
	}
	/*
	 * A range that starts and ends inside chunks, as libpin registers a
	 * read's destination: the head folio may be partial (6.12).
	 */
	if (!reg) {
		if (traced)
			tracer_clear(&tr);
		reg = register_and_read((uint8_t *)map + SUB_OFF, SUB_LEN, &read_ok,
					why, sizeof(why));
		tap(reg == 0 && read_ok, "pinmem [1 MiB, 6 MiB): registered (%s) and "
		    "READ_FIXED (%s)", reg ? strerror(-reg) : "success", why);
		if (traced) {
			tracer_read(&tr, &s);
			check_case(&tr, "pinmem [1 MiB, 6 MiB)", &s, reg, &want_sub,
				   "3 bvecs: 1 MiB at +1 MiB, then 2 MiB chunks (coalesced)");
		} else {
			skip("pinmem [1 MiB, 6 MiB): how io_uring stored it", tr.why);
		}
	}
free_region:
	pin_region_close(r);
	pin_dev_close(dev);

controls:
	/* 2. Control: a memfd of 4 KiB shmem pages. */
	mfd = memfd_create("fixed-coalesce", MFD_CLOEXEC);
	map = MAP_FAILED;
	if (mfd >= 0 && !ftruncate(mfd, SIZE))
		map = mmap(NULL, SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
	if (map == MAP_FAILED) {
		tap(false, "memfd control: %s", strerror(errno));
	} else {
		memset(map, 1, SIZE);
		if (traced)
			tracer_clear(&tr);
		reg = register_and_read(map, SIZE, &read_ok, why, sizeof(why));
		tap(reg == 0 && read_ok, "memfd control: registered (%s) and READ_FIXED (%s)",
		    reg ? strerror(-reg) : "success", why);
		if (!traced) {
			skip("memfd control: how io_uring stored it", tr.why);
		} else if (!knob_never("/sys/kernel/mm/transparent_hugepage/shmem_enabled")) {
			tracer_read(&tr, &s);
			skip("memfd control: how io_uring stored it", "shmem THP is not off");
		} else {
			tracer_read(&tr, &s);
			check_case(&tr, "memfd control", &s, reg, &want_4k,
				   "2048 bvecs of 4 KiB (not coalesced)");
		}
		munmap(map, SIZE);
	}
	if (mfd >= 0)
		close(mfd);

	/* 3. Control: anonymous memory in THPs, where the kernel has them. */
	thp_raw = mmap(NULL, SIZE + CHUNK, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (thp_raw == MAP_FAILED) {
		tap(false, "THP control: mmap: %s", strerror(errno));
		goto done;
	}
	thp = (uint8_t *)(((uintptr_t)thp_raw + CHUNK - 1) & ~(uintptr_t)(CHUNK - 1));
	/* Its own VMA, so that smaps speaks of it alone. */
	if (thp != thp_raw)
		munmap(thp_raw, (size_t)(thp - thp_raw));
	munmap(thp + SIZE, (size_t)(thp_raw + SIZE + CHUNK - (thp + SIZE)));
	madvise(thp, SIZE, MADV_HUGEPAGE);
	memset(thp, 1, SIZE);
	kb = anon_huge_kb(thp);
	printf("# THP control: AnonHugePages %ld kB of %lu kB\n", kb, SIZE >> 10);
	if (traced)
		tracer_clear(&tr);
	reg = register_and_read(thp, SIZE, &read_ok, why, sizeof(why));
	tap(reg == 0 && read_ok, "THP control: registered (%s) and READ_FIXED (%s)",
	    reg ? strerror(-reg) : "success", why);
	if (!traced) {
		skip("THP control: how io_uring stored it", tr.why);
	} else if (kb != (long)(SIZE >> 10)) {
		tracer_read(&tr, &s);
		skip("THP control: how io_uring stored it",
		     "the kernel did not back the mapping entirely with THPs");
	} else if (is61) {
		/* 6.1 has no coalescing code: even THPs stay 4 KiB bvecs. */
		tracer_read(&tr, &s);
		check_case(&tr, "THP control", &s, reg, &want_4k,
			   "2048 bvecs of 4 KiB (6.1 does not coalesce)");
	} else {
		tracer_read(&tr, &s);
		check_case(&tr, "THP control", &s, reg, &want_2m,
			   "4 bvecs of 2 MiB (coalesced)");
	}
	munmap(thp, SIZE);
done:
	if (traced)
		tracer_stop(&tr);
	printf("1..%d\n", test_no);
	return failures ? 1 : 0;
}
