// SPDX-License-Identifier: GPL-2.0
/*
 * The cache socket's directory, checked before a CDI spec binds it into
 * containers (sockdir.h). A read-only bind does not stop connect(), so
 * every socket in the directory is reachable from every container given
 * the device: the directory must hold the cache socket and nothing else.
 * A directory that does not exist yet (the socket unit makes it when it
 * starts) can only be judged by its path.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "sockdir.h"

/* Directories other programs put their own files and sockets in. */
static const char *const shared_dirs[] = {
	"/", "/bin", "/boot", "/etc", "/home", "/lib", "/lib64", "/media",
	"/mnt", "/opt", "/root", "/run", "/run/lock", "/run/user", "/sbin",
	"/srv", "/tmp", "/usr", "/usr/lib", "/usr/local", "/var", "/var/lib",
	"/var/lock", "/var/run", "/var/tmp",
};

/* Trees that are the kernel's: nothing of pinmem's lies there. */
static const char *const kernel_trees[] = { "/dev", "/proc", "/sys" };

/* Length of the UTF-8 sequence at s (1-4), or 0 if it is not one. */
static int utf8_len(const unsigned char *s)
{
	unsigned int c = s[0], n, i, min;
	unsigned long cp;

	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		n = 2, min = 0x80, cp = c & 0x1f;
	else if (c >= 0xe0 && c <= 0xef)
		n = 3, min = 0x800, cp = c & 0x0f;
	else if (c >= 0xf0 && c <= 0xf4)
		n = 4, min = 0x10000, cp = c & 0x07;
	else
		return 0;
	for (i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return (int)n;
}

/* UTF-8 text without control characters. */
static int text_ok(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	int n;

	while (*p) {
		if (*p < 0x20 || *p == 0x7f)
			return 0;
		n = utf8_len(p);
		if (!n)
			return 0;
		p += n;
	}
	return 1;
}

/* No empty, "." or ".." component (no "//", no trailing "/"). */
static int canonical(const char *path)
{
	const char *c = path + 1, *end;
	size_t n;

	for (;;) {
		end = strchrnul(c, '/');
		n = (size_t)(end - c);
		if (!n || (n == 1 && c[0] == '.') ||
		    (n == 2 && c[0] == '.' && c[1] == '.'))
			return 0;
		if (!*end)
			return 1;
		c = end + 1;
	}
}

static int shared(const char *dir)
{
	size_t i, n;

	for (i = 0; i < sizeof(shared_dirs) / sizeof(*shared_dirs); i++)
		if (!strcmp(dir, shared_dirs[i]))
			return 1;
	for (i = 0; i < sizeof(kernel_trees) / sizeof(*kernel_trees); i++) {
		n = strlen(kernel_trees[i]);
		if (!strncmp(dir, kernel_trees[i], n) &&
		    (!dir[n] || dir[n] == '/'))
			return 1;
	}
	return 0;
}

/* Whether dir holds anything but name (which, if there, is a socket). */
static const char *contents_problem(const char *dir, const char *name)
{
	const char *why = NULL;
	struct dirent *e;
	struct stat st;
	DIR *d = opendir(dir);

	if (!d)
		return "its directory cannot be read";
	while (!why && (e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (strcmp(e->d_name, name))
			why = "its directory holds other files than the socket";
		else if (fstatat(dirfd(d), name, &st, AT_SYMLINK_NOFOLLOW) ||
			 !S_ISSOCK(st.st_mode))
			why = "it exists and is not a socket";
	}
	closedir(d);
	return why;
}

/* The directory as it is now, when it exists. */
static const char *existing_problem(const char *dir, const char *name,
				    uid_t service_uid)
{
	char real[PATH_MAX];
	struct stat st;

	if (lstat(dir, &st))
		return errno == ENOENT ? NULL : "its directory cannot be looked at";
	if (!realpath(dir, real) || strcmp(real, dir))
		return "its directory is reached through a symbolic link";
	if (!S_ISDIR(st.st_mode))
		return "its directory is not a directory";
	if (st.st_uid != 0 && st.st_uid != service_uid)
		return "its directory is owned by another user than root or pinmem-cached";
	if (st.st_mode & (S_IWGRP | S_IWOTH))
		return "its directory is writable by others than its owner";
	return contents_problem(dir, name);
}

const char *sockdir_problem(const char *socket, uid_t service_uid)
{
	const char *slash = strrchr(socket, '/');
	const char *why;
	char *dir;

	if (socket[0] != '/')
		return "not an absolute path";
	if (!text_ok(socket))
		return "not UTF-8 text without control characters";
	if (!canonical(socket))
		return "not canonical (an empty, \".\" or \"..\" component)";
	if (strlen(socket) > 107)
		return "longer than a socket's address (107 bytes)";
	dir = strndup(socket, slash == socket ? 1 : (size_t)(slash - socket));
	if (!dir)
		return "out of memory";
	if (shared(dir))
		why = "its directory is shared with other programs";
	else
		why = existing_problem(dir, slash + 1, service_uid);
	free(dir);
	return why;
}
