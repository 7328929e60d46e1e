// SPDX-License-Identifier: MIT
/*
 * The checkpoint cache's packets, checked and built. Pure functions: the
 * service runs every request through cache_proto_decode before acting on
 * it, and tests/fuzz/cache_proto drives it with arbitrary bytes.
 */
#include <errno.h>
#include <string.h>

#include "cache_proto.h"

/* What each type must carry: payload size (or minimum) and fds. */
struct type_rule {
	unsigned type;
	size_t payload;		/* exact, unless variable */
	int variable;		/* payload >= payload bytes, any more */
	int nfds;		/* -1: as the payload says */
	int reply;
};

static const struct type_rule rules[] = {
	{ CACHE_REQ_LOAD, sizeof(struct cache_req_load), 0, 1, 0 },
	{ CACHE_REQ_LIST, 0, 0, 0, 0 },
	{ CACHE_REQ_KEEP, sizeof(struct cache_req_keep), 0, -1, 0 },
	{ CACHE_REP_LOAD, sizeof(struct cache_rep_load), 0, 1, 1 },
	{ CACHE_REP_LIST, 0, 1, 0, 1 },
	{ CACHE_REP_WAIT, sizeof(struct cache_rep_wait), 0, 0, 1 },
	{ CACHE_REP_DONE, 0, 1, 0, 1 },
	{ CACHE_REP_ERROR, sizeof(struct cache_rep_error), 1, 0, 1 },
};

static const struct type_rule *rule_of(unsigned type)
{
	for (size_t i = 0; i < sizeof(rules) / sizeof(rules[0]); i++)
		if (rules[i].type == type)
			return &rules[i];
	return NULL;
}

static int refuse(const char **why, const char *text)
{
	if (why)
		*why = text;
	return -EPROTO;
}

/* The payload of a known type, whose size is already checked. */
static int decode_payload(const struct type_rule *tr, const uint8_t *p,
			  size_t n, int nfds, struct cache_msg *msg,
			  const char **why)
{
	switch (tr->type) {
	case CACHE_REQ_KEEP:
		memcpy(&msg->u.keep, p, sizeof(msg->u.keep));
		if (msg->u.keep.op < CACHE_KEEP_PIN ||
		    msg->u.keep.op > CACHE_KEEP_WARM_END ||
		    msg->u.keep.reserved)
			return refuse(why, "keep request: unknown operation");
		if (nfds != (msg->u.keep.op != CACHE_KEEP_WARM_END))
			return refuse(why, nfds ? "message carries an fd it must not" :
					   "message needs one fd");
		break;
	case CACHE_REQ_LOAD:
		memcpy(&msg->u.load, p, sizeof(msg->u.load));
		if ((msg->u.load.flags &
		     ~(CACHE_REQ_HEARTBEAT | CACHE_REQ_ALIGNED)) ||
		    msg->u.load.reserved)
			return refuse(why, "load request: unknown flags");
		break;
	case CACHE_REP_LOAD:
		memcpy(&msg->u.rep_load, p, sizeof(msg->u.rep_load));
		if (msg->u.rep_load.view_length < msg->u.rep_load.file_size ||
		    msg->u.rep_load.view_length % 4096)
			return refuse(why, "load reply: view shorter than the file or not pages");
		break;
	case CACHE_REP_WAIT:
		memcpy(&msg->u.wait, p, sizeof(msg->u.wait));
		if (!msg->u.wait.interval_ms || msg->u.wait.reserved)
			return refuse(why, "wait reply: no interval");
		break;
	case CACHE_REP_ERROR:
		memcpy(&msg->u.error, p, sizeof(msg->u.error));
		if (msg->u.error.err <= 0 || msg->u.error.reserved)
			return refuse(why, "error reply: errno not positive");
		msg->text = (const char *)p + sizeof(msg->u.error);
		msg->text_len = n - sizeof(msg->u.error);
		break;
	case CACHE_REP_LIST:
	case CACHE_REP_DONE:
		msg->text = (const char *)p;
		msg->text_len = n;
		break;
	}
	return 0;
}

int cache_proto_decode(const void *buf, size_t len, int nfds,
		       struct cache_msg *msg, const char **why)
{
	const struct type_rule *tr;
	struct cache_hdr h;
	size_t n;

	memset(msg, 0, sizeof(*msg));
	if (len > CACHE_MAX_REPLY) {
		if (why)
			*why = "packet too long";
		return -EMSGSIZE;
	}
	if (len < sizeof(h))
		return refuse(why, "packet shorter than the header");
	memcpy(&h, buf, sizeof(h));
	if (h.magic != CACHE_MAGIC)
		return refuse(why, "bad magic (not a pinmem cache packet)");
	if (h.version != CACHE_VERSION)
		return refuse(why, "unsupported protocol version");
	if (h.reserved)
		return refuse(why, "reserved header bits set");
	n = len - sizeof(h);
	if (h.length != n)
		return refuse(why, "header length differs from the packet's");
	tr = rule_of(h.type);
	if (!tr)
		return refuse(why, "unknown message type");
	if (!tr->reply && len > CACHE_MAX_REQUEST) {
		if (why)
			*why = "request too long";
		return -EMSGSIZE;
	}
	if (n < tr->payload || (!tr->variable && n != tr->payload))
		return refuse(why, "payload size wrong for the type");
	if (tr->nfds >= 0 && nfds != tr->nfds)
		return refuse(why, tr->nfds ? "message needs one fd" :
				   "message carries an fd it must not");
	msg->type = h.type;
	return decode_payload(tr, (const uint8_t *)buf + sizeof(h), n, nfds,
			      msg, why);
}

int cache_proto_encode(void *buf, size_t cap, unsigned type,
		       const void *payload, size_t payload_len)
{
	struct cache_hdr h = {
		.magic = CACHE_MAGIC,
		.version = CACHE_VERSION,
		.type = (uint16_t)type,
		.length = (uint32_t)payload_len,
	};

	if (payload_len > CACHE_MAX_REPLY - sizeof(h) ||
	    cap < sizeof(h) + payload_len)
		return -ENOSPC;
	memcpy(buf, &h, sizeof(h));
	if (payload_len)
		memcpy((uint8_t *)buf + sizeof(h), payload, payload_len);
	return (int)(sizeof(h) + payload_len);
}

int cache_proto_encode_error(void *buf, size_t cap, int err,
			     const char *text)
{
	struct cache_rep_error e = { .err = err > 0 ? err : EIO };
	size_t room = CACHE_MAX_REPLY - sizeof(struct cache_hdr) - sizeof(e);
	size_t tl = strlen(text);
	uint8_t *p = buf;
	struct cache_hdr h;
	int n;

	if (tl > room)
		tl = room;
	n = cache_proto_encode(buf, cap, CACHE_REP_ERROR, &e, sizeof(e));
	if (n < 0 || cap < (size_t)n + tl)
		return -ENOSPC;
	memcpy(p + n, text, tl);
	memcpy(&h, p, sizeof(h));
	h.length += (uint32_t)tl;
	memcpy(p, &h, sizeof(h));
	return n + (int)tl;
}
