# SPDX-License-Identifier: GPL-2.0
#
# pinmem: build, install, test, demo.
#
#   make            the module (for every supported kernel installed), libpin,
#                   the tools and the test programs, all under build/
#   make deps       install the Debian packages the build and tests need
#   make check      deps, build, host tests, then the guest suite on each kernel
#                   and the debug-kernel lane (tests/vm/debug-kernel)
#   make check-debug  every guest suite on the debug kernel (KASAN, lockdep...)
#   make check-kcsan  the kselftests, fault injection, the ABI fuzzer and the
#                   soak on the data-race kernel (KCSAN; its own build)
#   make fuzz       long fuzzing: libFuzzer targets and the ABI fuzzer
#   make demo       deps, what the demo runs (module, libpin, pinmem-cached),
#                   then the demo in a guest
#   make stress     the whole checkpoint-load matrix in a guest per kernel
#                   (tests/io/load-matrix.py --full; hours under TCG)
#   make boot-loop  boot the rig's guest N times (KERNEL=6.12 N=300) and
#                   tally clean boots, retried early deaths and the rest
#   make poke-keys  flip hot static keys N times in a guest (KERNEL=6.12
#                   N=1000) while its other CPU runs the code they patch
#   make install    libpin, headers, pkg-config file, man pages, tools
#                   (PREFIX, DESTDIR); it says how to install the module
#   make install-dkms  the module's source for DKMS, udev rule, modules-load.d
#   make userland   libpin and the tools only (no module, no tests)
#   make device-plugin  the Kubernetes device plugin (Python), in build/
#   make deb        the Debian packages, in build/deb/

.DEFAULT_GOAL := all
.SUFFIXES:
.DELETE_ON_ERROR:

TOP	:= $(abspath .)
B	:= $(TOP)/build
PREFIX	?= /usr/local
DESTDIR	?=

# The project's one version (VERSION): the module, libpin's soname minor,
# pin.h's PIN_VERSION_*, libpin.pc, the tools and the Python package.
VERSION	:= $(shell cat $(TOP)/VERSION)
VERSION_MAJOR := $(word 1,$(subst ., ,$(VERSION)))
VERSION_MINOR := $(word 2,$(subst ., ,$(VERSION)))
VERSION_PATCH := $(word 3,$(subst ., ,$(VERSION)))
ifeq ($(VERSION_PATCH),)
$(error VERSION must be MAJOR.MINOR.PATCH, not '$(VERSION)')
endif

# Kernels we build for and test on: labels understood by tests/vm/kernel.
KERNELS	?= 6.1 6.12

CC	?= cc
CFLAGS_COMMON := -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -O2 -g \
	-I$(TOP)/include -I$(B)/include
SANFLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer \
	-fno-sanitize-recover=all

all:

# pin_version.h (included by pin.h) is written at parse time, and only when
# its text changes, so that every compile of pin.h finds it up to date.
PIN_VERSION_H := $(B)/include/pin_version.h
$(shell $(TOP)/libpin/gen-version-h $(TOP)/VERSION $(PIN_VERSION_H) >&2)

include kmod/kmod.mk
include libpin/libpin.mk
include tools/tools.mk
include tests/tests.mk
include deploy/deploy.mk
include service/service.mk
include deploy/kubernetes/device-plugin/device-plugin.mk

userland: $(B)/lib/libpin.so.1 $(B)/lib/libpin.a $(B)/lib/libpin.pc $(TOOLS)

install:
	@echo "make install: libpin, its headers, man pages and the tools are in $(DESTDIR)$(PREFIX)."
	@echo "The module: make install-dkms, then as root: groupadd --system pinmem;" \
		"dkms install pinmem/$(VERSION); modprobe pinmem (or the Debian packages: make deb)."

deps:
	tests/deps.sh

# deps first, then a fresh make so that paths found at parse time
# (kernel headers) see what deps installed.
check: deps
	$(MAKE) all
	tests/check

check-debug: deps
	$(MAKE) all
	rm -rf $(B)/results-debug
	PINMEM_VM_RETRY_LOG=$(B)/results-debug/boot-retries.log \
		tests/vm/debug-kernel/lane $(B)/results-debug/debug; \
	tests/report $(B)/results-debug

# KCSAN excludes KASAN, so it is a second debug kernel, built on first use
# (PINMEM_DEBUG_FLAVOUR=kcsan); not in make check (its build is as long as
# the first one's).
check-kcsan: deps
	$(MAKE) all
	rm -rf $(B)/results-kcsan
	PINMEM_DEBUG_FLAVOUR=kcsan PINMEM_VM_RETRY_LOG=$(B)/results-kcsan/boot-retries.log \
		tests/vm/debug-kernel/lane $(B)/results-kcsan/kcsan '[16]0-*'; \
	tests/report $(B)/results-kcsan

# PINMEM_FUZZ_SECONDS per libFuzzer target (default 600), then
# PINMEM_FUZZ_OPS ABI fuzzer operations (default 2000000) in a 6.1 guest,
# then PINMEM_FUZZ_USER_OPS (default 1000000) as unprivileged users.
fuzz: all fuzz-build
	tests/fuzz/run $${PINMEM_FUZZ_SECONDS:-600}
	PINMEM_VM_TIMEOUT=7200 PINMEM_FUZZ_OPS=$${PINMEM_FUZZ_OPS:-2000000} \
		tests/vm/run build/fault/abifuzz
	PINMEM_VM_TIMEOUT=7200 PINMEM_FUZZ_USER_OPS=$${PINMEM_FUZZ_USER_OPS:-1000000} \
		tests/vm/run tests/guest.d/61-fuzz-user

