/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Helpers for the checkpoint I/O tests: checks that say what and where,
 * the fixture byte pattern (the same as tests/io/stgen.py), files.
 * Each test exits 0 (pass), 77 (skip, with the reason on stdout) or 1.
 */
#ifndef IO_TEST_H
#define IO_TEST_H

#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <pin.h>

#define FAIL(...) do {							\
	fprintf(stderr, "%s:%d: ", __FILE__, __LINE__);			\
	fprintf(stderr, __VA_ARGS__);					\
	fputc('\n', stderr);						\
	exit(1);							\
} while (0)

#define CHECK(cond, ...) do {						\
	if (!(cond))							\
		FAIL("check failed: %s: " "%s", #cond,			\
		     io_fmt(__VA_ARGS__));				\
} while (0)

#define CHECK_EQ(a, b) do {						\
	long long _a = (long long)(a), _b = (long long)(b);		\
	if (_a != _b)							\
		FAIL("%s == %lld, expected %s == %lld", #a, _a, #b, _b);	\
} while (0)

#define SKIP(...) do {							\
	printf("SKIP: ");						\
	printf(__VA_ARGS__);						\
	putchar('\n');							\
	exit(77);							\
} while (0)

static inline const char *io_fmt(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));
static inline const char *io_fmt(const char *fmt, ...)
{
	static char buf[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	return buf;
}

static inline uint32_t fnv1a32(const char *s)
{
	uint32_t h = 0x811c9dc5u;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 0x01000193u;
	return h;
}

static inline uint8_t pattern(const char *name, int dtype, uint64_t j)
{
	uint8_t v = (uint8_t)(fnv1a32(name) + 131u * (uint32_t)j);

	return dtype == PIN_DT_BOOL ? (v & 1) : v;
}

/* Index of the first byte of t that differs from the pattern, or -1. */
static inline long long pattern_diff(const char *name, int dtype,
				     const void *data, uint64_t n)
{
	const uint8_t *p = data;
	uint64_t j;

	for (j = 0; j < n; j++)
		if (p[j] != pattern(name, dtype, j))
			return (long long)j;
	return -1;
}

static inline void write_file(const char *path, const void *buf, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

	if (fd < 0)
		FAIL("create %s: %s", path, strerror(errno));
	if (write(fd, buf, len) != (ssize_t)len)
		FAIL("write %s: %s", path, strerror(errno));
	close(fd);
}

static inline void *read_all(const char *path, size_t *len)
{
	struct stat sb;
	char *buf;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0 || fstat(fd, &sb) < 0)
		FAIL("open %s: %s", path, strerror(errno));
	buf = malloc((size_t)sb.st_size + 1);
	if (!buf || read(fd, buf, (size_t)sb.st_size) != sb.st_size)
		FAIL("read %s", path);
	close(fd);
	*len = (size_t)sb.st_size;
	return buf;
}

/* Deterministic bytes for raw I/O tests. */
static inline void fill(uint8_t *p, size_t n, uint32_t seed)
{
	size_t i;

	for (i = 0; i < n; i++) {
		seed = seed * 1103515245u + 12345u;
		p[i] = (uint8_t)(seed >> 16);
	}
}

/* A directory the test may write to: argv[1], else $TMPDIR, else /tmp. */
static inline const char *test_dir(int argc, char **argv)
{
	if (argc > 1)
		return argv[1];
	if (getenv("TMPDIR"))
		return getenv("TMPDIR");
	return "/tmp";
}

/* Does the filesystem of dir take O_DIRECT? 1 yes, 0 no (EINVAL). */
static inline int dir_has_odirect(const char *dir)
{
	char path[4096];
	int fd;

	snprintf(path, sizeof(path), "%s/.odirect-probe-%d", dir, (int)getpid());
	fd = open(path, O_RDWR | O_CREAT | O_DIRECT | O_CLOEXEC, 0600);
	if (fd < 0 && errno != EINVAL)
		FAIL("probe %s: %s", path, strerror(errno));
	if (fd >= 0)
		close(fd);
	unlink(path);
	return fd >= 0;
}

#endif /* IO_TEST_H */
