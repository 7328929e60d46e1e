// SPDX-License-Identifier: GPL-2.0
/*
 * The entries pinmem-cached holds: found by a file's identity, kept most
 * recently used first, each charged to the budget and to the member whose
 * request loaded it, or, once an eviction found it mapped by other
 * tenants alone, to one of theirs (evict.c). The loop alone changes the list; an entry's pinned
 * resources are freed by the thread that loads or evicts it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "service.h"

uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

uint64_t now_real_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
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

/*
 * A name for a table a person reads: bytes outside printable ASCII, and
 * the backslash, as \xNN, so that no name moves a terminal's cursor or
 * starts a line of its own. Cut to fit, never mid-escape.
 */
void escape_name(const char *in, size_t n, char *out, size_t len)
{
	size_t o = 0;

	for (size_t i = 0; i < n && o + 5 < len; i++) {
		unsigned char c = (unsigned char)in[i];

		if (c >= 0x20 && c < 0x7f && c != '\\')
			out[o++] = (char)c;
		else
			o += (size_t)snprintf(out + o, len - o, "\\x%02x", c);
	}
	if (len)
		out[o < len ? o : len - 1] = '\0';
}

int store_init(struct store *s, uint64_t budget, int backend)
{
	memset(s, 0, sizeof(*s));
	s->budget = budget;
	s->backend = backend;
	s->next_id = 1;
	return events_init(&s->ev);
}

/* The pinned resources: by the thread that owns them, or at exit. */
void entry_release(struct entry *e)
{
	pin_view_close(e->view);
	e->view = NULL;
	if (e->region)
		pin_region_close(e->region);
	e->region = NULL;
	pin_dev_close(e->dev);
	e->dev = NULL;
}

/*
 * At exit: ready entries are freed; those a thread still loads or evicts
 * stay with it (the process ends with them).
 */
void store_fini(struct store *s)
{
	struct entry *e, *next;

	for (e = s->head; e; e = next) {
		next = e->next;
		if (e->state == ENTRY_READY) {
			entry_release(e);
			free(e);
		}
	}
	s->head = s->tail = NULL;
}

/* The entry holding the file with key k; entries on their way out never. */
struct entry *store_find(struct store *s, const struct cache_key *k)
{
	for (struct entry *e = s->head; e; e = e->next)
		if (e->state != ENTRY_EVICTING && key_equal(&e->key, k))
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
			uint64_t charge, struct member *m, uid_t uid)
{
	struct entry *e = calloc(1, sizeof(*e));

	if (!e)
		return NULL;
	e->id = s->next_id++;
	e->key = *k;
	e->state = ENTRY_LOADING;
	e->bytes = charge;
	e->born_ns = e->used_ns = now_ns();
	e->born_real_ns = now_real_ns();
	e->file_fd = -1;
	e->backend = s->backend;
	e->owner = s;
	e->member = m;
	e->uid = uid;
	push_front(s, e);
	s->count++;
	s->used += charge;
	m->bytes += charge;
	return e;
}

/* Unlink and uncharge an entry whose resources are already released. */
void store_forget(struct store *s, struct entry *e)
{
	unlink_entry(s, e);
	s->count--;
	s->used -= e->bytes;
	e->member->bytes -= e->bytes;
	free(e);
}

/* Move e's charge to member m: the budget's use is unchanged. */
void entry_charge_to(struct entry *e, struct member *m)
{
	e->member->bytes -= e->bytes;
	m->bytes += e->bytes;
	e->member = m;
}

/* A client that was handed e's view, so that tables name it to its user. */
void entry_saw(struct entry *e, pid_t pid, uid_t uid)
{
	e->seen[e->nseen++ % ENTRY_SEEN] = (struct seen_pid){ pid, uid };
}

/*
 * Whether the process pid, mapping e, may be named to caller: root sees
 * all, as /proc does for CAP_SYS_PTRACE; others see the processes of their
 * own uid that e was handed to. A process the service never served (a
 * child of a client) is named to root alone.
 */
int entry_visible_pid(const struct entry *e, pid_t pid, uid_t caller)
{
	unsigned n = e->nseen < ENTRY_SEEN ? e->nseen : ENTRY_SEEN;

	if (caller == 0)
		return 1;
	for (unsigned i = 0; i < n; i++)
		if (e->seen[i].pid == pid && e->seen[i].uid == caller)
			return 1;
	return 0;
}
