// SPDX-License-Identifier: MIT
/*
 * libFuzzer target: libpin's JSON reader (pin__json_parse) against
 * jansson (json_loadb with JSON_REJECT_DUPLICATES | JSON_DECODE_ANY) on
 * the same text. Both must agree on accept/reject, except where libpin is
 * stricter on purpose, counted and printed at exit:
 *  - nesting deeper than 64 levels (libpin refuses; jansson allows 2048);
 *  - integers beyond int64 (jansson refuses them; libpin keeps a number's
 *    text and reads u64 exactly, which data_offsets need);
 *  - reals that overflow a double (jansson refuses, libpin keeps the text);
 *  - a NUL byte: jansson stops reading at it and accepts "1\0garbage";
 *    libpin refuses the NUL (a header is exactly its length).
 * Any other disagreement aborts, with the input saved by libFuzzer.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "st/safetensors_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static unsigned long agree, deep, bigint, bigreal, nul;

static void report(void)
{
	fprintf(stderr, "json_diff: agreed %lu; libpin stricter on depth %lu, "
		"on NUL bytes %lu; jansson refused big integers %lu, big reals "
		"%lu\n", agree, deep, nul, bigint, bigreal);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int registered;
	struct pin__jarena a = { 0 };
	struct pin__jval *v;
	json_error_t jerr;
	json_t *j;
	char err[256];
	int pin_ok, jan_ok;

	if (!registered++)
		atexit(report);
	pin_ok = pin__json_parse(&a, (const char *)data, size, " \t\r\n", &v,
				 err, sizeof(err)) == 0;
	pin__json_free(&a);
	j = json_loadb((const char *)data, size,
		       JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &jerr);
	jan_ok = j != NULL;
	json_decref(j);
	if (pin_ok == jan_ok) {
		agree++;
		return 0;
	}
	if (!pin_ok && strstr(err, "deep")) {
		deep++;
		return 0;
	}
	if (!pin_ok && jan_ok && memchr(data, 0, size)) {
		nul++;
		return 0;
	}
	if (pin_ok && (strstr(jerr.text, "too big integer") ||
		       strstr(jerr.text, "too big negative integer"))) {
		bigint++;
		return 0;
	}
	if (pin_ok && strstr(jerr.text, "real number overflow")) {
		bigreal++;
		return 0;
	}
	fprintf(stderr, "json_diff: libpin %s (%s), jansson %s (%s)\n",
		pin_ok ? "accepts" : "refuses", pin_ok ? "" : err,
		jan_ok ? "accepts" : "refuses", jan_ok ? "" : jerr.text);
	abort();
}
