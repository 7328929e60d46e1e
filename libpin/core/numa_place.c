// SPDX-License-Identifier: MIT
/*
 * NUMA placement on the portable backend, where no module places pages.
 *
 * A memfd's pages come from the mempolicy of the thread whose fallocate
 * or fault allocates them: a fresh memfd has no shared policy of its own
 * (nobody mbind()s it) and hugetlbfs offers none. So libpin binds the
 * allocating thread to the node for the time of the allocation and puts
 * its own policy back afterwards: MPOL_BIND where every page must come
 * from the node, MPOL_PREFERRED where others may serve
 * (PIN_REGION_ANY_NODE). What MPOL_BIND cannot promise is a clean ENOMEM:
 * a node that runs short reclaims and then meets the OOM killer, as any
 * numactl --membind program does; a node without memory, or with less in
 * all than asked for, is refused here first.
 *
 * Where the pages lie is read back with move_pages(2) without target
 * nodes, which only reports, page by page through a read-only mapping
 * made for the query.
 *
 * No libnuma: these are three system calls with the kernel's own uapi
 * constants, and libnuma would add a runtime dependency for nothing else.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/mempolicy.h>

#include "internal.h"

#define NODE_SYSFS	"/sys/devices/system/node"
#define QUERY_BATCH	1024	/* pages per move_pages call */

static long get_mempolicy_(int *mode, unsigned long *mask, unsigned long max)
{
	return syscall(SYS_get_mempolicy, mode, mask, max, NULL, 0UL);
}

static long set_mempolicy_(int mode, const unsigned long *mask,
			   unsigned long max)
{
	return syscall(SYS_set_mempolicy, mode, mask, max);
}

/*
 * Read the sysfs node list at name ("0-1,3"): 1 if node is in it, else 0;
 * *max (if not NULL) the highest node listed. -ENOENT where the kernel
 * has no such list (no NUMA): then node 0 is the only one.
 */
static int node_listed(const char *name, int node, int *max)
{
	char path[128], buf[4096], *p;
	int found = 0;
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), NODE_SYSFS "/%s", name);
	f = fopen(path, "re");
	if (!f)
		return -ENOENT;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	if (max)
		*max = 0;
	for (p = buf; *p && *p != '\n';) {
		char *end;
		long lo = strtol(p, &end, 10), hi = lo;

		if (end == p)
			break;
		if (*end == '-')
			hi = strtol(end + 1, &end, 10);
		if (node >= lo && node <= hi)
			found = 1;
		if (max && hi > *max && hi < PIN__MAX_NODES)
			*max = (int)hi;
		p = *end == ',' ? end + 1 : end;
	}
	return found;
}

/* Node ids the kernel has (highest possible + 1); 1 without NUMA. */
static unsigned node_ids(void)
{
	int max;

	return node_listed("possible", 0, &max) < 0 ? 1 : (unsigned)max + 1;
}

/* MemTotal of a node in bytes, 0 if sysfs does not say. */
static uint64_t node_mem_total(int node)
{
	char path[128], line[256];
	uint64_t kb = 0;
	FILE *f;

	snprintf(path, sizeof(path), NODE_SYSFS "/node%d/meminfo", node);
	f = fopen(path, "re");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		char *p = strstr(line, "MemTotal:");

		if (p && sscanf(p + 9, "%" SCNu64, &kb) == 1)
			break;
	}
	fclose(f);
	return kb * 1024;
}

int pin__place_portable(char *err, int node, unsigned flags, uint64_t size,
			struct pin__place *place)
{
	int online, memory;
	uint64_t total;

	place->node = node;
	place->mode = MPOL_DEFAULT;
	if (node < 0)
		return 0;
	online = node >= PIN__MAX_NODES ? 0 : node_listed("online", node, NULL);
	if (online == -ENOENT)
		online = node == 0;
	if (!online)
		return pin__fail(err, -EINVAL,
				 "alloc on node %d: no such node online", node);
	memory = node_listed("has_memory", node, NULL);
	if (memory == -ENOENT)
		memory = node == 0;
	if (flags & PIN_REGION_ANY_NODE) {
		/* Preferring a node without memory is the default policy. */
		place->mode = memory ? MPOL_PREFERRED : MPOL_DEFAULT;
		return 0;
	}
	if (!memory)
		return pin__fail(err, -ENOMEM,
				 "alloc %" PRIu64 " bytes on node %d: the node has no memory (PIN_REGION_ANY_NODE lets other nodes serve)",
				 size, node);
	total = node_mem_total(node);
	if (total && size > total)
		return pin__fail(err, -ENOMEM,
				 "alloc %" PRIu64 " bytes on node %d: more than the node's memory (%" PRIu64 " bytes; PIN_REGION_ANY_NODE lets other nodes serve)",
				 size, node, total);
	place->mode = MPOL_BIND;
	return 0;
}

