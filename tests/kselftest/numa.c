// SPDX-License-Identifier: GPL-2.0
/*
 * NUMA placement (ABI 3): ALLOC_NODE puts every chunk on the node asked
 * for or fails with ENOMEM, ALLOC_ANY_NODE lets other nodes serve, bad
 * node arguments are EINVAL, and NODES says where the bytes are. The
 * two-node cases run in a guest started with PINMEM_VM_NUMA=2 (or
 * "2,memless": node 1 without memory) and are skipped elsewhere; a
 * caller's cpuset confines them.
 */
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "pinmem_test.h"

#define CHUNK (2 * MiB)
#define MAX_NODES 64

PM_FIXTURE(numa);

static int alloc_on(int dev, uint64_t size, uint32_t flags, int node)
{
	struct pinmem_alloc a = { .size = size, .flags = flags, .node = node };

	if (ioctl(dev, PINMEM_IOC_ALLOC, &a))
		return -errno;
	return a.fd;
}

/* NODES into bytes[MAX_NODES]; returns count, or -errno. */
static int nodes_of(int fd, uint64_t *bytes, uint32_t capacity)
{
	struct pinmem_nodes q = {
		.bytes_ptr = (uintptr_t)bytes, .capacity = capacity,
	};

	memset(bytes, 0xa5, capacity * sizeof(*bytes));
	if (ioctl(fd, PINMEM_IOC_NODES, &q))
		return -errno;
	return q.count;
}

/* Whether node n is online, and whether it has memory. */
static int node_listed(const char *state, int n)
{
	char path[128], list[256];
	int lo, hi, len;
	const char *p;
	FILE *f;

	snprintf(path, sizeof(path), "/sys/devices/system/node/%s", state);
	f = fopen(path, "re");
	if (!f)
		return n == 0;
	if (!fgets(list, sizeof(list), f))
		list[0] = 0;
	fclose(f);
	for (p = list; *p && *p != '\n'; p += len) {
		len = 0;
		if (sscanf(p, "%d%n", &lo, &len) != 1)
			break;
		hi = lo;
		if (p[len] == '-') {
			p += len + 1;
			if (sscanf(p, "%d%n", &hi, &len) != 1)
				break;
		}
		if (n >= lo && n <= hi)
			return 1;
		if (p[len] == ',')
			len++;
	}
	return 0;
}

TEST_F(numa, bad_node_arguments_einval)
{
	int dev = self->env.dev;

	EXPECT_EQ(-EINVAL, alloc_on(dev, CHUNK, 0, 1));
	EXPECT_EQ(-EINVAL, alloc_on(dev, CHUNK, PINMEM_ALLOC_ANY_NODE, 0));
	EXPECT_EQ(-EINVAL, alloc_on(dev, CHUNK, PINMEM_ALLOC_NODE, -1));
	EXPECT_EQ(-EINVAL, alloc_on(dev, CHUNK, PINMEM_ALLOC_NODE, 1 << 20));
	EXPECT_EQ(-EINVAL, alloc_on(dev, CHUNK, PINMEM_ALLOC_NODE |
				    PINMEM_ALLOC_ANY_NODE, 1 << 20));
}

TEST_F(numa, node0_holds_every_chunk)
{
	uint64_t bytes[MAX_NODES];
	int rfd, vfd, count, n;

	rfd = alloc_on(self->env.dev, 5 * CHUNK + PG, PINMEM_ALLOC_NODE, 0);
	ASSERT_LE(0, rfd) TH_LOG("ALLOC on node 0: %s", pm_errname(-rfd));
	count = nodes_of(rfd, bytes, MAX_NODES);
	ASSERT_LT(0, count) TH_LOG("NODES: %s", pm_errname(-count));
	EXPECT_EQ(6 * CHUNK, bytes[0]);
	for (n = 1; n < count && n < MAX_NODES; n++) {
		EXPECT_EQ(0, bytes[n]) TH_LOG("node %d", n);
	}
	/* A view fd answers for its region; capacity 0 gives the count. */
	vfd = pm_view(rfd, 0, CHUNK, 0);
	EXPECT_EQ(count, nodes_of(vfd, bytes, 0));
	bytes[1] = 7;
	EXPECT_EQ(count, nodes_of(vfd, bytes, 1));
	EXPECT_EQ(6 * CHUNK, bytes[0]);
	EXPECT_EQ(7, bytes[1]) TH_LOG("NODES wrote beyond its capacity");
	close(vfd);
	close(rfd);
}

