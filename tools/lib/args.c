// SPDX-License-Identifier: GPL-2.0
/*
 * Strict numbers from the command line. atoi() and a bare strtoul() take
 * "abc" as 0 and "16x" as 16, so a mistyped option ran with some other
 * value in silence; here anything but digits (and, for sizes, one suffix)
 * is refused, as is a value out of the option's range, with the option,
 * the text and the range in the message.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "lib/args.h"

static const char suffixes[] = "KMGTP";

/* A bound as the user would write it: 4K, 64M, 1P, or plain digits. */
static void size_words(uint64_t v, char *buf, size_t len)
{
	int i = -1;

	while (v && !(v & 1023) && suffixes[i + 1]) {
		v >>= 10;
		i++;
	}
	if (i < 0)
		snprintf(buf, len, "%llu", (unsigned long long)v);
	else
		snprintf(buf, len, "%llu%c", (unsigned long long)v, suffixes[i]);
}

static int refuse(const char *opt, const char *text, const char *what,
		  uint64_t min, uint64_t max, int sizes)
{
	char lo[32], hi[32];

	if (sizes) {
		size_words(min, lo, sizeof(lo));
		size_words(max, hi, sizeof(hi));
	} else {
		snprintf(lo, sizeof(lo), "%llu", (unsigned long long)min);
		snprintf(hi, sizeof(hi), "%llu", (unsigned long long)max);
	}
	fprintf(stderr, "%s: %s: \"%s\" is not %s from %s to %s\n",
		program_invocation_short_name, opt, text, what, lo, hi);
	return -1;
}

/* The digits at *s, advancing it: 0, or -1 on none or on overflow. */
static int digits(const char **s, uint64_t *v)
{
	const char *p = *s;
	unsigned long long n;
	char *end;

	if (*p < '0' || *p > '9')
		return -1;
	errno = 0;
	n = strtoull(p, &end, 10);
	if (errno)
		return -1;
	*s = end;
	*v = n;
	return 0;
}

int parse_u64(const char *opt, const char *text, uint64_t min, uint64_t max,
	      uint64_t *out)
{
	const char *p = text;
	uint64_t v;

	if (digits(&p, &v) || *p || v < min || v > max)
		return refuse(opt, text, "a number", min, max, 0);
	*out = v;
	return 0;
}

int parse_size(const char *opt, const char *text, uint64_t min, uint64_t max,
	       uint64_t *out)
{
	const char *p = text;
	unsigned shift = 0;
	uint64_t v;
	int i;

	if (digits(&p, &v))
		return refuse(opt, text, "a size", min, max, 1);
	for (i = 0; *p && suffixes[i]; i++)
		if ((*p | 0x20) == (suffixes[i] | 0x20)) {
			shift = 10 * (unsigned)(i + 1);
			p++;
			break;
		}
	if (*p || v > (UINT64_MAX >> shift))
		return refuse(opt, text, "a size", min, max, 1);
	v <<= shift;
	if (v < min || v > max)
		return refuse(opt, text, "a size", min, max, 1);
	*out = v;
	return 0;
}

int parse_size_multiple(const char *opt, const char *text, uint64_t unit,
			uint64_t max, uint64_t *out)
{
	char what[48];
	uint64_t v;

	if (parse_size(opt, text, unit, max, &v))
		return -1;
	if (v % unit) {
		size_words(unit, what, sizeof(what));
		fprintf(stderr, "%s: %s: \"%s\" is not a multiple of %s\n",
			program_invocation_short_name, opt, text, what);
		return -1;
	}
	*out = v;
	return 0;
}

void args_try_help(void)
{
	fprintf(stderr, "Try '%s --help' for the options.\n",
		program_invocation_short_name);
}

int parse_seconds(const char *opt, const char *text, uint64_t max,
		  uint64_t *ms)
{
	const char *p = text;
	uint64_t v = 0, scale = 1000;

	if (*p != '.' && (digits(&p, &v) || v > max))
		goto bad;
	v *= 1000;
	if (*p == '.')
		for (p++; *p >= '0' && *p <= '9' && scale > 1; p++)
			v += (uint64_t)(*p - '0') * (scale /= 10);
	if (*p || p[-1] == '.' || v == 0 || v > max * 1000)
		goto bad;
	*ms = v;
	return 0;
bad:
	fprintf(stderr, "%s: %s: \"%s\" is not a number of seconds from 0.001 to %llu\n",
		program_invocation_short_name, opt, text,
		(unsigned long long)max);
	return -1;
}