int pin__place_enter(const struct pin__place *place,
		     struct pin__place_scope *s)
{
	unsigned long mask[PIN__MAX_NODES / (8 * sizeof(unsigned long))];

	s->saved = 0;
	if (place->node < 0 || place->mode == MPOL_DEFAULT)
		return 0;
	if (get_mempolicy_(&s->mode, s->mask, PIN__MAX_NODES + 1)) {
		/* A kernel without NUMA: node 0, the only one, is everywhere. */
		return errno == ENOSYS ? 0 : -errno;
	}
	memset(mask, 0, sizeof(mask));
	mask[place->node / (8 * sizeof(unsigned long))] =
		1UL << (place->node % (8 * sizeof(unsigned long)));
	if (set_mempolicy_(place->mode, mask, PIN__MAX_NODES + 1))
		return -errno;	/* EINVAL: the node is outside our cpuset */
	s->saved = 1;
	return 0;
}

void pin__place_leave(struct pin__place_scope *s)
{
	if (!s->saved)
		return;
	if ((s->mode & ~MPOL_MODE_FLAGS) == MPOL_DEFAULT)
		set_mempolicy_(MPOL_DEFAULT, NULL, 0);
	else
		set_mempolicy_(s->mode, s->mask, PIN__MAX_NODES + 1);
	s->saved = 0;
}

/* Add the nodes of the n pages at pages[] to bytes[], step bytes each. */
static int count_pages(void **pages, size_t n, uint64_t step, uint64_t *bytes,
		       unsigned capacity)
{
	int status[QUERY_BATCH];
	size_t i;

	if (!n)
		return 0;
	if (syscall(SYS_move_pages, 0, (unsigned long)n, pages, NULL, status,
		    0))
		return -errno;
	for (i = 0; i < n; i++)
		if (status[i] >= 0 && (unsigned)status[i] < capacity)
			bytes[status[i]] += step;
	return 0;
}

/*
 * Count the n pages at off of the query mapping, mapped first (move_pages
 * reports only mapped pages). Every page of a region is allocated by the
 * time pin_region_create or the loader hands it out, so the read faults allocate
 * nothing; a fallocated page that nothing has touched yet is zeroed, as
 * the owner's first read would.
 */
static int count_window(char *map, uint64_t off, size_t n, uint64_t step,
			uint64_t *bytes, unsigned capacity)
{
	void *pages[QUERY_BATCH];
	size_t i;

	if (madvise(map + off, n * step, MADV_POPULATE_READ) && errno != EINVAL)
		return -errno;
	for (i = 0; i < n; i++)
		pages[i] = map + off + i * step;
	return count_pages(pages, n, step, bytes, capacity);
}

int pin__portable_nodes(struct pin_region *r, uint64_t *bytes,
			unsigned capacity)
{
	uint64_t step = r->hugetlb ? 2ULL << 20 : (uint64_t)sysconf(_SC_PAGESIZE);
	unsigned ids = node_ids();
	char path[64], *map;
	uint64_t off;
	int fd, ret = 0;

	if (capacity > ids)
		capacity = ids;
	if (!capacity || !r->size)
		return (int)ids;
	memset(bytes, 0, capacity * sizeof(*bytes));
	snprintf(path, sizeof(path), "/proc/self/fd/%d", r->fd);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return pin__fail(r->err, -errno, "nodes: reopen %s", path);
	map = mmap(NULL, r->size, PROT_READ, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED) {
		ret = pin__fail(r->err, -errno, "nodes: mapping the memfd");
		close(fd);
		return ret;
	}
	for (off = 0; !ret && off < r->size; off += QUERY_BATCH * step) {
		uint64_t n = (r->size - off + step - 1) / step;

		ret = count_window(map, off, n < QUERY_BATCH ? (size_t)n :
				   QUERY_BATCH, step, bytes, capacity);
	}
	munmap(map, r->size);
	close(fd);
	if (ret)
		return pin__fail(r->err, ret, "nodes: move_pages");
	return (int)ids;
}
