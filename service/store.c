// SPDX-License-Identifier: GPL-2.0
/*
 * The entries pinmem-cached holds: found by a file's identity, kept most
 * recently used first, and evicted from the other end only when the
 * kernel agrees (pin_region_donate with no wait), so a client that maps a view
 * makes an eviction fail, never itself.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "service.h"

uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

void human_bytes(uint64_t n, char *buf, size_t len)
{
	if (n >= (1ULL << 30))
		snprintf(buf, len, "%.1f GiB", (double)n / (1ULL << 30));
	else if (n >= (1ULL << 20))
		snprintf(buf, len, "%.1f MiB", (double)n / (1ULL << 20));
	else
		snprintf(buf, len, "%llu KiB", (unsigned long long)(n >> 10));
}

int store_init(struct store *s, uint64_t budget, int backend)
{
	memset(s, 0, sizeof(*s));
	s->budget = budget;
	s->backend = backend;
	s->next_id = 1;
	s->done_efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (s->done_efd < 0)
		return -errno;
	pthread_mutex_init(&s->lock, NULL);
	return 0;
}

static void entry_free(struct entry *e)
{
	pin_view_close(e->view);
	if (e->region)
		pin_region_close(e->region);
	pin_dev_close(e->dev);
	if (e->file_fd >= 0)
		close(e->file_fd);
	free(e);
}

/*
 * At exit: loads still running keep their entries (the process ends with
 * them); loads done but not yet seen by the loop are freed like the rest.
 */
void store_fini(struct store *s)
{
	struct entry *e, *next;

	pthread_mutex_lock(&s->lock);
	for (e = s->done; e; e = e->done_next)
		e->state = ENTRY_READY;
	s->done = NULL;
	pthread_mutex_unlock(&s->lock);
	for (e = s->head; e; e = next) {
		next = e->next;
		if (e->state == ENTRY_READY)
			entry_free(e);
	}
	close(s->done_efd);
}

/*
 * The identity of the file open at fd. The fd must be open for reading
 * (an O_PATH fd proves nothing about the sender's right to read) and name
 * a regular file.
 */
int key_of_fd(int fd, struct cache_key *k, char *why, size_t len)
{
	struct stat st;
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0)
		return snprintf(why, len, "fcntl: %s", strerror(errno)), -EBADF;
	if ((fl & O_PATH) || (fl & O_ACCMODE) == O_WRONLY) {
		snprintf(why, len, "the fd is not open for reading (O_PATH or write-only): open the checkpoint with O_RDONLY");
		return -EACCES;
	}
	if (fstat(fd, &st) < 0)
		return snprintf(why, len, "fstat: %s", strerror(errno)), -errno;
	if (!S_ISREG(st.st_mode)) {
		snprintf(why, len, "the fd is not a regular file");
		return -EINVAL;
	}
	memset(k, 0, sizeof(*k));
	k->dev = st.st_dev;
	k->ino = st.st_ino;
	k->size = st.st_size;
	k->mtime = st.st_mtim;
	k->ctime = st.st_ctim;
	return 0;
}

int key_equal(const struct cache_key *a, const struct cache_key *b)
{
	return a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
	       a->mtime.tv_sec == b->mtime.tv_sec &&
	       a->mtime.tv_nsec == b->mtime.tv_nsec &&
	       a->ctime.tv_sec == b->ctime.tv_sec &&
	       a->ctime.tv_nsec == b->ctime.tv_nsec;
}

struct entry *store_find(struct store *s, const struct cache_key *k)
{
	for (struct entry *e = s->head; e; e = e->next)
		if (key_equal(&e->key, k))
			return e;
	return NULL;
}

static void unlink_entry(struct store *s, struct entry *e)
{
	if (e->prev)
		e->prev->next = e->next;
	else
		s->head = e->next;
	if (e->next)
		e->next->prev = e->prev;
	else
		s->tail = e->prev;
	e->prev = e->next = NULL;
}

static void push_front(struct store *s, struct entry *e)
{
	e->next = s->head;
	e->prev = NULL;
	if (s->head)
		s->head->prev = e;
	s->head = e;
	if (!s->tail)
		s->tail = e;
}

void store_touch(struct store *s, struct entry *e)
{
	e->used_ns = now_ns();
	unlink_entry(s, e);
	push_front(s, e);
}

struct entry *store_add(struct store *s, const struct cache_key *k,
			uint64_t charge)
{
	struct entry *e = calloc(1, sizeof(*e));

	if (!e)
		return NULL;
	e->id = s->next_id++;
	e->key = *k;
	e->state = ENTRY_LOADING;
	e->bytes = charge;
	e->born_ns = e->used_ns = now_ns();
	e->file_fd = -1;
	e->backend = s->backend;
	push_front(s, e);
	s->count++;
	s->used += charge;
	return e;
}

void store_remove(struct store *s, struct entry *e)
{
	unlink_entry(s, e);
	s->count--;
	s->used -= e->bytes;
	entry_free(e);
}

static void count_eviction(struct evictions *ev, uint64_t bytes,
			   uint64_t donate_ns, uint64_t release_ns)
{
	ev->count++;
	ev->last_bytes = bytes;
	ev->last_donate_ns = donate_ns;
	ev->last_release_ns = release_ns;
	if (donate_ns + release_ns > ev->max_ns)
		ev->max_ns = donate_ns + release_ns;
}

/*
 * Ask the kernel to take e back: a donation with no wait succeeds only
 * when no view of it is mapped. On the portable backend there is nobody
 * to ask; the service drops its reference and the memory lives on while
 * any client maps it. Timed: the DONATE, and the release of the pages
 * when the region is closed (both inside the load that needs the room).
 */
static int try_evict(struct store *s, struct entry *e)
{
	uint64_t t0, t1, bytes;
	int ret;

	if (e->state != ENTRY_READY || e->waiters || e->handoffs) {
		snprintf(e->evict_why, sizeof(e->evict_why), "%s",
			 e->state != ENTRY_READY ? "loading" :
			 "being handed to a client");
		return -EBUSY;
	}
	t0 = now_ns();
	ret = pin_region_donate(e->region, 0);
	if (ret && ret != -EOPNOTSUPP) {
		snprintf(e->evict_why, sizeof(e->evict_why), "%s",
			 pin_region_error(e->region));
		return ret;
	}
	t1 = now_ns();
	bytes = e->bytes;
	store_remove(s, e);
	count_eviction(&s->evictions, bytes, t1 - t0, now_ns() - t1);
	return 0;
}

/*
 * Evict least recently used entries until need more bytes fit the
 * budget. -ENOSPC, with the reasons in why, when they do not.
 */
int store_make_room(struct store *s, uint64_t need, char *why, size_t len)
{
	char a[32], b[32];
	struct entry *e, *prev;
	size_t off;

	human_bytes(need, a, sizeof(a));
	human_bytes(s->budget, b, sizeof(b));
	if (need > s->budget) {
		snprintf(why, len, "over budget: the file needs %s, the service's budget is %s",
			 a, b);
		return -ENOSPC;
	}
	for (e = s->tail; e && s->used + need > s->budget; e = prev) {
		prev = e->prev;
		try_evict(s, e);
	}
	if (s->used + need <= s->budget)
		return 0;
	off = (size_t)snprintf(why, len, "over budget: the file needs %s of %s and nothing more can be evicted:",
			       a, b);
	for (e = s->tail; e && off < len; e = e->prev)
		off += (size_t)snprintf(why + off, len - off, " entry %llu: %s;",
					(unsigned long long)e->id, e->evict_why);
	return -ENOSPC;
}
