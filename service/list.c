// SPDX-License-Identifier: GPL-2.0
/*
 * pinmem-cached's entries as a table: size, age, idle time, the processes
 * mapping each (the kernel's holders on the device backend) and why an
 * entry cannot be evicted now.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "service.h"

#define MAX_HOLDERS	64

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

/* The view mappings of a ready entry, as the kernel counts them. */
static void put_clients(struct text *t, struct entry *e)
{
	struct pin_holder h[MAX_HOLDERS];
	int n, views = 0;

	if (e->state != ENTRY_READY) {
		put(t, "    clients: %u waiting for the load\n", e->waiters);
		return;
	}
	h[0].size = sizeof(h[0]);
	n = pin_region_holders(e->region, h, MAX_HOLDERS);
	if (n == -EOPNOTSUPP) {
		put(t, "    clients: not known (portable backend: the kernel does not count views)\n");
		put(t, "    evict: %s\n", e->handoffs ? "no, being handed to a client" :
		    "yes (drops the service's reference; clients keep their mappings)");
		return;
	}
	if (n < 0) {
		put(t, "    clients: holders: %s\n", pin_region_error(e->region));
		return;
	}
	for (int i = 0; i < n && i < MAX_HOLDERS; i++) {
		if (h[i].kind != PIN_HOLDER_VIEW)
			continue;
		put(t, "%s pid %d (%.16s)", views++ ? "," : "    clients:",
		    (int)h[i].pid, h[i].comm);
	}
	if (n > MAX_HOLDERS)
		put(t, " and %d more", n - MAX_HOLDERS);
	put(t, "%s\n", views ? "" : "    clients: none mapping it");
	if (views || e->handoffs)
		put(t, "    evict: no, %s\n", views ? "mapped by the clients above" :
		    "being handed to a client");
	else
		put(t, "    evict: yes\n");
}

/* How many entries were evicted, and what the last and slowest took. */
static void put_evictions(struct text *t, const struct evictions *ev)
{
	char size[32];

	if (!ev->count) {
		put(t, "evictions: 0\n");
		return;
	}
	human_bytes(ev->last_bytes, size, sizeof(size));
	put(t, "evictions: %llu; the last: %s, DONATE %.3f ms, release %.3f ms; the slowest %.3f ms\n",
	    (unsigned long long)ev->count, size, (double)ev->last_donate_ns / 1e6,
	    (double)ev->last_release_ns / 1e6, (double)ev->max_ns / 1e6);
}

int store_list(struct store *s, char *buf, size_t len)
{
	struct text t = { .buf = buf, .len = len };
	uint64_t now = now_ns();
	char used[32], budget[32], size[32];

	buf[0] = '\0';
	human_bytes(s->used, used, sizeof(used));
	human_bytes(s->budget, budget, sizeof(budget));
	put(&t, "pinmem-cached: %s backend, %u entries, %s of %s budget, %llu loads\n",
	    pin_backend_name(s->backend), s->count, used, budget,
	    (unsigned long long)s->loads);
	put_evictions(&t, &s->evictions);
	put(&t, "%4s %10s %8s %8s %-8s %s\n", "ID", "SIZE", "AGE", "IDLE",
	    "STATE", "FILE");
	for (struct entry *e = s->head; e; e = e->next) {
		human_bytes(e->bytes, size, sizeof(size));
		put(&t, "%4llu %10s %7.1fs %7.1fs %-8s %s\n",
		    (unsigned long long)e->id, size,
		    (double)(now - e->born_ns) / 1e9,
		    (double)(now - e->used_ns) / 1e9,
		    e->state == ENTRY_READY ? "ready" : "loading", e->name);
		put_clients(&t, e);
		if (e->evict_why[0])
			put(&t, "    last refused eviction: %s\n", e->evict_why);
	}
	if (t.off + 1 >= t.len && t.len > 16)
		memcpy(buf + t.len - 16, "\n... (cut)\n", 12);
	return (int)t.off;
}
