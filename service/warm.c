// SPDX-License-Identifier: GPL-2.0
/*
 * Kept entries: checkpoints an operator (root, or the service's own user:
 * SO_PEERCRED) keeps loaded. A kept entry is charged to the node
 * (KEPT_TENANT), to no client's tenant, but still counts against the
 * budget, and is never evicted for room; only an operator's unpin, or a
 * warm list that no longer names it, makes it an ordinary entry again.
 * Kept entries alone may not exceed the budget: a pin that would is
 * refused (ENOSPC).
 *
 * The service opens no path for this either: pinctl cache pin, and
 * pinctl cache warm for a config file, open each file with their own
 * permissions and pass the fd, as every client does. With --config the
 * service runs pinctl cache warm itself at start and on SIGHUP, so that
 * the list is applied with the service's own (the unit's) permissions;
 * a unit that wants root's runs it as ExecStartPost=+ and ExecReload=+.
 */
#include <errno.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "loop.h"
#include "cache_proto.h"

extern char **environ;

static int is_operator(uid_t uid)
{
	return uid == 0 || uid == geteuid();
}

/* Answer a KEEP that loads nothing: DONE, with what was done. */
static void done(struct loop *l, struct conn *c, const char *text)
{
	int n = cache_proto_encode(l->rep, CACHE_MAX_REPLY, CACHE_REP_DONE,
				   text, strlen(text));

	if (n > 0)
		cache_msg_send(c->fd, l->rep, (size_t)n, -1, MSG_DONTWAIT);
	conn_close(l, c);
}

static struct member *node_member(struct loop *l)
{
	return member_get(&l->members, KEPT_TENANT, &l->s->ev);
}

/* The kept entries' record in the fd store follows their kept-ness. */
static void set_kept(struct entry *e, unsigned kept, uint64_t set)
{
	if (e->kept == kept && e->warm_set == set)
		return;
	e->kept = kept;
	e->warm_set = set;
	if (e->state == ENTRY_READY)
		fdstore_rekeep(e);
}

/* Stop keeping what warm lists other than set kept. */
static void warm_end(struct loop *l, struct conn *c, uint64_t set)
{
	unsigned n = 0;
	char text[128];

	for (struct entry *e = l->s->head; e; e = e->next) {
		if (!(e->kept & KEPT_WARM) || e->warm_set == set)
			continue;
		set_kept(e, e->kept & ~KEPT_WARM, 0);
		n++;
	}
	snprintf(text, sizeof(text), "%u entries no longer kept by an earlier warm list",
		 n);
	done(l, c, text);
}

/* A KEEP request: an operator's; its fd keyed as a LOAD's is. */
void handle_keep(struct loop *l, struct conn *c, unsigned op, uint64_t set,
		 int fd)
{
	if (!is_operator(c->uid)) {
		member_drop_fd(c->member, fd);
		conn_error(l, c, EPERM, "keeping entries is for root and the service's own user: not permitted");
		return;
	}
	if (op == CACHE_KEEP_WARM_END) {
		warm_end(l, c, set);
		return;
	}
	c->keep_op = op;
	c->keep_set = set;
	c->state = CONN_KEYING;
	c->heartbeat = 1;
	c->aligned_ok = 1;
	c->deadline_ns = after_ms((uint64_t)l->o->client_timeout_ms);
	member_key(c->member, fd, c->id);
	send_wait(l, c);
}

/* Whether kept entries and need more bytes would exceed the budget. */
static int kept_over(struct store *s, uint64_t need, char *why, size_t len)
{
	uint64_t kept = 0;
	char a[32], b[32], c[32];

	for (struct entry *e = s->head; e; e = e->next)
		kept += e->kept ? e->bytes : 0;
	if (kept + need <= s->budget)
		return 0;
	human_bytes(kept, a, sizeof(a));
	human_bytes(need, b, sizeof(b));
	human_bytes(s->budget, c, sizeof(c));
	snprintf(why, len, "no room to keep it: kept entries (%s) and this file (%s) would exceed the budget (%s)",
		 a, b, c);
	return 1;
}

/*
 * A KEEP's keyed file, before it is looked up: an UNPIN is answered here,
 * and a pin that kept entries cannot fit is refused. 1: answered.
 */
