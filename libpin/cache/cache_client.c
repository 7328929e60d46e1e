// SPDX-License-Identifier: MIT
/*
 * The checkpoint cache's client: ask pinmem-cached for a file open at an
 * fd, map the read-only view it answers with and parse the file image it
 * holds; without a service, load the file privately and say why.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "internal.h"
#include "cache_conn.h"
#include "st/safetensors_ck.h"

#define CACHE_OPTS_SIZE	PIN__SIZE_1_0(struct pin_cache_opts, why_len)

struct cache_view {
	void *map;
	size_t len;		/* of the mapping */
	uint64_t file_size;	/* of the file image at its start */
	int aligned;		/* CACHE_LOAD_ALIGNED: tensors on 64 bytes */
};

struct pin_cache_ck {
	struct pin_st *st;
	struct pin_dev *dev;		/* private load only */
	struct cache_view *views;	/* shared: one per file */
	size_t nviews;
	uint64_t entry;			/* shared: the first file's */
	unsigned fresh;			/* files this request loaded */
	int backend;
	int shared;
	int timeout_ms;			/* each request's deadline */
	char how[320];
};

const char *pin_cache_socket(const char *path)
{
	const char *env = getenv("PIN_CACHE_SOCKET");

	if (path && *path)
		return path;
	return env && *env ? env : PIN_CACHE_SOCKET;
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

/*
 * Map the view of a LOAD reply, read-only, as the ck's next view: 0,
 * EBUSY (fall back) when the kernel says the region is being taken back,
 * or -errno.
 */
static int map_view(struct pin_cache_ck *c, const struct cache_rep_load *r,
		    int vfd, char *why, size_t len)
{
	struct cache_view *v = realloc(c->views, (c->nviews + 1) * sizeof(*v));
	void *map;
	int ret;

	if (!v)
		return -ENOMEM;
	c->views = v;
	map = mmap(NULL, r->view_length, PROT_READ, MAP_SHARED, vfd, 0);
	if (map == MAP_FAILED && errno == EBUSY) {
		/* Evicted after all: past the service's deadline for us. */
		snprintf(c->how, sizeof(c->how), "private: the service evicted entry %llu before this process mapped it; loaded into this process alone",
			 (unsigned long long)r->entry_id);
		return EBUSY;
	}
	if (map == MAP_FAILED) {
		ret = -errno;
		if (why && len)
			snprintf(why, len, "mapping the service's view: %s",
				 strerror(-ret));
		return ret;
	}
	v[c->nviews++] = (struct cache_view){ .map = map,
					      .len = r->view_length,
					      .file_size = r->file_size,
					      .aligned = !!(r->flags &
							    CACHE_LOAD_ALIGNED) };
	if (c->nviews == 1)
		c->entry = r->entry_id;
	c->fresh += !!(r->flags & CACHE_LOAD_FRESH);
	c->backend = (int)r->backend;
	return 0;
}

/*
 * Errors that say the service will not serve this request, not that the
 * file is bad: no room (budget or the user's share), busy (the user's
 * connections or loads), a file it does not cache (a file system whose
 * identity it cannot trust), or a refusal of the request itself, which
 * this client made well-formed (a service that could not take the fd it
 * carried, out of fds or memory, says so with these). The caller loads
 * privately.
 */
static int service_declined(int err)
{
	return err == ENOSPC || err == EAGAIN || err == EOPNOTSUPP ||
	       err == EPROTO || err == EMSGSIZE || err == EMFILE ||
	       err == ENFILE || err == ENOMEM;
}

static const char *declined_words(int err)
{
	switch (err) {
	case ENOSPC:
		return "the service has no room";
	case EAGAIN:
		return "the service is busy";
	case EOPNOTSUPP:
		return "the service does not cache this file";
	default:
		return "the service refused the request";
	}
}

/*
 * The service is there but its socket refused this user: which group to
 * join, in the device's words (the socket's group; pinmem where it is
 * root's, as the project's units make it pinmem's).
 */
static void say_join(const char *path, int err, char *out, size_t len)
{
	struct group gr, *found = NULL;
	char gbuf[1024];
	const char *name = "pinmem";
	struct stat st;

	if (stat(path, &st) == 0 && st.st_gid != 0 &&
	    getgrgid_r(st.st_gid, &gr, gbuf, sizeof(gbuf), &found) == 0 &&
	    found)
		name = found->gr_name;
	snprintf(out, len, "the service at %s refused this user (%s): join group %s (sudo usermod -aG %s $USER, then log in again)",
		 path, strerror(err), name, name);
}

static int refused_user(const struct cache_call *k, int ret)
{
	return !k->connected && (ret == -EACCES || ret == -EPERM);
}

/* Why the service was not asked, or failed: c->how, to fall back on. */
static int say_private(struct pin_cache_ck *c, const char *path,
		       const struct cache_call *k, int ret)
{
	double s = c->timeout_ms / 1000.0;

	if (ret == -ETIMEDOUT && !k->connected)
		snprintf(c->how, sizeof(c->how), "private: the service at %s did not accept the connection within %.1f s; loaded into this process alone",
			 path, s);
	else if (ret == -ETIMEDOUT)
		snprintf(c->how, sizeof(c->how), "private: the service at %s did not answer within %.1f s; loaded into this process alone",
			 path, s);
	else if (refused_user(k, ret)) {
		char join[256];

		say_join(path, -ret, join, sizeof(join));
		snprintf(c->how, sizeof(c->how), "private: %s; loaded into this process alone",
			 join);
	} else if (!k->connected)
		snprintf(c->how, sizeof(c->how), "private: no service at %s (%s); loaded into this process alone",
			 path, strerror(-ret));
	else
		snprintf(c->how, sizeof(c->how), "private: the service at %s failed the request (%s); loaded into this process alone",
			 path, strerror(-ret));
	return -ret;
}

/* Interpret a reply: 0 and the view mapped, or ask_service's codes. */
static int take_reply(struct pin_cache_ck *c, const char *path,
		      const struct cache_call *k, int ret, char *why,
		      size_t len)
{
	const struct cache_msg *msg = &k->msg;

	if (ret == 0 && msg->type == CACHE_REP_LOAD)
		return map_view(c, &msg->u.rep_load, k->rep_fd, why, len);
	if (ret == 0 && msg->type == CACHE_REP_ERROR) {
		set_why(why, len, msg->text, msg->text_len);
		if (!service_declined(msg->u.error.err))
			return -msg->u.error.err;
		snprintf(c->how, sizeof(c->how), "private: %s: %.*s",
			 declined_words(msg->u.error.err),
			 (int)(msg->text_len > 200 ? 200 : msg->text_len),
			 msg->text);
		return msg->u.error.err;
	}
	if (ret == 0)
		return -EPROTO;
	if (ret == -ENOMEM)
		return ret;
	return say_private(c, path, k, ret);
}

/* File fi's image in view v, as the service laid it out. */
static int parse_view(struct pin_st *st, unsigned fi,
		      const struct cache_view *v)
{
	if (v->aligned)
		return pin__st_parse_placed(st, fi, v->map, v->file_size,
					    v->len);
	return pin__st_parse_image(st, fi, v->map, v->file_size);
}

/*
 * A service older than the heartbeat (or than aligned images) refuses the
 * flag with these words.
 */
static int refused_heartbeat(const struct cache_call *k, int ret)
{
	static const char text[] = "load request: unknown flags";

	return ret == 0 && k->msg.type == CACHE_REP_ERROR &&
	       k->msg.u.error.err == EPROTO &&
	       k->msg.text_len == sizeof(text) - 1 &&
	       !memcmp(k->msg.text, text, sizeof(text) - 1);
}

/*
 * Ask the service for the file open at fd and map the view it answers
 * with. Returns 0 (mapped: c's last view), a positive errno when the
 * service is not there to ask or does not answer in time (fall back), or
 * -errno for the file's own failure. The request asks for heartbeats and
 * says it reads aligned images; a service too old to know these flags is
 * asked once more without them. The connection stays open until the view
 * is mapped: until it closes, the service does not evict the entry.
 */
static int ask_service(struct pin_cache_ck *c, const char *path, int fd,
		       char *why, size_t len)
{
	struct cache_req_load req = {
		.flags = CACHE_REQ_HEARTBEAT | CACHE_REQ_ALIGNED,
	};
	struct cache_call k = { .type = CACHE_REQ_LOAD, .payload = &req,
				.payload_len = sizeof(req), .fd = fd,
				.timeout_ms = c->timeout_ms };
	int ret;

	ret = cache_call(path, &k);
	if (refused_heartbeat(&k, ret)) {
		cache_call_end(&k);
		req.flags = 0;
		ret = cache_call(path, &k);
	}
	ret = take_reply(c, path, &k, ret, why, len);
	cache_call_end(&k);
	return ret;
}

static void say_shared(struct pin_cache_ck *c)
{
	const char *b = pin_backend_name(c->backend);

	c->shared = 1;
	if (c->nviews == 1)
		snprintf(c->how, sizeof(c->how),
			 "shared: entry %llu of pinmem-cached (%s backend), %s",
			 (unsigned long long)c->entry, b, c->fresh ?
			 "loaded by this request" : "already in memory");
	else
		snprintf(c->how, sizeof(c->how),
			 "shared: %zu files of pinmem-cached (%s backend), the first entry %llu; %u loaded by this request",
			 c->nviews, b, (unsigned long long)c->entry, c->fresh);
}

/* One file, open at fd: from the service, parsed in its view. */
static int shared_file(struct pin_cache_ck *c, const char *sock, int fd,
		       char *why, size_t len)
{
	char name[64];
	int ret;

	ret = ask_service(c, sock, fd, why, len);
	if (ret)
		return ret;
	c->st = pin_st_create();
	if (!c->st)
		return -ENOMEM;
	snprintf(name, sizeof(name), "fd %d (shared entry %llu)", fd,
		 (unsigned long long)c->entry);
	ret = pin__st_add_file(c->st, name);
	if (!ret)
		ret = parse_view(c->st, 0, &c->views[0]);
	if (!ret)
		ret = pin__st_build_index(c->st);
	if (ret) {
		set_why(why, len, pin_st_error(c->st), strlen(pin_st_error(c->st)));
		return ret;
	}
	say_shared(c);
	return 0;
}
/* What pin__st_index gives each shard of a sharded shared open. */
struct shard_ask {
	struct pin_cache_ck *c;
	const char *sock;
	char *why;
	size_t len;
	int fallback;		/* the positive errno that ended it, or 0 */
};

/* Shard fi: opened here (the caller's permissions), from the service. */
static int shared_shard(struct pin_st *st, unsigned fi, void *arg)
{
	struct shard_ask *a = arg;
	const char *path = pin_st_file_path(st, fi);
	struct cache_view *v;
	int fd, ret;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		ret = -errno;
		if (a->why && a->len)
			snprintf(a->why, a->len, "%s: %s", path, strerror(-ret));
		return ret;
	}
	ret = ask_service(a->c, a->sock, fd, a->why, a->len);
	close(fd);
	if (ret > 0) {
		a->fallback = ret;
		return -ECANCELED;
	}
	if (ret)
		return ret;
	v = &a->c->views[a->c->nviews - 1];
	ret = parse_view(st, fi, v);
	if (ret)
		set_why(a->why, a->len, pin_st_error(st), strlen(pin_st_error(st)));
	return ret;
}

