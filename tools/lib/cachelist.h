/* SPDX-License-Identifier: GPL-2.0 */
/*
 * pinmem-cached's LIST table (service/list.c writes it) read back as JSON
 * fields, for pinctl --json cache (cachelist.c).
 */
#ifndef PINMEM_TOOLS_CACHELIST_H
#define PINMEM_TOOLS_CACHELIST_H

#include <stdio.h>

void cache_list_json(FILE *f, const char *table);

#endif
