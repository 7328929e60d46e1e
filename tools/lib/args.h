/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Strict numbers from the command line (args.c), for the tools and
 * pinmem-cached: every character checked, the range enforced, and a
 * mistake named on stderr ("pinload: --queue-depth: "abc" is not a number
 * from 1 to 256"). The callers exit ARGS_EXIT_USAGE on an error.
 */
#ifndef PINMEM_TOOLS_ARGS_H
#define PINMEM_TOOLS_ARGS_H

#include <stdint.h>

/*
 * The exit statuses every tool uses (pinctl, pinload, pinbench and
 * pinmem-cached): 0 ok, 1 the operation failed, 2 a usage error, 3 no
 * device where one is needed (/dev/pinmem absent) or no service answers
 * at the cache socket.
 */
#define TOOLS_EXIT_FAILED	1
#define ARGS_EXIT_USAGE		2
#define TOOLS_EXIT_NODEV	3

/* Decimal digits only, min <= value <= max: 0, or -1 after saying why. */
int parse_u64(const char *opt, const char *text, uint64_t min, uint64_t max,
	      uint64_t *out);

/* The same with an optional K, M, G, T or P suffix (powers of 1024). */
int parse_size(const char *opt, const char *text, uint64_t min, uint64_t max,
	       uint64_t *out);

/* A size that is a multiple of unit, from unit to max. */
int parse_size_multiple(const char *opt, const char *text, uint64_t unit,
			uint64_t max, uint64_t *out);

/*
 * Seconds, with up to three decimals ("2", "0.5"), from 0.001 to max:
 * *ms, or -1 after saying why.
 */
int parse_seconds(const char *opt, const char *text, uint64_t max,
		  uint64_t *ms);

/* After getopt has named an unknown option or a missing argument. */
void args_try_help(void);

#endif
