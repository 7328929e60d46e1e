// SPDX-License-Identifier: GPL-2.0
/*
 * pinmem-cached's listening sockets: those systemd passes (socket
 * activation: LISTEN_PID, LISTEN_FDS, fds from 3 on), or one bound here.
 * Entries' fds handed back by the service manager's fd store are fdstore.c's.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "service.h"

#define LISTEN_FDS_START	3

/*
 * The sockets systemd passed, if they are for this process; the variables
 * are removed so that children do not take them for theirs. The fds of
 * the service manager's fd store come in the same variables: those, named
 * as fdstore.c names them, are left to it. Returns how many sockets (0:
 * not socket-activated), or -EINVAL for sockets that are not listening
 * SOCK_SEQPACKET ones.
 */
int listen_fds_from_systemd(int *fds, int max)
{
	const char *pid = getenv("LISTEN_PID"), *nfd = getenv("LISTEN_FDS");
	const char *names = getenv("LISTEN_FDNAMES");
	long n;
	int k = 0;

	if (!pid || !nfd || strtol(pid, NULL, 10) != (long)getpid())
		return 0;
	n = strtol(nfd, NULL, 10);
	if (n <= 0)
		return -EINVAL;
	for (int i = 0; i < n; i++) {
		int fd = LISTEN_FDS_START + i, type = 0, acc = 0;
		size_t len = names ? strcspn(names, ":") : 0;
		socklen_t l = sizeof(type);
		int ours = names && fdstore_name_ours(names, len);

		if (names)
			names = names[len] ? names + len + 1 : NULL;
		if (ours)
			continue;
		if (k == max ||
		    getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &l) ||
		    type != SOCK_SEQPACKET)
			return -EINVAL;
		l = sizeof(acc);
		if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &acc, &l) || !acc)
			return -EINVAL;
		fcntl(fd, F_SETFD, FD_CLOEXEC);
		fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
		fds[k++] = fd;
	}
	unsetenv("LISTEN_PID");
	unsetenv("LISTEN_FDS");
	unsetenv("LISTEN_FDNAMES");
	return k;
}

/*
 * Whether a service already answers at path: a socket file there that
 * refuses connections is a dead one's, and may be replaced.
 */
static int someone_listens(const struct sockaddr_un *sa)
{
	int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0), ret;

	if (s < 0)
		return 0;
	ret = connect(s, (const struct sockaddr *)sa, sizeof(*sa)) == 0;
	close(s);
	return ret;
}

/*
 * Bind and listen at path (mode 0660: the owner's group may connect);
 * *bound: the socket file's identity, for listen_path_remove.
 */
int listen_on_path(const char *path, struct stat *bound)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int s, ret;

	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	strcpy(sa.sun_path, path);
	if (someone_listens(&sa))
		return -EADDRINUSE;
	unlink(path);
	s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (s < 0)
		return -errno;
	if (bind(s, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    chmod(path, 0660) < 0 || stat(path, bound) < 0 ||
	    listen(s, 1024) < 0) {
		ret = -errno;
		close(s);
		return ret;
	}
	return s;
}

/*
 * At exit, remove the socket file listen_on_path made, so that clients
 * say "no service" rather than "connection refused"; a file another
 * instance has bound there since stays. 0 when removed.
 */
int listen_path_remove(const char *path, const struct stat *bound)
{
	struct stat now;

	if (stat(path, &now) || now.st_dev != bound->st_dev ||
	    now.st_ino != bound->st_ino)
		return -ENOENT;
	return unlink(path) ? -errno : 0;
}
