# SPDX-License-Identifier: GPL-2.0
# One program per tools/<name>.c, linked against libpin; installed to bin/.
TOOLS := $(patsubst tools/%.c,$(B)/bin/%,$(wildcard tools/*.c))

all: $(TOOLS)

$(B)/bin/%: tools/%.c tools/json.h tools/cpu.h tools/pages.h tools/pinbench_donate.h tools/pinbench_alloc_rate.h tools/pinbench_baselines.h tools/pinbench_report.h $(LIBPIN_PUBLIC_HDRS) $(B)/lib/libpin.so.1
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_COMMON) -o $@ $< -L$(B)/lib -lpin -Wl,-rpath,'$$ORIGIN/../lib'

install: install-tools
install-tools: $(TOOLS)
	install -d $(DESTDIR)$(PREFIX)/bin
	$(if $(TOOLS),install -m 0755 $(TOOLS) $(DESTDIR)$(PREFIX)/bin/)
.PHONY: install-tools
