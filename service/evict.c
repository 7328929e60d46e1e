// SPDX-License-Identifier: GPL-2.0
/*
 * Making room: which entries to evict for a load, and the evictions, each
 * in a thread of its own. An eviction asks the kernel to take the region
 * back (pin_region_donate with no wait, which succeeds only when no view
 * of it is mapped) and frees it; both take the region's lock, which
 * another process can keep busy, so neither runs on the event loop. An
 * entry being evicted still counts against the budget until it is gone.
 *
 * Two limits: the budget, and each member's share of it, so that one
 * tenant cannot hold everything and make every other tenant's loads
 * private. An entry counts against its loader's share until an eviction
 * finds it mapped by other tenants alone: then one of them pays for it,
 * so that a third party keeping a tenant's entry mapped cannot fill that
 * tenant's share.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service.h"

static int evictable(const struct entry *e, uint64_t since_ns)
{
	return e->state == ENTRY_READY && !e->kept && !e->waiters && !e->handoffs &&
	       e->evict_failed_ns <= since_ns;
}

/* Bytes on their way out: of everyone, and of member m. */
static void evicting(const struct store *s, const struct member *m,
		     uint64_t *all, uint64_t *mine)
{
	*all = *mine = 0;
	for (const struct entry *e = s->head; e; e = e->next) {
		if (e->state != ENTRY_EVICTING)
			continue;
		*all += e->bytes;
		if (e->member == m)
			*mine += e->bytes;
	}
}

static int over(uint64_t held, uint64_t leaving, uint64_t need, uint64_t cap)
{
	return held - leaving + need > cap;
}

/*
 * Room for r->need bytes of r->member: 0 when there is room now, 1 when
 * evictions under way may make it (ask again after each), -ENOSPC when
 * nothing can. Starts the evictions it needs, least recently used first:
 * the member's own entries for its share, anyone's for the budget.
 */
int room_plan(struct store *s, const struct room *r,
	      const struct member_opts *mo)
{
	struct member *m = r->member;
	uint64_t all, mine;
	struct entry *e, *prev;

	if (r->need > s->budget || r->need > mo->share)
		return -ENOSPC;
	evicting(s, m, &all, &mine);
	for (e = s->tail; e && over(m->bytes, mine, r->need, mo->share); e = prev) {
		prev = e->prev;
		if (e->member == m && evictable(e, r->since_ns) &&
		    !evict_start(s, e)) {
			mine += e->bytes;
			all += e->bytes;
		}
	}
	for (e = s->tail; e && over(s->used, all, r->need, s->budget); e = prev) {
		prev = e->prev;
		if (evictable(e, r->since_ns) && !evict_start(s, e)) {
			all += e->bytes;
			mine += e->member == m ? e->bytes : 0;
		}
	}
	if (!over(m->bytes, 0, r->need, mo->share) &&
	    !over(s->used, 0, r->need, s->budget))
		return 0;
	if (!over(m->bytes, mine, r->need, mo->share) &&
	    !over(s->used, all, r->need, s->budget))
		return 1;
	return -ENOSPC;
}

/* The tenant of a process that maps e; -errno when it cannot be told. */
static int holder_tenant(const struct entry *e, pid_t pid, char *out,
			 size_t len)
{
	uid_t uid = 0;
	int ret = 0;

	if (e->owner->tenant == TENANT_UID)
		ret = tenant_uid_of(pid, &uid);
	return ret ? ret : tenant_of(e->owner->tenant, pid, uid, out, len);
}

/*
 * Where e's charge goes when no process of its member's tenant maps it:
 * the first holder whose tenant can be told (ev->tenant; empty: stays).
 */
static void note_payer(struct entry *e, struct event *ev)
{
	char t[TENANT_LEN];

	ev->tenant[0] = '\0';
	for (unsigned i = 0; i < ev->nholders; i++) {
		if (holder_tenant(e, ev->holders[i].pid, t, sizeof(t)))
			continue;
		if (!strcmp(t, e->member->tenant)) {
			ev->tenant[0] = '\0';
			return;
		}
		if (!ev->tenant[0])
			memcpy(ev->tenant, t, sizeof(t));
	}
}

/* After a refused DONATE: who maps it, for the tables (names filtered). */
static void note_holders(struct entry *e, struct event *ev)
{
	struct pin_holder h[ENTRY_HOLDERS];
	int n, views = 0;

	h[0].size = sizeof(h[0]);
	n = pin_region_holders(e->region, h, ENTRY_HOLDERS);
	for (int i = 0; i < n && i < ENTRY_HOLDERS; i++) {
		if (h[i].kind != PIN_HOLDER_VIEW)
			continue;
		ev->holders[ev->nholders].pid = h[i].pid;
		memcpy(ev->holder_comm[ev->nholders++], h[i].comm, 16);
		views++;
	}
	if (n > ENTRY_HOLDERS)
		views += n - ENTRY_HOLDERS;
	snprintf(ev->why, sizeof(ev->why), "mapped by %d client mapping%s",
		 views, views == 1 ? "" : "s");
	note_payer(e, ev);
}

