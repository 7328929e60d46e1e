/* SPDX-License-Identifier: GPL-2.0 */
/*
 * pinmem-cached: one pinned copy of a checkpoint per host. The types its
 * files share: an entry (one file's identity and its sealed region), the
 * store (the entries, least recently used last, and the budget), a member
 * (one tenant's share of the service, and the thread that touches its
 * fds),
 * the events threads hand the loop, and the loop's options.
 *
 * The rule that keeps one client from stalling the others: the event loop
 * never calls anything that can block on what a client controls. A
 * client's fd (a FUSE file, a lingering TCP socket) is keyed and closed by
 * its member's thread, loaded by a loading thread; evictions and the
 * kernel's HOLDERS, which take a region's lock, run in threads too. A
 * client's socket is closed by its member's thread as well (its close
 * releases the files still queued on it), and the loop reads a socket
 * only while the process has room for every fd a packet can carry: an
 * fd the kernel cannot install is released by the thread that reads it.
 * What one member can make the process hold is bounded: over its bound
 * its connections are not read, and new ones are refused unread.
 */
#ifndef PINMEM_CACHED_H
#define PINMEM_CACHED_H

#include <pthread.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>

#include <pin.h>

/*
 * A file's identity: what fstat, statx and statfs say, never its path; or,
 * for a file whose stat the kernel cannot vouch for (FUSE, network file
 * systems), its size and the SHA-256 of its bytes (by_content).
 */
struct cache_key {
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtime;
	struct timespec ctime;
	struct timespec btime;		/* 0 where the file system has none */
	uint64_t fsid;			/* statfs f_fsid: which file system */
	int by_content;			/* keyed by size and sha alone */
	int hashed;			/* by_content: sha is the bytes' digest */
	uint8_t sha[32];
};

enum entry_state { ENTRY_LOADING, ENTRY_READY, ENTRY_EVICTING };

/* A process the view was handed to, so that lists name it to its user. */
struct seen_pid {
	pid_t pid;
	uid_t uid;
};

#define ENTRY_SEEN	32
#define ENTRY_HOLDERS	8
#define NAME_LEN	256
#define TENANT_LEN	512		/* a tenant's key: "uid N", a path */

/* What one member of the service is (pinmem-cached --tenant). */
enum tenant_kind { TENANT_UID, TENANT_CGROUP, TENANT_POD };

/* Why an entry is kept loaded (warm.c): an operator's pin, a warm list. */
#define KEPT_PIN	1U
#define KEPT_WARM	2U
/* The tenant kept entries are charged to: the node's, no client's. */
#define KEPT_TENANT	"node (kept entries)"

struct member;

struct entry {
	struct entry *prev, *next;	/* the store's list, most recent first */
	uint64_t id;
	struct cache_key key;
	enum entry_state state;
	uint64_t bytes;			/* charged against the budget */
	uint64_t born_ns, used_ns;	/* CLOCK_MONOTONIC */
	uint64_t born_real_ns;		/* CLOCK_REALTIME: what outlives a
					 * restart (the fd store's record) */
	unsigned waiters;		/* connections waiting for the load */
	unsigned handoffs;		/* handed the view, not yet gone */
	struct member *member;		/* charged to it: the loader's tenant,
					 * or one that keeps it mapped */
	uid_t uid;			/* whose request loaded it */
	unsigned kept;			/* KEPT_*: never evicted for room */
	uint64_t warm_set;		/* KEPT_WARM: the warm list's number */
	uint64_t loader;		/* the connection whose request loads it */
	char name[NAME_LEN];		/* the path as first seen, escaped */
	char evict_why[128];		/* the last refused eviction */
	uint64_t evict_failed_ns;
	struct seen_pid seen[ENTRY_SEEN];	/* a ring */
	unsigned nseen;
	struct seen_pid holders[ENTRY_HOLDERS];	/* at the refusal (uid unused) */
	char holder_comm[ENTRY_HOLDERS][16];
	unsigned nholders;

