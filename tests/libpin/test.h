/* SPDX-License-Identifier: MIT */
/*
 * Shared helpers for the libpin tests: one program per behaviour, exit 0
 * pass, 77 skip (with the reason printed), anything else fail. Failures
 * say what, where and with which values.
 */
#ifndef LIBPIN_TEST_H
#define LIBPIN_TEST_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>
#include <sys/mman.h>

#include <pin.h>

#define T_SKIP	77

#define FAIL(...) do {							\
	fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);		\
	fprintf(stderr, __VA_ARGS__);					\
	fputc('\n', stderr);						\
	exit(1);							\
} while (0)

#define SKIP(...) do {							\
	printf("SKIP: ");						\
	printf(__VA_ARGS__);						\
	putchar('\n');							\
	exit(T_SKIP);							\
} while (0)

/* expr must equal want (both as long long). */
#define EXPECT_EQ(expr, want) do {					\
	long long _g = (long long)(expr), _w = (long long)(want);	\
	if (_g != _w)							\
		FAIL("%s = %lld, expected %lld", #expr, _g, _w);	\
} while (0)

#define EXPECT_TRUE(cond) do {						\
	if (!(cond))							\
		FAIL("expected %s", #cond);				\
} while (0)

/* A libpin call that must succeed; prints the handle's text if not. */
#define CHECK_OK(expr, errtext) do {					\
	int _r = (expr);						\
	if (_r < 0)							\
		FAIL("%s = %d (%s): %s", #expr, _r, strerror(-_r),	\
		     (errtext));					\
} while (0)

#define EXPECT_CONTAINS(hay, needle) do {				\
	const char *_h = (hay), *_n = (needle);				\
	if (!_h || !strstr(_h, _n))					\
		FAIL("%s = \"%s\" lacks \"%s\"", #hay, _h ? _h : "(null)", _n); \
} while (0)

/* Open fds in this process (leak checks compare two counts). */
static inline int t_count_fds(void)
{
	long max = sysconf(_SC_OPEN_MAX);
	int n = 0, fd;

	if (max < 0 || max > 65536)
		max = 65536;
	for (fd = 0; fd < max; fd++)
		if (fcntl(fd, F_GETFD) >= 0)
			n++;
	return n;
}

#define MiB(x)	((uint64_t)(x) << 20)

/*
 * Open the backend the environment selects (PIN_BACKEND=device|portable,
 * else whatever AUTO finds); skip if the test needs the other one.
 */
static inline struct pin_dev *t_open(int need)
{
	struct pin_dev *dev;
	int ret = pin_dev_open(&dev, PIN_BACKEND_AUTO, NULL);

	if (ret < 0)
		FAIL("pin_dev_open(AUTO) = %d (%s)", ret, strerror(-ret));
	if (need && pin_dev_backend(dev) != need) {
		int have = pin_dev_backend(dev);

		pin_dev_close(dev);
		SKIP("needs the %s backend, running on %s",
		     pin_backend_name(need), pin_backend_name(have));
	}
	return dev;
}

static inline void t_fill(unsigned char *p, size_t n, unsigned seed)
{
	size_t i;

	for (i = 0; i < n; i++)
		p[i] = (unsigned char)(i * 131u + seed);
}

static inline void t_check(const unsigned char *p, size_t n, unsigned seed,
			   const char *what)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (p[i] != (unsigned char)(i * 131u + seed))
			FAIL("%s: byte %zu is 0x%02x, expected 0x%02x", what,
			     i, p[i], (unsigned char)(i * 131u + seed));
}

/*
 * A one-tensor safetensors file ("w", U8, nbytes of t_fill(seed)) in a
 * memfd; its path, through /proc, in path. Returns the fd to close.
 */
static inline int t_st_memfd(char *path, size_t len, uint32_t nbytes,
			     unsigned seed)
{
	unsigned char *data = malloc(nbytes);
	int fd = memfd_create("libpin-test-st", MFD_CLOEXEC);
	char hdr[128];
	uint64_t n;

	if (fd < 0 || !data)
		FAIL("memfd_create or malloc: %s", strerror(errno));
	n = (uint64_t)snprintf(hdr, sizeof(hdr),
			       "{\"w\":{\"dtype\":\"U8\",\"shape\":[%u],"
			       "\"data_offsets\":[0,%u]}}", nbytes, nbytes);
	t_fill(data, nbytes, seed);
	if (write(fd, &n, 8) != 8 || write(fd, hdr, n) != (ssize_t)n ||
	    write(fd, data, nbytes) != (ssize_t)nbytes)
		FAIL("write: %s", strerror(errno));
	free(data);
	snprintf(path, len, "/proc/self/fd/%d", fd);
	return fd;
}

#endif /* LIBPIN_TEST_H */
