/* SPDX-License-Identifier: GPL-2.0 */
/*
 * pinctl cache load|pin|unpin FILE and pinctl cache warm (keep.c): files
 * opened here, with the caller's own permissions, and passed to
 * pinmem-cached, which opens no path itself.
 */
#ifndef PINMEM_TOOLS_KEEP_H
#define PINMEM_TOOLS_KEEP_H

/* The default warm list, as pinmem-cached's --config. */
#define KEEP_CONFIG_DEFAULT	"/etc/pinmem/cached.conf"

/* Whether word is one of the cache command's subcommands. */
int keep_is_subcommand(const char *word);
/*
 * Run "cache WORD ARGS": argv holds what follows WORD; sock: a --socket
 * given before it, or NULL. Returns the exit status.
 */
int keep_main(const char *word, int argc, char **argv, const char *sock);

#endif
