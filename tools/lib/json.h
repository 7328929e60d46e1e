/* SPDX-License-Identifier: GPL-2.0 */
/* A string as JSON, for the tools' --json output (json.c). */
#ifndef PINMEM_TOOLS_JSON_H
#define PINMEM_TOOLS_JSON_H

#include <stdio.h>

void json_str(FILE *f, const char *s);

#endif