TEST_F(numa, nodes_bad_arguments)
{
	struct pinmem_nodes q = { .reserved = 1 };
	uint64_t id;
	int rfd = pm_alloc_id(self->env.dev, CHUNK, &id);

	ASSERT_ERRNO(EINVAL, ioctl(rfd, PINMEM_IOC_NODES, &q));
	q.reserved = 0;
	q.region_id = id;
	ASSERT_ERRNO(EINVAL, ioctl(rfd, PINMEM_IOC_NODES, &q));
	q.region_id = 0;
	ASSERT_ERRNO(ENOENT, ioctl(self->env.dev, PINMEM_IOC_NODES, &q));
	q.region_id = id + 1000000;
	ASSERT_ERRNO(ENOENT, ioctl(self->env.dev, PINMEM_IOC_NODES, &q));
	close(rfd);
}

TEST_F(numa, nodes_by_id_on_device_fd)
{
	uint64_t bytes[MAX_NODES], sum = 0, id;
	int rfd = pm_alloc_id(self->env.dev, 3 * CHUNK, &id);
	struct pinmem_nodes q = {
		.region_id = id, .bytes_ptr = (uintptr_t)bytes,
		.capacity = MAX_NODES,
	};

	ASSERT_OK(ioctl(self->env.dev, PINMEM_IOC_NODES, &q));
	ASSERT_LT(0, q.count);
	for (unsigned int n = 0; n < q.count && n < MAX_NODES; n++)
		sum += bytes[n];
	EXPECT_EQ(3 * CHUNK, sum);
	close(rfd);
}

TEST_F(numa, default_policy_counts_every_chunk)
{
	uint64_t bytes[MAX_NODES], sum = 0;
	int rfd = pm_alloc(self->env.dev, 64 * CHUNK);
	int count = nodes_of(rfd, bytes, MAX_NODES);

	ASSERT_LT(0, count);
	for (int n = 0; n < count && n < MAX_NODES; n++)
		sum += bytes[n];
	EXPECT_EQ(64 * CHUNK, sum);
	close(rfd);
}

TEST_F(numa, second_node_only_its_own_memory)
{
	uint64_t bytes[MAX_NODES];
	int rfd, count;

	if (!node_listed("online", 1))
		SKIP(return, "one NUMA node (tests/vm/run with PINMEM_VM_NUMA=2)");
	rfd = alloc_on(self->env.dev, 32 * CHUNK, PINMEM_ALLOC_NODE, 1);
	if (!node_listed("has_memory", 1)) {
		/* Refused, promptly, and nothing taken from node 0. */
		ASSERT_EQ(-ENOMEM, rfd);
		rfd = alloc_on(self->env.dev, 32 * CHUNK,
			       PINMEM_ALLOC_NODE | PINMEM_ALLOC_ANY_NODE, 1);
		ASSERT_LE(0, rfd) TH_LOG("ANY_NODE: %s", pm_errname(-rfd));
		count = nodes_of(rfd, bytes, MAX_NODES);
		ASSERT_LE(2, count);
		EXPECT_EQ(0, bytes[1]);
		EXPECT_EQ(32 * CHUNK, bytes[0]);
		printf("# memoryless node 1: ALLOC_NODE ENOMEM, ANY_NODE from node 0\n");
	} else {
		ASSERT_LE(0, rfd) TH_LOG("ALLOC on node 1: %s", pm_errname(-rfd));
		count = nodes_of(rfd, bytes, MAX_NODES);
		ASSERT_LE(2, count);
		EXPECT_EQ(0, bytes[0]);
		EXPECT_EQ(32 * CHUNK, bytes[1]);
		printf("# node 1: 64 MiB, all of it there\n");
	}
	close(rfd);
}

