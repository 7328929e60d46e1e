// SPDX-License-Identifier: GPL-2.0
/* pinmem: the trace events of kmod/trace.h, made once here. */
#include <linux/types.h>

#define CREATE_TRACE_POINTS
#include "trace.h"