static void *evict_thread(void *arg)
{
	struct entry *e = arg;
	struct event *ev = event_new(EV_EVICTED);
	uint64_t t0 = now_ns(), t1;
	int ret;

	ev->entry = e;
	/* Out of the fd store first: its copy of the fd would keep the pages. */
	fdstore_drop(e);
	ret = pin_region_donate(e->region, 0);
	if (ret && ret != -EOPNOTSUPP) {
		fdstore_put(e);
		ev->err = -ret;
		if (ret == -EBUSY)
			note_holders(e, ev);
		else
			snprintf(ev->why, sizeof(ev->why), "donate: %s",
				 strerror(-ret));
	} else {
		t1 = now_ns();
		entry_release(e);
		ev->donate_ns = t1 - t0;
		ev->release_ns = now_ns() - t1;
	}
	events_post(&e->owner->ev, ev);
	return NULL;
}

int evict_start(struct store *s, struct entry *e)
{
	int ret;

	(void)s;
	e->state = ENTRY_EVICTING;
	ret = thread_detached(evict_thread, e);
	if (ret)
		e->state = ENTRY_READY;
	return ret;
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

/* An eviction's thread is done: forget the entry, or keep it and why. */
void evict_done(struct store *s, struct event *ev)
{
	struct entry *e = ev->entry;

	if (!ev->err) {
		count_eviction(&s->evictions, e->bytes, ev->donate_ns,
			       ev->release_ns);
		store_forget(s, e);
		return;
	}
	e->state = ENTRY_READY;
	e->evict_failed_ns = now_ns();
	snprintf(e->evict_why, sizeof(e->evict_why), "%.120s", ev->why);
	e->nholders = ev->nholders;
	memcpy(e->holders, ev->holders, sizeof(e->holders));
	memcpy(e->holder_comm, ev->holder_comm, sizeof(e->holder_comm));
}

/* Why e cannot go now, its holders named as caller may see them. */
static size_t put_reason(const struct entry *e, uid_t caller, char *buf,
			 size_t len)
{
	const char *why = e->state == ENTRY_LOADING ? "loading" :
			  e->state == ENTRY_EVICTING ? "being evicted" :
			  e->waiters || e->handoffs ? "being handed to a client" :
			  e->evict_why[0] ? e->evict_why : "evictable";
	size_t off = (size_t)snprintf(buf, len, " entry %llu: %s",
				      (unsigned long long)e->id, why);
	unsigned hidden = 0;

	for (unsigned i = 0; i < e->nholders && off < len; i++) {
		if (!entry_visible_pid(e, e->holders[i].pid, caller)) {
			hidden++;
			continue;
		}
		off += (size_t)snprintf(buf + off, len - off, "%s pid %d (%.16s)",
					i - hidden ? "," : ":",
					(int)e->holders[i].pid, e->holder_comm[i]);
	}
	if (off < len)
		off += (size_t)snprintf(buf + off, len - off, ";");
	return off;
}

/* The ENOSPC text: which limit, and why nothing more could be evicted. */
void room_refusal(struct store *s, const struct room *r,
		  const struct member_opts *mo, uid_t caller,
		  char *why, size_t len)
{
	char a[32], b[32], c[32];
	/* The share is the reason only where it is less than the budget. */
	int share = mo->share < s->budget &&
		    (r->need > mo->share ||
		     (r->need <= s->budget &&
		      r->member->bytes + r->need > mo->share));
	size_t off;

	human_bytes(r->need, a, sizeof(a));
	human_bytes(s->budget, b, sizeof(b));
	human_bytes(mo->share, c, sizeof(c));
	if (r->need > s->budget || r->need > mo->share) {
		snprintf(why, len, "over budget: the file needs %s, the service's budget is %s, one tenant's share %s",
			 a, b, c);
		return;
	}
	if (share) {
		human_bytes(r->member->bytes, b, sizeof(b));
		off = (size_t)snprintf(why, len, "over your share: the file needs %s; your tenant's entries hold %s of its share of %s, and none can be evicted now:",
				       a, b, c);
	} else {
		off = (size_t)snprintf(why, len, "over budget: the file needs %s of %s and nothing more can be evicted:",
				       a, b);
	}
	for (struct entry *e = s->tail; e && off < len; e = e->prev)
		if (!share || e->member == r->member)
			off += put_reason(e, caller, why + off, len - off);
}
