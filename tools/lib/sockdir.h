/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Whether the cache socket's directory may be handed to containers
 * (sockdir.c): the CDI spec binds that directory, whole, into every
 * container given the device, so it must be one of pinmem's own, never a
 * directory other programs share (a socket in /run would hand them the
 * host's containerd.sock).
 */
#ifndef PINMEM_TOOLS_SOCKDIR_H
#define PINMEM_TOOLS_SOCKDIR_H

#include <sys/types.h>

/* The directory to use instead: the default socket's. */
#define SOCKDIR_DEFAULT	"/run/pinmem"

/*
 * NULL when socket may be named in a spec, else why not, in words (a
 * phrase, static). The path: absolute, UTF-8 without control characters,
 * canonical (no empty, "." or ".." component), at most 107 bytes (a
 * socket address). Its directory: none of the directories other programs
 * share (/, /run, /tmp, /dev, /home, /etc ...) nor below /proc, /sys or
 * /dev; and when it exists, reached without a symbolic link, a directory
 * owned by root or by service_uid, writable by its owner alone, holding
 * nothing but the socket (a socket, when it exists).
 */
const char *sockdir_problem(const char *socket, uid_t service_uid);

#endif