/* Undo a shared open that cannot finish: back to an empty ck. */
static void drop_shared(struct pin_cache_ck *c)
{
	pin_st_close(c->st);
	c->st = NULL;
	for (size_t i = 0; i < c->nviews; i++)
		munmap(c->views[i].map, c->views[i].len);
	free(c->views);
	c->views = NULL;
	c->nviews = 0;
	c->fresh = 0;
	c->entry = 0;
}

/* A sharded checkpoint's index: every shard from the service. */
static int shared_index(struct pin_cache_ck *c, const char *sock,
			const char *path, char *why, size_t len)
{
	struct shard_ask a = { .c = c, .sock = sock, .why = why, .len = len };
	int ret;

	c->st = pin_st_create();
	if (!c->st)
		return -ENOMEM;
	ret = pin__st_index(c->st, path, shared_shard, &a);
	if (a.fallback) {
		drop_shared(c);
		return a.fallback;
	}
	if (ret && why && len && !why[0])
		set_why(why, len, pin_st_error(c->st), strlen(pin_st_error(c->st)));
	if (!ret)
		say_shared(c);
	return ret;
}

/* Without the service: pin_st_load of path (a file, or an index). */
static int load_private(struct pin_cache_ck *c, const char *path, char *why,
			size_t len)
{
	int ret;

	ret = pin_dev_open(&c->dev, PIN_BACKEND_AUTO, &(struct pin_dev_opts){ .size = sizeof(struct pin_dev_opts), .why = why, .why_len = len });
	if (ret)
		return ret;
	c->st = pin_st_create();
	if (!c->st)
		return -ENOMEM;
	ret = pin_st_load(c->st, c->dev, path, NULL);
	if (ret)
		set_why(why, len, pin_st_error(c->st), strlen(pin_st_error(c->st)));
	return ret;
}

