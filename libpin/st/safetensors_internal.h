/* SPDX-License-Identifier: MIT */
/*
 * libpin's strict JSON reader (safetensors_json.c), used for headers
 * (safetensors_header.c) and index files (safetensors_index.c). Not
 * installed.
 */
#ifndef LIBPIN_SAFETENSORS_INTERNAL_H
#define LIBPIN_SAFETENSORS_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

enum pin__jtype {
	PIN_J_NULL, PIN_J_FALSE, PIN_J_TRUE, PIN_J_NUM, PIN_J_STR, PIN_J_ARR,
	PIN_J_OBJ
};

struct pin__jval {
	int type;
	/* PIN_J_STR: decoded, NUL-terminated (NUL itself is refused).
	 * PIN_J_NUM: the number's text as written. */
	char *s;
	size_t slen;
	int is_u64;		/* PIN_J_NUM: a plain non-negative integer */
	uint64_t u64;
	/* PIN_J_ARR/PIN_J_OBJ: n items; keys[] only for objects. */
	size_t n;
	struct pin__jval **items;
	char **keys;
};

/* Every node and string of one parse lives in its arena. */
struct pin__jarena {
	void *blocks;		/* singly linked */
};

/*
 * Parse exactly one JSON value from text[0..len): RFC 8259, UTF-8 checked,
 * no duplicate keys, nesting up to 64 levels, no NUL in strings. After the
 * value only bytes in `trail` may follow (e.g. " " or " \t\r\n").
 * Returns 0, or -EINVAL with a message naming the byte offset in err,
 * -ENOMEM.
 */
int pin__json_parse(struct pin__jarena *a, const char *text, size_t len,
		    const char *trail, struct pin__jval **out, char *err,
		    size_t errlen);
void pin__json_free(struct pin__jarena *a);
/* Is [s, s+len) valid UTF-8 (no overlongs, surrogates, > U+10FFFF)? */
int pin__utf8_valid(const char *s, size_t len);

#endif /* LIBPIN_SAFETENSORS_INTERNAL_H */