	/* Written by the loading or evicting thread alone while it runs. */
	int file_fd;			/* the first asker's fd */
	struct member *file_member;	/* whose it is: closed by its thread
					 * (a kept entry's member is another) */
	int backend;
	struct pin_dev *dev;
	struct pin_region *region;
	struct pin_view *view;
	uint64_t view_length;
	int aligned;			/* tensors on 64 bytes: CACHE_LOAD_ALIGNED */
	int err;			/* positive errno when the load failed */
	char errtext[512];
	struct store *owner;
};

/* What evicting has cost: the kernel's DONATE, then freeing the pages. */
struct evictions {
	uint64_t count;
	uint64_t last_bytes;
	uint64_t last_donate_ns, last_release_ns;
	uint64_t max_ns;		/* the slowest, DONATE and release */
};

/* Threads tell the loop what they did through these, and an eventfd. */
enum event_kind { EV_KEYED, EV_LOADED, EV_EVICTED, EV_LISTED };

struct event {
	struct event *next;
	enum event_kind kind;
	uint64_t conn_id;		/* KEYED, LISTED */
	char tenant[TENANT_LEN];	/* KEYED: whose fd; EVICTED: the
					 * refused entry's charge goes to */
	struct entry *entry;		/* LOADED, EVICTED */
	int err;			/* positive errno, or 0 */
	int fd;				/* KEYED: the client's fd, or -1 */
	struct cache_key key;		/* KEYED */
	int digested;			/* KEYED: by a digest's thread */
	char name[NAME_LEN];		/* KEYED */
	char why[256];			/* KEYED, EVICTED: when err */
	uint64_t donate_ns, release_ns;	/* EVICTED */
	struct seen_pid holders[ENTRY_HOLDERS];	/* EVICTED: refused by */
	char holder_comm[ENTRY_HOLDERS][16];
	unsigned nholders;
	char *text;			/* LISTED, malloc'd */
	size_t len;
};

struct events {
	pthread_mutex_t lock;
	struct event *head, *tail;
	int efd;			/* eventfd the loop polls */
};

struct member_opts {
	uint64_t share;			/* bytes of the budget one tenant may hold */
	unsigned max_clients;		/* connections of one tenant */
	unsigned max_loads;		/* loads of one tenant in flight */
	unsigned max_pending_fds;	/* its fds still to key or close */
};

/* One tenant's share of the service, and the thread that touches its fds. */
struct member {
	struct member *next;
	char tenant[TENANT_LEN];	/* its key (tenant.c) */
	unsigned conns;			/* the loop's counts */
	unsigned loads;
	uint64_t bytes;			/* charged for the entries it loaded */

	pthread_mutex_t lock;		/* the fd queue, shared with the thread */
	struct fd_job *jobs, *last;
	unsigned queued;		/* jobs not yet done */
	unsigned fds;			/* its clients' fds the process holds */
	int running;
	struct events *ev;
};

/* The service manager's fd store (fdstore.c). */
struct fdstore_fd {
	int fd;
	char name[256];
};

struct fdstore {
	int on;				/* under systemd: $NOTIFY_SOCKET */
	struct sockaddr_un addr;
	socklen_t addr_len;
	struct fdstore_fd *passed;	/* handed back at start, ours by name */
	unsigned npassed;
	unsigned restored, dropped;
};

struct store {
	struct entry *head, *tail;
	unsigned count;
	uint64_t used;			/* bytes of every entry, loading too */
	uint64_t budget;
	uint64_t next_id;
	int backend;			/* PIN_BACKEND_* the loads ask for */
	enum tenant_kind tenant;	/* whom evictions charge a held entry */
	uint64_t loads;			/* files loaded since start */
	struct evictions evictions;
	struct events ev;
	struct fdstore *fdstore;	/* NULL: entries die with the process */
};

uint64_t now_ns(void);
uint64_t now_real_ns(void);
void human_bytes(uint64_t n, char *buf, size_t len);
void escape_name(const char *in, size_t n, char *out, size_t len);

