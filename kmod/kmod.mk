# SPDX-License-Identifier: GPL-2.0
#
# pinmem.ko for each kernel in KERNELS (labels of tests/vm/kernel), never
# the running one: build/kmod/<label>/pinmem.ko. Each kernel builds in its
# own directory, which mirrors the checkout's module sources through links
# (the top-level Kbuild names the objects), since a 6.1 kbuild cannot put an
# external module's objects anywhere but beside its sources.
#
#   make KDIR=/path/to/kernel/build [KERNELS=label]   one custom build
#   make kmod-lint                                    checkpatch + sparse

KMOD_SRCS := $(wildcard $(TOP)/kmod/*.c $(TOP)/kmod/*.h)
KMOD_DEPS := $(KMOD_SRCS) $(TOP)/Kbuild $(TOP)/include/uapi/pinmem.h

# The build directory of a label's kernel headers, if installed.
kmod_kdir = $(if $(KDIR),$(KDIR),$(patsubst %/Makefile,%,$(wildcard \
	$(shell $(TOP)/tests/vm/kernel $(1) build 2>/dev/null)/Makefile)))

KMOD_LABELS := $(if $(KDIR),$(firstword $(KERNELS)),$(KERNELS))
KMOD_HAVE := $(foreach k,$(KMOD_LABELS),$(if $(call kmod_kdir,$(k)),$(k)))
KMOD_MISSING := $(filter-out $(KMOD_HAVE),$(KMOD_LABELS))

ifneq ($(KMOD_MISSING),)
ifeq ($(KMOD_HAVE),)
$(error pinmem.ko: no kernel headers for $(KMOD_MISSING) (make deps))
endif
$(info pinmem.ko: skipping kernel(s) $(KMOD_MISSING): headers not installed)
endif

KMOD_KOS := $(foreach k,$(KMOD_HAVE),$(B)/kmod/$(k)/pinmem.ko)

all: $(KMOD_KOS)

# Mirror the sources into a label's build directory.
kmod_tree = mkdir -p $(1)/kmod && \
	ln -sfn $(TOP)/Kbuild $(1)/Kbuild && \
	ln -sfn $(TOP)/include $(1)/include && \
	find $(1)/kmod -maxdepth 1 -type l -delete && \
	ln -sf $(KMOD_SRCS) $(1)/kmod/

$(B)/kmod/%/pinmem.ko: $(KMOD_DEPS) kmod/kmod.mk
	@$(call kmod_tree,$(@D))
	$(MAKE) -C $(call kmod_kdir,$*) M=$(@D) modules

CHECKPATCH_DIR := $(B)/checkpatch
CHECKPATCH := $(CHECKPATCH_DIR)/checkpatch.pl
LINUX_SOURCE_TAR ?= $(firstword $(wildcard /usr/src/linux-source-*.tar.xz))

# checkpatch.pl and its data files, from Debian's linux-source.
$(CHECKPATCH):
	@test -n "$(LINUX_SOURCE_TAR)" || \
		{ echo "checkpatch: no /usr/src/linux-source-*.tar.xz (make deps)"; exit 1; }
	mkdir -p $(CHECKPATCH_DIR)
	tar -xJf $(LINUX_SOURCE_TAR) -C $(CHECKPATCH_DIR) --strip-components=2 \
		--wildcards '*/scripts/checkpatch.pl' '*/scripts/spelling.txt' \
		'*/scripts/const_structs.checkpatch'
	touch $@

all: $(CHECKPATCH)

kmod-lint: $(KMOD_KOS) $(CHECKPATCH)
	tests/host.d/05-kmod-lint

.PHONY: kmod-lint
