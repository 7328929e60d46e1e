/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A Container Device Interface spec for /dev/pinmem and the cache
 * service's socket (cdi.c), as `pinctl cdi generate` writes it: the device
 * pinmem.dev/memory=all, whose container edits add the device node (owner
 * root, group pinmem, 0660, as udev makes it on the host), the socket's
 * directory (pinmem's own: sockdir.h) as a read-only bind mount, and
 * PIN_CACHE_SOCKET.
 */
#ifndef PINMEM_TOOLS_CDI_H
#define PINMEM_TOOLS_CDI_H

#include <stdio.h>
#include <sys/types.h>

#define CDI_KIND	"pinmem.dev/memory"
#define CDI_DEVICE	"all"
#define CDI_DEVICE_NODE	"/dev/pinmem"

/*
 * CDI_V050: cdiVersion 0.5.0, read by every runtime with CDI (Debian 12's
 * podman 4.3, built with the CDI library 0.5.2, refuses a newer version and
 * any field it does not know). CDI_V070: 0.7.0, which adds additionalGids
 * (the group joined by the container's process, so that a non-root
 * container user may open the node and connect to the socket).
 */
enum cdi_version { CDI_V050, CDI_V070 };

struct cdi_opts {
	enum cdi_version version;
	gid_t gid;		/* of group pinmem */
	const char *socket;	/* the cache socket, same path in the container */
	uid_t service_uid;	/* pinmem-cached's, who may own its directory */
};

/* "0.5.0" or "0.7.0" -> *v: 0, or -1 for any other text. */
int cdi_parse_version(const char *text, enum cdi_version *v);

/* The spec as JSON (which is also YAML) on f: 0, or -EINVAL for a socket
 * whose directory may not be bound into containers (sockdir_problem). */
int cdi_write(FILE *f, const struct cdi_opts *o);

/*
 * The spec into path, replaced whole (a temporary file beside it, then
 * rename), mode 0644, its directory made (0755) if missing; "-": stdout.
 * 0, or a negative errno (the words on stderr, after "pinctl: cdi: ").
 */
int cdi_generate(const char *path, const struct cdi_opts *o);

#endif
