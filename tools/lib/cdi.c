// SPDX-License-Identifier: GPL-2.0
/*
 * The CDI spec `pinctl cdi generate` writes (cdi.h). The device node's
 * major and minor are left out: the runtime takes them from the host's
 * /dev/pinmem when it starts the container, so the spec stays right when
 * the module is reloaded and its dynamic minor changes. The socket's
 * directory is bound, not the socket: a restart of the service's socket
 * unit makes a new socket there, which a container started earlier then
 * sees. Read-only is enough, connect() on a socket needs no writable mount.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cdi.h"

int cdi_parse_version(const char *text, enum cdi_version *v)
{
	if (!strcmp(text, "0.5.0"))
		*v = CDI_V050;
	else if (!strcmp(text, "0.7.0"))
		*v = CDI_V070;
	else
		return -1;
	return 0;
}

/* A path printed between quotes as it is: nothing JSON escapes. */
static int plain_path(const char *s)
{
	if (s[0] != '/')
		return 0;
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == '"' || *s == '\\' ||
		    *s == 0x7f)
			return 0;
	return 1;
}

int cdi_socket_ok(const char *socket)
{
	const char *slash = strrchr(socket, '/');

	return plain_path(socket) && slash != socket && slash[1];
}

int cdi_write(FILE *f, const struct cdi_opts *o)
{
	const char *slash = strrchr(o->socket, '/');
	int dirlen = slash ? (int)(slash - o->socket) : 0;
	unsigned int gid = (unsigned int)o->gid;

	if (!cdi_socket_ok(o->socket))
		return -EINVAL;
	fprintf(f, "{\n  \"cdiVersion\": \"%s\",\n  \"kind\": \"%s\",\n",
		o->version == CDI_V070 ? "0.7.0" : "0.5.0", CDI_KIND);
	fprintf(f, "  \"devices\": [\n    {\n      \"name\": \"%s\",\n"
		"      \"containerEdits\": {\n", CDI_DEVICE);
	fprintf(f, "        \"deviceNodes\": [\n          {\"path\": \"%s\", "
		"\"type\": \"c\", \"permissions\": \"rw\", \"fileMode\": %d, "
		"\"uid\": 0, \"gid\": %u}\n        ],\n", CDI_DEVICE_NODE,
		0660, gid);
	fprintf(f, "        \"mounts\": [\n          {\"hostPath\": \"%.*s\", "
		"\"containerPath\": \"%.*s\", \"type\": \"bind\", \"options\": "
		"[\"bind\", \"ro\", \"nosuid\", \"nodev\", \"noexec\"]}\n"
		"        ],\n", dirlen, o->socket, dirlen, o->socket);
	fprintf(f, "        \"env\": [\"PIN_CACHE_SOCKET=%s\"]", o->socket);
	if (o->version == CDI_V070)
		fprintf(f, ",\n        \"additionalGids\": [%u]", gid);
	fputs("\n      }\n    }\n  ]\n}\n", f);
	return ferror(f) ? -EIO : 0;
}

static int make_parent(const char *path)
{
	char *dir = strdup(path), *slash;
	int ret = 0;

	if (!dir)
		return -ENOMEM;
	slash = strrchr(dir, '/');
	if (slash && slash != dir) {
		*slash = 0;
		if (mkdir(dir, 0755) && errno != EEXIST)
			ret = -errno;
	}
	free(dir);
	return ret;
}

int cdi_generate(const char *path, const struct cdi_opts *o)
{
	char tmp[4096];
	FILE *f;
	int ret;

	if (!strcmp(path, "-")) {
		ret = cdi_write(stdout, o);
		return ret ? ret : fflush(stdout) ? -errno : 0;
	}
	if (snprintf(tmp, sizeof(tmp), "%s.tmp%ld", path, (long)getpid()) >=
	    (int)sizeof(tmp))
		return -ENAMETOOLONG;
	ret = make_parent(path);
	f = ret ? NULL : fopen(tmp, "wx");
	if (!f) {
		ret = ret ? ret : -errno;
		fprintf(stderr, "pinctl: cdi: %s: %s\n", path, strerror(-ret));
		return ret;
	}
	ret = cdi_write(f, o);
	if (!ret && fchmod(fileno(f), 0644))
		ret = -errno;
	if (fclose(f) && !ret)
		ret = -errno;
	if (!ret && rename(tmp, path))
		ret = -errno;
	if (ret) {
		unlink(tmp);
		fprintf(stderr, "pinctl: cdi: %s: %s\n", path, strerror(-ret));
	}
	return ret;
}
