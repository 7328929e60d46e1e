// SPDX-License-Identifier: GPL-2.0
/*
 * A first look at pinmem through its raw ioctls: a region, a read-only
 * view of it, a donation refused while the view is mapped (naming who holds
 * it), and the same donation succeeding once the view is unmapped.
 *
 *   tests/vm/run build/examples/first-look
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <uapi/pinmem.h>

#define MiB (1024 * 1024)
#define REGION_SIZE (8 * MiB)

static void die(const char *what)
{
	fprintf(stderr, "first-look: %s: %s\n", what, strerror(errno));
	exit(1);
}

static const char *state_name(__u32 state)
{
	switch (state) {
	case PINMEM_STATE_OPEN:
		return "OPEN";
	case PINMEM_STATE_SEALED:
		return "SEALED";
	case PINMEM_STATE_DONATED:
		return "DONATED";
	}
	return "?";
}

static void show_region(int fd)
{
	struct pinmem_region_info info = { 0 };

	if (ioctl(fd, PINMEM_IOC_INFO, &info))
		die("INFO");
	printf("    region %llu: %s, %llu MiB in %llu chunks of 2 MiB; "
	       "owner mappings %llu, view mappings %llu, view fds %llu\n",
	       (unsigned long long)info.region_id, state_name(info.state),
	       (unsigned long long)info.size / MiB,
	       (unsigned long long)info.nr_chunks,
	       (unsigned long long)info.owner_mappings,
	       (unsigned long long)info.view_mappings,
	       (unsigned long long)info.view_fds);
}

static void show_holders(int fd)
{
	struct pinmem_holder h[8];
	struct pinmem_holders req = {
		.holders_ptr = (uintptr_t)h,
		.capacity = 8,
	};

	if (ioctl(fd, PINMEM_IOC_HOLDERS, &req))
		die("HOLDERS");
	for (__u32 i = 0; i < req.count && i < req.capacity; i++)
		printf("    pid %u (%s): %s mapping %#llx-%#llx %c%c%c of region "
		       "bytes [%llu MiB, %llu MiB)%s\n",
		       h[i].tgid, h[i].comm,
		       h[i].kind == PINMEM_HOLDER_VIEW ? "view" : "owner",
		       (unsigned long long)h[i].start,
		       (unsigned long long)(h[i].start + h[i].length),
		       h[i].prot & PROT_READ ? 'r' : '-',
		       h[i].prot & PROT_WRITE ? 'w' : '-',
		       h[i].prot & PROT_EXEC ? 'x' : '-',
		       (unsigned long long)h[i].offset / MiB,
		       (unsigned long long)(h[i].offset + h[i].length) / MiB,
		       h[i].kind == PINMEM_HOLDER_VIEW ? "  <- holds the donation up" : "");
}

static int transition(int fd, unsigned long request)
{
	struct pinmem_transition t = { 0 };

	return ioctl(fd, request, &t) ? -errno : 0;
}

int main(void)
{
	struct pinmem_version ver = { 0 };
	struct pinmem_alloc alloc = { .size = REGION_SIZE };
	struct pinmem_view view = { .offset = 0, .length = REGION_SIZE };
	unsigned char *owner, *seen;
	int dev, err, surprises = 0;

	dev = open(PINMEM_DEVICE_PATH, O_RDWR | O_CLOEXEC);
	if (dev < 0)
		die("open " PINMEM_DEVICE_PATH " (is pinmem.ko loaded?)");
	if (ioctl(dev, PINMEM_IOC_VERSION, &ver))
		die("VERSION");
	printf("pinmem ABI %u, chunks of %llu MiB\n", ver.abi_version,
	       (unsigned long long)ver.chunk_size / MiB);

	/* A region: 8 MiB of pinned pages, and the owner's mapping of it. */
	if (ioctl(dev, PINMEM_IOC_ALLOC, &alloc))
		die("ALLOC");
	printf("ALLOC 8 MiB: region %llu, fd %d\n",
	       (unsigned long long)alloc.region_id, alloc.fd);
	owner = mmap(NULL, REGION_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED,
		     alloc.fd, 0);
	if (owner == MAP_FAILED)
		die("mmap region");
	for (size_t i = 0; i < REGION_SIZE; i++)
		owner[i] = (unsigned char)(i * 7 + i / 4096);
	printf("owner mapping at %p: wrote a pattern\n", (void *)owner);
	show_region(alloc.fd);

	/* A read-only view of the whole region, mapped: it sees the pattern. */
	if (ioctl(alloc.fd, PINMEM_IOC_VIEW, &view))
		die("VIEW");
	seen = mmap(NULL, REGION_SIZE, PROT_READ, MAP_SHARED, view.fd, 0);
	if (seen == MAP_FAILED)
		die("mmap view");
	err = memcmp(seen, owner, REGION_SIZE) != 0;
	surprises += err;
	printf("VIEW (read-only): fd %d, mapped at %p, reads the pattern: %s\n",
	       view.fd, (void *)seen, err ? "NO" : "yes");
	show_region(alloc.fd);

	/* Donating the region is refused while the view is mapped. */
	err = transition(alloc.fd, PINMEM_IOC_DONATE);
	surprises += err != -EBUSY;
	printf("DONATE: %s; the region's holders:\n",
	       err == -EBUSY ? "refused with EBUSY" : strerror(-err));
	show_holders(alloc.fd);

	/* Unmap the view, and the same donation goes through. */
	if (munmap(seen, REGION_SIZE))
		die("munmap view");
	printf("munmap the view\n");
	err = transition(alloc.fd, PINMEM_IOC_DONATE);
	surprises += err != 0;
	printf("DONATE: %s\n", err ? strerror(-err) : "done");
	show_region(alloc.fd);

	seen = mmap(NULL, REGION_SIZE, PROT_READ, MAP_SHARED, view.fd, 0);
	err = seen == MAP_FAILED ? -errno : 0;
	surprises += err != -EBUSY;
	printf("mapping the view while DONATED: %s\n",
	       err == -EBUSY ? "refused with EBUSY" :
	       err ? strerror(-err) : "allowed?!");
	if (seen != MAP_FAILED)
		munmap(seen, REGION_SIZE);

	err = transition(alloc.fd, PINMEM_IOC_PUBLISH);
	surprises += err != 0;
	printf("PUBLISH: %s\n", err ? strerror(-err) : "done");
	show_region(alloc.fd);

	close(view.fd);
	munmap(owner, REGION_SIZE);
	close(alloc.fd);
	close(dev);
	if (surprises)
		printf("%d step(s) did not behave as described above\n", surprises);
	return surprises ? 1 : 0;
}
