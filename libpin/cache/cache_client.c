// SPDX-License-Identifier: MIT
/*
 * The checkpoint cache's client: ask pinmem-cached for a file open at an
 * fd, map the read-only view it answers with and parse the file image it
 * holds; without a service, load the file privately and say why.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "internal.h"
#include "cache_proto.h"

#define CACHE_OPTS_SIZE	PIN__SIZE_1_0(struct pin_cache_opts, why_len)

struct pin_cache_ck {
	struct pin_st *st;
	struct pin_dev *dev;	/* private load only */
	void *map;		/* shared: the view mapping */
	size_t map_len;
	uint64_t entry;
	int shared;
	char how[320];
};

static const char *socket_path(const char *sock_path)
{
	const char *env = getenv("PIN_CACHE_SOCKET");

	if (sock_path)
		return sock_path;
	return env && *env ? env : PIN_CACHE_SOCKET;
}

/* A connected SOCK_SEQPACKET socket to the service, or -errno. */
static int connect_service(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int s, ret;

	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	strcpy(sa.sun_path, path);
	s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -errno;
	if (connect(s, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		ret = -errno;
		close(s);
		return ret;
	}
	return s;
}

/* Send one request, receive and decode its reply; *fdp: the reply's fd. */
static int exchange(int s, unsigned type, const void *payload, size_t plen,
		    int fd, uint8_t *rep, struct cache_msg *msg, int *fdp)
{
	uint8_t req[CACHE_MAX_REQUEST];
	const char *why = NULL;
	size_t len;
	int n, ret;

	n = cache_proto_encode(req, sizeof(req), type, payload, plen);
	if (n < 0)
		return n;
	ret = cache_msg_send(s, req, (size_t)n, fd, 0);
	if (ret)
		return ret;
	ret = cache_msg_recv(s, rep, CACHE_MAX_REPLY, &len, fdp, 0);
	if (ret)
		return ret;
	ret = cache_proto_decode(rep, len, *fdp >= 0, msg, &why);
	if (ret && *fdp >= 0) {
		close(*fdp);
		*fdp = -1;
	}
	return ret;
}

static void set_why(char *why, size_t len, const char *text, size_t n)
{
	if (!why || !len)
		return;
	if (n >= len)
		n = len - 1;
	memcpy(why, text, n);
	why[n] = '\0';
}

/* Map the view of a LOAD reply and parse the file image in it. */
static int take_view(struct pin_cache_ck *c, const struct cache_rep_load *r,
		     int vfd, int fd, char *why, size_t len)
{
	char name[64];
	int ret;

	c->map = mmap(NULL, r->view_length, PROT_READ, MAP_SHARED, vfd, 0);
	if (c->map == MAP_FAILED) {
		ret = -errno;
		c->map = NULL;
		if (why && len)
			snprintf(why, len, "mapping the service's view: %s",
				 strerror(-ret));
		return ret;
	}
	c->map_len = r->view_length;
	c->st = pin_st_create();
	if (!c->st)
		return -ENOMEM;
	snprintf(name, sizeof(name), "fd %d (shared entry %llu)", fd,
		 (unsigned long long)r->entry_id);
	ret = pin_st_parse_buffer(c->st, c->map, r->file_size, name);
	if (ret) {
		set_why(why, len, pin_st_error(c->st), strlen(pin_st_error(c->st)));
		return ret;
	}
	c->entry = r->entry_id;
	c->shared = 1;
	snprintf(c->how, sizeof(c->how),
		 "shared: entry %llu of pinmem-cached (%s backend), %s",
		 (unsigned long long)r->entry_id, pin_backend_name((int)r->backend),
		 r->flags & CACHE_LOAD_FRESH ? "loaded by this request" :
		 "already in memory");
	return 0;
}

/*
 * Ask the service. Returns 0 (shared), a positive errno when the service
 * is not there to ask (fall back), or -errno for the file's own failure.
 */
static int ask_service(struct pin_cache_ck *c, const char *path, int fd,
		       char *why, size_t len)
{
	struct cache_req_load req = { 0 };
	struct cache_msg msg = { 0 };
	uint8_t *rep;
	int s, vfd = -1, ret;

	s = connect_service(path);
	if (s < 0) {
		snprintf(c->how, sizeof(c->how), "private: no service at %s (%s); loaded into this process alone",
			 path, strerror(-s));
		return -s;
	}
	rep = malloc(CACHE_MAX_REPLY);
	ret = rep ? exchange(s, CACHE_REQ_LOAD, &req, sizeof(req), fd, rep,
			     &msg, &vfd) : -ENOMEM;
	close(s);
	if (ret == 0 && msg.type == CACHE_REP_LOAD) {
		ret = take_view(c, &msg.u.rep_load, vfd, fd, why, len);
	} else if (ret == 0 && msg.type == CACHE_REP_ERROR) {
		set_why(why, len, msg.text, msg.text_len);
		ret = -msg.u.error.err;
		if (ret == -ENOSPC) {
			snprintf(c->how, sizeof(c->how), "private: the service has no room: %.*s",
				 (int)(msg.text_len > 200 ? 200 : msg.text_len), msg.text);
			ret = ENOSPC;
		}
	} else if (ret == 0) {
		ret = -EPROTO;
	} else if (ret != -ENOMEM) {
		snprintf(c->how, sizeof(c->how), "private: the service at %s failed the request (%s); loaded into this process alone",
			 path, strerror(-ret));
		ret = -ret;
	}
	if (vfd >= 0)
		close(vfd);
	free(rep);
	return ret;
}

static int load_private(struct pin_cache_ck *c, int fd, char *why, size_t len)
{
	char path[64];
	int ret;

	ret = pin_dev_open(&c->dev, PIN_BACKEND_AUTO, &(struct pin_dev_opts){ .size = sizeof(struct pin_dev_opts), .why = why, .why_len = len });
	if (ret)
		return ret;
	c->st = pin_st_create();
	if (!c->st)
		return -ENOMEM;
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	ret = pin_st_load(c->st, c->dev, path, NULL);
	if (ret)
		set_why(why, len, pin_st_error(c->st), strlen(pin_st_error(c->st)));
	return ret;
}

int pin_cache_open(int fd, const struct pin_cache_opts *opts,
		   struct pin_cache_ck **ckp)
{
	struct pin_cache_opts o;
	struct pin_cache_ck *c;
	int ret;

	if (!ckp)
		return -EINVAL;
	*ckp = NULL;
	ret = pin__opts_in(&o, sizeof(o), opts, CACHE_OPTS_SIZE);
	if (ret)
		return ret;
	if (fd < 0)
		return -EBADF;
	if (o.flags & ~PIN_CACHE_NO_FALLBACK)
		return -EINVAL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	pin__why(o.why, o.why_len, "");
	ret = ask_service(c, socket_path(o.socket), fd, o.why, o.why_len);
	if (ret > 0 && (o.flags & PIN_CACHE_NO_FALLBACK)) {
		set_why(o.why, o.why_len, c->how, strlen(c->how));
		ret = -ret;
	} else if (ret > 0) {
		ret = load_private(c, fd, o.why, o.why_len);
	}
	if (ret) {
		pin_cache_close(c);
		return ret;
	}
	*ckp = c;
	return 0;
}

const struct pin_st *pin_cache_st(const struct pin_cache_ck *c)
{
	return c ? c->st : NULL;
}

int pin_cache_shared(const struct pin_cache_ck *c)
{
	return c ? c->shared : 0;
}

const char *pin_cache_how(const struct pin_cache_ck *c)
{
	return c ? c->how : "";
}

uint64_t pin_cache_entry(const struct pin_cache_ck *c)
{
	return c ? c->entry : 0;
}

void pin_cache_close(struct pin_cache_ck *c)
{
	if (!c)
		return;
	pin_st_close(c->st);
	if (c->map)
		munmap(c->map, c->map_len);
	if (c->dev)
		pin_dev_close(c->dev);
	free(c);
}

int pin_cache_list(const struct pin_cache_opts *opts, char *buf, size_t len)
{
	struct cache_msg msg = { 0 };
	struct pin_cache_opts o;
	uint8_t *rep;
	int s, vfd = -1, ret;

	if (!buf || !len)
		return -EINVAL;
	buf[0] = '\0';
	ret = pin__opts_in(&o, sizeof(o), opts, CACHE_OPTS_SIZE);
	if (ret)
		return ret;
	s = connect_service(socket_path(o.socket));
	if (s < 0)
		return s;
	rep = malloc(CACHE_MAX_REPLY);
	ret = rep ? exchange(s, CACHE_REQ_LIST, NULL, 0, -1, rep, &msg, &vfd) :
		    -ENOMEM;
	close(s);
	if (vfd >= 0)
		close(vfd);
	if (ret == 0 && msg.type == CACHE_REP_ERROR)
		ret = -msg.u.error.err;
	else if (ret == 0 && msg.type != CACHE_REP_LIST)
		ret = -EPROTO;
	if (ret == 0 || msg.type == CACHE_REP_ERROR) {
		set_why(buf, len, msg.text, msg.text_len);
		if (ret == 0)
			ret = (int)strlen(buf);
	}
	free(rep);
	return ret;
}
