// SPDX-License-Identifier: GPL-2.0
/*
 * Entries that outlive the process: under systemd each ready entry's
 * region fd is kept in the service manager's file descriptor store
 * (sd_notify's FDSTORE=1, written here: the protocol is a datagram, and
 * libsystemd would be one more dependency for it), with a second fd
 * beside it, a sealed memfd holding what the entry is (its file's key,
 * the load's alignment, the region's id and size, its charge and member,
 * the name it is listed by, its load time, whether it is kept (warm.c),
 * a digest of the image's header). A restarted
 * service is handed both back (LISTEN_FDS, LISTEN_FDNAMES) and serves an
 * entry again only when the region is the one stored: sealed, of the
 * stored id and size, its header unchanged. What fails is closed, taken
 * out of the store and counted, never served. The file itself is not
 * looked at (the service never opens a path): its key is checked, as for
 * every entry, against the key of each client's fd that asks for it.
 *
 * The names: "pinmem-entry.<region id>.region" and "....meta", within
 * systemd's rules for an FDNAME (printable ASCII, no ':', 255 at most),
 * and unlike a socket unit's name ("pinmem-cached.socket"), which names
 * socket activation's fd in the same LISTEN_FDNAMES.
 * A metadata memfd rather than metadata in the name: the key and the
 * listed name do not fit 255 characters.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "service.h"

#define FDS_START	3
#define NAME_PREFIX	"pinmem-entry."
/* Bumped with the layout: a record of another is dropped, counted. */
#define META_MAGIC	"PMCFDS2"

/* The stored record; its layout changing makes stored entries unusable. */
struct fdstore_meta {
	char magic[8];
	uint32_t len;			/* sizeof(struct fdstore_meta) */
	uint32_t key_len;		/* sizeof(struct cache_key) */
	struct cache_key key;
	uint64_t region_id, region_size, view_length, bytes;
	uint64_t entry_id;		/* as lists showed it */
	uint64_t born_real_ns;		/* loaded then (CLOCK_REALTIME) */
	uint64_t warm_set;		/* KEPT_WARM: the warm list's */
	uint32_t kept;			/* KEPT_* */
	uint32_t pad2;
	uint32_t uid;			/* whose request loaded it */
	int32_t backend;
	uint32_t aligned;
	uint32_t pad;
	uint8_t header_sha[32];		/* of the image's first 8 + n bytes */
	char name[NAME_LEN];
	char tenant[TENANT_LEN];	/* the member charged for it */
	uint8_t sha[32];		/* of every byte above */
};

/* The notify socket's address; 0 without one (not under systemd). */
int fdstore_init(struct fdstore *f)
{
	const char *p = getenv("NOTIFY_SOCKET");
	size_t n = p ? strlen(p) : 0;

	memset(f, 0, sizeof(*f));
	if (!n || n >= sizeof(f->addr.sun_path) || (p[0] != '/' && p[0] != '@'))
		return 0;
	f->addr.sun_family = AF_UNIX;
	memcpy(f->addr.sun_path, p, n);
	if (p[0] == '@')
		f->addr.sun_path[0] = 0;	/* abstract */
	f->addr_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n);
	f->on = 1;
	return 1;
}

/* One sd_notify datagram, with fd in SCM_RIGHTS where fd >= 0. */
static int notify(const struct fdstore *f, const char *text, int fd)
{
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int))];
	} c;
	struct iovec iov = { (void *)text, strlen(text) };
	struct msghdr m = {
		.msg_name = (void *)&f->addr, .msg_namelen = f->addr_len,
		.msg_iov = &iov, .msg_iovlen = 1,
	};
	int s = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0), ret = 0;

	if (s < 0)
		return -errno;
	if (fd >= 0) {
		memset(&c, 0, sizeof(c));
		m.msg_control = c.buf;
		m.msg_controllen = sizeof(c.buf);
		c.h.cmsg_level = SOL_SOCKET;
		c.h.cmsg_type = SCM_RIGHTS;
		c.h.cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(&c.h), &fd, sizeof(int));
	}
	if (sendmsg(s, &m, MSG_NOSIGNAL) < 0)
		ret = -errno;
	close(s);
	return ret;
}

static void fd_name(char *out, size_t len, uint64_t region_id,
		    const char *what)
{
	snprintf(out, len, NAME_PREFIX "%llx.%s",
		 (unsigned long long)region_id, what);
}

