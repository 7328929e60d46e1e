// SPDX-License-Identifier: GPL-2.0
/*
 * Does io_uring coalesce a pinmem mapping's 2 MiB chunks when the mapping is
 * registered as a fixed buffer? Prints TAP (run it in the guest, as root:
 * tests/guest.d/45-io-coalesce).
 *
 * User space cannot see how io_uring stores a registered buffer, so this
 * looks from inside the kernel through two kprobe events (tracefs, in a
 * private trace instance, filtered to this process):
 *   reg: return of io_sqe_buffer_register(ctx, iov, pimu, last_hpage); the
 *        struct io_mapped_ubuf it made is *pimu ($arg3 at return);
 *   imp: io_import_fixed(ddir, iter, imu, buf_addr, len), which a
 *        READ_FIXED runs with the imu it uses.
 * Both read imu->nr_bvecs, imu->folio_shift and the first bio_vecs at the
 * offsets of Linux 6.12's io_uring/rsrc.h (ubuf u64 @0, len @8,
 * nr_bvecs @12, folio_shift @16, refs @20, acct_pages @24, bvec[] @32, a
 * bio_vec 16 bytes: page, len @+8, offset @+12). 6.12 coalesces in
 * io_try_coalesce_buffer(): when the pinned pages run contiguously through
 * folios of one size, imu keeps one bvec per folio and folio_shift = that
 * folio's shift. On 6.1 only imp is used (its return probes cannot fetch
 * arguments), at 6.1's offsets (ubuf @0, ubuf_end @8, nr_bvecs @16,
 * acct_pages @24, bvec[] @32; no folio_shift, no coalescing code). Other
 * kernels: the layout (and on 6.13+ the signature) differs, so the probe
 * checks SKIP there.
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
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <liburing.h>
#include <pin.h>

#define MIB		(1ul << 20)
#define CHUNK		(2 * MIB)
#define SIZE		(8 * MIB)
#define NR_CHUNKS	(SIZE / CHUNK)
#define NR_PAGES	(SIZE / 4096)
/* The READ_FIXED lands here: past the first bvec, so the 6.12 import takes
 * its segment-skip path, which relies on folio_shift. */
#define READ_OFF	(CHUNK + 4096)
#define READ_LEN	8192

struct tracer {
	char dir[256];		/* tracefs root */
	char group[64];		/* kprobe event group, per pid */
	char inst[384];		/* private instance */
	bool events;		/* events created */
	bool instance;		/* instance created */
	bool has_reg;		/* the reg probe too (6.12) */
	int nr_off;		/* offsetof(struct io_mapped_ubuf, nr_bvecs) */
	char why[512];		/* why tracing is unavailable */
};

/* What the probes saw for one registration (and its read). */
struct seen {
	bool reg;		/* a reg line */
	long ret;
	unsigned long long imu, nr_bvecs, folio_shift, len, acct_pages;
	unsigned long long bv0_len, bv0_off, bv1_len;
	bool imp;		/* an imp line */
	unsigned long long imp_imu, imp_nr_bvecs, imp_folio_shift;
	unsigned long long imp_bv0_len, imp_bv1_len;
};

static int test_no;
static int failures;
/* For the exit path: the tracer to take down. */
static struct tracer *live_tracer;

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

static int write_str(const char *path, const char *s, int flags)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC | flags);
	ssize_t n;
	int err;

	if (fd < 0)
		return -errno;
	n = write(fd, s, strlen(s));
	err = n < 0 ? -errno : 0;
	close(fd);
	return err;
}

/* The whole of a (small, virtual) file, NUL-terminated; NULL on error. */
static char *read_text(const char *path)
{
	size_t cap = 8192, len = 0;
	char *buf = malloc(cap), *p;
	ssize_t n;
	int fd;

	if (!buf)
		return NULL;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		free(buf);
		return NULL;
	}
	while ((n = read(fd, buf + len, cap - len - 1)) > 0) {
		len += (size_t)n;
		if (cap - len < 4096) {
			p = realloc(buf, cap *= 2);
			if (!p)
				break;
			buf = p;
		}
	}
	close(fd);
	buf[len] = '\0';
	return buf;
}

