// SPDX-License-Identifier: GPL-2.0
/*
 * A string as JSON, for the tools' --json output: quotes, backslashes and
 * control bytes escaped; other bytes as they are (paths and task names are
 * UTF-8 in practice).
 */
#include <stdio.h>

#include "json.h"

void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; s && *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20 || c == 0x7f)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}
