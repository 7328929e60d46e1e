// SPDX-License-Identifier: GPL-2.0
/*
 * pinmem-cached's entries as a table: size, age, idle time, the processes
 * mapping each (the kernel's holders on the device backend) and why an
 * entry cannot be evicted now. The loop takes a snapshot; a thread of the
 * LIST's own asks the kernel for holders (which takes each region's lock)
 * and writes the text. A caller sees paths and processes as /proc would
 * show them: its own uid's, or all for root, who also sees the tenant
 * each entry counts against.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <uapi/pinmem.h>

#include "service.h"

#define MAX_HOLDERS	64
#define LIST_MAX	(60U << 10)

/*
 * One entry as the loop saw it (the fields the loop owns: a loading
 * thread may be writing the others), and a view fd to ask the kernel with.
 */
struct list_item {
	struct entry e;
	int visible;
	char charged[TENANT_LEN];	/* the tenant it counts against */
	int vfd;			/* a dup of the view's fd, or -1 */
};

static void snapshot(struct list_item *it, const struct entry *e)
{
	it->e.id = e->id;
	it->e.state = e->state;
	it->e.bytes = e->bytes;
	it->e.born_ns = e->born_ns;
	it->e.used_ns = e->used_ns;
	it->e.waiters = e->waiters;
	it->e.handoffs = e->handoffs;
	it->e.kept = e->kept;
	memcpy(it->e.name, e->name, sizeof(e->name));
	memcpy(it->e.evict_why, e->evict_why, sizeof(e->evict_why));
	memcpy(it->e.seen, e->seen, sizeof(e->seen));
	it->e.nseen = e->nseen;
	memcpy(it->charged, e->member->tenant, sizeof(it->charged));
}

struct list_job {
	struct events *ev;
	uint64_t conn_id;
	uid_t caller;
	char head[512];
	struct list_item *items;
	unsigned n;
	int portable;
};

struct text {
	char *buf;
	size_t len, off;
};

static void put(struct text *t, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (t->off + 1 >= t->len)
		return;
	va_start(ap, fmt);
	n = vsnprintf(t->buf + t->off, t->len - t->off, fmt, ap);
	va_end(ap);
	if (n > 0)
		t->off += (size_t)n < t->len - t->off ? (size_t)n :
			  t->len - t->off - 1;
}

/* The kernel's view holders of the item's region; -errno on failure. */
static int holders_of(int vfd, struct pinmem_holder *h, unsigned cap)
{
	struct pinmem_holders q = {
		.holders_ptr = (uintptr_t)h, .capacity = cap,
		.record_size = sizeof(*h),
	};

	if (ioctl(vfd, PINMEM_IOC_HOLDERS, &q) < 0)
		return -errno;
	return (int)q.count;
}

static void put_holders(struct text *t, const struct list_item *it,
			uid_t caller, int say_evict)
{
	struct pinmem_holder h[MAX_HOLDERS];
	int n = holders_of(it->vfd, h, MAX_HOLDERS), views = 0, hidden = 0;

	if (n < 0) {
		put(t, "    clients: holders: %s\n", strerror(-n));
		return;
	}
	for (int i = 0; i < n && i < MAX_HOLDERS; i++) {
		char comm[64];

		if (h[i].kind != PINMEM_HOLDER_VIEW)
			continue;
		views++;
		if (!entry_visible_pid(&it->e, (pid_t)h[i].tgid, caller)) {
			hidden++;
			continue;
		}
		escape_name(h[i].comm, strnlen(h[i].comm, sizeof(h[i].comm)),
			    comm, sizeof(comm));
		put(t, "%s pid %u (%s)", views - hidden > 1 ? "," : "    clients:",
		    h[i].tgid, comm);
	}
	if (n > MAX_HOLDERS)
		hidden += n - MAX_HOLDERS, views += n - MAX_HOLDERS;
	if (hidden)
		put(t, "%s%d of other users", views > hidden ? ", and " : "    clients: ",
		    hidden);
	put(t, "%s\n", views ? "" : "    clients: none mapping it");
	if (!say_evict)
		return;
	if (views || it->e.handoffs)
		put(t, "    evict: no, %s\n", views ? "mapped by the clients above" :
		    "being handed to a client");
	else
		put(t, "    evict: yes\n");
}

static void put_clients(struct text *t, const struct list_item *it,
			int portable, uid_t caller)
{
	if (it->e.kept)
		put(t, "    kept: %s\n", it->e.kept == KEPT_WARM ? "warm list" :
		    it->e.kept == KEPT_PIN ? "pinned" : "pinned, warm list");
	if (it->e.kept && it->e.state == ENTRY_READY) {
		put(t, "    evict: no, kept loaded (pinctl cache unpin FILE lets it go)\n");
		if (!portable)
			put_holders(t, it, caller, 0);
	} else if (it->e.state == ENTRY_LOADING) {
		put(t, "    clients: %u waiting for the load\n", it->e.waiters);
	} else if (it->e.state == ENTRY_EVICTING) {
		put(t, "    evict: being evicted\n");
	} else if (portable) {
		put(t, "    clients: not known (portable backend: the kernel does not count views)\n");
		put(t, "    evict: %s\n", it->e.handoffs ? "no, being handed to a client" :
		    "yes (drops the service's reference; clients keep their mappings)");
	} else {
		put_holders(t, it, caller, 1);
	}
}

