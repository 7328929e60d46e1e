# SPDX-License-Identifier: GPL-2.0
#
# pinmem: build, install, test, demo.
#
#   make            the module (for every supported kernel installed), libpin,
#                   the tools and the test programs, all under build/
#   make deps       install the Debian packages the build and tests need
#   make check      deps, build, host tests, then the guest suite on each kernel
#   make demo       deps, build, then the demo in a guest
#   make stress     the whole checkpoint-load matrix in a guest per kernel
#                   (tests/io/load-matrix.py --full; hours under TCG)
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

demo: deps
	$(MAKE) all
	tests/vm/run /usr/bin/python3 libpin/python/demo.py

# Every layout x backend x geometry of the load matrix, per kernel; the
# guest gets room for a 600 MiB file and its region.
stress: deps
	$(MAKE) all
	set -e; for k in $(KERNELS); do \
		PINMEM_KERNEL=$$k PINMEM_VM_MEM=4096 PINMEM_VM_DISK_MB=2048 \
		PINMEM_VM_TIMEOUT=21600 tests/vm/run tests/io/load-matrix.py \
		--full /run/pinmem/scratch; \
	done

clean:
	rm -rf $(B)

.PHONY: all deps check demo stress clean install