/* Check the options and start a ck; *ckp NULL until it succeeds. */
static int open_begin(const struct pin_cache_opts *opts,
		      struct pin_cache_opts *o, struct pin_cache_ck **ckp,
		      struct pin_cache_ck **cp)
{
	int ret;

	if (!ckp)
		return -EINVAL;
	*ckp = NULL;
	ret = pin__opts_in(o, sizeof(*o), opts, CACHE_OPTS_SIZE);
	if (ret)
		return ret;
	if ((o->flags & ~PIN_CACHE_NO_FALLBACK) || o->timeout_ms < 0)
		return -EINVAL;
	*cp = calloc(1, sizeof(**cp));
	if (!*cp)
		return -ENOMEM;
	(*cp)->timeout_ms = cache_timeout_ms(o->timeout_ms);
	pin__why(o->why, o->why_len, "");
	return 0;
}

/* c->how as an error: without "private: " and what a fallback did. */
static void say_failed(const struct pin_cache_ck *c, char *why, size_t len)
{
	static const char pre[] = "private: ";
	const char *s = c->how, *end;

	if (!strncmp(s, pre, sizeof(pre) - 1))
		s += sizeof(pre) - 1;
	end = strstr(s, "; loaded into this process alone");
	set_why(why, len, s, end ? (size_t)(end - s) : strlen(s));
}