# Parts 1-6 under Debian's python3 (torch), then part 7 (JAX) under the
# venv that tests/deps.sh made, in the same guest. It builds only what the
# demo runs: the module for the guest's kernel, libpin and pinmem-cached
# (part 6), not the test programs, sanitizer builds and fuzzers of all.
DEMO_KERNEL := 6.1
demo: deps
	$(MAKE) $(B)/kmod/$(DEMO_KERNEL)/pinmem.ko $(B)/lib/libpin.so.1 $(CACHED)
	PINMEM_KERNEL=$(DEMO_KERNEL) tests/vm/run sh -c '/usr/bin/python3 libpin/python/demo.py && \
		"$$(tests/python-venv path)/bin/python" libpin/python/demo_jax.py && \
		echo "demo: parts 1-7: all checks passed"'

# pinmem's loaders against the other checkpoint loaders (pinbench peers):
# 1 GiB and 512 MiB checkpoints, 5 cold runs each, on the host (portable
# backend); bench-guest: the same table in a 6.12 guest on the device
# backend, the module's huge pages in it (64 MiB, one run, the torch rows
# and fio: under TCG each interpreter's torch import takes about a minute
# and only the ratios mean anything).
bench: deps
	$(MAKE) all
	mkdir -p $(B)/bench
	$(B)/bin/pinbench peers --runs 5 --json $(B)/bench/peers.json

bench-guest: deps
	$(MAKE) all
	mkdir -p $(B)/bench
	PINMEM_KERNEL=6.12 PINMEM_VM_TIMEOUT=7200 \
		tests/vm/run env PIN_BACKEND=device $(B)/bin/pinbench peers \
		--mib 64 --runs 1 --dir /run/pinmem/scratch/peers \
		--rows pinmem,pinload,fst,fst+lock,runai,runai+lock,st+lock,fio \
		--json $(B)/bench/peers-guest.json

# A new client's first tensor after pinmem-cached restarts (its entries
# kept in the fd store) against a cold load: a 1 GiB checkpoint in a 6.12
# guest on the device backend (tests/cache/bench-restart); bench-restart
# runs it on the host, portable backend.
bench-restart: deps
	$(MAKE) all
	tests/cache/bench-restart 1024

bench-restart-guest: deps
	$(MAKE) all
	PINMEM_KERNEL=6.12 PINMEM_VM_MEM=6144 PINMEM_VM_DISK_MB=3072 \
		PINMEM_VM_TIMEOUT=1800 tests/vm/run env PIN_BACKEND=device \
		tests/cache/bench-restart 1024 /run/pinmem/scratch/bench-restart

# Two containers (Debian 12's podman and crun, the device through CDI)
# sharing one pinned copy, and the eviction refused naming their
# processes: the container test (tests/host.d/61-containers) in a 6.12
# guest, showing what the node sees at each step.
demo-containers: deps
	$(MAKE) all
	PINMEM_CONTAINER_DEMO=1 tests/host.d/61-containers

# Every layout x backend x geometry of the load matrix, per kernel (the
# guest gets room for a 600 MiB file and its region); then the races of
# the owner's zap against a view's first mapping, 25 times make check's
# rounds; then power cuts at every write of a checkpoint save (libpin's,
# the Python package's, sharded, and a PyTorch distributed checkpoint's).
stress: deps
	$(MAKE) all
	set -e; for k in $(KERNELS); do \
		PINMEM_KERNEL=$$k PINMEM_VM_MEM=4096 PINMEM_VM_DISK_MB=2048 \
		PINMEM_VM_TIMEOUT=21600 tests/vm/run tests/io/load-matrix.py \
		--full /run/pinmem/scratch; \
		PINMEM_KERNEL=$$k PINMEM_ZAP_ROUNDS=1000 \
		tests/vm/run tests/guest.d/10-kselftest refs; \
		PINMEM_KERNEL=$$k PINMEM_POWERCUT_KERNELS=$$k \
		PINMEM_POWERCUT_ARGS="--all --saver c,python,sharded,dcp" \
		PINMEM_POWERCUT_TIMEOUT=14400 PINMEM_VM_TIMEOUT=21600 \
		tests/vm/run tests/guest.d/47-powercut; \
	done

# How often a guest kernel fails to boot in the rig (tests/vm/boot-loop).
boot-loop: all
	PINMEM_KERNEL=$(or $(KERNEL),6.12) tests/vm/boot-loop $(or $(N),30)

# Live patches of kernel text against the guest's other CPU
# (tests/vm/poke-keys): what multi-threaded TCG fails.
poke-keys: all
	PINMEM_KERNEL=$(or $(KERNEL),6.12) tests/vm/run tests/vm/poke-keys $(or $(N),1000)

clean:
	rm -rf $(B)

.PHONY: all deps check check-debug check-kcsan fuzz demo demo-containers bench bench-guest bench-restart bench-restart-guest stress boot-loop poke-keys clean install userland
