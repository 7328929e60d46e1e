/* SPDX-License-Identifier: GPL-2.0 */
/* CPU time for the tools' reports (cpu.c). */
#ifndef PINMEM_TOOLS_CPU_H
#define PINMEM_TOOLS_CPU_H

#include <sys/resource.h>

/* User + system seconds of RUSAGE_SELF or RUSAGE_CHILDREN. */
double cpu_seconds(int who);

#endif
