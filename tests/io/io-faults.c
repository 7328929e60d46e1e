// SPDX-License-Identifier: GPL-2.0
/*
 * Short transfers, EAGAIN and EINTR, forced: run under the liburing-faults.so
 * shim (LD_PRELOAD, see uring-faults.c), which rewrites io_uring completion
 * results the way the kernel may return them and poisons the bytes a
 * rewritten result disowns. pin_file_read, pin_region_read_file, pin_file_write and
 * pin_region_write_file of a multi-MiB file in 64 KiB requests, 8 in flight,
 * O_DIRECT (where DIR takes it) and buffered, must move every byte right
 * and count exactly the short transfers and retries injected; a request
 * answered EAGAIN 200 times running still completes; a failed or empty
 * completion fails the call with an error naming the file and the offset.
 *   LD_PRELOAD=build/tests/io/liburing-faults.so io-faults DIR
 */
#include <dlfcn.h>

#include "io-test.h"

#define SIZE	((6u << 20) + 12345u)
#define REQ	(64u << 10)
#define SPEC	"short@3/7,eagain@4/11,eintr@6/13,wait-eintr@2/9"

static int (*faults_set)(const char *spec);
static long (*faults_injected)(const char *kind);

static void set(const char *spec)
{
	CHECK(faults_set(spec) == 0, "uring_faults_set(%s)", spec);
}

static long inj(const char *kind)
{
	return faults_injected(kind);
}

/* The injected short transfers and retries are what the stats count. */
static void check_counts(const char *what, const struct pin_io_stats *st,
			 const char *short_kind)
{
	long s = inj(short_kind);
	long r = inj("eagain") + inj("eintr") + inj("wait-eintr");

	printf("# %s: direct=%d requests=%llu short_ios=%llu retries=%llu"
	       " (injected %s=%ld eagain=%ld eintr=%ld wait-eintr=%ld)\n",
	       what, st->direct, (unsigned long long)st->requests,
	       (unsigned long long)st->short_ios,
	       (unsigned long long)st->retries, short_kind, s, inj("eagain"),
	       inj("eintr"), inj("wait-eintr"));
	CHECK(s > 0 && inj("eagain") > 0 && inj("eintr") > 0 &&
	      inj("wait-eintr") > 0, "%s: not every fault was injected", what);
	CHECK_EQ(st->short_ios, s);
	CHECK_EQ(st->retries, r);
}

static uint64_t nreq(uint64_t bytes)
{
	return (bytes + REQ - 1) / REQ;
}

static void reads(const char *path, const uint8_t *data, uint8_t *buf,
		  int direct, const char *short_kind)
{
	static const uint64_t ranges[][2] = {
		{ 0, SIZE }, { 5000, SIZE - 5000 - 100 },
	};
	char why[512];
	struct pin_io_opts o = { .size = sizeof(struct pin_io_opts), .why = why, .why_len = sizeof(why),
				 .queue_depth = 8, .request_size = REQ,
				 .flags = direct ? 0 : PIN_IO_BUFFERED };
	char spec[128];
	size_t i;

	snprintf(spec, sizeof(spec), "%s@3/7,eagain@4/11,eintr@6/13,wait-eintr@2/9",
		 short_kind);
	for (i = 0; i < 2; i++) {
		uint64_t off = ranges[i][0], len = ranges[i][1];
		struct pin_io_stats st = PIN_INIT(struct pin_io_stats);
		char what[128];
		int ret;

		snprintf(what, sizeof(what), "pin_file_read %llu+%llu %s %s",
			 (unsigned long long)off, (unsigned long long)len,
			 direct ? "direct" : "buffered", short_kind);
		memset(buf, 0xee, SIZE + 8192);
		set(spec);
		ret = pin_file_read(buf, SIZE + 8192, path, off, len, &o, &st);
		CHECK(ret == (int)(off % 4096), "%s: %d: %s", what, ret, why);
		CHECK(!memcmp(buf + ret, data + off, len), "%s: bytes differ", what);
		CHECK_EQ(st.direct, direct);
		CHECK_EQ(st.requests, nreq(pin_file_span(off, len)));
		check_counts(what, &st, short_kind);
	}
}

