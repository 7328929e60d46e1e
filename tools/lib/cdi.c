// SPDX-License-Identifier: GPL-2.0
/*
 * The CDI spec `pinctl cdi generate` writes (cdi.h). The device node's
 * major and minor are left out: the runtime takes them from the host's
 * /dev/pinmem when it starts the container, so the spec stays right when
 * the module is reloaded and its dynamic minor changes. The socket's
 * directory is bound, not the socket: a restart of the service's socket
 * unit makes a new socket there, which a container started earlier then
 * sees. Read-only is enough, connect() on a socket needs no writable mount;
 * and so the directory must be pinmem's own (sockdir.c), or containers
 * could connect to whatever else is in it. Paths go into the JSON escaped.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cdi.h"
#include "json.h"
#include "sockdir.h"

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

int cdi_write(FILE *f, const struct cdi_opts *o)
{
	const char *slash = strrchr(o->socket, '/');
	unsigned int gid = (unsigned int)o->gid;
	char *dir, *env;

	if (sockdir_problem(o->socket, o->service_uid))
		return -EINVAL;
	dir = strndup(o->socket, (size_t)(slash - o->socket));
	if (!dir || asprintf(&env, "PIN_CACHE_SOCKET=%s", o->socket) < 0) {
		free(dir);
		return -ENOMEM;
	}
	fprintf(f, "{\n  \"cdiVersion\": \"%s\",\n  \"kind\": \"%s\",\n",
		o->version == CDI_V070 ? "0.7.0" : "0.5.0", CDI_KIND);
	fprintf(f, "  \"devices\": [\n    {\n      \"name\": \"%s\",\n"
		"      \"containerEdits\": {\n", CDI_DEVICE);
	fprintf(f, "        \"deviceNodes\": [\n          {\"path\": \"%s\", "
		"\"type\": \"c\", \"permissions\": \"rw\", \"fileMode\": %d, "
		"\"uid\": 0, \"gid\": %u}\n        ],\n", CDI_DEVICE_NODE,
		0660, gid);
	fputs("        \"mounts\": [\n          {\"hostPath\": ", f);
	json_str(f, dir);
	fputs(", \"containerPath\": ", f);
	json_str(f, dir);
	fputs(", \"type\": \"bind\", \"options\": [\"bind\", \"ro\", "
	      "\"nosuid\", \"nodev\", \"noexec\"]}\n        ],\n", f);
	fputs("        \"env\": [", f);
	json_str(f, env);
	fputs("]", f);
	free(dir);
	free(env);
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
