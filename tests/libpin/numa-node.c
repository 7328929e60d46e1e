// SPDX-License-Identifier: MIT
/*
 * NUMA: pin_region_create and pin_st_load with PIN_REGION_NODE, and
 * pin_region_nodes, on either backend (PIN_BACKEND): node 0 always;
 * where two nodes are online (tests/numa.d), node 1 with memory, from the
 * CPUs of node 0 (and node 0 from node 1's), or node 1 without memory
 * (strict: ENOMEM; any node: node 0 serves). The calling thread's
 * mempolicy is the same after as before. And pin_pci_numa_node against
 * sysfs for every PCI device there is, in each spelling of its bus id.
 */
#include <ctype.h>
#include <dirent.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <linux/mempolicy.h>

#include "test.h"

#define TENSOR_BYTES	((5u << 20) + 123)

static int backend;

/* The calling thread's mempolicy mode: libpin must leave it as it was. */
static int policy_mode(void)
{
	unsigned long mask[1024 / (8 * sizeof(unsigned long))];
	int mode = -1;

	if (syscall(SYS_get_mempolicy, &mode, mask, 1025UL, NULL, 0UL))
		FAIL("get_mempolicy: %s", strerror(errno));
	return mode;
}

/* 1 if x is in the sysfs list at path ("0-1,3"), else 0; dflt if none. */
static int list_has(const char *path, int x, int dflt)
{
	char buf[4096], *p, *end;
	size_t n;
	FILE *f = fopen(path, "re");

	if (!f)
		return dflt;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	for (p = buf; *p >= '0' && *p <= '9'; p = end + (*end == ',')) {
		long lo = strtol(p, &end, 10), hi = lo;

		if (*end == '-')
			hi = strtol(end + 1, &end, 10);
		if (x >= lo && x <= hi)
			return 1;
	}
	return 0;
}

static int node_in(const char *name, int node)
{
	char path[96];

	snprintf(path, sizeof(path), "/sys/devices/system/node/%s", name);
	return list_has(path, node, node == 0);
}

/*
 * Run on the CPUs of node only, so that memory nobody placed comes from
 * there: a placement on another node that libpin failed to make then
 * shows, whichever CPU the test started on.
 */
static void run_on_cpus_of(int node)
{
	char path[96];
	cpu_set_t set;
	int cpu, n = 0;

	snprintf(path, sizeof(path), "/sys/devices/system/node/node%d/cpulist",
		 node);
	CPU_ZERO(&set);
	for (cpu = 0; cpu < CPU_SETSIZE; cpu++)
		if (list_has(path, cpu, 0)) {
			CPU_SET(cpu, &set);
			n++;
		}
	if (!n || sched_setaffinity(0, sizeof(set), &set))
		FAIL("running on node %d's CPUs (%d of them): %s", node, n,
		     strerror(errno));
	printf("# running on the %d CPU(s) of node %d\n", n, node);
}

/* Bytes of r that the node query should count: whole chunks or pages. */
static uint64_t placed_bytes(struct pin_region *r)
{
	uint64_t size = pin_region_size(r);

	if (backend == PIN_BACKEND_DEVICE)
		return (size + MiB(2) - 1) & ~(MiB(2) - 1);
	return size;
}

/* All of r's bytes on want, none elsewhere. */
static void expect_nodes(struct pin_region *r, int want, const char *what)
{
	uint64_t bytes[8];
	int n, i;

	n = pin_region_nodes(r, bytes, 8);
	if (n < 1)
		FAIL("%s: pin_region_nodes = %d (%s)", what, n,
		     pin_region_error(r));
	for (i = 0; i < n && i < 8; i++)
		if (bytes[i] != (i == want ? placed_bytes(r) : 0))
			FAIL("%s: node %d holds %llu bytes, expected %llu", what,
			     i, (unsigned long long)bytes[i],
			     (unsigned long long)(i == want ? placed_bytes(r) : 0));
	EXPECT_EQ(pin_region_nodes(r, NULL, 0), n);
	EXPECT_EQ(pin_region_nodes(r, NULL, 1), -EINVAL);
	printf("ok - %s: node %d holds all %llu bytes\n", what, want,
	       (unsigned long long)placed_bytes(r));
}