static void region_io(const char *dir, const char *path, const uint8_t *data,
		      int direct)
{
	const struct pin_region_opts fallback = {
		.size = sizeof(fallback), .flags = PIN_REGION_FALLBACK,
	};
	char why[512];
	struct pin_io_opts o = { .size = sizeof(struct pin_io_opts), .why = why, .why_len = sizeof(why),
				 .queue_depth = 8, .request_size = REQ,
				 .flags = direct ? 0 : PIN_IO_BUFFERED };
	struct pin_io_stats st = PIN_INIT(struct pin_io_stats);
	struct pin_region *r;
	struct pin_dev *dev;
	char back[4096];
	uint8_t *got;
	void *map;
	size_t n;
	int ret;

	CHECK_EQ(pin_dev_open(&dev, PIN_BACKEND_AUTO, NULL), 0);
	ret = pin_region_create(dev, 8u << 20, NULL, &r);
	if (ret == -ENOMEM)
		ret = pin_region_create(dev, 8u << 20, &fallback, &r);
	CHECK(ret == 0, "alloc: %s", pin_dev_error(dev));
	CHECK_EQ(pin_region_map(r, &map), 0);
	set(SPEC);
	ret = pin_region_read_file(r, 1 << 20, path, 0, SIZE, &o, &st);
	CHECK(ret == 0, "pin_region_read_file: %d %s", ret,
	      pin_region_error(r));
	CHECK(!memcmp((uint8_t *)map + (1 << 20), data, SIZE),
	      "pin_region_read_file: bytes in the region differ");
	CHECK_EQ(st.requests, nreq(pin_file_span(0, SIZE)));
	check_counts(direct ? "pin_region_read_file direct" : "pin_region_read_file buffered",
		     &st, "short");

	snprintf(back, sizeof(back), "%s/io-faults-back-%d.bin", dir, (int)getpid());
	set(SPEC);
	ret = pin_region_write_file(r, 1 << 20, back, 0, SIZE, &o, &st);
	CHECK(ret == 0, "pin_region_write_file: %d %s", ret,
	      pin_region_error(r));
	check_counts(direct ? "pin_region_write_file direct" : "pin_region_write_file buffered",
		     &st, "short");
	set(NULL);
	got = read_all(back, &n);
	CHECK_EQ(n, SIZE);
	CHECK(!memcmp(got, data, SIZE), "pin_region_write_file: file bytes differ");
	free(got);
	unlink(back);
	CHECK_EQ(pin_region_close(r), 0);
	pin_dev_close(dev);
}

static void writes(const char *dir, const uint8_t *data, int direct,
		   const char *short_kind)
{
	char why[512];
	struct pin_io_opts o = { .size = sizeof(struct pin_io_opts), .why = why, .why_len = sizeof(why),
				 .queue_depth = 8, .request_size = REQ,
				 .flags = direct ? 0 : PIN_IO_BUFFERED };
	struct pin_io_stats st = PIN_INIT(struct pin_io_stats);
	char path[4096], what[128], spec[128];
	uint8_t *back;
	size_t n;
	int ret, k;

	snprintf(spec, sizeof(spec), "%s@3/7,eagain@4/11,eintr@6/13,wait-eintr@2/9",
		 short_kind);
	/* From the (possibly aligned) buffer and from an unaligned copy:
	 * zero-copy and bounce-buffer requests. */
	for (k = 0; k < 2; k++) {
		uint8_t *src = malloc(SIZE + 1);

		memcpy(src + k, data, SIZE);
		snprintf(path, sizeof(path), "%s/io-faults-w%d-%d.bin", dir, k,
			 (int)getpid());
		snprintf(what, sizeof(what), "pin_file_write %s src+%d %s",
			 direct ? "direct" : "buffered", k, short_kind);
		set(spec);
		ret = pin_file_write(src + k, SIZE, path, 0, &o, &st);
		CHECK(ret == 0, "%s: %d %s", what, ret, why);
		CHECK_EQ(st.direct, direct);
		CHECK(st.requests >= nreq(SIZE), "%s: %llu requests", what,
		      (unsigned long long)st.requests);
		check_counts(what, &st, short_kind);
		set(NULL);
		back = read_all(path, &n);
		CHECK_EQ(n, SIZE);
		CHECK(!memcmp(back, data, SIZE), "%s: file bytes differ", what);
		free(back);
		free(src);
		unlink(path);
	}
}

