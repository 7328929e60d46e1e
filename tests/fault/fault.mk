# SPDX-License-Identifier: GPL-2.0
# Fault injection and the ABI fuzzer: programs that run in the guest
# (tests/guest.d/60-fault), built with the kselftest harness headers.
#   build/fault/failnth   fail-nth sweep over every ioctl and mmap path
#   build/fault/abifuzz   seeded multi-process ABI fuzzer with a model

FAULT_PROGS := $(patsubst tests/fault/%.c,$(B)/fault/%,\
		 $(filter-out tests/fault/abifuzz-%.c,$(wildcard tests/fault/*.c)))

all: $(FAULT_PROGS)

$(B)/fault/%: tests/fault/%.c $(wildcard tests/fault/*.h) \
		tests/kselftest/pinmem_test.h include/uapi/pinmem.h \
		$(B)/kselftest/include/kselftest_harness.h
	@mkdir -p $(@D)
	$(CC) $(KSFT_CFLAGS) -o $@ $(filter %.c,$^)

$(patsubst $(B)/%,build/%,$(FAULT_PROGS)): build/fault/%: $(B)/fault/% ;

$(B)/fault/abifuzz: tests/fault/abifuzz-model.c tests/fault/abifuzz-ops.c \
		tests/fault/abifuzz-user.c
