// SPDX-License-Identifier: MIT
/*
 * NUMA: pin_alloc_on_node and pin_region_nodes on either backend (the
 * device places and reports; the portable backend says it cannot), and
 * pin_pci_numa_node against sysfs for every PCI device there is, in each
 * spelling of its bus id.
 */
#include <ctype.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>

#include "test.h"

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
	struct pin_region *r = NULL;
	uint64_t bytes[8];
	int n;

	pci_ids();
	EXPECT_EQ(pin_alloc_on_node(dev, MiB(2), PIN_ALLOC_ANY_NODE, -1, &r),
		  -EINVAL);
	EXPECT_EQ(pin_alloc_on_node(dev, MiB(2), 0, -2, &r), -EINVAL);
	EXPECT_EQ(pin_alloc_on_node(dev, MiB(2), 0x80, 0, &r), -EINVAL);
	EXPECT_TRUE(r == NULL);
	if (pin_dev_backend(dev) == PIN_BACKEND_PORTABLE) {
		EXPECT_EQ(pin_alloc_on_node(dev, MiB(2), 0, 0, &r), -EOPNOTSUPP);
		EXPECT_CONTAINS(pin_dev_error(dev), "portable");
		CHECK_OK(pin_alloc_on_node(dev, MiB(2), 0, -1, &r),
			 pin_dev_error(dev));
		EXPECT_EQ(pin_region_nodes(r, bytes, 8), -EOPNOTSUPP);
		EXPECT_EQ(pin_dev_region_nodes(dev, 1, bytes, 8), -EOPNOTSUPP);
		pin_region_free(r);
		pin_close(dev);
		printf("ok - portable: no placement, said so\n");
		return 0;
	}
	EXPECT_EQ(pin_alloc_on_node(dev, MiB(2), 0, 1 << 20, &r), -EINVAL);
	EXPECT_CONTAINS(pin_dev_error(dev), "no such node");
	CHECK_OK(pin_alloc_on_node(dev, MiB(6) + 4096, 0, 0, &r),
		 pin_dev_error(dev));
	n = pin_region_nodes(r, bytes, 8);
	EXPECT_TRUE(n >= 1);
	EXPECT_EQ(bytes[0], MiB(8));
	EXPECT_EQ(pin_region_nodes(r, NULL, 0), n);
	EXPECT_EQ(pin_region_nodes(r, NULL, 1), -EINVAL);
	memset(bytes, 0, sizeof(bytes));
	EXPECT_EQ(pin_dev_region_nodes(dev, pin_region_id(r), bytes, 8), n);
	EXPECT_EQ(bytes[0], MiB(8));
	EXPECT_EQ(pin_dev_region_nodes(dev, pin_region_id(r) + 1000000, bytes,
				       8), -ENOENT);
	pin_region_free(r);
	pin_close(dev);
	printf("ok - device: node 0 holds the region, NODES says so\n");
	return 0;
}
