/* SPDX-License-Identifier: GPL-2.0 */
/*
 * pinmem-cached: one pinned copy of a checkpoint per host. The types its
 * files share: an entry (one file's identity and its sealed region), the
 * store (the entries, least recently used last, and the budget), and a
 * connection of the event loop.
 */
#ifndef PINMEM_CACHED_H
#define PINMEM_CACHED_H

#include <pthread.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>

#include <pin.h>

/* A file's identity: what fstat says, never its path. */
struct cache_key {
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtime;
	struct timespec ctime;
};

enum entry_state { ENTRY_LOADING, ENTRY_READY };

struct entry {
	struct entry *prev, *next;	/* the store's list, most recent first */
	uint64_t id;
	struct cache_key key;
	enum entry_state state;
	uint64_t bytes;			/* charged against the budget */
	uint64_t born_ns, used_ns;	/* CLOCK_MONOTONIC */
	unsigned waiters;		/* connections waiting for the load */
	unsigned handoffs;		/* handed the view, not yet gone */
	char name[160];			/* the path as first seen, for lists */
	char evict_why[256];		/* the last refused eviction */

	/* Written by the loading thread alone until it completes. */
	int file_fd;			/* the first asker's fd, duplicated */
	int backend;
	struct pin_dev *dev;
	struct pin_region *region;
	struct pin_view *view;
	uint64_t view_length;
	int err;			/* positive errno when the load failed */
	char errtext[512];
	struct entry *done_next;	/* the completion queue */
	struct store *owner;
};

/* What evicting has cost: the kernel's DONATE, then freeing the pages. */
struct evictions {
	uint64_t count;
	uint64_t last_bytes;
	uint64_t last_donate_ns, last_release_ns;
	uint64_t max_ns;		/* the slowest, DONATE and release */
};

struct store {
	struct entry *head, *tail;
	unsigned count;
	uint64_t used;			/* bytes of every entry, loading too */
	uint64_t budget;
	uint64_t next_id;
	int backend;			/* PIN_BACKEND_* the loads ask for */
	uint64_t loads;			/* files loaded since start */
	struct evictions evictions;

	/* Completed loads, handed from loading threads to the loop. */
	pthread_mutex_t lock;
	struct entry *done;
	int done_efd;			/* eventfd the loop polls */
};

uint64_t now_ns(void);
void human_bytes(uint64_t n, char *buf, size_t len);

/* store.c */
int store_init(struct store *s, uint64_t budget, int backend);
void store_fini(struct store *s);
int key_of_fd(int fd, struct cache_key *k, char *why, size_t len);
int key_equal(const struct cache_key *a, const struct cache_key *b);
struct entry *store_find(struct store *s, const struct cache_key *k);
void store_touch(struct store *s, struct entry *e);
int store_make_room(struct store *s, uint64_t need, char *why, size_t len);
struct entry *store_add(struct store *s, const struct cache_key *k,
			uint64_t charge);
void store_remove(struct store *s, struct entry *e);
int store_list(struct store *s, char *buf, size_t len);

/* load.c */
int load_start(struct store *s, struct entry *e);
struct entry *load_take_done(struct store *s);

/* listen.c */
int listen_fds_from_systemd(int *fds, int max);
int listen_on_path(const char *path);

/* loop.c */
struct loop_opts {
	int client_timeout_ms;
	unsigned max_clients;
};
int loop_run(struct store *s, const int *lfds, int nlfds,
	     const struct loop_opts *o);

#endif /* PINMEM_CACHED_H */
