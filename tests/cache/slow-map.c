// SPDX-License-Identifier: GPL-2.0
/*
 * slow-map.so: an LD_PRELOAD shim that holds a cache client back before
 * it maps the service's view, so that a test can act between the reply
 * and the mapping. The first read-only shared mapping of an fd (the view
 * of a LOAD reply) waits until the file SLOW_MAP_UNTIL exists (at most a
 * minute); "slow-map: waiting" on stderr says it has begun. Every other
 * mmap passes straight through.
 */
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

typedef void *(*mmap_fn)(void *, size_t, int, int, int, off_t);

static atomic_int waited;

static void wait_once(void)
{
	static const char said[] = "slow-map: waiting\n";
	const char *until = getenv("SLOW_MAP_UNTIL");
	struct timespec tick = { 0, 10 * 1000000L };

	if (!until || atomic_exchange(&waited, 1))
		return;
	if (write(2, said, sizeof(said) - 1) < 0)
		return;
	for (int i = 0; i < 6000 && access(until, F_OK); i++)
		nanosleep(&tick, NULL);
}

void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	mmap_fn real = (mmap_fn)dlsym(RTLD_NEXT, "mmap");

	if (fd >= 0 && prot == PROT_READ && flags == MAP_SHARED)
		wait_once();
	return real(addr, len, prot, flags, fd, off);
}
