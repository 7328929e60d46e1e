# SPDX-License-Identifier: GPL-2.0
# Short programs a user reads first (raw uapi, no libpin); run them in the
# guest, e.g. tests/vm/run build/examples/first-look.
EXAMPLES := $(patsubst tests/examples/%.c,$(B)/examples/%,$(wildcard tests/examples/*.c))

all: $(EXAMPLES)

$(EXAMPLES): $(B)/examples/%: tests/examples/%.c include/uapi/pinmem.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_COMMON) -o $@ $<