/* Region options for node (-1: none) and PIN_REGION_ANY_NODE or 0. */
static struct pin_region_opts on_node(int node, unsigned flags)
{
	struct pin_region_opts o = PIN_INIT(struct pin_region_opts);

	o.flags = flags | (node != -1 ? PIN_REGION_NODE : 0);
	o.node = node;
	return o;
}

static void alloc_on(struct pin_dev *dev, int node, unsigned flags, int want)
{
	struct pin_region_opts ro = on_node(node, flags);
	struct pin_region *r = NULL;
	char what[64];

	snprintf(what, sizeof(what), "alloc on node %d%s", node,
		 flags ? " (any node)" : "");
	CHECK_OK(pin_region_create(dev, MiB(6) + 4096, &ro, &r),
		 pin_dev_error(dev));
	EXPECT_EQ(policy_mode(), MPOL_DEFAULT);
	expect_nodes(r, want, what);
	pin_region_close(r);
}

/* A checkpoint loaded onto node; its one region on want, bytes intact. */
static void load_on(struct pin_dev *dev, const char *path, int node,
		    unsigned flags, unsigned io_flags, int want)
{
	struct pin_io_opts o = { .size = sizeof(o), .flags = io_flags };
	struct pin_region_opts ro = on_node(node, flags);
	struct pin_st_load_opts lo = {
		.size = sizeof(lo), .region = &ro, .io = &o,
	};
	struct pin_st *ck = pin_st_create();
	struct pin_st_tensor t = PIN_INIT(struct pin_st_tensor);
	char what[96];

	snprintf(what, sizeof(what), "load on node %d%s%s", node,
		 flags ? " (any node)" : "",
		 io_flags ? " (pinned first, in the caller's thread)" : "");
	CHECK_OK(pin_st_load(ck, dev, path, &lo), pin_st_error(ck));
	EXPECT_EQ(policy_mode(), MPOL_DEFAULT);
	CHECK_OK(pin_st_find(ck, "w", &t), pin_st_error(ck));
	t_check(t.data, TENSOR_BYTES, 3, what);
	expect_nodes(pin_st_region(ck, 0), want, what);
	pin_st_close(ck);
}

static void bad_arguments(struct pin_dev *dev, const char *path)
{
	/* ANY_NODE without a node; node < 0; unknown flags; no such node. */
	struct pin_region_opts bad[] = {
		{ .size = sizeof(bad[0]), .flags = PIN_REGION_ANY_NODE },
		{ .size = sizeof(bad[0]), .flags = PIN_REGION_NODE, .node = -2 },
		{ .size = sizeof(bad[0]), .flags = PIN_REGION_NODE | 0x80 },
		{ .size = sizeof(bad[0]), .flags = PIN_REGION_NODE,
		  .node = 1 << 20 },
	};
	struct pin_st_load_opts lo = PIN_INIT(struct pin_st_load_opts);
	struct pin_region *r = NULL;
	struct pin_st *ck = pin_st_create();
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		EXPECT_EQ(pin_region_create(dev, MiB(2), &bad[i], &r), -EINVAL);
	EXPECT_CONTAINS(pin_dev_error(dev), "no such node");
	EXPECT_TRUE(r == NULL);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		lo.region = &bad[i];
		EXPECT_EQ(pin_st_load(ck, dev, path, &lo), -EINVAL);
	}
	EXPECT_CONTAINS(pin_st_error(ck), "no such node");
	EXPECT_EQ(pin_st_count(ck), 0);
	pin_st_close(ck);
	printf("ok - bad nodes and flags: EINVAL, nothing made\n");
}

