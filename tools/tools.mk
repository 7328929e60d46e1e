# SPDX-License-Identifier: GPL-2.0
# One program per tools/<name>.c, linked against libpin; installed to bin/.
# A program's parts are in tools/<name>/ (pinbench); what several tools
# share is in tools/lib/.
TOOLS := $(patsubst tools/%.c,$(B)/bin/%,$(wildcard tools/*.c))
TOOLS_LIB := $(wildcard tools/lib/*.c)
TOOLS_HDRS := $(wildcard tools/*/*.h)

all: $(TOOLS)

$(B)/bin/pinbench: $(wildcard tools/pinbench/*.c)

$(B)/bin/%: tools/%.c $(TOOLS_LIB) $(TOOLS_HDRS) $(LIBPIN_PUBLIC_HDRS) $(B)/lib/libpin.so.1
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_COMMON) -Itools -o $@ $(filter %.c,$^) -L$(B)/lib -lpin -Wl,-rpath,'$$ORIGIN/../lib'

install: install-tools
install-tools: $(TOOLS)
	install -d $(DESTDIR)$(PREFIX)/bin
	$(if $(TOOLS),install -m 0755 $(TOOLS) $(DESTDIR)$(PREFIX)/bin/)
.PHONY: install-tools