static void tracer_stop(struct tracer *t)
{
	char path[512], cmd[160];

	if (t->instance) {
		snprintf(path, sizeof(path), "%s/events/%s/enable", t->inst, t->group);
		write_str(path, "0", 0);
		if (rmdir(t->inst))
			printf("# could not remove %s: %s\n", t->inst, strerror(errno));
		t->instance = false;
	}
	if (t->events) {
		snprintf(path, sizeof(path), "%s/kprobe_events", t->dir);
		snprintf(cmd, sizeof(cmd), "-:%s/reg\n", t->group);
		write_str(path, cmd, O_APPEND);
		snprintf(cmd, sizeof(cmd), "-:%s/imp\n", t->group);
		write_str(path, cmd, O_APPEND);
		t->events = false;
	}
}

static void tracer_stop_live(void)
{
	if (live_tracer)
		tracer_stop(live_tracer);
}

/* Append the kernel's tracing error_log tail to why. */
static void explain(struct tracer *t, const char *what, int err)
{
	char path[512], *log, *last = NULL, *p;

	snprintf(path, sizeof(path), "%s/error_log", t->dir);
	log = read_text(path);
	if (log)
		for (p = strtok(log, "\n"); p; p = strtok(NULL, "\n"))
			last = p;
	snprintf(t->why, sizeof(t->why), "%s: %s%s%s", what, strerror(-err),
		 last ? "; error_log: " : "", last ? last : "");
	free(log);
}

static int tracer_start(struct tracer *t, const char *release)
{
	static const char *const syms[] = { "io_import_fixed", "io_sqe_buffer_register" };
	char path[512], def[640], pidf[64], *ksyms;
	int err;
	size_t i;

	memset(t, 0, sizeof(*t));
	if (!strncmp(release, "6.12.", 5)) {
		t->has_reg = true;
		t->nr_off = 12;
	} else if (!strncmp(release, "6.1.", 4)) {
		/*
		 * No probes on 6.1: it refuses the pinmem registration, so
		 * there is nothing of ours to watch, and once under TCG the
		 * probed task sat in a soft lockup for minutes.
		 */
		snprintf(t->why, sizeof(t->why), "6.1: no kprobes (it refuses "
			 "the registration; probing hung a TCG guest once)");
		return -EOPNOTSUPP;
	} else {
		snprintf(t->why, sizeof(t->why), "kernel %s: the probes know struct "
			 "io_mapped_ubuf of 6.1 and 6.12 only", release);
		return -EOPNOTSUPP;
	}
	snprintf(t->dir, sizeof(t->dir), "/sys/kernel/tracing");
	snprintf(path, sizeof(path), "%s/kprobe_events", t->dir);
	if (access(path, F_OK) && mount("nodev", t->dir, "tracefs", 0, NULL) &&
	    access(path, F_OK)) {
		snprintf(t->why, sizeof(t->why), "no tracefs kprobe_events at %s (mount: %s)",
			 t->dir, strerror(errno));
		return -ENOENT;
	}
	/* The probe points must be functions of their own, not inlined. */
	ksyms = read_text("/proc/kallsyms");
	for (i = 0; i < (t->has_reg ? 2u : 1u); i++) {
		char pat[80];

		snprintf(pat, sizeof(pat), " %s\n", syms[i]);
		if (!ksyms || !strstr(ksyms, pat)) {
			snprintf(t->why, sizeof(t->why), "%s is not in /proc/kallsyms",
				 syms[i]);
			free(ksyms);
			return -ENOENT;
		}
	}
	free(ksyms);
	snprintf(t->group, sizeof(t->group), "pinmemcoal%d", (int)getpid());
	live_tracer = t;
	atexit(tracer_stop_live);
	t->events = true;
	/* Return probe: *pimu is the imu just made (6.12 layout). */
	snprintf(def, sizeof(def),
		 "r:%s/reg io_sqe_buffer_register ret=$retval:s32 imu=+0($arg3):x64 "
		 "nr_bvecs=+12(+0($arg3)):u32 folio_shift=+16(+0($arg3)):u32 "
		 "len=+8(+0($arg3)):u32 acct_pages=+24(+0($arg3)):u64 "
		 "bv0_len=+40(+0($arg3)):u32 bv0_off=+44(+0($arg3)):u32 "
		 "bv1_len=+56(+0($arg3)):u32\n", t->group);
	err = t->has_reg ? write_str(path, def, O_APPEND) : 0;
	if (err) {
		explain(t, "kretprobe on io_sqe_buffer_register refused", err);
		return err;
	}
	snprintf(def, sizeof(def),
		 "p:%s/imp io_import_fixed imu=$arg3:x64 nr_bvecs=+%d($arg3):u32 %s"
		 "bv0_len=+40($arg3):u32 bv1_len=+56($arg3):u32 addr=$arg4:x64 "
		 "len=$arg5:u64\n", t->group, t->nr_off,
		 t->has_reg ? "folio_shift=+16($arg3):u32 " : "");
	err = write_str(path, def, O_APPEND);
	if (err) {
		explain(t, "kprobe on io_import_fixed refused", err);
		return err;
	}
	snprintf(t->inst, sizeof(t->inst), "%s/instances/%s", t->dir, t->group);
	if (mkdir(t->inst, 0700)) {
		err = -errno;
		explain(t, "tracefs instance", err);
		return err;
	}
	t->instance = true;
	snprintf(pidf, sizeof(pidf), "common_pid == %d", (int)getpid());
	snprintf(path, sizeof(path), "%s/events/%s/filter", t->inst, t->group);
	err = write_str(path, pidf, 0);
	if (!err) {
		snprintf(path, sizeof(path), "%s/events/%s/enable", t->inst, t->group);
		err = write_str(path, "1", 0);
	}
	if (err) {
		explain(t, "enabling the events", err);
		return err;
	}
	return 0;
}

