/* SPDX-License-Identifier: GPL-2.0 */
/* SHA-256 (FIPS 180-4): service/sha256.c. */
#ifndef PINMEM_SHA256_H
#define PINMEM_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define SHA256_LEN	32

struct sha256 {
	uint32_t h[8];
	uint64_t len;			/* bytes so far */
	uint8_t buf[64];
	size_t fill;
};

void sha256_init(struct sha256 *s);
void sha256_update(struct sha256 *s, const void *data, size_t n);
void sha256_final(struct sha256 *s, uint8_t out[SHA256_LEN]);

#endif /* PINMEM_SHA256_H */
