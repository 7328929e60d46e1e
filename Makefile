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
#   make fuzz       long fuzzing: libFuzzer targets and the ABI fuzzer
#   make demo       deps, build, then the demo in a guest
#   make install    libpin, header, pkg-config file, tools (PREFIX, DESTDIR)

.DEFAULT_GOAL := all
.SUFFIXES:
.DELETE_ON_ERROR:

TOP	:= $(abspath .)
B	:= $(TOP)/build
PREFIX	?= /usr/local
DESTDIR	?=

# Kernels we build for and test on: labels understood by tests/vm/kernel.
KERNELS	?= 6.1 6.12

CC	?= cc
CFLAGS_COMMON := -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -O2 -g \
	-I$(TOP)/include
SANFLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer \
	-fno-sanitize-recover=all

all:

include kmod/kmod.mk
include libpin/libpin.mk
include tools/tools.mk
include tests/tests.mk

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
	tests/vm/debug-kernel/lane $(B)/results-debug/debug; \
	tests/report $(B)/results-debug

# PINMEM_FUZZ_SECONDS per libFuzzer target (default 600), then
# PINMEM_FUZZ_OPS ABI fuzzer operations (default 2000000) in a 6.1 guest.
fuzz: all fuzz-build
	tests/fuzz/run $${PINMEM_FUZZ_SECONDS:-600}
	PINMEM_VM_TIMEOUT=7200 PINMEM_FUZZ_OPS=$${PINMEM_FUZZ_OPS:-2000000} \
		tests/vm/run build/fault/abifuzz

demo: deps
	$(MAKE) all
	tests/vm/run /usr/bin/python3 libpin/python/demo.py

clean:
	rm -rf $(B)

.PHONY: all deps check check-debug fuzz demo clean install