/* The digest of the image's header: its 8-byte length and the JSON. */
static int header_sha(struct pin_view *v, uint64_t length, uint8_t out[32])
{
	const uint8_t *p;
	uint64_t n = 0;
	int ret = pin_view_map(v, PROT_READ, (void **)&p);

	if (ret)
		return ret;
	if (length >= 8)
		for (int i = 7; i >= 0; i--)
			n = n << 8 | p[i];
	ret = length < 8 || n > length - 8 ? -EINVAL :
	      key_digest(p, 8 + n, out);
	pin_view_unmap(v, (void *)p);
	return ret;
}

static void meta_seal(struct fdstore_meta *m)
{
	key_digest(m, offsetof(struct fdstore_meta, sha), m->sha);
}

static int meta_memfd(const struct fdstore_meta *m)
{
	int fd = memfd_create("pinmem-cached-entry",
			      MFD_CLOEXEC | MFD_ALLOW_SEALING);

	if (fd < 0)
		return -errno;
	if (pwrite(fd, m, sizeof(*m), 0) != (ssize_t)sizeof(*m) ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW |
		  F_SEAL_WRITE | F_SEAL_SEAL)) {
		close(fd);
		return -EIO;
	}
	return fd;
}

/* The record of a ready entry, as a sealed memfd; -errno. */
static int meta_of(struct entry *e, struct fdstore_meta *m)
{
	int ret;

	memset(m, 0, sizeof(*m));
	memcpy(m->magic, META_MAGIC, sizeof(META_MAGIC));
	m->len = sizeof(*m);
	m->key_len = sizeof(m->key);
	m->key = e->key;
	m->region_id = pin_region_id(e->region);
	m->region_size = pin_region_size(e->region);
	m->view_length = e->view_length;
	m->bytes = e->bytes;
	m->entry_id = e->id;
	m->born_real_ns = e->born_real_ns;
	m->kept = e->kept;
	m->warm_set = e->warm_set;
	m->uid = e->uid;
	memcpy(m->tenant, e->member->tenant, sizeof(m->tenant));
	m->backend = e->backend;
	m->aligned = (uint32_t)e->aligned;
	memcpy(m->name, e->name, sizeof(m->name));
	ret = header_sha(e->view, e->view_length, m->header_sha);
	if (ret)
		return ret;
	meta_seal(m);
	return meta_memfd(m);
}

static int put_meta(struct fdstore *f, struct entry *e, uint64_t *region_id)
{
	struct fdstore_meta m;
	char msg[128 + NAME_LEN];
	int mfd = meta_of(e, &m), ret;

	if (mfd < 0)
		return mfd;
	*region_id = m.region_id;
	strcpy(msg, "FDSTORE=1\nFDPOLL=0\nFDNAME=");
	fd_name(msg + strlen(msg), NAME_LEN, m.region_id, "meta");
	ret = notify(f, msg, mfd);
	close(mfd);
	return ret;
}

static void not_kept(const struct entry *e, int ret)
{
	fprintf(stderr, "pinmem-cached: %s: not kept in the service manager's fd store (it will not survive a restart): %s\n",
		e->name, strerror(-ret));
}

/*
 * Keep a ready entry in the store: its metadata first, so that a region
 * is never stored without what makes it usable. Runs in the entry's
 * loading or evicting thread.
 */
void fdstore_put(struct entry *e)
{
	struct fdstore *f = e->owner->fdstore;
	char msg[128 + NAME_LEN];
	uint64_t id = 0;
	int ret;

	if (!f || !f->on)
		return;
	ret = put_meta(f, e, &id);
	if (!ret) {
		strcpy(msg, "FDSTORE=1\nFDPOLL=0\nFDNAME=");
		fd_name(msg + strlen(msg), NAME_LEN, id, "region");
		ret = notify(f, msg, pin_region_fd(e->region));
	}
	if (ret)
		not_kept(e, ret);
}

/*
 * A stored entry's record again, after its kept-ness changed: the old one
 * out (the store keeps every fd sent under a name), the new one in.
 */
void fdstore_rekeep(struct entry *e)
{
	struct fdstore *f = e->owner->fdstore;
	char msg[128 + NAME_LEN];
	uint64_t id;
	int ret;

	if (!f || !f->on || !e->region)
		return;
	strcpy(msg, "FDSTOREREMOVE=1\nFDNAME=");
	fd_name(msg + strlen(msg), 64, pin_region_id(e->region), "meta");
	notify(f, msg, -1);
	ret = put_meta(f, e, &id);
	if (ret)
		not_kept(e, ret);
}

