// SPDX-License-Identifier: GPL-2.0
/*
 * pinbench load's baselines: fio's io_uring O_DIRECT reads (plain and
 * --fixedbufs) and writes, buffered pread and mmap + memcpy into pinned
 * memory, each one cold run with its GB/s and CPU seconds per GB.
 *
 */
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <pin.h>

#include "bench.h"

extern char **environ;

/* Run fio, return its bandwidth in bytes/s for the section ("read"/"write"). */
static double run_fio(const struct cfg *c, char *const argv[],
		      const char *section)
{
	posix_spawn_file_actions_t fa;
	char *out = NULL, *p, key[32];
	size_t len = 0, cap = 0;
	int pipefd[2], status;
	pid_t pid;
	double bw = -1;

	if (pipe2(pipefd, O_CLOEXEC) < 0)
		return -1;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, pipefd[1], 1);
	if (posix_spawnp(&pid, c->fio, &fa, NULL, argv, environ)) {
		posix_spawn_file_actions_destroy(&fa);
		close(pipefd[0]);
		close(pipefd[1]);
		return -1;
	}
	posix_spawn_file_actions_destroy(&fa);
	close(pipefd[1]);
	for (;;) {
		ssize_t r;

		if (len + 4096 > cap) {
			cap = cap ? cap * 2 : 65536;
			p = realloc(out, cap + 1);
			if (!p)
				break;
			out = p;
		}
		r = read(pipefd[0], out + len, cap - len);
		if (r <= 0)
			break;
		len += (size_t)r;
	}
	close(pipefd[0]);
	waitpid(pid, &status, 0);
	if (!out)
		return -1;
	out[len] = 0;
	snprintf(key, sizeof(key), "\"%s\" : {", section);
	p = strstr(out, "\"jobs\"");
	if (p)
		p = strstr(p, key);
	if (p)
		p = strstr(p, "\"bw_bytes\"");
	if (p && WIFEXITED(status) && !WEXITSTATUS(status)) {
		p = strchr(p, ':');
		if (p)
			bw = strtod(p + 1, NULL);
	}
	if (bw < 0)
		fprintf(stderr, "pinbench: fio failed or printed no %s bandwidth\n",
			section);
	free(out);
	return bw;
}

/*
 * fio's block size: the request size, or (fio refuses a size below one
 * block) the whole file, as libpin then moves it in one request.
 */
static unsigned long long fio_bs(const struct cfg *c, uint64_t size)
{
	uint64_t whole = size & ~4095ULL;

	return whole && whole < c->req ? whole : c->req;
}

/* fixed: with --fixedbufs, registered buffers as libpin uses them. */
static double fio_load(const struct cfg *c, const char *file, uint64_t size,
		       int fixed)
{
	char bs[32], qd[32], sz[32];
	char *argv[] = {
		(char *)c->fio, "--name=pinbench", "--readonly", "--rw=read",
		"--ioengine=io_uring", "--direct=1", "--output-format=json",
		"--filename", (char *)file, bs, qd, sz,
		fixed ? "--fixedbufs" : NULL, NULL,
	};

	snprintf(bs, sizeof(bs), "--bs=%llu", fio_bs(c, size));
	snprintf(qd, sizeof(qd), "--iodepth=%u", c->qd);
	snprintf(sz, sizeof(sz), "--size=%llu",
		 (unsigned long long)(size & ~4095ULL));
	return run_fio(c, argv, "read");
}

double fio_save(const struct cfg *c, const char *file, uint64_t size,
		       int fixed)
{
	char bs[32], qd[32], sz[32];
	char *argv[] = {
		(char *)c->fio, "--name=pinbench", "--rw=write",
		"--ioengine=io_uring", "--direct=1", "--end_fsync=1",
		"--output-format=json", "--filename", (char *)file, bs, qd, sz,
		fixed ? "--fixedbufs" : NULL, NULL,
	};

	snprintf(bs, sizeof(bs), "--bs=%llu", fio_bs(c, size));
	snprintf(qd, sizeof(qd), "--iodepth=%u", c->qd);
	snprintf(sz, sizeof(sz), "--size=%llu", (unsigned long long)size);
	return run_fio(c, argv, "write");
}