/* events.c */
int events_init(struct events *ev);
void events_fini(struct events *ev);
void events_post(struct events *ev, struct event *e);
struct event *events_take(struct events *ev);
struct event *event_new(enum event_kind kind);
void event_free(struct event *e);
int thread_detached(void *(*fn)(void *), void *arg);

/* key.c */
int key_of_fd(int fd, struct cache_key *k, char *why, size_t len);
int key_equal(const struct cache_key *a, const struct cache_key *b);
int key_hash_fd(int fd, struct cache_key *k, char *why, size_t len);
int key_digest(const void *p, size_t n, uint8_t out[32]);

/* tenant.c */
int tenant_kind_parse(const char *s);
int tenant_pod_cut(char *path);
int tenant_of(enum tenant_kind kind, pid_t pid, uid_t uid, char *out,
	      size_t len);
int tenant_of_peer(enum tenant_kind kind, int fd, const struct ucred *cr,
		   char *out, size_t len);
int tenant_uid_of(pid_t pid, uid_t *uid);
int tenant_kind_usable(enum tenant_kind kind, char *why, size_t len);

/* member.c */
struct member *member_get(struct member **list, const char *tenant,
			  struct events *ev);
void member_key(struct member *m, int fd, uint64_t conn_id);
void member_drop_fd(struct member *m, int fd);
void member_took(struct member *m, int n);
unsigned member_fds(struct member *m);
unsigned member_pending(struct member *m);
void members_sweep(struct member **list);
void members_fini(struct member **list);

/* store.c */
int store_init(struct store *s, uint64_t budget, int backend);
void store_fini(struct store *s);
struct entry *store_find(struct store *s, const struct cache_key *k);
void store_touch(struct store *s, struct entry *e);
struct entry *store_add(struct store *s, const struct cache_key *k,
			uint64_t charge, struct member *m, uid_t uid);
void entry_charge_to(struct entry *e, struct member *m);
void store_forget(struct store *s, struct entry *e);
void entry_release(struct entry *e);
void entry_saw(struct entry *e, pid_t pid, uid_t uid);
int entry_visible_pid(const struct entry *e, pid_t pid, uid_t caller);

/* evict.c */
struct room {
	uint64_t need;
	struct member *member;
	uint64_t since_ns;		/* refusals after this are final */
};
int room_plan(struct store *s, const struct room *r,
	      const struct member_opts *mo);
int evict_start(struct store *s, struct entry *e);
void evict_done(struct store *s, struct event *ev);
void room_refusal(struct store *s, const struct room *r,
		  const struct member_opts *mo, uid_t caller,
		  char *why, size_t len);

/* load.c */
int load_start(struct store *s, struct entry *e);

/* digest.c */
int digest_start(struct events *ev, const struct event *kev,
		 struct member *m);

/* list.c */
int list_start(struct store *s, uint64_t conn_id, uid_t caller);

/* fdstore.c */
int fdstore_init(struct fdstore *f);
int fdstore_collect(struct fdstore *f);
int fdstore_name_ours(const char *name, size_t len);
void fdstore_put(struct entry *e);
void fdstore_drop(struct entry *e);
void fdstore_rekeep(struct entry *e);
void fdstore_restore(struct store *s, struct member **members);

/* listen.c */
int listen_fds_from_systemd(int *fds, int max);
int listen_on_path(const char *path, struct stat *bound);
int listen_path_remove(const char *path, const struct stat *bound);

/* loop.c */
struct loop_opts {
	int client_timeout_ms;
	int load_timeout_ms;		/* a waiting connection's deadline */
	unsigned max_clients;
	enum tenant_kind tenant;	/* what a member is */
	struct member_opts member;
	const char *config;		/* --config: the warm list (warm.c) */
	int config_given;		/* named: its absence is said */
};
int loop_run(struct store *s, const int *lfds, int nlfds,
	     const struct loop_opts *o);

#endif /* PINMEM_CACHED_H */
