// SPDX-License-Identifier: MIT
/*
 * NUMA: where a region's memory lies (NODES; numa_place.c on the portable
 * backend), and the node of a PCI device from sysfs, so that a region can
 * be placed beside a GPU.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <uapi/pinmem.h>

#include "internal.h"

int pin_region_nodes(struct pin_region *r, uint64_t *bytes, unsigned capacity)
{
	struct pinmem_nodes q;
	int ret;

	if (!r || (capacity && !bytes))
		return -EINVAL;
	if (r->backend == PIN_BACKEND_PORTABLE)
		return pin__portable_nodes(r, bytes, capacity);
	memset(&q, 0, sizeof(q));
	q.bytes_ptr = (uintptr_t)bytes;
	q.capacity = capacity;
	ret = pin__ioctl(r->fd, PINMEM_IOC_NODES, &q);
	if (ret == -ENOTTY)
		return pin__fail(r->err, -EOPNOTSUPP,
				 "nodes: the module predates ABI 3 (no NODES)");
	if (ret)
		return pin__fail(r->err, ret, "nodes");
	return (int)q.count;
}

int pin_dev_region_nodes(struct pin_dev *dev, uint64_t region_id,
			 uint64_t *bytes, unsigned capacity)
{
	struct pinmem_nodes q;
	int ret;

	if (!dev || (capacity && !bytes))
		return -EINVAL;
	if (dev->backend == PIN_BACKEND_PORTABLE)
		return pin__fail(dev->err, -EOPNOTSUPP,
				 "nodes: the portable backend keeps no regions by id");
	memset(&q, 0, sizeof(q));
	q.region_id = region_id;
	q.bytes_ptr = (uintptr_t)bytes;
	q.capacity = capacity;
	ret = pin__ioctl(dev->fd, PINMEM_IOC_NODES, &q);
	if (ret == -ENOTTY)
		return pin__fail(dev->err, -EOPNOTSUPP,
				 "nodes: the module predates ABI 3 (no NODES)");
	if (ret)
		return pin__fail(dev->err, ret, "nodes of region %" PRIu64,
				 region_id);
	return (int)q.count;
}

/*
 * "dddd:bb:dd.f" in sysfs's spelling from a bus id as CUDA or lspci write
 * it: any case, a domain of 4 or 8 hex digits (CUDA's is 8, zero-padded),
 * or none (domain 0).
 */
static int pci_sysfs_name(const char *id, char *out, size_t len)
{
	unsigned long dom = 0;
	unsigned bus, dev, fn;
	const char *p = id;
	char *end;
	int n = 0;

	if (strchr(id, '/') || strlen(id) > 32)
		return -EINVAL;
	if (strchr(id, ':') != strrchr(id, ':')) {
		dom = strtoul(id, &end, 16);
		if (end == id || *end != ':' || end - id > 8 || dom > 0xffff)
			return -EINVAL;
		p = end + 1;
	}
	if (sscanf(p, "%2x:%2x.%1x%n", &bus, &dev, &fn, &n) != 3 ||
	    p[n] || dev > 0x1f || fn > 7 || !isxdigit((unsigned char)p[0]))
		return -EINVAL;
	snprintf(out, len, "%04lx:%02x:%02x.%x", dom, bus, dev, fn);
	return 0;
}

int pin_pci_numa_node(const char *bus_id)
{
	char name[32], path[96], buf[16];
	ssize_t n;
	int fd, node;

	if (!bus_id || pci_sysfs_name(bus_id, name, sizeof(name)))
		return -EINVAL;
	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/numa_node", name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return n < 0 ? -errno : -EIO;
	buf[n] = 0;
	if (sscanf(buf, "%d", &node) != 1 || node < -1)
		return -EIO;
	return node;
}
