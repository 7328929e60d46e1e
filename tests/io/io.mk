# SPDX-License-Identifier: GPL-2.0
# Checkpoint I/O and safetensors tests: one program per tests/io/*.c, built
# with ASan+UBSan against build/lib-san/libpin.a (host and guest run the
# same binaries), and stgen.py, the independent fixture writer.
# uring-faults.c is not a test but the LD_PRELOAD shim io-faults runs under
# (liburing-faults.so, no sanitizers: it only rewrites completions);
# uring-probes.c is not one either but part of fixed-coalesce (its kprobes).

IO_TEST_SRCS	:= $(filter-out tests/io/uring-faults.c tests/io/uring-probes.c,\
		     $(sort $(wildcard tests/io/*.c)))
IO_TESTS	:= $(patsubst tests/io/%.c,$(B)/tests/io/%,$(IO_TEST_SRCS))

all: $(IO_TESTS) $(B)/tests/io/liburing-faults.so

$(B)/tests/io/%: tests/io/%.c tests/io/io-test.h $(LIBPIN_PUBLIC_HDRS) $(B)/lib-san/libpin.a
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_COMMON) $(SANFLAGS) -o $@ $(filter %.c,$^) $(B)/lib-san/libpin.a $(LIBPIN_LIBS)

$(B)/tests/io/fixed-coalesce: tests/io/uring-probes.c tests/io/uring-probes.h

$(B)/tests/io/liburing-faults.so: tests/io/uring-faults.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_COMMON) -fPIC -shared -o $@ $< -ldl -lpthread -luring