/*
 * Finish an open whose service step returned ret: fall back to the
 * private load of path where allowed, and hand the ck over or free it.
 */
static int open_end(struct pin_cache_ck *c, int ret, const char *path,
		    const struct pin_cache_opts *o, struct pin_cache_ck **ckp)
{
	if (ret > 0 && (o->flags & PIN_CACHE_NO_FALLBACK)) {
		say_failed(c, o->why, o->why_len);
		ret = -ret;
	} else if (ret > 0) {
		ret = load_private(c, path, o->why, o->why_len);
	}
	if (ret) {
		pin_cache_close(c);
		return ret;
	}
	*ckp = c;
	return 0;
}

int pin_cache_open(int fd, const struct pin_cache_opts *opts,
		   struct pin_cache_ck **ckp)
{
	char path[64];
	struct pin_cache_opts o;
	struct pin_cache_ck *c;
	int ret;

	ret = open_begin(opts, &o, ckp, &c);
	if (ret)
		return ret;
	if (fd < 0) {
		free(c);
		return -EBADF;
	}
	ret = shared_file(c, pin_cache_socket(o.socket), fd, o.why, o.why_len);
	/* The private load reads the very file asked about. */
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	return open_end(c, ret, path, &o, ckp);
}

/* A single file: opened here, then as pin_cache_open. */
static int open_file_path(const char *path, const struct pin_cache_opts *opts,
			  struct pin_cache_ck **ckp)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC), ret;

	if (fd < 0) {
		ret = -errno;
		if (ckp)
			*ckp = NULL;
		if (opts && opts->size >= CACHE_OPTS_SIZE && opts->why &&
		    opts->why_len)
			snprintf(opts->why, opts->why_len, "%s", strerror(-ret));
		return ret;
	}
	ret = pin_cache_open(fd, opts, ckp);
	close(fd);
	return ret;
}

