# SPDX-License-Identifier: GPL-2.0
# libpin tests: one program per tests/libpin/*.c, built twice:
#   build/tests/libpin/NAME      against build/lib/libpin.so.1 (runs under
#                                valgrind too)
#   build/tests/libpin-san/NAME  with ASan+UBSan, against build/lib-san
# and the install check: `make install` into build/destdir, then a program
# built with pkg-config from there (run in the guest by guest.d/20-libpin).

LIBPIN_TEST_SRCS := $(sort $(wildcard tests/libpin/*.c))
LIBPIN_TESTS	 := $(patsubst tests/libpin/%.c,$(B)/tests/libpin/%,$(LIBPIN_TEST_SRCS))
LIBPIN_SAN_TESTS := $(patsubst tests/libpin/%.c,$(B)/tests/libpin-san/%,$(LIBPIN_TEST_SRCS))
LIBPIN_DESTDIR	 := $(B)/destdir
# The libdir `make install PREFIX=/usr` picks (multiarch on Debian).
LIBPIN_DESTLIB	 := $(LIBPIN_DESTDIR)$(if $(MULTIARCH),/usr/lib/$(MULTIARCH),/usr/lib)

all: $(LIBPIN_TESTS) $(LIBPIN_SAN_TESTS) $(B)/tests/libpin-installed/example-donate

$(B)/tests/libpin/%: tests/libpin/%.c tests/libpin/test.h $(LIBPIN_PUBLIC_HDRS) $(B)/lib/libpin.so
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_COMMON) -o $@ $< -L$(B)/lib -lpin -Wl,-rpath,$(B)/lib

$(B)/tests/libpin-san/%: tests/libpin/%.c tests/libpin/test.h $(LIBPIN_PUBLIC_HDRS) $(B)/lib-san/libpin.a
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_COMMON) $(SANFLAGS) -o $@ $< $(B)/lib-san/libpin.a -ldl -luring

# Install into a staging root with PREFIX=/usr and build the README example
# the way a user would: pkg-config from the installed .pc, nothing from the
# checkout. The rpath points into the staging root, which the guest sees at
# the same path.
$(B)/tests/libpin-installed/example-donate: tests/libpin/example-donate.c \
		$(B)/lib/libpin.so.1 $(B)/lib/libpin.a $(LIBPIN_PUBLIC_HDRS) \
		include/uapi/pinmem.h libpin/libpin.pc.in $(wildcard libpin/man/*)
	rm -rf $(LIBPIN_DESTDIR)
	$(MAKE) --no-print-directory install-libpin DESTDIR=$(LIBPIN_DESTDIR) PREFIX=/usr
	@mkdir -p $(@D)
	PKG_CONFIG_PATH=$(LIBPIN_DESTLIB)/pkgconfig \
	PKG_CONFIG_SYSROOT_DIR=$(LIBPIN_DESTDIR) \
		sh -c '$(CC) -std=c11 -Wall -Wextra -Werror -o $@ $< $$(pkg-config --cflags --libs libpin) -Wl,-rpath,$(LIBPIN_DESTLIB)'

# Helpers the guest suite drives (not tests themselves).
all: $(B)/tests/libpin-helpers/hold-region $(B)/tests/libpin-helpers/hold-refs
$(B)/tests/libpin-helpers/%: tests/libpin/helpers/%.c $(LIBPIN_PUBLIC_HDRS) $(B)/lib/libpin.so
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_COMMON) -o $@ $< -L$(B)/lib -lpin -Wl,-rpath,$(B)/lib