/* Both of an entry's names, and another (a stray one) where given. */
static void remove_names(const struct fdstore *f, uint64_t region_id,
			 const char *also)
{
	char msg[128 + 256];

	if (also) {
		snprintf(msg, sizeof(msg), "FDSTOREREMOVE=1\nFDNAME=%s", also);
		notify(f, msg, -1);
	}
	strcpy(msg, "FDSTOREREMOVE=1\nFDNAME=");
	fd_name(msg + strlen(msg), 64, region_id, "region");
	notify(f, msg, -1);
	strcpy(msg, "FDSTOREREMOVE=1\nFDNAME=");
	fd_name(msg + strlen(msg), 64, region_id, "meta");
	notify(f, msg, -1);
}

/* Take an entry out of the store: before its eviction frees it. */
void fdstore_drop(struct entry *e)
{
	struct fdstore *f = e->owner->fdstore;

	if (f && f->on && e->region)
		remove_names(f, pin_region_id(e->region), NULL);
}

/*
 * The fds passed back at start that are ours (by name; socket activation's
 * sockets come in the same variables), before listen.c takes the sockets.
 */
int fdstore_collect(struct fdstore *f)
{
	const char *pid = getenv("LISTEN_PID"), *nfd = getenv("LISTEN_FDS");
	const char *names = getenv("LISTEN_FDNAMES");
	long n;

	if (!pid || !nfd || !names || strtol(pid, NULL, 10) != (long)getpid())
		return 0;
	n = strtol(nfd, NULL, 10);
	if (n <= 0 || n > 1 << 20)
		return 0;
	f->passed = calloc((size_t)n, sizeof(*f->passed));
	if (!f->passed)
		return -ENOMEM;
	for (long i = 0; i < n && *names; i++) {
		size_t len = strcspn(names, ":");

		if (fdstore_name_ours(names, len) &&
		    len < sizeof(f->passed->name)) {
			struct fdstore_fd *p = &f->passed[f->npassed++];

			p->fd = FDS_START + (int)i;
			memcpy(p->name, names, len);
			fcntl(p->fd, F_SETFD, FD_CLOEXEC);
		}
		names += len + (names[len] == ':');
	}
	return f->npassed;
}

static int ends_with(const char *name, size_t len, const char *end)
{
	size_t n = strlen(end);

	return len >= n && !strncmp(name + len - n, end, n);
}

/* Whether a name LISTEN_FDNAMES gives is one of the store's. */
int fdstore_name_ours(const char *name, size_t len)
{
	return len > strlen(NAME_PREFIX) &&
	       !strncmp(name, NAME_PREFIX, strlen(NAME_PREFIX)) &&
	       (ends_with(name, len, ".region") || ends_with(name, len, ".meta"));
}

static int take_fd(struct fdstore *f, uint64_t id, const char *what)
{
	char name[64];

	fd_name(name, sizeof(name), id, what);
	for (unsigned i = 0; i < f->npassed; i++) {
		int fd = f->passed[i].fd;

		if (fd >= 0 && !strcmp(f->passed[i].name, name)) {
			f->passed[i].fd = -1;
			return fd;
		}
	}
	return -1;
}

static const char *read_meta(int fd, struct fdstore_meta *m)
{
	uint8_t sha[32];

	if (fd < 0)
		return "no metadata beside the region";
	if (pread(fd, m, sizeof(*m), 0) != (ssize_t)sizeof(*m) ||
	    memcmp(m->magic, META_MAGIC, sizeof(META_MAGIC)) ||
	    m->len != sizeof(*m) || m->key_len != sizeof(m->key))
		return "metadata of another layout";
	if (key_digest(m, offsetof(struct fdstore_meta, sha), sha) ||
	    memcmp(sha, m->sha, sizeof(sha)))
		return "metadata whose checksum does not match";
	m->name[NAME_LEN - 1] = 0;
	return NULL;
}

/* The region handed back must be the one stored, unchanged. */
static const char *check_region(struct entry *e, const struct fdstore_meta *m)
{
	struct pin_region_info info = { .size = sizeof(info) };
	uint8_t sha[32];

	if (pin_region_info(e->region, &info))
		return "the region's state cannot be read";
	if (info.state != PIN_STATE_SEALED)
		return "the region is not sealed";
	if (info.region_size != m->region_size || info.id != m->region_id)
		return "the region is not of the stored id and size";
	if (m->view_length > info.region_size ||
	    pin_view_create(e->region, 0, m->view_length, 0, &e->view))
		return "no view of the region can be made";
	if (header_sha(e->view, m->view_length, sha) ||
	    memcmp(sha, m->header_sha, sizeof(sha)))
		return "the image's header is not the stored one";
	return NULL;
}