int pin_cache_open_path(const char *path, const struct pin_cache_opts *opts,
			struct pin_cache_ck **ckp)
{
	struct pin_cache_opts o;
	struct pin_cache_ck *c;
	int ret;

	if (!path) {
		if (ckp)
			*ckp = NULL;
		return -EINVAL;
	}
	if (!pin__st_is_index(path))
		return open_file_path(path, opts, ckp);
	ret = open_begin(opts, &o, ckp, &c);
	if (ret)
		return ret;
	ret = shared_index(c, pin_cache_socket(o.socket), path, o.why, o.why_len);
	return open_end(c, ret, path, &o, ckp);
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
	drop_shared(c);
	if (c->dev)
		pin_dev_close(c->dev);
	free(c);
}

int pin_cache_list(const struct pin_cache_opts *opts, char *buf, size_t len)
{
	struct cache_call k = { .type = CACHE_REQ_LIST, .fd = -1 };
	struct pin_cache_opts o;
	int ret;

	if (!buf || !len)
		return -EINVAL;
	buf[0] = '\0';
	ret = pin__opts_in(&o, sizeof(o), opts, CACHE_OPTS_SIZE);
	if (ret)
		return ret;
	if (o.timeout_ms < 0)
		return -EINVAL;
	k.timeout_ms = cache_timeout_ms(o.timeout_ms);
	ret = cache_call(pin_cache_socket(o.socket), &k);
	if (refused_user(&k, ret))
		say_join(pin_cache_socket(o.socket), -ret, buf, len);
	if (ret == 0 && k.msg.type == CACHE_REP_ERROR)
		ret = -k.msg.u.error.err;
	else if (ret == 0 && k.msg.type != CACHE_REP_LIST)
		ret = -EPROTO;
	if (ret == 0 || k.msg.type == CACHE_REP_ERROR) {
		set_why(buf, len, k.msg.text, k.msg.text_len);
		if (ret == 0)
			ret = (int)strlen(buf);
	}
	cache_call_end(&k);
	return ret;
}

/* A KEEP's answer: 0 for a view (closed at once: the service keeps it) or
 * DONE, the service's error otherwise; its text in opts->why either way. */
int pin_cache_keep(int fd, unsigned op, uint64_t set,
		   const struct pin_cache_opts *opts)
{
	struct cache_req_keep req = { .op = op, .set = set };
	struct cache_call k = { .type = CACHE_REQ_KEEP, .payload = &req,
				.payload_len = sizeof(req), .fd = fd };
	struct pin_cache_opts o;
	int ret;

	ret = pin__opts_in(&o, sizeof(o), opts, CACHE_OPTS_SIZE);
	if (ret)
		return ret;
	if (op < PIN_CACHE_PIN || op > PIN_CACHE_WARM_END || o.timeout_ms < 0 ||
	    (fd < 0) != (op == PIN_CACHE_WARM_END))
		return -EINVAL;
	k.timeout_ms = cache_timeout_ms(o.timeout_ms);
	ret = cache_call(pin_cache_socket(o.socket), &k);
	if (refused_user(&k, ret) && o.why)
		say_join(pin_cache_socket(o.socket), -ret, o.why, o.why_len);
	else if (ret && !k.connected && o.why)
		snprintf(o.why, o.why_len, "no service at %s",
			 pin_cache_socket(o.socket));
	if (ret == 0 && k.msg.type == CACHE_REP_ERROR)
		ret = -k.msg.u.error.err;
	else if (ret == 0 && k.msg.type != CACHE_REP_LOAD &&
		 k.msg.type != CACHE_REP_DONE)
		ret = -EPROTO;
	if (o.why && (k.msg.type == CACHE_REP_ERROR ||
		      k.msg.type == CACHE_REP_DONE))
		set_why(o.why, o.why_len, k.msg.text, k.msg.text_len);
	else if (o.why && k.msg.type == CACHE_REP_LOAD)
		snprintf(o.why, o.why_len, "entry %llu",
			 (unsigned long long)k.msg.u.rep_load.entry_id);
	cache_call_end(&k);
	return ret;
}