int keep_refused(struct loop *l, struct conn *c, struct event *ev)
{
	struct entry *e = store_find(l->s, &ev->key);
	uint64_t need = ((uint64_t)ev->key.size + (2U << 20) - 1) &
			~((2ULL << 20) - 1);
	char why[256];

	if (c->keep_op == CACHE_KEEP_UNPIN) {
		member_drop_fd(c->member, ev->fd);
		if (!e) {
			conn_error(l, c, ENOENT, "not loaded: nothing to unpin");
			return 1;
		}
		set_kept(e, 0, 0);
		snprintf(why, sizeof(why), "entry %llu is no longer kept: an ordinary entry, evicted when room is needed",
			 (unsigned long long)e->id);
		done(l, c, why);
		return 1;
	}
	if (e && e->kept)
		return 0;
	if (kept_over(l->s, e ? e->bytes : need, why, sizeof(why))) {
		member_drop_fd(c->member, ev->fd);
		conn_error(l, c, ENOSPC, why);
		return 1;
	}
	return 0;
}

/* A PIN's or WARM's entry, found or just made: kept, charged to the node. */
void keep_entry(struct loop *l, struct conn *c, struct entry *e)
{
	struct member *node;
	unsigned bit;

	if (!c->keep_op)
		return;
	node = node_member(l);
	if (node && node != e->member) {
		if (e->state == ENTRY_LOADING) {
			e->member->loads--;
			node->loads++;
		}
		entry_charge_to(e, node);
	}
	bit = c->keep_op == CACHE_KEEP_PIN ? KEPT_PIN : KEPT_WARM;
	set_kept(e, e->kept | bit,
		 bit == KEPT_WARM ? c->keep_set : e->warm_set);
}

/* A kept file's room: the budget's, never a tenant's share. */
const struct member_opts *keep_room(struct loop *l, struct conn *c,
				    struct room *r, struct member_opts *tmp)
{
	struct member *node;

	if (!c->keep_op)
		return &l->o->member;
	node = node_member(l);
	if (node)
		r->member = node;
	*tmp = l->o->member;
	tmp->share = UINT64_MAX;
	return tmp;
}

/* A load done: its record, written by the loading thread, says kept. */
void kept_loaded(struct entry *e)
{
	if (e->kept && !e->err)
		fdstore_rekeep(e);
}

/* The socket's path, for pinctl: the first listening socket's name. */
static int socket_path(struct loop *l, char *out, size_t len)
{
	struct sockaddr_un a;
	socklen_t al = sizeof(a);

	if (!l->nlws || getsockname(l->lws[0].fd, (struct sockaddr *)&a, &al) ||
	    a.sun_family != AF_UNIX || al <= offsetof(struct sockaddr_un, sun_path) ||
	    !a.sun_path[0])
		return -ENOENT;
	snprintf(out, len, "%.*s", (int)(al - offsetof(struct sockaddr_un, sun_path)),
		 a.sun_path);
	return 0;
}

/*
 * Apply --config: pinctl cache warm, beside this binary (../bin/pinctl)
 * unless $PINMEM_PINCTL names it, as a child the loop does not wait for
 * (SIGCHLD is ignored: the kernel reaps it). It says what it did on the
 * service's stderr.
 */
void warm_config_apply(struct loop *l)
{
	char self[4096], tool[4200], sock[sizeof(((struct sockaddr_un *)0)->sun_path) + 1];
	const char *env = getenv("PINMEM_PINCTL"), *run;
	char *argv[] = { (char *)"pinctl", (char *)"cache", (char *)"warm",
			 (char *)"--config", (char *)l->o->config,
			 (char *)"--socket", sock, NULL };
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t at;
	sigset_t none, dfl;
	ssize_t n;
	pid_t pid;
	int ret;

	if (!l->o->config || (!l->o->config_given && access(l->o->config, F_OK)))
		return;
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0 || socket_path(l, sock, sizeof(sock))) {
		fprintf(stderr, "pinmem-cached: %s not applied: the service's own path or socket cannot be told\n",
			l->o->config);
		return;
	}
	self[n] = 0;
	*strrchr(self, '/') = 0;
	snprintf(tool, sizeof(tool), "%s/../bin/pinctl", self);
	run = env && *env ? env : tool;
	/* Not the loop's blocked signals, nor its ignored SIGCHLD. */
	sigemptyset(&none);
	sigemptyset(&dfl);
	sigaddset(&dfl, SIGCHLD);
	posix_spawnattr_init(&at);
	posix_spawnattr_setsigmask(&at, &none);
	posix_spawnattr_setsigdefault(&at, &dfl);
	posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK |
				 POSIX_SPAWN_SETSIGDEF);
	/* What it says goes where the service's words go. */
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, 2, 1);
	ret = posix_spawn(&pid, run, &fa, &at, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&at);
	if (ret)
		fprintf(stderr, "pinmem-cached: %s not applied: cannot run %s: %s\n",
			l->o->config, run, strerror(ret));
	else
		fprintf(stderr, "pinmem-cached: applying %s (pinctl cache warm, pid %d)\n",
			l->o->config, (int)pid);
}