static const char *adopt(struct entry *e, int rfd, const struct fdstore_meta *m)
{
	if (m->backend != e->backend)
		return "stored by the other backend";
	if (pin_dev_open(&e->dev, m->backend, NULL))
		return "the backend cannot be opened";
	if (pin_region_import(e->dev, rfd, &e->region))
		return "not a region";
	return check_region(e, m);
}

/*
 * The load time, on this boot's monotonic clock: the wall clock's age of
 * the record (the monotonic clock does not outlive the process's
 * namespace, and a new boot's restarts it), never in the future.
 */
static void born_again(struct entry *e, uint64_t born_real_ns)
{
	uint64_t real = now_real_ns(), mono = now_ns();
	uint64_t age = real > born_real_ns ? real - born_real_ns : 0;

	e->born_real_ns = born_real_ns;
	e->born_ns = age < mono ? mono - age : 0;
}

/*
 * One stored entry back, or why not: a region and its metadata, checked,
 * charged to the budget and to its member as when it was loaded.
 */
static const char *restore_one(struct store *s, struct member **members,
			       int rfd, int mfd)
{
	struct entry tmp = { .backend = s->backend }, *e;
	struct fdstore_meta m;
	struct member *mb;
	const char *why = read_meta(mfd, &m);

	if (!why)
		why = adopt(&tmp, rfd, &m);
	if (!why && s->used + m.bytes > s->budget)
		why = "over the budget";
	m.tenant[sizeof(m.tenant) - 1] = 0;
	mb = why ? NULL : member_get(members, m.tenant, &s->ev);
	if (!why && !mb)
		why = "out of memory";
	e = why ? NULL : store_add(s, &m.key, m.bytes, mb, (uid_t)m.uid);
	if (!why && !e)
		why = "out of memory";
	if (why) {
		entry_release(&tmp);
		return why;
	}
	e->state = ENTRY_READY;
	/* The id lists showed; new ones follow every id handed back. */
	e->id = m.entry_id;
	born_again(e, m.born_real_ns);
	if (s->next_id <= m.entry_id)
		s->next_id = m.entry_id + 1;
	e->dev = tmp.dev;
	e->region = tmp.region;
	e->view = tmp.view;
	e->view_length = m.view_length;
	e->aligned = (int)m.aligned;
	e->kept = m.kept & (KEPT_PIN | KEPT_WARM);
	e->warm_set = m.warm_set;
	memcpy(e->name, m.name, sizeof(e->name));
	return NULL;
}

static uint64_t id_of(const char *name)
{
	return strtoull(name + strlen(NAME_PREFIX), NULL, 16);
}

/* Bad ones are closed and taken out of the store, and said. */
static void restore_pass(struct store *s, struct member **members,
			 struct fdstore *f, unsigned *ok, unsigned *bad)
{
	for (unsigned i = 0; i < f->npassed; i++) {
		const char *name = f->passed[i].name, *why;
		uint64_t id = id_of(name);
		int rfd, mfd;

		if (f->passed[i].fd < 0)
			continue;
		rfd = take_fd(f, id, "region");
		mfd = take_fd(f, id, "meta");
		why = rfd < 0 ? "a region's metadata without the region" :
		      restore_one(s, members, rfd, mfd);
		if (why) {
			fprintf(stderr, "pinmem-cached: stored entry %llx dropped: %s\n",
				(unsigned long long)id, why);
			remove_names(f, id, name);
			++*bad;
		} else {
			++*ok;
		}
		if (rfd >= 0)
			close(rfd);
		if (mfd >= 0)
			close(mfd);
		if (f->passed[i].fd >= 0)	/* a name of neither kind */
			close(f->passed[i].fd);
		f->passed[i].fd = -1;
	}
}

/*
 * Serve again what the store handed back, and say what came of it (or
 * why the service starts empty).
 */
void fdstore_restore(struct store *s, struct member **members)
{
	struct fdstore *f = s->fdstore;
	unsigned ok = 0, bad = 0;
	char b[32];

	if (!f || !f->on) {
		for (unsigned i = 0; f && i < f->npassed; i++)
			close(f->passed[i].fd);
		if (f)
			free(f->passed);
		fprintf(stderr, "pinmem-cached: starting empty: not under systemd (no NOTIFY_SOCKET), so no entry outlives this process\n");
		return;
	}
	restore_pass(s, members, f, &ok, &bad);
	free(f->passed);
	f->passed = NULL;
	f->npassed = 0;
	f->restored = ok;
	f->dropped = bad;
	human_bytes(s->used, b, sizeof(b));
	fprintf(stderr, "pinmem-cached: %u entries (%s) taken back from the service manager's fd store, %u dropped\n",
		ok, b, bad);
}
