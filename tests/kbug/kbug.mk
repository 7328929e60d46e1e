# SPDX-License-Identifier: GPL-2.0
# Reproducers of kernel bugs pinmem works around (liburing only, no libpin);
# run by hand in a guest, never by make check: they warn or corrupt memory.

all: $(B)/tests/kbug/fixed-vcnt-wrap

$(B)/tests/kbug/%: tests/kbug/%.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_COMMON) -o $@ $< -luring
