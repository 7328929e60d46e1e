// SPDX-License-Identifier: GPL-2.0
/*
 * Tenants: who a client is, for fairness. A member (member.c) is one
 * tenant: its share of the budget, its connections and loads, its fd
 * thread. What a tenant is depends on where the service runs
 * (pinmem-cached --tenant):
 *
 *   uid     the client's uid (SO_PEERCRED): a plain host's users;
 *   cgroup  the client's cgroup v2 path, as /proc/PID/cgroup shows it;
 *   pod     that path cut after its Kubernetes pod cgroup, so that a
 *           pod's containers (and cgroups made below them) are one
 *           tenant; a path with no pod cgroup is taken whole.
 *
 * A tenant's key is a string: "uid N", or the path. A client whose
 * cgroup cannot be read has no tenant and is refused: it must never
 * fall into another's, or into one key shared by everybody.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "service.h"

#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD	77	/* Linux 6.5 */
#endif

int tenant_kind_parse(const char *s)
{
	return !strcmp(s, "uid") ? TENANT_UID :
	       !strcmp(s, "cgroup") ? TENANT_CGROUP :
	       !strcmp(s, "pod") ? TENANT_POD : -1;
}

/* A pod's uid as the kubelet writes it: hex digits, '-' or '_'. */
static int pod_uid(const char *s, size_t n)
{
	if (!n)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!strchr("0123456789abcdefABCDEF-_", s[i]))
			return 0;
	return 1;
}

/*
 * A pod's cgroup, as the kubelet names it: pod<uid> under the cgroupfs
 * driver, kubepods[-<qos>]-pod<uid>.slice under the systemd driver.
 */
static int pod_component(const char *c, size_t n)
{
	static const char slice[] = ".slice";
	const char *p;
	size_t sl = sizeof(slice) - 1;

	if (n > 3 && !memcmp(c, "pod", 3))
		return pod_uid(c + 3, n - 3);
	if (n <= 9 + sl || memcmp(c, "kubepods-", 9) ||
	    memcmp(c + n - sl, slice, sl))
		return 0;
	/* The last "-pod" before ".slice": the qos part has none. */
	for (p = c + n - sl; p > c + 8; p--)
		if (!memcmp(p - 4, "-pod", 4))
			return pod_uid(p, (size_t)(c + n - sl - p));
	return 0;
}

/* Cut path after its first pod cgroup; 1 when cut there, 0 when none. */
int tenant_pod_cut(char *path)
{
	char *c = path;

	while (*c) {
		char *end;

		while (*c == '/')
			c++;
		end = strchrnul(c, '/');
		if (pod_component(c, (size_t)(end - c))) {
			*end = '\0';
			return 1;
		}
		c = end;
	}
	return 0;
}

/* /proc/PID/WHAT's first len - 1 bytes into buf, NUL-terminated. */
static int read_proc(pid_t pid, const char *what, char *buf, size_t len)
{
	char name[64];
	ssize_t n;
	int fd;

	snprintf(name, sizeof(name), "/proc/%d/%s", (int)pid, what);
	fd = open(name, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n < 0)
		return -errno;
	buf[n] = '\0';
	return 0;
}

/* The cgroup v2 path of pid ("0::PATH" in /proc/PID/cgroup). */
static int cgroup_of(pid_t pid, char *out, size_t len)
{
	char buf[4096];
	char *p, *nl;
	int ret = read_proc(pid, "cgroup", buf, sizeof(buf));

	if (ret)
		return ret;
	p = !strncmp(buf, "0::", 3) ? buf : strstr(buf, "\n0::");
	if (!p)
		return -ENOENT;		/* not in a cgroup v2 hierarchy */
	p += p == buf ? 3 : 4;
	nl = strchrnul(p, '\n');
	if (*p != '/' || (size_t)(nl - p) >= len)
		return -ENAMETOOLONG;
	memcpy(out, p, (size_t)(nl - p));
	out[nl - p] = '\0';
	return 0;
}

/*
 * The tenant of the process pid (of uid): its key in out. For cgroup and
 * pod, pid must be one the service can see (0: another pid namespace's).
 * Reads /proc, which takes the kernel's cgroup lock, held by no client.
 */
int tenant_of(enum tenant_kind kind, pid_t pid, uid_t uid, char *out,
	      size_t len)
{
	int ret;

	if (kind == TENANT_UID) {
		snprintf(out, len, "uid %u", (unsigned)uid);
		return 0;
	}
	if (pid <= 0)
		return -ESRCH;
	ret = cgroup_of(pid, out, len);
	if (!ret && kind == TENANT_POD)
		tenant_pod_cut(out);
	return ret;
}

/*
 * The tenant of the client on the socket fd, whose SO_PEERCRED is cr.
 * The pid may have been reused if the connecting process is gone: where
 * the kernel gives a pidfd of it (SO_PEERPIDFD), the cgroup read counts
 * only if that process still exists once it is read. Older kernels have
 * no such check (Documentation/cache.md, "Tenants").
 */
int tenant_of_peer(enum tenant_kind kind, int fd, const struct ucred *cr,
		   char *out, size_t len)
{
	socklen_t pl = sizeof(int);
	int pidfd = -1, ret;

	if (kind == TENANT_UID)
		return tenant_of(kind, cr->pid, cr->uid, out, len);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERPIDFD, &pidfd, &pl)) {
		if (errno != ENOPROTOOPT)
			return -errno;	/* ESRCH: the process is gone */
		pidfd = -1;
	}
	ret = tenant_of(kind, cr->pid, cr->uid, out, len);
	if (pidfd >= 0) {
		/* EPERM (another user's) still says it exists. */
		if (!ret && syscall(SYS_pidfd_send_signal, pidfd, 0, NULL, 0) &&
		    errno == ESRCH)
			ret = -ESRCH;
		close(pidfd);
	}
	return ret;
}

/* The uid a process runs as (effective), for a holder's tenant. */
int tenant_uid_of(pid_t pid, uid_t *uid)
{
	char buf[1024], *p;
	unsigned r, e;
	int ret = read_proc(pid, "status", buf, sizeof(buf));

	if (ret)
		return ret;
	p = strstr(buf, "\nUid:");
	if (!p || sscanf(p + 5, "%u %u", &r, &e) != 2)
		return -ENOENT;
	*uid = (uid_t)e;
	return 0;
}

/* Whether tenants of kind can be told here: cgroup v2 holds processes. */
int tenant_kind_usable(enum tenant_kind kind, char *why, size_t len)
{
	char path[TENANT_LEN];
	int ret;

	if (kind == TENANT_UID)
		return 0;
	ret = cgroup_of(getpid(), path, sizeof(path));
	if (ret)
		snprintf(why, len, "--tenant %s needs the unified cgroup hierarchy (cgroup v2), and /proc/self/cgroup has no \"0::\" line: use --tenant uid",
			 kind == TENANT_POD ? "pod" : "cgroup");
	return ret;
}