/* The 3rd request answered EAGAIN (EINTR) every time: after
 * PIN_IO_MAX_RETRIES resubmissions the call fails, naming the request. */
static void gives_up(const char *dir, const char *path, const uint8_t *data,
		     uint8_t *buf, int direct)
{
	char why[512];
	struct pin_io_opts o = { .size = sizeof(struct pin_io_opts), .why = why, .why_len = sizeof(why),
				 .queue_depth = 1, .request_size = REQ,
				 .flags = direct ? 0 : PIN_IO_BUFFERED };
	struct pin_io_stats st = PIN_INIT(struct pin_io_stats);
	char wpath[4096], want[4096 + 128];
	int ret;

	set("eagain@3/1");
	ret = pin_file_read(buf, SIZE + 8192, path, 0, SIZE, &o, &st);
	snprintf(want, sizeof(want), "%s: read of %u bytes at offset %u (%u tries): ",
		 path, REQ, 2 * REQ, PIN_IO_MAX_RETRIES + 1);
	CHECK(ret == -EAGAIN && strstr(why, want),
	      "read, EAGAIN forever: %d \"%s\", want \"%s...\"", ret,
	      why, want);
	CHECK_EQ(inj("eagain"), PIN_IO_MAX_RETRIES + 1);
	CHECK_EQ(st.retries, PIN_IO_MAX_RETRIES);
	printf("# %s\n", why);

	snprintf(wpath, sizeof(wpath), "%s/io-faults-g-%d.bin", dir, (int)getpid());
	set("eintr@3/1");
	ret = pin_file_write(data, SIZE, wpath, 0, &o, &st);
	snprintf(want, sizeof(want), "%s: write of %u bytes at offset %u (%u tries): ",
		 wpath, REQ, 2 * REQ, PIN_IO_MAX_RETRIES + 1);
	CHECK(ret == -EINTR && strstr(why, want),
	      "write, EINTR forever: %d \"%s\", want \"%s...\"", ret,
	      why, want);
	CHECK_EQ(inj("eintr"), PIN_IO_MAX_RETRIES + 1);
	printf("# %s\n", why);
	unlink(wpath);

	/* Every wait answered EAGAIN: the submission gives up the same way. */
	set("wait-eagain@1/1");
	ret = pin_file_read(buf, SIZE + 8192, path, 0, SIZE, &o, &st);
	snprintf(want, sizeof(want), "%s: io_uring_submit (%u tries): ",
		 path, PIN_IO_MAX_RETRIES + 1);
	CHECK(ret == -EAGAIN && strstr(why, want),
	      "read, wait EAGAIN forever: %d \"%s\", want \"%s...\"", ret,
	      why, want);
	CHECK_EQ(inj("wait-eagain"), PIN_IO_MAX_RETRIES + 1);
	printf("# %s\n", why);
	set(NULL);
}

/* One injected failure on the 5th completion, one request in flight: the
 * 5th request, at 4 * REQ, fails the call. */
