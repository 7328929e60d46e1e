// SPDX-License-Identifier: GPL-2.0
/*
 * pinmem: the module's limits (its parameters) and what all regions hold
 * against them. Device-wide state, below every other file: it calls none.
 */
#include <linux/moduleparam.h>
#include <linux/sizes.h>

#include "pinmem.h"

struct pinmem_totals pinmem_totals;

unsigned long long pinmem_max_total_bytes;
module_param_named(max_total_bytes, pinmem_max_total_bytes, ullong, 0644);
MODULE_PARM_DESC(max_total_bytes,
		 "Bytes all regions may hold together (0: no module limit)");

unsigned long long pinmem_max_region_bytes = 64ULL * SZ_1G;
module_param_named(max_region_bytes, pinmem_max_region_bytes, ullong, 0644);
MODULE_PARM_DESC(max_region_bytes, "Largest region, in bytes");
