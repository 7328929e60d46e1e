// SPDX-License-Identifier: GPL-2.0
/*
 * A keyed LOAD on the event loop: served from memory, joined to the load
 * of its file under way, or a new load once there is room. Requests that
 * wait for evictions queue, oldest first, and ask again after each
 * eviction or load ends; a later request for the same file waits behind
 * the first, so that one file is loaded once.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "loop.h"

/* Room is there: a new entry, charged to the member, and its thread. */
static void start_load(struct loop *l, struct conn *c, uint64_t charge,
		       struct member *m)
{
	struct entry *e = store_add(l->s, &c->key, charge, m, c->uid);
	int fd = c->file_fd;

	room_unlink(l, c);
	c->state = CONN_NEW;
	c->file_fd = -1;
	if (!e) {
		member_drop_fd(c->member, fd);
		conn_error(l, c, ENOMEM, "out of memory");
		return;
	}
	memcpy(e->name, c->name, sizeof(e->name));
	e->file_fd = fd;
	e->file_member = c->member;
	e->loader = c->id;
	if (load_start(l->s, e)) {
		member_drop_fd(c->member, fd);
		store_forget(l->s, e);
		conn_error(l, c, EAGAIN, "cannot start a loading thread");
		return;
	}
	e->member->loads++;
	keep_entry(l, c, e);
	conn_join(l, c, e);
}

/* An earlier connection waiting for room for the same file: wait behind. */
static int room_queued_before(struct loop *l, struct conn *c)
{
	for (struct conn *o = l->rooms; o && o != c; o = o->room_next)
		if (key_equal(&o->key, &c->key))
			return 1;
	return 0;
}

/* A keyed file with no entry: room for it now, later, or never. */
static void try_room(struct loop *l, struct conn *c)
{
	uint64_t charge = ((uint64_t)c->key.size + (2U << 20) - 1) &
			  ~((2ULL << 20) - 1);
	struct room r = { charge, c->member, c->since_ns };
	struct member_opts kept_mo;
	const struct member_opts *mo = keep_room(l, c, &r, &kept_mo);
	struct entry *e = store_find(l->s, &c->key);
	char why[1024];
	int fd, ret;

	if (e || room_queued_before(l, c)) {
		if (e) {
			room_unlink(l, c);
			fd = c->file_fd;
			c->file_fd = -1;
			member_drop_fd(c->member, fd);
			c->state = CONN_NEW;
			keep_entry(l, c, e);
			if (e->state == ENTRY_READY)
				conn_hand_over(l, c, e, 0);
			else
				conn_join(l, c, e);
		}
		return;
	}
	if (c->member->loads >= mo->max_loads) {
		snprintf(why, sizeof(why), "busy: your tenant has %u loads in flight, the most one tenant may have",
			 c->member->loads);
		conn_error(l, c, EAGAIN, why);
		return;
	}
	ret = room_plan(l->s, &r, mo);
	if (ret == 0) {
		start_load(l, c, charge, r.member);
	} else if (ret < 0) {
		room_refusal(l->s, &r, mo, c->uid, why, sizeof(why));
		conn_error(l, c, ENOSPC, why);
	}
}

/* Every connection waiting for room asks again, oldest first. */
void retry_rooms(struct loop *l)
{
	struct conn *c = l->rooms, *next;

	while (c) {
		next = c->room_next;
		try_room(l, c);
		c = next;
	}
}

static void room_wait(struct loop *l, struct conn *c, const struct event *ev)
{
	struct conn **pp = &l->rooms;

	c->state = CONN_ROOM;
	c->file_fd = ev->fd;
	c->key = ev->key;
	memcpy(c->name, ev->name, sizeof(c->name));
	c->since_ns = now_ns();
	c->deadline_ns = after_ms((uint64_t)l->o->load_timeout_ms);
	while (*pp)
		pp = &(*pp)->room_next;
	*pp = c;
	try_room(l, c);
}

/*
 * A file keyed by its bytes: read and hashed in a thread, which counts as
 * one of its tenant's loads in flight, under the load's deadline; the
 * connection stays CONN_KEYING until the digest comes back as keyed.
 */
static void read_for_digest(struct loop *l, struct conn *c, struct event *ev)
{
	char why[128];

	if (c->member->loads >= l->o->member.max_loads) {
		member_drop_fd(c->member, ev->fd);
		snprintf(why, sizeof(why), "busy: your tenant has %u loads in flight, the most one tenant may have",
			 c->member->loads);
		conn_error(l, c, EAGAIN, why);
		return;
	}
	if (digest_start(&l->s->ev, ev, c->member)) {
		member_drop_fd(c->member, ev->fd);
		conn_error(l, c, EAGAIN, "cannot start a thread to read the file");
		return;
	}
	c->member->loads++;
	c->deadline_ns = after_ms((uint64_t)l->o->load_timeout_ms);
}

/* The member's thread (or a digest's) keyed a LOAD's fd. */
void keyed(struct loop *l, struct event *ev)
{
	struct conn *c = conn_by_id(l, ev->conn_id);
	struct member *m = NULL;
	struct entry *e;

	if (ev->digested || !c || c->state != CONN_KEYING)
		m = member_get(&l->members, ev->tenant, &l->s->ev);
	if (ev->digested && m)
		m->loads--;
	if (!c || c->state != CONN_KEYING) {
		/* The asker is gone; out of memory, its fd stays open. */
		if (m)
			member_drop_fd(m, ev->fd);
		return;
	}
	if (ev->err) {
		conn_error(l, c, ev->err, ev->why);
		return;
	}
	if (ev->key.by_content && !ev->key.hashed) {
		read_for_digest(l, c, ev);
		return;
	}
	if (c->keep_op && keep_refused(l, c, ev))
		return;
	e = store_find(l->s, &ev->key);
	if (!e) {
		room_wait(l, c, ev);
		return;
	}
	member_drop_fd(c->member, ev->fd);
	keep_entry(l, c, e);
	if (e->state == ENTRY_READY)
		conn_hand_over(l, c, e, 0);
	else
		conn_join(l, c, e);
}
