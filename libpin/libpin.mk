# SPDX-License-Identifier: GPL-2.0
# libpin: build/lib/libpin.so.$(VERSION) (soname libpin.so.1, and the
# libpin.so.1 and libpin.so links), build/lib/libpin.a, and an ASan+UBSan
# build build/lib-san/libpin.a for the tests. Every .c in libpin's layers
# (libpin/core/, libpin/io/, libpin/st/, libpin/cache/, lowest first) is part of the
# library, so files added to a layer are picked up.
#
# Installed: the library in LIBDIR (PREFIX/lib, or /usr/lib/<multiarch> when
# PREFIX is /usr, as Debian has it), the headers in PREFIX/include/pinmem/
# (LIBPIN_PUBLIC_HDRS and uapi/pinmem.h; libpin.pc adds that directory, so
# `#include <pin.h>` keeps working), libpin.pc in LIBDIR/pkgconfig.

# The public headers: pin.h, the headers it includes, and pin_version.h. The
# one list of them: the install rule and every program built against libpin
# (tools, tests) use it.
LIBPIN_PUBLIC_HDRS := include/pin.h include/pin_io.h include/pin_st.h include/pin_cache.h \
		      include/pin_cuda.h $(PIN_VERSION_H)
LIBPIN_LAYERS	:= core io st cache
LIBPIN_SRCS	:= $(sort $(foreach l,$(LIBPIN_LAYERS),$(wildcard libpin/$(l)/*.c)))
LIBPIN_HDRS	:= $(LIBPIN_PUBLIC_HDRS) include/uapi/pinmem.h $(wildcard libpin/*.h $(LIBPIN_LAYERS:%=libpin/%/*.h))
LIBPIN_SONAME	:= libpin.so.$(VERSION_MAJOR)
LIBPIN_REAL	:= libpin.so.$(VERSION)
MULTIARCH	:= $(shell $(CC) -print-multiarch 2>/dev/null)
LIBDIR		?= $(if $(and $(filter /usr,$(PREFIX)),$(MULTIARCH)),/usr/lib/$(MULTIARCH),$(PREFIX)/lib)
INCLUDEDIR	?= $(PREFIX)/include/pinmem
LIBPIN_PC_SED	= -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@LIBDIR@|$(LIBDIR)|g' \
		  -e 's|@VERSION@|$(VERSION)|g'
LIBPIN_OBJS	:= $(patsubst libpin/%.c,$(B)/obj/libpin/%.o,$(LIBPIN_SRCS))
LIBPIN_SAN_OBJS	:= $(patsubst libpin/%.c,$(B)/obj-san/libpin/%.o,$(LIBPIN_SRCS))
LIBPIN_LIBS	:= -ldl -luring

LIBPIN_CFLAGS	:= $(CFLAGS_COMMON) -fPIC -fvisibility=default -Ilibpin
ifneq ($(wildcard /usr/local/cuda/include/cuda.h),)
LIBPIN_CFLAGS	+= -DPIN_HAVE_CUDA_H -I/usr/local/cuda/include
endif

all: $(B)/lib/libpin.so.1 $(B)/lib/libpin.so $(B)/lib/libpin.a \
	$(B)/lib-san/libpin.a $(B)/lib/libpin.pc

$(B)/obj/libpin/%.o: libpin/%.c $(LIBPIN_HDRS)
	@mkdir -p $(@D)
	$(CC) $(LIBPIN_CFLAGS) -c -o $@ $<

$(B)/obj-san/libpin/%.o: libpin/%.c $(LIBPIN_HDRS)
	@mkdir -p $(@D)
	$(CC) $(LIBPIN_CFLAGS) $(SANFLAGS) -c -o $@ $<

$(B)/lib/$(LIBPIN_REAL): $(LIBPIN_OBJS) libpin/libpin.map
	@mkdir -p $(@D)
	$(CC) -shared -Wl,-soname,$(LIBPIN_SONAME) -Wl,--version-script=libpin/libpin.map \
		-Wl,-z,defs -o $@ $(LIBPIN_OBJS) $(LIBPIN_LIBS)

$(B)/lib/libpin.so.1: $(B)/lib/$(LIBPIN_REAL)
	ln -sf $(LIBPIN_REAL) $@
	ln -sf libpin.so.1 $(@D)/libpin.so	# -lpin links need it with the .so.1

$(B)/lib/libpin.so: $(B)/lib/libpin.so.1
	ln -sf libpin.so.1 $@

$(B)/lib/libpin.a: $(LIBPIN_OBJS)
	@mkdir -p $(@D)
	rm -f $@
	ar rcs $@ $^

$(B)/lib-san/libpin.a: $(LIBPIN_SAN_OBJS)
	@mkdir -p $(@D)
	rm -f $@
	ar rcs $@ $^

$(B)/lib/libpin.pc: libpin/libpin.pc.in VERSION
	@mkdir -p $(@D)
	sed $(LIBPIN_PC_SED) $< >$@

install: install-libpin
install-libpin: $(B)/lib/libpin.so.1 $(B)/lib/libpin.a
	install -d $(DESTDIR)$(LIBDIR)/pkgconfig $(DESTDIR)$(INCLUDEDIR)/uapi
	install -m 0644 $(B)/lib/$(LIBPIN_REAL) $(DESTDIR)$(LIBDIR)/
	ln -sf $(LIBPIN_REAL) $(DESTDIR)$(LIBDIR)/$(LIBPIN_SONAME)
	ln -sf $(LIBPIN_SONAME) $(DESTDIR)$(LIBDIR)/libpin.so
	install -m 0644 $(B)/lib/libpin.a $(DESTDIR)$(LIBDIR)/
	sed $(LIBPIN_PC_SED) libpin/libpin.pc.in >$(DESTDIR)$(LIBDIR)/pkgconfig/libpin.pc
	install -m 0644 $(LIBPIN_PUBLIC_HDRS) $(DESTDIR)$(INCLUDEDIR)/
	install -m 0644 include/uapi/pinmem.h $(DESTDIR)$(INCLUDEDIR)/uapi/
	install -d $(DESTDIR)$(PREFIX)/share/man/man1 $(DESTDIR)$(PREFIX)/share/man/man3
	install -m 0644 libpin/man/*.1 $(DESTDIR)$(PREFIX)/share/man/man1/
	install -m 0644 libpin/man/*.3 $(DESTDIR)$(PREFIX)/share/man/man3/
	# Every other name in a page's NAME line is a .so link to it.
	for p in libpin/man/*.3; do b=$$(basename $$p); \
		for n in $$(sed -n '/^\.SH NAME/{n;s/ \\-.*//;s/,//g;p;}' $$p); do \
			[ "$$n.3" = "$$b" ] || echo ".so man3/$$b" \
				>$(DESTDIR)$(PREFIX)/share/man/man3/$$n.3; \
		done; \
	done
.PHONY: install-libpin