static void tracer_clear(struct tracer *t)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/trace", t->inst);
	write_str(path, "", O_TRUNC);
}

static unsigned long long field(const char *line, const char *name)
{
	const char *p = line;
	size_t n = strlen(name);

	while ((p = strstr(p, name))) {
		if ((p == line || p[-1] == ' ') && p[n] == '=')
			return strtoull(p + n + 1, NULL, 0);
		p += n;
	}
	return ~0ull;
}

/* Parse this case's events out of the instance's trace. */
static void tracer_read(struct tracer *t, struct seen *s)
{
	char path[512], *text, *line;

	memset(s, 0, sizeof(*s));
	snprintf(path, sizeof(path), "%s/trace", t->inst);
	text = read_text(path);
	if (!text)
		return;
	for (line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
		if (line[0] == '#')
			continue;
		printf("# trace: %s\n", line + strspn(line, " "));
		if (strstr(line, " reg: ")) {
			s->reg = true;
			s->ret = (long)(int)field(line, "ret");
			s->imu = field(line, "imu");
			s->nr_bvecs = field(line, "nr_bvecs");
			s->folio_shift = field(line, "folio_shift");
			s->len = field(line, "len");
			s->acct_pages = field(line, "acct_pages");
			s->bv0_len = field(line, "bv0_len");
			s->bv0_off = field(line, "bv0_off");
			s->bv1_len = field(line, "bv1_len");
		} else if (strstr(line, " imp: ") && !s->imp) {
			s->imp = true;
			s->imp_imu = field(line, "imu");
			s->imp_nr_bvecs = field(line, "nr_bvecs");
			s->imp_folio_shift = field(line, "folio_shift");
			s->imp_bv0_len = field(line, "bv0_len");
			s->imp_bv1_len = field(line, "bv1_len");
		}
	}
	free(text);
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
	struct pin_region_info info;
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
	ret = pin_open(&dev, PIN_BACKEND_DEVICE);
	if (ret) {
		tap(false, "pinmem device: pin_open: %s", strerror(-ret));
		goto controls;
	}
	ret = pin_alloc(dev, SIZE, 0, &r);
	if (ret) {
		tap(false, "pinmem: 8 MiB region of 2 MiB chunks: %s", pin_dev_error(dev));
		pin_close(dev);
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
	pin_region_free(r);
	pin_close(dev);

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
	live_tracer = NULL;
	printf("1..%d\n", test_no);
	return failures ? 1 : 0;
}
