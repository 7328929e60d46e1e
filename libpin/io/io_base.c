// SPDX-License-Identifier: MIT
/*
 * What every part of the I/O layer shares, below all of them: the clock
 * the stats and step timelines are measured with, a failure's text (with
 * the errno's words) and the notes on why a transfer fell back from
 * O_DIRECT or registered buffers.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "internal.h"
#include "io_internal.h"

uint64_t pin__now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* Print fmt into buf, then ": " and err's text when err is set; returns err. */
int pin__io_fail(char *buf, size_t len, int err, const char *fmt, ...)
{
	char ebuf[128];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, len, fmt, ap);
	va_end(ap);
	if (n < 0)
		n = 0;
	if (err && (size_t)n < len)
		snprintf(buf + n, len - n, ": %s",
			 pin__strerror(err, ebuf, sizeof(ebuf)));
	return err;
}

/* Append a reason to st->fallback_reason ("; " between reasons). */
void pin__io_note_fallback(struct pin__io_stats *st, const char *fmt, ...)
{
	size_t n = strlen(st->fallback_reason);
	va_list ap;

	if (n && n + 2 < sizeof(st->fallback_reason)) {
		memcpy(st->fallback_reason + n, "; ", 3);
		n += 2;
	}
	va_start(ap, fmt);
	vsnprintf(st->fallback_reason + n, sizeof(st->fallback_reason) - n,
		  fmt, ap);
	va_end(ap);
}
