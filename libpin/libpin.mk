# SPDX-License-Identifier: GPL-2.0
# libpin: build/lib/libpin.so.0 (+ libpin.so), build/lib/libpin.a, and an
# ASan+UBSan build build/lib-san/libpin.a for the tests. Every libpin/*.c is
# part of the library, so files added by other parts are picked up.

LIBPIN_SRCS	:= $(sort $(wildcard libpin/*.c))
LIBPIN_HDRS	:= include/pin.h include/uapi/pinmem.h $(wildcard libpin/*.h)
LIBPIN_OBJS	:= $(patsubst libpin/%.c,$(B)/obj/libpin/%.o,$(LIBPIN_SRCS))
LIBPIN_SAN_OBJS	:= $(patsubst libpin/%.c,$(B)/obj-san/libpin/%.o,$(LIBPIN_SRCS))
LIBPIN_LIBS	:= -ldl -luring

LIBPIN_CFLAGS	:= $(CFLAGS_COMMON) -fPIC -fvisibility=default -Ilibpin
ifneq ($(wildcard /usr/local/cuda/include/cuda.h),)
LIBPIN_CFLAGS	+= -DPIN_HAVE_CUDA_H -I/usr/local/cuda/include
endif

all: $(B)/lib/libpin.so.0 $(B)/lib/libpin.so $(B)/lib/libpin.a \
	$(B)/lib-san/libpin.a $(B)/lib/libpin.pc

$(B)/obj/libpin/%.o: libpin/%.c $(LIBPIN_HDRS)
	@mkdir -p $(@D)
	$(CC) $(LIBPIN_CFLAGS) -c -o $@ $<

$(B)/obj-san/libpin/%.o: libpin/%.c $(LIBPIN_HDRS)
	@mkdir -p $(@D)
	$(CC) $(LIBPIN_CFLAGS) $(SANFLAGS) -c -o $@ $<

$(B)/lib/libpin.so.0: $(LIBPIN_OBJS) libpin/libpin.map
	@mkdir -p $(@D)
	$(CC) -shared -Wl,-soname,libpin.so.0 -Wl,--version-script=libpin/libpin.map \
		-Wl,-z,defs -o $@ $(LIBPIN_OBJS) $(LIBPIN_LIBS)
	ln -sf libpin.so.0 $(@D)/libpin.so	# -lpin links need it with the .so.0

$(B)/lib/libpin.so: $(B)/lib/libpin.so.0
	ln -sf libpin.so.0 $@

$(B)/lib/libpin.a: $(LIBPIN_OBJS)
	@mkdir -p $(@D)
	rm -f $@
	ar rcs $@ $^

$(B)/lib-san/libpin.a: $(LIBPIN_SAN_OBJS)
	@mkdir -p $(@D)
	rm -f $@
	ar rcs $@ $^

$(B)/lib/libpin.pc: libpin/libpin.pc.in
	@mkdir -p $(@D)
	sed 's|@PREFIX@|$(PREFIX)|g' $< >$@

install: install-libpin
install-libpin: $(B)/lib/libpin.so.0 $(B)/lib/libpin.a
	install -d $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/lib/pkgconfig \
		$(DESTDIR)$(PREFIX)/include/uapi
	install -m 0755 $(B)/lib/libpin.so.0 $(DESTDIR)$(PREFIX)/lib/
	ln -sf libpin.so.0 $(DESTDIR)$(PREFIX)/lib/libpin.so
	install -m 0644 $(B)/lib/libpin.a $(DESTDIR)$(PREFIX)/lib/
	sed 's|@PREFIX@|$(PREFIX)|g' libpin/libpin.pc.in \
		>$(DESTDIR)$(PREFIX)/lib/pkgconfig/libpin.pc
	install -m 0644 include/pin.h $(DESTDIR)$(PREFIX)/include/
	install -m 0644 include/uapi/pinmem.h $(DESTDIR)$(PREFIX)/include/uapi/
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
