// SPDX-License-Identifier: GPL-2.0
/*
 * Soak: N processes, each cycling M regions through alloc, fill, views
 * (read-only and read-write, mapped and unmapped), seal, donate (with and
 * without wait), publish, reopen and free, for a bounded time. At the end
 * the module's totals are back at baseline and MemFree (after dropping the
 * page cache) is back within a tolerance of where it started.
 *   soak [SECONDS] [PROCS] [REGIONS]   (PINMEM_SOAK_SECONDS, default 60)
 * TAP: one test.
 */
/* For its helpers only: this is a plain TAP program, not a harness one. */
#pragma GCC diagnostic ignored "-Wunused-function"
#include "../kselftest/pinmem_test.h"

#define RSIZE	(4 * MiB)
#define TOLERANCE_KB	(32 * 1024)

static long long memfree_kb(void)
{
	char line[128];
	long long kb = -1;
	FILE *f;
	int fd = open("/proc/sys/vm/drop_caches", O_WRONLY | O_CLOEXEC);

	sync();
	if (fd >= 0) {
		if (write(fd, "3", 1) != 1)
			kb = -2;
		close(fd);
	}
	f = fopen("/proc/meminfo", "re");
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "MemFree: %lld kB", &kb) == 1)
			break;
	if (f)
		fclose(f);
	return kb;
}

static int xform(int fd, unsigned long cmd, uint32_t flags, uint32_t ms)
{
	struct pinmem_transition t = { .flags = flags, .timeout_ms = ms };

	return ioctl(fd, cmd, &t) ? errno : 0;
}

static int view(int rfd, uint32_t flags)
{
	struct pinmem_view v = { .length = RSIZE, .flags = flags };

	return ioctl(rfd, PINMEM_IOC_VIEW, &v) ? -1 : v.fd;
}

/* One region's life; 0, or the line that failed. */
static int cycle(int dev, uint32_t seed)
{
	struct pinmem_alloc a = { .size = RSIZE, .flags = seed & 1 };
	int vro, vrw;
	void *p, *q;

	if (ioctl(dev, PINMEM_IOC_ALLOC, &a))
		return __LINE__;
	p = mmap(NULL, RSIZE, PROT_READ | PROT_WRITE, MAP_SHARED, a.fd, 0);
	if (p == MAP_FAILED)
		return __LINE__;
	pm_fill(p, RSIZE, seed);
	vrw = view(a.fd, PINMEM_VIEW_WRITE);
	vro = view(a.fd, 0);
	if (vrw < 0 || vro < 0)
		return __LINE__;
	q = mmap(NULL, RSIZE, PROT_READ, MAP_SHARED, vro, 0);
	if (q == MAP_FAILED || pm_check(q, RSIZE, seed) != -1)
		return __LINE__;
	if (xform(a.fd, PINMEM_IOC_DONATE, 0, 0) != EBUSY)
		return __LINE__;
	if (fork() == 0)		/* holds the view mapping a moment */
		_exit(usleep(5000));
	munmap(q, RSIZE);
	close(vrw);
	if (xform(a.fd, PINMEM_IOC_SEAL, 0, 0) ||
	    xform(a.fd, PINMEM_IOC_DONATE, PINMEM_DONATE_WAIT, 10000))
		return __LINE__;
	wait(NULL);
	if (xform(a.fd, seed & 2 ? PINMEM_IOC_PUBLISH : PINMEM_IOC_REOPEN, 0, 0))
		return __LINE__;
	q = mmap(NULL, RSIZE, PROT_READ, MAP_SHARED, vro, 0);
	if (q == MAP_FAILED || pm_check(q, RSIZE, seed) != -1)
		return __LINE__;
	munmap(q, RSIZE);
	munmap(p, RSIZE);
	close(vro);
	close(a.fd);
	return 0;
}

int main(int argc, char **argv)
{
	const char *env = getenv("PINMEM_SOAK_SECONDS");
	int secs = argc > 1 ? atoi(argv[1]) : env ? atoi(env) : 60;
	int procs = argc > 2 ? atoi(argv[2]) : 4;
	int regions = argc > 3 ? atoi(argv[3]) : 4;
	struct pinmem_dev_info base, now;
	long long free0, free1;
	long cycles = 0;
	int dev, bad = 0, pipefd[2];
	double t0;

	printf("TAP version 13\n1..1\n");
	dev = open(PINMEM_DEVICE_PATH, O_RDWR | O_CLOEXEC);
	if (dev < 0 || ioctl(dev, PINMEM_IOC_DEV_INFO, &base) || pipe(pipefd)) {
		printf("ok 1 # SKIP no %s\n", PINMEM_DEVICE_PATH);
		return 0;
	}
	free0 = memfree_kb();
	t0 = pm_now();
	for (int i = 0; i < procs; i++) {
		if (fork() == 0) {
			long n = 0;
			int line = 0;

			while (!line && pm_now() - t0 < secs)
				for (int r = 0; r < regions && !line; r++, n++)
					line = cycle(dev, i * 7919 + n);
			if (line)
				printf("# proc %d: cycle %ld failed at soak.c:%d: %s\n",
				       i, n, line, strerror(errno));
			if (write(pipefd[1], &n, sizeof(n)) != sizeof(n))
				line = 1;
			_exit(!!line);
		}
	}
	close(pipefd[1]);
	for (int i = 0; i < procs; i++) {
		long n = 0;
		int st;

		if (read(pipefd[0], &n, sizeof(n)) == sizeof(n))
			cycles += n;
		if (wait(&st) < 0 || !WIFEXITED(st) || WEXITSTATUS(st))
			bad = 1;
	}
	for (int i = 0; i < 300; i++) {
		if (ioctl(dev, PINMEM_IOC_DEV_INFO, &now))
			break;
		if (now.nr_regions == base.nr_regions &&
		    now.total_bytes == base.total_bytes &&
		    now.nr_mappings == base.nr_mappings &&
		    now.nr_view_fds == base.nr_view_fds)
			break;
		usleep(10000);
	}
	if (now.nr_regions != base.nr_regions ||
	    now.total_bytes != base.total_bytes ||
	    now.nr_mappings != base.nr_mappings ||
	    now.nr_view_fds != base.nr_view_fds) {
		printf("# totals not back: regions %llu bytes %llu\n",
		       now.nr_regions, now.total_bytes);
		bad = 1;
	}
	free1 = memfree_kb();
	printf("# soak: %d procs x %d regions of %llu MiB, %ld region cycles in "
	       "%.0f s; MemFree %lld -> %lld kB (%+lld kB, tolerance %d kB)\n",
	       procs, regions, RSIZE / MiB, cycles, pm_now() - t0, free0,
	       free1, free1 - free0, TOLERANCE_KB);
	if (free0 < 0 || free1 < free0 - TOLERANCE_KB)
		bad = 1;
	printf("%s 1 - soak: %ld cycles, totals at baseline, MemFree within "
	       "%d MiB\n", bad ? "not ok" : "ok", cycles, TOLERANCE_KB / 1024);
	return bad;
}
