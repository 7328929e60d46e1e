/* SPDX-License-Identifier: GPL-2.0 */
/* Which pages a loaded region got, for the tools' reports (pages.c). */
#ifndef PINMEM_TOOLS_PAGES_H
#define PINMEM_TOOLS_PAGES_H

#include <pin.h>

/* kB of the smaps entry starting at addr mapped by huge PMDs, or -1. */
long long pmd_mapped_kb(const void *addr);

/* "device", "hugetlb", "thp", "4k" or "unknown": r, of backend. */
const char *page_kind(int backend, struct pin_region *r);

#endif
