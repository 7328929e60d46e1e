// SPDX-License-Identifier: MIT
/*
 * libFuzzer target: the safetensors header parser (pin_st_parse_buffer)
 * on an arbitrary buffer. Every tensor it accepts must lie inside the
 * buffer: each byte of each tensor is read, so ASan catches any offset
 * the parser let through that it should not have.
 */
#include <stdint.h>
#include <string.h>

#include <pin.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pin_st *ck = pin_st_create();
	volatile uint8_t sink = 0;

	if (!ck)
		return 0;
	if (pin_st_parse_buffer(ck, data, size, "fuzz") == 0) {
		for (size_t i = 0; i < pin_st_count(ck); i++) {
			struct pin_st_tensor t = PIN_INIT(struct pin_st_tensor);
			const uint8_t *p;

			if (pin_st_tensor(ck, i, &t))
				__builtin_trap();
			p = t.data;
			for (uint64_t j = 0; j < t.nbytes; j++)
				sink ^= p[j];
			if (pin_st_find(ck, t.name, &t))
				__builtin_trap();
		}
		for (size_t i = 0; i < pin_st_metadata_count(ck); i++) {
			const char *k, *v;

			if (pin_st_metadata(ck, i, &k, &v))
				__builtin_trap();
			sink ^= (uint8_t)(strlen(k) + strlen(v));
		}
	}
	(void)sink;
	pin_st_close(ck);
	return 0;
}
