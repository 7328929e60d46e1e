# SPDX-License-Identifier: GPL-2.0
# pinmem-cached's tests (tests/cache/run-tests, from host.d/26-cache and
# guest.d/46-cache): the client the scripts drive, built against libpin,
# and slow-map.so, the LD_PRELOAD shim that delays its mapping of a view.
all: $(B)/tests/cache/cache-client $(B)/tests/cache/slow-map.so
$(B)/tests/cache/%: tests/cache/%.c include/pin_cache.h $(LIBPIN_PUBLIC_HDRS) $(B)/lib/libpin.so.1
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_COMMON) -o $@ $< -L$(B)/lib -lpin -Wl,-rpath,$(B)/lib
$(B)/tests/cache/slow-map.so: tests/cache/slow-map.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_COMMON) -fPIC -shared -o $@ $< -ldl
