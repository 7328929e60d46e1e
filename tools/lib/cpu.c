// SPDX-License-Identifier: GPL-2.0
/*
 * CPU time for the tools' reports: user + system seconds of every thread of
 * this process (RUSAGE_SELF) or of its waited-for children (RUSAGE_CHILDREN).
 */
#include <sys/resource.h>

#include "cpu.h"

double cpu_seconds(int who)
{
	struct rusage ru;

	if (getrusage(who, &ru) < 0)
		return 0;
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
	       (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}