static void put_item(struct text *t, const struct list_item *it,
		     int portable, uid_t caller, uint64_t now)
{
	static const char *const states[] = { "loading", "ready", "evicting" };
	char size[32];

	human_bytes(it->e.bytes, size, sizeof(size));
	put(t, "%4llu %10s %7.1fs %7.1fs %-8s %s\n",
	    (unsigned long long)it->e.id, size,
	    (double)(now - it->e.born_ns) / 1e9,
	    (double)(now - it->e.used_ns) / 1e9, states[it->e.state],
	    it->visible ? it->e.name : "(a file of another user)");
	put_clients(t, it, portable, caller);
	if (it->e.evict_why[0])
		put(t, "    last refused eviction: %s\n", it->e.evict_why);
	if (caller == 0) {
		char tenant[TENANT_LEN];

		escape_name(it->charged, strlen(it->charged), tenant,
			    sizeof(tenant));
		put(t, "    charged to: %s\n", tenant);
	}
}

static void *list_thread(void *arg)
{
	struct list_job *j = arg;
	struct event *ev = event_new(EV_LISTED);
	struct text t = { .len = LIST_MAX };
	uint64_t now = now_ns();

	t.buf = malloc(t.len);
	if (t.buf) {
		t.buf[0] = '\0';
		put(&t, "%s", j->head);
		for (unsigned i = 0; i < j->n; i++)
			put_item(&t, &j->items[i], j->portable, j->caller, now);
		if (t.off + 1 >= t.len)
			memcpy(t.buf + t.len - 16, "\n... (cut)\n", 12);
	}
	for (unsigned i = 0; i < j->n; i++)
		if (j->items[i].vfd >= 0)
			close(j->items[i].vfd);
	ev->conn_id = j->conn_id;
	ev->text = t.buf;
	ev->len = t.buf ? strlen(t.buf) : 0;
	ev->err = t.buf ? 0 : ENOMEM;
	events_post(j->ev, ev);
	free(j->items);
	free(j);
	return NULL;
}

static void head_of(struct store *s, struct list_job *j)
{
	char used[32], budget[32];
	const struct evictions *ev = &s->evictions;
	size_t off;

	human_bytes(s->used, used, sizeof(used));
	human_bytes(s->budget, budget, sizeof(budget));
	off = (size_t)snprintf(j->head, sizeof(j->head),
			       "pinmem-cached: %s backend, %u entries, %s of %s budget, %llu loads\n",
			       pin_backend_name(s->backend), s->count, used, budget,
			       (unsigned long long)s->loads);
	if (!ev->count) {
		off += (size_t)snprintf(j->head + off, sizeof(j->head) - off,
					"evictions: 0\n");
	} else {
		human_bytes(ev->last_bytes, used, sizeof(used));
		off += (size_t)snprintf(j->head + off, sizeof(j->head) - off,
					"evictions: %llu; the last: %s, DONATE %.3f ms, release %.3f ms; the slowest %.3f ms\n",
					(unsigned long long)ev->count, used,
					(double)ev->last_donate_ns / 1e6,
					(double)ev->last_release_ns / 1e6,
					(double)ev->max_ns / 1e6);
	}
	snprintf(j->head + off, sizeof(j->head) - off, "%4s %10s %8s %8s %-8s %s\n",
		 "ID", "SIZE", "AGE", "IDLE", "STATE", "FILE");
}

/* Snapshot the store for caller and start the LIST's thread. */
int list_start(struct store *s, uint64_t conn_id, uid_t caller)
{
	struct list_job *j = calloc(1, sizeof(*j));
	unsigned i = 0;
	int ret;

	if (!j || !(j->items = calloc(s->count + 1, sizeof(*j->items)))) {
		free(j);
		return -ENOMEM;
	}
	j->ev = &s->ev;
	j->conn_id = conn_id;
	j->caller = caller;
	j->portable = s->backend == PIN_BACKEND_PORTABLE;
	head_of(s, j);
	for (struct entry *e = s->head; e && i < s->count; e = e->next, i++) {
		snapshot(&j->items[i], e);
		j->items[i].visible = caller == 0 || e->uid == caller;
		j->items[i].vfd = e->state == ENTRY_READY && !j->portable ?
				  dup(pin_view_fd(e->view)) : -1;
	}
	j->n = i;
	ret = thread_detached(list_thread, j);
	if (ret) {
		for (i = 0; i < j->n; i++)
			if (j->items[i].vfd >= 0)
				close(j->items[i].vfd);
		free(j->items);
		free(j);
	}
	return ret;
}
