// SPDX-License-Identifier: MIT
/*
 * A small strict JSON reader (RFC 8259) for safetensors headers and index
 * files: recursive descent over a length-bounded buffer, every node in one
 * arena, errors that name the byte offset and what was wrong.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "safetensors_internal.h"

#define MAX_DEPTH	64

struct block {
	struct block *next;
	char mem[];
};

struct parser {
	struct pin__jarena *a;
	const char *s;
	size_t len;
	size_t pos;
	int depth;
	char *err;
	size_t errlen;
};

static void *arena_alloc(struct pin__jarena *a, size_t n)
{
	struct block *b = malloc(sizeof(*b) + n + 1);

	if (!b)
		return NULL;
	b->next = a->blocks;
	a->blocks = b;
	return b->mem;
}

void pin__json_free(struct pin__jarena *a)
{
	struct block *b = a->blocks, *next;

	for (; b; b = next) {
		next = b->next;
		free(b);
	}
	a->blocks = NULL;
}

static int fail(struct parser *p, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static int fail(struct parser *p, const char *fmt, ...)
{
	va_list ap;
	int n;

	n = snprintf(p->err, p->errlen, "JSON error at byte %zu: ", p->pos);
	if (n < 0 || (size_t)n >= p->errlen)
		return -EINVAL;
	va_start(ap, fmt);
	vsnprintf(p->err + n, p->errlen - n, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

/* Length of the UTF-8 sequence at s (max len bytes), 0 if invalid. */
static size_t utf8_seq(const unsigned char *s, size_t len)
{
	unsigned c = s[0];
	size_t n, i;
	uint32_t cp;

	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf) {
		n = 2;
		cp = c & 0x1f;
	} else if (c >= 0xe0 && c <= 0xef) {
		n = 3;
		cp = c & 0x0f;
	} else if (c >= 0xf0 && c <= 0xf4) {
		n = 4;
		cp = c & 0x07;
	} else {
		return 0;
	}
	if (len < n)
		return 0;
	for (i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (s[i] & 0x3f);
	}
	if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) ||
	    cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return n;
}

int pin__utf8_valid(const char *s, size_t len)
{
	size_t i = 0, n;

	while (i < len) {
		n = utf8_seq((const unsigned char *)s + i, len - i);
		if (!n)
			return 0;
		i += n;
	}
	return 1;
}

static void skip_ws(struct parser *p)
{
	while (p->pos < p->len && (p->s[p->pos] == ' ' || p->s[p->pos] == '\t' ||
				   p->s[p->pos] == '\n' || p->s[p->pos] == '\r'))
		p->pos++;
}

static struct pin__jval *node(struct parser *p, int type)
{
	struct pin__jval *v = arena_alloc(p->a, sizeof(*v));

	if (v) {
		memset(v, 0, sizeof(*v));
		v->type = type;
	}
	return v;
}

static int hex4(struct parser *p, uint32_t *out)
{
	uint32_t v = 0;
	int i;

	if (p->len - p->pos < 4)
		return fail(p, "truncated \\u escape");
	for (i = 0; i < 4; i++) {
		char c = p->s[p->pos + i];

		v <<= 4;
		if (c >= '0' && c <= '9')
			v |= (uint32_t)(c - '0');
		else if (c >= 'a' && c <= 'f')
			v |= (uint32_t)(c - 'a' + 10);
		else if (c >= 'A' && c <= 'F')
			v |= (uint32_t)(c - 'A' + 10);
		else
			return fail(p, "bad hex digit in \\u escape");
	}
	p->pos += 4;
	*out = v;
	return 0;
}

