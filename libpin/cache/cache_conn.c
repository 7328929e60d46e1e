// SPDX-License-Identifier: MIT
/*
 * A client's exchange with pinmem-cached under a deadline (cache_conn.h).
 *
 * Connect: an AF_UNIX connect waits only while the listener's backlog is
 * full, and a non-blocking one then fails at once with EAGAIN, never
 * EINPROGRESS, so there is nothing to poll for. The connect therefore
 * blocks with SO_SNDTIMEO as its deadline: the kernel wakes it when the
 * service accepts a connection and fails it with EAGAIN when the time is
 * up. The send keeps that deadline. Receive: poll with the time left; a
 * WAIT (the service is working on it) restarts the deadline.
 */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "cache_conn.h"

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* "2", "0.5", "1.25": seconds as ms; -1 unless a number > 0 that fits. */
static int parse_seconds(const char *s)
{
	long long ms = 0;
	int digits = 0, scale = 1000;

	for (; *s >= '0' && *s <= '9'; s++, digits++)
		if ((ms = ms * 10 + (*s - '0')) > INT_MAX / 1000)
			return -1;
	ms *= 1000;
	if (*s == '.')
		for (s++; *s >= '0' && *s <= '9'; s++, digits++)
			ms += (*s - '0') * (scale /= 10);
	return *s || !digits || ms <= 0 ? -1 : (int)ms;
}

int cache_timeout_ms(int opt_ms)
{
	const char *env = getenv("PIN_CACHE_TIMEOUT");
	int ms;

	if (opt_ms > 0)
		return opt_ms;
	ms = env ? parse_seconds(env) : -1;
	return ms > 0 ? ms : CACHE_TIMEOUT_MS;
}

/* SO_SNDTIMEO to the deadline: -ETIMEDOUT when it has passed. */
static int send_deadline(int s, int64_t deadline)
{
	int64_t left = deadline - now_ms();
	struct timeval tv;

	if (left <= 0)
		return -ETIMEDOUT;
	tv.tv_sec = (time_t)(left / 1000);
	tv.tv_usec = (suseconds_t)(left % 1000 * 1000);
	if (setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)))
		return -errno;
	return 0;
}

/* A connected socket, or -errno (-ETIMEDOUT: the backlog stayed full). */
static int conn_open(const char *path, int64_t deadline)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int s, ret;

	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	strcpy(sa.sun_path, path);
	s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -errno;
	do {
		ret = send_deadline(s, deadline);
		if (ret)
			break;
		if (connect(s, (struct sockaddr *)&sa, sizeof(sa)) == 0)
			return s;
		ret = errno == EAGAIN ? -ETIMEDOUT : -errno;
	} while (ret == -EINTR);
	close(s);
	return ret;
}

/* Wait until s is readable: 0, or -ETIMEDOUT at the deadline. */
static int wait_readable(int s, int64_t deadline)
{
	struct pollfd p = { .fd = s, .events = POLLIN };
	int64_t left;
	int n;

	for (;;) {
		left = deadline - now_ms();
		if (left <= 0)
			return -ETIMEDOUT;
		n = poll(&p, 1, left > INT_MAX ? INT_MAX : (int)left);
		if (n > 0)
			return 0;
		if (n < 0 && errno != EINTR)
			return -errno;
	}
}

/* How long to wait after a WAIT: the deadline, or twice its interval. */
static int64_t wait_after(const struct cache_call *k)
{
	int64_t beat = 2 * (int64_t)k->msg.u.wait.interval_ms;

	if (beat > CACHE_WAIT_MAX_MS)
		beat = CACHE_WAIT_MAX_MS;
	return beat > k->timeout_ms ? beat : k->timeout_ms;
}

/* The reply, read past any WAIT, each of which restarts the deadline. */
static int conn_recv(int s, struct cache_call *k, int64_t deadline)
{
	const char *why = NULL;
	size_t len;
	int ret;

	for (;;) {
		ret = wait_readable(s, deadline);
		if (ret)
			return ret;
		ret = cache_msg_recv(s, k->rep, CACHE_MAX_REPLY, &len,
				     &k->rep_fd, MSG_DONTWAIT, NULL);
		if (ret == -EAGAIN)
			continue;
		if (ret)
			return ret;
		ret = cache_proto_decode(k->rep, len, k->rep_fd >= 0, &k->msg,
					 &why);
		if (ret || k->msg.type != CACHE_REP_WAIT)
			return ret;
		deadline = now_ms() + wait_after(k);
	}
}

int cache_call(const char *path, struct cache_call *k)
{
	uint8_t req[CACHE_MAX_REQUEST];
	int64_t deadline = now_ms() + k->timeout_ms;
	int s, n, ret;

	k->rep_fd = -1;
	k->sock = -1;
	k->connected = 0;
	memset(&k->msg, 0, sizeof(k->msg));
	n = cache_proto_encode(req, sizeof(req), k->type, k->payload,
			       k->payload_len);
	if (n < 0)
		return n;
	if (!k->rep && !(k->rep = malloc(CACHE_MAX_REPLY)))
		return -ENOMEM;
	s = conn_open(path, deadline);
	if (s < 0)
		return s;
	k->connected = 1;
	ret = send_deadline(s, deadline);
	if (!ret)
		ret = cache_msg_send(s, req, (size_t)n, k->fd, 0);
	if (ret == -EAGAIN)
		ret = -ETIMEDOUT;
	if (!ret)
		ret = conn_recv(s, k, deadline);
	if (ret)
		close(s);
	else
		k->sock = s;
	return ret;
}

void cache_call_end(struct cache_call *k)
{
	if (k->sock >= 0)
		close(k->sock);
	k->sock = -1;
	if (k->rep_fd >= 0)
		close(k->rep_fd);
	k->rep_fd = -1;
	free(k->rep);
	k->rep = NULL;
}