static void failures(const char *dir, const char *path, const uint8_t *data,
		     uint8_t *buf, int direct)
{
	char why[512];
	struct pin_io_opts o = { .size = sizeof(struct pin_io_opts), .why = why, .why_len = sizeof(why),
				 .queue_depth = 1, .request_size = REQ,
				 .flags = direct ? 0 : PIN_IO_BUFFERED };
	struct pin_io_stats st = PIN_INIT(struct pin_io_stats);
	char wpath[4096], want[4096 + 128];
	int ret;

	set("eio@5");
	ret = pin_file_read(buf, SIZE + 8192, path, 0, SIZE, &o, &st);
	snprintf(want, sizeof(want), "%s: read of %u bytes at offset %u: ",
		 path, REQ, 4 * REQ);
	CHECK(ret == -EIO && strstr(why, want),
	      "read, EIO at 5: %d \"%s\", want \"%s...\"", ret, why, want);
	CHECK_EQ(inj("eio"), 1);
	printf("# %s\n", why);

	set("zero@5");
	ret = pin_file_read(buf, SIZE + 8192, path, 0, SIZE, &o, &st);
	snprintf(want, sizeof(want), "%s: end of file at offset %u, expected data up to %u",
		 path, 4 * REQ, SIZE);
	CHECK(ret == -EIO && strstr(why, want),
	      "read, 0 at 5: %d \"%s\", want \"%s\"", ret, why, want);
	printf("# %s\n", why);

	snprintf(wpath, sizeof(wpath), "%s/io-faults-e-%d.bin", dir, (int)getpid());
	set("eio@5");
	ret = pin_file_write(data, SIZE, wpath, 0, &o, &st);
	snprintf(want, sizeof(want), "%s: write of %u bytes at offset %u: ",
		 wpath, REQ, 4 * REQ);
	CHECK(ret == -EIO && strstr(why, want),
	      "write, EIO at 5: %d \"%s\", want \"%s...\"", ret, why, want);
	printf("# %s\n", why);

	set("zero@5");
	ret = pin_file_write(data, SIZE, wpath, 0, &o, &st);
	CHECK(ret == -EIO && strstr(why, want),
	      "write, 0 at 5: %d \"%s\", want \"%s...\"", ret, why, want);
	printf("# %s\n", why);
	unlink(wpath);

	/* The same request answered EAGAIN 200 times running, then done. */
	set("eagain@3x200");
	memset(buf, 0xee, SIZE + 8192);
	ret = pin_file_read(buf, SIZE + 8192, path, 0, SIZE, &o, &st);
	CHECK(ret == 0, "read, 200 x EAGAIN: %d %s", ret, why);
	CHECK(!memcmp(buf, data, SIZE), "read, 200 x EAGAIN: bytes differ");
	CHECK_EQ(inj("eagain"), 200);
	CHECK_EQ(st.retries, 200);
	CHECK_EQ(st.requests, nreq(pin_file_span(0, SIZE)));
	set(NULL);
	gives_up(dir, path, data, buf, direct);
}

int main(int argc, char **argv)
{
	const char *dir = test_dir(argc, argv);
	char path[4096];
	uint8_t *data, *buf;
	int direct, d;

	faults_set = (int (*)(const char *))dlsym(RTLD_DEFAULT,
						   "uring_faults_set");
	faults_injected = (long (*)(const char *))dlsym(RTLD_DEFAULT,
							 "uring_faults_injected");
	if (!faults_set || !faults_injected)
		FAIL("run with LD_PRELOAD=.../build/tests/io/liburing-faults.so");
	direct = dir_has_odirect(dir);
	printf("# %s: O_DIRECT %s\n", dir, direct ? "yes" : "refused");
	snprintf(path, sizeof(path), "%s/io-faults-%d.bin", dir, (int)getpid());
	data = malloc(SIZE);
	fill(data, SIZE, 11);
	write_file(path, data, SIZE);
	if (posix_memalign((void **)&buf, 4096, SIZE + 8192))
		FAIL("posix_memalign");

	for (d = direct; d >= 0; d--) {
		reads(path, data, buf, d, "short");
		if (!d)		/* mid-block short reads: buffered only */
			reads(path, data, buf, d, "oddshort");
		region_io(dir, path, data, d);
		writes(dir, data, d, "short");
		if (!d)		/* short writes mid-block: buffered only */
			writes(dir, data, d, "oddshort");
		failures(dir, path, data, buf, d);
	}
	/* The disowned bytes were poisoned, so the checks above saw them
	 * moved again. */
	printf("# poisoned %ld ranges\n", inj("poisoned"));
	CHECK(inj("poisoned") > 0, "nothing poisoned");
	CHECK_EQ(inj("poison-failed"), 0);
	unlink(path);
	free(buf);
	free(data);
	if (!direct)
		printf("# %s refuses O_DIRECT: only the buffered path was tested\n",
		       dir);
	return 0;
}