/* Node 1 without memory: strict is ENOMEM, any node lets node 0 serve. */
static void memoryless_node(struct pin_dev *dev, const char *path)
{
	struct pin_region_opts node1 = on_node(1, 0);
	struct pin_st_load_opts lo = { .size = sizeof(lo), .region = &node1 };
	struct pin_region *r = NULL;
	struct pin_st *ck = pin_st_create();

	EXPECT_EQ(pin_region_create(dev, MiB(2), &node1, &r), -ENOMEM);
	EXPECT_CONTAINS(pin_dev_error(dev), "node 1");
	EXPECT_EQ(pin_st_load(ck, dev, path, &lo), -ENOMEM);
	EXPECT_EQ(pin_st_count(ck), 0);
	pin_st_close(ck);
	EXPECT_EQ(policy_mode(), MPOL_DEFAULT);
	printf("ok - node 1 has no memory: ENOMEM, strict\n");
	alloc_on(dev, 1, PIN_REGION_ANY_NODE, 0);
	load_on(dev, path, 1, PIN_REGION_ANY_NODE, 0, 0);
}

static void pci_ids(void)
{
	DIR *d = opendir("/sys/bus/pci/devices");
	struct dirent *e;
	int checked = 0;

	EXPECT_EQ(pin_pci_numa_node("zz"), -EINVAL);
	EXPECT_EQ(pin_pci_numa_node("0000:00:00.0/../x"), -EINVAL);
	EXPECT_EQ(pin_pci_numa_node("0000:00:20.0"), -EINVAL);
	EXPECT_EQ(pin_pci_numa_node("0000:00:00.8"), -EINVAL);
	EXPECT_EQ(pin_pci_numa_node("10000:00:00.0"), -EINVAL);
	EXPECT_EQ(pin_pci_numa_node(NULL), -EINVAL);
	EXPECT_EQ(pin_pci_numa_node("fffe:fe:1f.7"), -ENOENT);
	if (!d)
		return;
	while ((e = readdir(d))) {
		char path[300], upper[64], cuda[80];
		int want, i;
		FILE *f;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/numa_node",
			 e->d_name);
		f = fopen(path, "re");
		if (!f)
			continue;
		if (fscanf(f, "%d", &want) != 1)
			want = -100;
		fclose(f);
		EXPECT_EQ(pin_pci_numa_node(e->d_name), want);
		for (i = 0; e->d_name[i] && i < 63; i++)
			upper[i] = (char)toupper((unsigned char)e->d_name[i]);
		upper[i] = 0;
		EXPECT_EQ(pin_pci_numa_node(upper), want);
		snprintf(cuda, sizeof(cuda), "0000%s", upper);
		EXPECT_EQ(pin_pci_numa_node(cuda), want);
		if (!strncmp(e->d_name, "0000:", 5))
			EXPECT_EQ(pin_pci_numa_node(e->d_name + 5), want);
		checked++;
	}
	closedir(d);
	printf("# %d PCI devices: node as sysfs says, in every spelling\n",
	       checked);
}

int main(void)
{
	struct pin_dev *dev = t_open(0);
	uint64_t bytes[8];
	char path[64];
	int fd;

	backend = pin_dev_backend(dev);
	printf("# backend %s\n", pin_backend_name(backend));
	pci_ids();
	fd = t_st_memfd(path, sizeof(path), TENSOR_BYTES, 3);
	bad_arguments(dev, path);
	alloc_on(dev, 0, 0, 0);
	alloc_on(dev, 0, PIN_REGION_ANY_NODE, 0);
	load_on(dev, path, 0, 0, 0, 0);
	load_on(dev, path, 0, 0, PIN_IO_PIN_FIRST, 0);
	if (backend == PIN_BACKEND_PORTABLE)
		EXPECT_EQ(pin_dev_region_nodes(dev, 1, bytes, 8), -EOPNOTSUPP);
	if (node_in("online", 1) && node_in("has_memory", 1)) {
		run_on_cpus_of(0);
		alloc_on(dev, 1, 0, 1);
		load_on(dev, path, 1, 0, 0, 1);
		load_on(dev, path, 1, 0, PIN_IO_PIN_FIRST, 1);
		run_on_cpus_of(1);
		alloc_on(dev, 0, 0, 0);
		load_on(dev, path, 0, 0, 0, 0);
	} else if (node_in("online", 1)) {
		memoryless_node(dev, path);
	} else {
		printf("# one node online: node 1's cases need tests/numa.d\n");
	}
	close(fd);
	pin_dev_close(dev);
	return 0;
}
