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

#include "pinmem.h"

/*
 * ALLOC's chunks from the NUMA node asked for (any: only preferred). A
 * node that is no node of this system, or outside the caller's cpuset, is
 * EINVAL; one without memory is ENOMEM, like any node that cannot give the
 * pages: the request is valid, the memory is not there.
 */
int pinmem_place_on_node(struct pinmem_place *place, int node, bool any)
{
	int nid;

	if (node < 0 || node >= nr_node_ids)
		return -EINVAL;
	nid = array_index_nospec(node, nr_node_ids);
	if (!node_online(nid))
		return -EINVAL;
	/* As set_mempolicy(2): a node with memory outside the cpuset. */
	if (node_state(nid, N_MEMORY) &&
	    !node_isset(nid, cpuset_current_mems_allowed))
		return -EINVAL;
	place->nid = nid;
	place->gfp = 0;
	if (any)
		return 0;
	if (!node_state(nid, N_MEMORY))
		return -ENOMEM;
	place->gfp = __GFP_THISNODE;
	return 0;
}

/*
 * Bytes per node of the region's chunks into bytes[nr_node_ids], zeroed
 * by the caller. Chunks are only ever added (POPULATE, FILL) while the
 * region lives: no lock.
 */
void pinmem_region_nodes(struct pinmem_region *region, u64 *bytes)
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
