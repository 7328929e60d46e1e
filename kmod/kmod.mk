# SPDX-License-Identifier: GPL-2.0
#
# pinmem.ko, built out of tree once per kernel, each in its own directory
# under build/kmod/ that mirrors the checkout's module sources through
# links (the top-level Kbuild names the objects), since a 6.1 kbuild cannot
# put an external module's objects anywhere but beside its sources.
#
#   make                       the kernels of KERNELS (labels of tests/vm/kernel,
#                              default 6.1 6.12: build/kmod/<label>/) whose
#                              headers are installed, and the running kernel
#                              when /lib/modules/$(uname -r)/build exists and is
#                              none of them (build/kmod/<release>/)
#   make KDIR=/path/to/build   that kernel only: build/kmod/<its release>/
#   make kmod-lint             checkpatch + sparse

# These builds are the tests' and have the test gates (kmod/testgate.c,
# debugfs pinmem/gates); DKMS and the packages build without them.

KMOD_SRCS := $(wildcard $(TOP)/kmod/*.c $(TOP)/kmod/*.h)
KMOD_DEPS := $(KMOD_SRCS) $(TOP)/Kbuild $(TOP)/include/uapi/pinmem.h $(TOP)/VERSION

# The build directory of a label's kernel headers, if installed.
kmod_label_kdir = $(patsubst %/Makefile,%,$(wildcard \
	$(shell $(TOP)/tests/vm/kernel $(1) build 2>/dev/null)/Makefile))
# The release a prepared kernel build tree is for.
kmod_release = $(shell cat $(1)/include/config/kernel.release 2>/dev/null)

KMOD_HEADERS_HINT := install that kernel's headers (Debian: apt-get install \
linux-headers-RELEASE; make deps installs those of 6.1 and 6.12)

# KMOD_BUILDS: name:kdir pairs, the name being build/kmod/<name>/.
ifneq ($(KDIR),)
ifeq ($(wildcard $(KDIR)/Makefile),)
$(error pinmem.ko: KDIR=$(KDIR) is not a kernel build tree (no Makefile there): \
$(KMOD_HEADERS_HINT), or point KDIR at a configured kernel source)
endif
KMOD_KDIR_RELEASE := $(call kmod_release,$(KDIR))
ifeq ($(KMOD_KDIR_RELEASE),)
$(error pinmem.ko: KDIR=$(KDIR) is not prepared for modules (no \
include/config/kernel.release): $(KMOD_HEADERS_HINT), or run \
`make modules_prepare` in that tree)
endif
KMOD_BUILDS := $(KMOD_KDIR_RELEASE):$(abspath $(KDIR))
else
KMOD_HAVE := $(foreach k,$(KERNELS),$(if $(call kmod_label_kdir,$(k)),$(k)))
KMOD_MISSING := $(filter-out $(KMOD_HAVE),$(KERNELS))
KMOD_BUILDS := $(foreach k,$(KMOD_HAVE),$(k):$(call kmod_label_kdir,$(k)))
KMOD_RUNNING := $(shell uname -r)
KMOD_RUNNING_KDIR := $(patsubst %/Makefile,%,$(wildcard /lib/modules/$(KMOD_RUNNING)/build/Makefile))
ifneq ($(KMOD_RUNNING_KDIR),)
ifeq ($(filter $(realpath $(KMOD_RUNNING_KDIR)),$(foreach k,$(KMOD_HAVE),$(realpath $(call kmod_label_kdir,$(k))))),)
KMOD_BUILDS += $(KMOD_RUNNING):$(KMOD_RUNNING_KDIR)
endif
endif
# Only goals that build the module need headers: "make deps" is what
# installs them, "make clean" removes what was built.
KMOD_GOALS_NEED_HEADERS := $(if $(MAKECMDGOALS),$(filter-out deps clean,$(MAKECMDGOALS)),all)
ifneq ($(KMOD_MISSING),)
ifeq ($(KMOD_BUILDS)$(if $(KMOD_GOALS_NEED_HEADERS),,none),)
$(error pinmem.ko: no kernel headers for $(KMOD_MISSING): $(KMOD_HEADERS_HINT); \
for any other kernel: make KDIR=/lib/modules/RELEASE/build)
endif
$(info pinmem.ko: skipping kernel(s) $(KMOD_MISSING): headers not installed (make deps))
endif
endif

kmod_name = $(firstword $(subst :, ,$(1)))
kmod_dir = $(lastword $(subst :, ,$(1)))
KMOD_KOS := $(foreach b,$(KMOD_BUILDS),$(B)/kmod/$(call kmod_name,$(b))/pinmem.ko)

all: $(KMOD_KOS)

# Mirror the sources into a kernel's build directory.
kmod_tree = mkdir -p $(1)/kmod && \
	ln -sfn $(TOP)/Kbuild $(1)/Kbuild && \
	ln -sfn $(TOP)/VERSION $(1)/VERSION && \
	ln -sfn $(TOP)/include $(1)/include && \
	find $(1)/kmod -maxdepth 1 -type l -delete && \
	ln -sf $(KMOD_SRCS) $(1)/kmod/

# A kernel configured anew (the debug kernel rebuilt with another fragment,
# under the same release) needs the module rebuilt: its .config is a
# prerequisite.
define kmod_rule
$(B)/kmod/$(call kmod_name,$(1))/pinmem.ko: $(KMOD_DEPS) kmod/kmod.mk \
		$(wildcard $(call kmod_dir,$(1))/.config)
	@$$(call kmod_tree,$$(@D))
	$$(MAKE) -C $(call kmod_dir,$(1)) M=$$(@D) PINMEM_TEST_GATES=y modules
endef
$(foreach b,$(KMOD_BUILDS),$(eval $(call kmod_rule,$(b))))

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
