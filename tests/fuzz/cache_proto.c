// SPDX-License-Identifier: MIT
/*
 * libFuzzer target: the checkpoint cache's packet decoder
 * (cache_proto_decode), which pinmem-cached runs on every request. The
 * first byte says how many fds the packet carried (0-2), the rest is the
 * packet. Whatever it accepts must have a known type and a text that lies
 * inside the packet (every byte is read, so ASan sees one that does not),
 * and must encode back to the same bytes.
 */
#include <stdint.h>
#include <string.h>

#include "cache_proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t again[CACHE_MAX_REPLY];
	volatile uint8_t sink = 0;
	struct cache_msg msg;
	const char *why = NULL;
	int n;

	if (size < 1)
		return 0;
	if (cache_proto_decode(data + 1, size - 1, data[0] % 3, &msg, &why)) {
		if (!why || !why[0])
			__builtin_trap();	/* every refusal says why */
		return 0;
	}
	for (size_t i = 0; i < msg.text_len; i++)
		sink ^= (uint8_t)msg.text[i];
	(void)sink;
	n = cache_proto_encode(again, sizeof(again), msg.type,
			       data + 1 + sizeof(struct cache_hdr),
			       size - 1 - sizeof(struct cache_hdr));
	if (n != (int)(size - 1) || memcmp(again, data + 1, size - 1))
		__builtin_trap();
	return 0;
}
