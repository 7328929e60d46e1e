// SPDX-License-Identifier: GPL-2.0
/*
 * pinmem: NUMA placement. The node an ALLOC asks for, and NODES, the
 * bytes of a region on each node.
 */
#include <linux/cpuset.h>
#include <linux/err.h>
#include <linux/gfp.h>
#include <linux/nodemask.h>
#include <linux/nospec.h>
#include <linux/numa.h>
#include <linux/slab.h>
#include <linux/uaccess.h>

#include "pinmem.h"

/*
 * Where ALLOC's chunks are to come from. A node without memory is
 * ENOMEM, like any node that cannot give the pages: the request is
 * valid, the memory is not there.
 */
int pinmem_place_from_alloc(const struct pinmem_alloc *a,
			    struct pinmem_place *place)
{
	int nid;

	place->nid = NUMA_NO_NODE;
	place->gfp = 0;
	if (!(a->flags & PINMEM_ALLOC_NODE))
		return a->node || (a->flags & PINMEM_ALLOC_ANY_NODE) ? -EINVAL : 0;
	if (a->node < 0 || a->node >= nr_node_ids)
		return -EINVAL;
	nid = array_index_nospec(a->node, nr_node_ids);
	if (!node_online(nid))
		return -EINVAL;
	/* As set_mempolicy(2): a node with memory outside the cpuset. */
	if (node_state(nid, N_MEMORY) &&
	    !node_isset(nid, cpuset_current_mems_allowed))
		return -EINVAL;
	place->nid = nid;
	if (a->flags & PINMEM_ALLOC_ANY_NODE)
		return 0;
	if (!node_state(nid, N_MEMORY))
		return -ENOMEM;
	place->gfp = __GFP_THISNODE;
	return 0;
}

/* Bytes per node of the region's chunks into bytes[nr_node_ids]. */
static void pinmem_region_nodes(struct pinmem_region *region, u64 *bytes)
{
	unsigned long i = 0;
	int order;

	for (order = PINMEM_CHUNK_ORDER; order >= 0; order--) {
		unsigned long n;

		for (n = 0; n < region->nr_by_order[order]; n++, i++) {
			/* ALLOC_LAZY: populated ones only (POPULATE's release). */
			struct page *chunk = smp_load_acquire(&region->chunks[i]);

			if (chunk)
				bytes[page_to_nid(chunk)] += PAGE_SIZE << order;
		}
	}
}

static int pinmem_nodes(struct pinmem_region *region, struct pinmem_nodes *q,
			void __user *arg)
{
	u32 filled;
	u64 *bytes;
	int ret = 0;

	/* Chunks are only ever added (POPULATE) while it lives: no lock. */
	bytes = kcalloc(nr_node_ids, sizeof(*bytes), GFP_KERNEL_ACCOUNT);
	if (!bytes)
		return -ENOMEM;
	pinmem_region_nodes(region, bytes);
	filled = min_t(u32, q->capacity, nr_node_ids);
	if (copy_to_user(u64_to_user_ptr(q->bytes_ptr), bytes,
			 array_size(filled, sizeof(*bytes))))
		ret = -EFAULT;
	kfree(bytes);
	if (ret)
		return ret;
	q->count = nr_node_ids;
	return copy_to_user(arg, q, sizeof(*q)) ? -EFAULT : 0;
}

/* NODES on the device fd (region NULL: by id) or a region or view fd. */
int pinmem_ioc_nodes(struct pinmem_region *region, void __user *arg)
{
	struct pinmem_nodes q;
	int ret;

	if (copy_from_user(&q, arg, sizeof(q)))
		return -EFAULT;
	if (q.reserved)
		return -EINVAL;
	region = pinmem_region_get_queried(region, q.region_id);
	if (IS_ERR(region))
		return PTR_ERR(region);
	ret = pinmem_nodes(region, &q, arg);
	pinmem_region_put(region);
	return ret;
}