/* More than node 1 has: ENOMEM, not chunks from node 0; ANY_NODE spills. */
TEST_F_TIMEOUT(numa, full_node_enomem_any_node_spills, 300)
{
	uint64_t bytes[MAX_NODES], size;
	unsigned long long kb = 0;
	char line[256];
	FILE *f;
	int rfd;

	if (!node_listed("has_memory", 1))
		SKIP(return, "no second node with memory (PINMEM_VM_NUMA=2)");
	f = fopen("/sys/devices/system/node/node1/meminfo", "re");
	ASSERT_NE(NULL, f);
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "Node 1 MemTotal: %llu kB", &kb) == 1)
			break;
	fclose(f);
	ASSERT_LT(0, kb);
	/* Node 1's total plus a bit: never all there, but fits the machine. */
	size = (kb * KiB + 64 * MiB) / CHUNK * CHUNK;
	EXPECT_EQ(-ENOMEM, alloc_on(self->env.dev, size, PINMEM_ALLOC_NODE, 1));
	rfd = alloc_on(self->env.dev, size,
		       PINMEM_ALLOC_NODE | PINMEM_ALLOC_ANY_NODE, 1);
	ASSERT_LE(0, rfd) TH_LOG("ANY_NODE, %llu MiB: %s",
				 (unsigned long long)size / MiB,
				 pm_errname(-rfd));
	ASSERT_LE(2, nodes_of(rfd, bytes, MAX_NODES));
	EXPECT_LT(0, bytes[0]);
	EXPECT_LT(0, bytes[1]);
	EXPECT_EQ(size, bytes[0] + bytes[1]);
	printf("# %llu MiB asked of node 1 (%llu MiB): %llu MiB there, %llu MiB on node 0\n",
	       (unsigned long long)size / MiB, kb / 1024,
	       (unsigned long long)bytes[1] / MiB,
	       (unsigned long long)bytes[0] / MiB);
	close(rfd);
}

#define CPUSET_CG	"/sys/fs/cgroup/pinmem-cpuset-test"

static int write_str(const char *path, const char *v)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = write(fd, v, strlen(v));
	close(fd);
	return n == (ssize_t)strlen(v) ? 0 : -EIO;
}

/* This process into a cgroup v2 whose cpuset.mems is node 0 only. */
static int confine_to_node0(void)
{
	char pid[32];

	mkdir("/sys/fs/cgroup", 0755);
	if (access("/sys/fs/cgroup/cgroup.controllers", F_OK) &&
	    mount("none", "/sys/fs/cgroup", "cgroup2", 0, NULL))
		return 30;
	if (write_str("/sys/fs/cgroup/cgroup.subtree_control", "+cpuset"))
		return 31;
	if (mkdir(CPUSET_CG, 0755) && errno != EEXIST)
		return 32;
	if (write_str(CPUSET_CG "/cpuset.mems", "0"))
		return 33;
	snprintf(pid, sizeof(pid), "%d", getpid());
	return write_str(CPUSET_CG "/cgroup.procs", pid) ? 34 : 0;
}

/*
 * A caller whose cpuset allows node 0 only: node 1 is refused (EINVAL,
 * as set_mempolicy(2) answers), with or without ANY_NODE, and a large
 * ALLOC puts nothing on node 1 although the allocation workers (kernel
 * threads, in no cpuset) would run on node 1's CPUs.
 */
TEST_F(numa, cpuset_confines_allocation)
{
	uint64_t bytes[MAX_NODES];
	int status, dev = self->env.dev;
	pid_t child;

	if (!node_listed("has_memory", 1))
		SKIP(return, "no second node with memory (PINMEM_VM_NUMA=2)");
	child = fork();
	ASSERT_LE(0, child);
	if (child == 0) {
		int rfd, ret = confine_to_node0();

		if (ret)
			_exit(ret);
		if (alloc_on(dev, 8 * CHUNK, PINMEM_ALLOC_NODE, 1) != -EINVAL)
			_exit(40);
		if (alloc_on(dev, 8 * CHUNK, PINMEM_ALLOC_NODE |
			     PINMEM_ALLOC_ANY_NODE, 1) != -EINVAL)
			_exit(41);
		rfd = alloc_on(dev, 128 * CHUNK, 0, 0);
		if (rfd < 0)
			_exit(42);
		if (nodes_of(rfd, bytes, MAX_NODES) < 2)
			_exit(43);
		if (bytes[1] || bytes[0] != 128 * CHUNK) {
			printf("# confined to node 0: %llu MiB on node 1\n",
			       (unsigned long long)bytes[1] / MiB);
			_exit(44);
		}
		close(rfd);
		_exit(0);
	}
	ASSERT_EQ(child, waitpid(child, &status, 0));
	rmdir(CPUSET_CG);
	ASSERT_TRUE(WIFEXITED(status));
	ASSERT_EQ(0, WEXITSTATUS(status))
		TH_LOG("30-34: cgroup set-up, 40/41: node 1 not refused, 42/43: ALLOC/NODES failed, 44: bytes on node 1");
}

TEST_HARNESS_MAIN
