# SPDX-License-Identifier: GPL-2.0
# The kselftest suite for pinmem.ko: one program per tests/kselftest/<area>.c,
# built to build/kselftest/<area> and run in the guest by
# tests/guest.d/10-kselftest. The harness headers come from Debian's
# linux-source-6.1 tarball at build time; they are never committed.

KSFT_SRC	:= /usr/src/linux-source-6.1.tar.xz
KSFT_INC	:= $(B)/kselftest/include
KSFT_HDRS	:= $(KSFT_INC)/kselftest_harness.h $(KSFT_INC)/kselftest.h
KSFT_PROGS	:= $(patsubst tests/kselftest/%.c,$(B)/kselftest/%,\
		     $(wildcard tests/kselftest/*.c))
# The harness itself trips -Wextra's sign-compare and unused-parameter
# checks in its macros; everything else stays an error.
KSFT_CFLAGS	:= $(CFLAGS_COMMON) -I$(KSFT_INC) -pthread \
		   -Wno-sign-compare -Wno-unused-parameter

all: $(KSFT_PROGS)

$(KSFT_HDRS) &:
	@test -r $(KSFT_SRC) || { echo "kselftest: $(KSFT_SRC) is missing;" \
		"install the linux-source-6.1 package (apt-get install" \
		"linux-source-6.1, or make deps)" >&2; exit 1; }
	@mkdir -p $(KSFT_INC)
	tar -xJf $(KSFT_SRC) -C $(KSFT_INC) --strip-components=4 \
		linux-source-6.1/tools/testing/selftests/kselftest_harness.h \
		linux-source-6.1/tools/testing/selftests/kselftest.h
	@touch $(KSFT_HDRS)

$(B)/kselftest/%: tests/kselftest/%.c tests/kselftest/pinmem_test.h \
		include/uapi/pinmem.h $(KSFT_HDRS)
	@mkdir -p $(@D)
	$(CC) $(KSFT_CFLAGS) -o $@ $< $(KSFT_LIBS_$*)

# Per program libraries: the I/O reference tests drive io_uring through
# liburing.
KSFT_LIBS_refs_io := -luring
# fmax() for the load test's limits.
KSFT_LIBS_holders_load := -lm
$(B)/kselftest/refs_io $(B)/kselftest/refs $(B)/kselftest/compat \
		$(B)/kselftest/gates: \
		tests/kselftest/refs_test.h

# `make build/kselftest/abi` from the checkout's root.
$(patsubst $(B)/%,build/%,$(KSFT_PROGS)): build/kselftest/%: $(B)/kselftest/% ;