/*
 * The read-ahead of the disk under file, in KiB, or -1. It sets how much
 * the mmap + memcpy path asks of the disk at a time: with a large one the
 * page cache alone keeps a slow disk busy.
 */
long read_ahead_kb(const char *file)
{
	static const char *const where[] = {
		"/sys/dev/block/%u:%u/queue/read_ahead_kb",
		"/sys/dev/block/%u:%u/../queue/read_ahead_kb",	/* partition */
		"/sys/class/bdi/%u:%u/read_ahead_kb",	/* no block queue */
	};
	struct stat sb;
	char path[128];
	long kb = -1;
	size_t i;

	if (stat(file, &sb) < 0)
		return -1;
	for (i = 0; i < sizeof(where) / sizeof(where[0]) && kb < 0; i++) {
		FILE *f;

		snprintf(path, sizeof(path), where[i], major(sb.st_dev),
			 minor(sb.st_dev));
		f = fopen(path, "re");
		if (!f)
			continue;
		if (fscanf(f, "%ld", &kb) != 1)
			kb = -1;
		fclose(f);
	}
	return kb;
}

/* Buffered pread, request-size chunks, into pinned memory. */
static double pread_load(const char *file, void *dst, uint64_t size,
			 uint32_t req)
{
	uint64_t t0 = now_ns(), at = 0;
	int fd = open(file, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -1;
	while (at < size) {
		ssize_t r = pread(fd, (char *)dst + at,
				  size - at < req ? size - at : req, (off_t)at);

		if (r <= 0)
			break;
		at += (uint64_t)r;
	}
	close(fd);
	return (double)at / ((double)(now_ns() - t0) / 1e9);
}

/* mmap the file and memcpy it into pinned memory (as the safetensors
 * library reads: map, then copy out). */
static double mmap_load(const char *file, void *dst, uint64_t size)
{
	uint64_t t0 = now_ns();
	int fd = open(file, O_RDONLY | O_CLOEXEC);
	void *m;

	if (fd < 0)
		return -1;
	m = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (m == MAP_FAILED)
		return -1;
	memcpy(dst, m, size);
	munmap(m, size);
	return (double)size / ((double)(now_ns() - t0) / 1e9);
}

int prep_cold(struct cfg *c)
{
	int ret;

	if (c->keep_caches)
		return -EPERM;
	ret = drop_caches();
	if (ret)
		c->cold = 0;
	return ret;
}

/* One cold run of a baseline load: its GB/s and CPU seconds per GB. */
void baseline_load(struct cfg *c, struct series *s, enum baseline how,
			  const char *file, void *dst, uint64_t size)
{
	struct cpu_mark m;
	double bps = -1;

	prep_cold(c);
	cpu_start(&m);
	switch (how) {
	case BASE_FIO:
		bps = fio_load(c, file, size, 0);
		break;
	case BASE_FIO_FIXED:
		bps = fio_load(c, file, size, 1);
		break;
	case BASE_PREAD:
		bps = pread_load(file, dst, size, c->req);
		break;
	case BASE_MMAP:
		bps = mmap_load(file, dst, size);
		break;
	}
	add_cpu(s, cpu_per_gb(&m, size));
	add(s, bps / 1e9);
}

/*
 * mmap + memcpy with its destination made pinned in the clock (allocated,
 * mapped, locked as pin_region_create and pin_region_map do), as a loader without
 * libpin would do it end to end; the other baselines copy into a region
 * pinned once, before any clock starts.
 */
void mmap_alloc_load(struct cfg *c, struct series *s,
			    struct pin_dev *dev, const char *file,
			    uint64_t size)
{
	const struct pin_region_opts fallback = {
		.size = sizeof(fallback), .flags = PIN_REGION_FALLBACK,
	};
	struct pin_region *r = NULL;
	uint64_t t0;
	struct cpu_mark m;
	double bps = -1;
	void *dst;

	prep_cold(c);
	cpu_start(&m);
	t0 = now_ns();
	if ((!pin_region_create(dev, size, NULL, &r) ||
	     !pin_region_create(dev, size, &fallback, &r)) &&
	    !pin_region_map(r, &dst) && mmap_load(file, dst, size) > 0)
		bps = (double)size / ((double)(now_ns() - t0) / 1e9);
	pin_region_close(r);
	add_cpu(s, cpu_per_gb(&m, size));
	add(s, bps / 1e9);
}