static size_t put_utf8(char *d, uint32_t cp)
{
	if (cp < 0x80) {
		d[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		d[0] = (char)(0xc0 | (cp >> 6));
		d[1] = (char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		d[0] = (char)(0xe0 | (cp >> 12));
		d[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		d[2] = (char)(0x80 | (cp & 0x3f));
		return 3;
	}
	d[0] = (char)(0xf0 | (cp >> 18));
	d[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
	d[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
	d[3] = (char)(0x80 | (cp & 0x3f));
	return 4;
}

/* p->pos at the opening quote. Decoded text never exceeds the raw text. */
static int parse_string(struct parser *p, char **out, size_t *outlen)
{
	size_t start = ++p->pos, n = 0, end;
	char *d;
	int ret;

	/* Find the closing quote first to size the buffer. */
	for (end = start; end < p->len && p->s[end] != '"'; end++)
		if (p->s[end] == '\\')
			end++;
	if (end >= p->len) {
		p->pos = start - 1;
		return fail(p, "unterminated string");
	}
	d = arena_alloc(p->a, end - start + 1);
	if (!d)
		return -ENOMEM;
	while (p->s[p->pos] != '"') {
		unsigned char c = (unsigned char)p->s[p->pos];

		if (c < 0x20)
			return fail(p, "control character 0x%02x in string", c);
		if (c == '\\') {
			uint32_t cp, lo;

			p->pos++;
			switch (p->s[p->pos]) {
			case '"': d[n++] = '"'; break;
			case '\\': d[n++] = '\\'; break;
			case '/': d[n++] = '/'; break;
			case 'b': d[n++] = '\b'; break;
			case 'f': d[n++] = '\f'; break;
			case 'n': d[n++] = '\n'; break;
			case 'r': d[n++] = '\r'; break;
			case 't': d[n++] = '\t'; break;
			case 'u':
				p->pos++;
				ret = hex4(p, &cp);
				if (ret)
					return ret;
				if (cp >= 0xdc00 && cp <= 0xdfff)
					return fail(p, "lone low surrogate \\u%04x", cp);
				if (cp >= 0xd800 && cp <= 0xdbff) {
					if (p->len - p->pos < 6 || p->s[p->pos] != '\\' ||
					    p->s[p->pos + 1] != 'u')
						return fail(p, "high surrogate \\u%04x without its pair", cp);
					p->pos += 2;
					ret = hex4(p, &lo);
					if (ret)
						return ret;
					if (lo < 0xdc00 || lo > 0xdfff)
						return fail(p, "high surrogate \\u%04x followed by \\u%04x", cp, lo);
					cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
				}
				if (!cp)
					return fail(p, "NUL (\\u0000) in string");
				n += put_utf8(d + n, cp);
				continue;
			default:
				return fail(p, "bad escape \\%c", p->s[p->pos]);
			}
			p->pos++;
			continue;
		}
		size_t sl = utf8_seq((const unsigned char *)p->s + p->pos,
				     end - p->pos);
		if (!sl)
			return fail(p, "invalid UTF-8 in string");
		memcpy(d + n, p->s + p->pos, sl);
		n += sl;
		p->pos += sl;
	}
	p->pos++;
	d[n] = 0;
	*out = d;
	*outlen = n;
	return 0;
}

static int is_digit(char c)
{
	return c >= '0' && c <= '9';
}

static int parse_number(struct parser *p, struct pin__jval **out)
{
	size_t start = p->pos;
	int plain = 1, overflow = 0;
	uint64_t v = 0;
	struct pin__jval *j;

	if (p->s[p->pos] == '-') {
		plain = 0;
		p->pos++;
	}
	if (p->pos >= p->len || !is_digit(p->s[p->pos]))
		return fail(p, "bad number");
	if (p->s[p->pos] == '0') {
		p->pos++;
		if (p->pos < p->len && is_digit(p->s[p->pos]))
			return fail(p, "leading zero in number");
	} else {
		while (p->pos < p->len && is_digit(p->s[p->pos])) {
			unsigned dg = (unsigned)(p->s[p->pos] - '0');

			if (v > (UINT64_MAX - dg) / 10)
				overflow = 1;
			else
				v = v * 10 + dg;
			p->pos++;
		}
	}
	if (p->pos < p->len && p->s[p->pos] == '.') {
		plain = 0;
		p->pos++;
		if (p->pos >= p->len || !is_digit(p->s[p->pos]))
			return fail(p, "bad fraction in number");
		while (p->pos < p->len && is_digit(p->s[p->pos]))
			p->pos++;
	}
	if (p->pos < p->len && (p->s[p->pos] == 'e' || p->s[p->pos] == 'E')) {
		plain = 0;
		p->pos++;
		if (p->pos < p->len && (p->s[p->pos] == '+' || p->s[p->pos] == '-'))
			p->pos++;
		if (p->pos >= p->len || !is_digit(p->s[p->pos]))
			return fail(p, "bad exponent in number");
		while (p->pos < p->len && is_digit(p->s[p->pos]))
			p->pos++;
	}
	j = node(p, PIN_J_NUM);
	if (!j)
		return -ENOMEM;
	j->slen = p->pos - start;
	j->s = arena_alloc(p->a, j->slen + 1);
	if (!j->s)
		return -ENOMEM;
	memcpy(j->s, p->s + start, j->slen);
	j->s[j->slen] = 0;
	j->is_u64 = plain && !overflow;
	j->u64 = v;
	*out = j;
	return 0;
}

static int parse_value(struct parser *p, struct pin__jval **out);

/* Grow a pointer array held in a temporary malloc buffer. */
static int push(void ***arr, size_t *n, size_t *cap, void *item)
{
	if (*n == *cap) {
		size_t nc = *cap ? *cap * 2 : 8;
		void **na = realloc(*arr, nc * sizeof(void *));

		if (!na)
			return -ENOMEM;
		*arr = na;
		*cap = nc;
	}
	(*arr)[(*n)++] = item;
	return 0;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Move the temporary array into the arena. */
static int settle(struct parser *p, void **tmp, size_t n, void ***dst)
{
	*dst = arena_alloc(p->a, n * sizeof(void *) + 1);
	if (!*dst)
		return -ENOMEM;
	if (n)
		memcpy(*dst, tmp, n * sizeof(void *));
	return 0;
}

/* An object member's key and the ':' after it; the key pushed on keys. */
static int parse_key(struct parser *p, void ***keys, size_t *kn,
		     size_t *kcap)
{
	char *k;
	size_t kl;
	int ret;

	if (p->pos >= p->len || p->s[p->pos] != '"')
		return fail(p, "expected a string key");
	ret = parse_string(p, &k, &kl);
	if (!ret)
		ret = push(keys, kn, kcap, k);
	if (ret)
		return ret;
	skip_ws(p);
	if (p->pos >= p->len || p->s[p->pos] != ':')
		return fail(p, "expected ':'");
	p->pos++;
	return 0;
}

/* An object's n keys are all different. */
static int check_unique_keys(struct parser *p, void **keys, size_t n)
{
	char **sorted;
	size_t i;
	int ret = 0;

	if (n < 2)
		return 0;
	sorted = malloc(n * sizeof(char *));
	if (!sorted)
		return -ENOMEM;
	memcpy(sorted, keys, n * sizeof(char *));
	qsort(sorted, n, sizeof(char *), cmp_str);
	for (i = 1; i < n; i++)
		if (!strcmp(sorted[i - 1], sorted[i]))
			break;
	if (i < n)
		ret = fail(p, "duplicate key \"%s\" in object", sorted[i]);
	free(sorted);
	return ret;
}

/* The members of an object (obj) or the elements of an array, up to close. */
static int parse_members(struct parser *p, int obj, void ***items,
			 size_t *n, void ***keys)
{
	size_t cap = 0, kn = 0, kcap = 0;
	char close = obj ? '}' : ']';
	int ret;

	skip_ws(p);
	if (p->pos < p->len && p->s[p->pos] == close) {
		p->pos++;
		return 0;
	}
	for (;;) {
		struct pin__jval *v;

		skip_ws(p);
		if (obj) {
			ret = parse_key(p, keys, &kn, &kcap);
			if (ret)
				return ret;
		}
		ret = parse_value(p, &v);
		if (!ret)
			ret = push(items, n, &cap, v);
		if (ret)
			return ret;
		skip_ws(p);
		if (p->pos < p->len && p->s[p->pos] == ',') {
			p->pos++;
			continue;
		}
		if (p->pos < p->len && p->s[p->pos] == close) {
			p->pos++;
			return 0;
		}
		return fail(p, "expected ',' or '%c'", close);
	}
}

static int parse_container(struct parser *p, struct pin__jval **out, int obj)
{
	void **items = NULL, **keys = NULL;
	struct pin__jval *j;
	size_t n = 0;
	int ret;

	if (++p->depth > MAX_DEPTH) {
		ret = fail(p, "nesting deeper than %d", MAX_DEPTH);
		goto out;
	}
	p->pos++;
	ret = parse_members(p, obj, &items, &n, &keys);
	if (!ret && obj)
		ret = check_unique_keys(p, keys, n);
	if (ret)
		goto out;
	j = node(p, obj ? PIN_J_OBJ : PIN_J_ARR);
	ret = -ENOMEM;
	if (!j)
		goto out;
	j->n = n;
	ret = settle(p, items, n, (void ***)&j->items);
	if (!ret && obj)
		ret = settle(p, keys, n, (void ***)&j->keys);
	if (ret)
		goto out;
	*out = j;
	p->depth--;
out:
	free(items);
	free(keys);
	return ret;
}

static int literal(struct parser *p, const char *word, int type,
		   struct pin__jval **out)
{
	size_t l = strlen(word);

	if (p->len - p->pos < l || memcmp(p->s + p->pos, word, l))
		return fail(p, "unexpected character '%c'", p->s[p->pos]);
	p->pos += l;
	*out = node(p, type);
	return *out ? 0 : -ENOMEM;
}

static int parse_value(struct parser *p, struct pin__jval **out)
{
	struct pin__jval *j;
	int ret;

	skip_ws(p);
	if (p->pos >= p->len)
		return fail(p, "unexpected end of text");
	switch (p->s[p->pos]) {
	case '{':
		return parse_container(p, out, 1);
	case '[':
		return parse_container(p, out, 0);
	case '"':
		j = node(p, PIN_J_STR);
		if (!j)
			return -ENOMEM;
		ret = parse_string(p, &j->s, &j->slen);
		if (ret)
			return ret;
		*out = j;
		return 0;
	case 't':
		return literal(p, "true", PIN_J_TRUE, out);
	case 'f':
		return literal(p, "false", PIN_J_FALSE, out);
	case 'n':
		return literal(p, "null", PIN_J_NULL, out);
	default:
		if (p->s[p->pos] == '-' || is_digit(p->s[p->pos]))
			return parse_number(p, out);
		return fail(p, "unexpected character 0x%02x",
			    (unsigned char)p->s[p->pos]);
	}
}

int pin__json_parse(struct pin__jarena *a, const char *text, size_t len,
		    const char *trail, struct pin__jval **out, char *err,
		    size_t errlen)
{
	struct parser p = {
		.a = a, .s = text, .len = len, .err = err, .errlen = errlen,
	};
	int ret;

	ret = parse_value(&p, out);
	if (ret)
		return ret;
	for (; p.pos < len; p.pos++)
		if (!text[p.pos] || !strchr(trail, text[p.pos]))
			return fail(&p, "byte 0x%02x after the JSON value",
				    (unsigned char)text[p.pos]);
	return 0;
}
