# SPDX-License-Identifier: GPL-2.0
# pinmem-cached (service/): one pinned copy of a checkpoint per host. It
# links libpin and compiles the cache protocol's files (libpin/cache_*.c,
# which libpin.so keeps to itself) into the binary. Installed to sbin/;
# the systemd units and sysusers/tmpfiles files with install-service.

SERVICE_SRCS	:= $(sort $(wildcard service/*.c))
SERVICE_PROTO	:= libpin/cache_proto.c libpin/cache_msg.c
CACHED		:= $(B)/sbin/pinmem-cached

all: $(CACHED)

$(CACHED): $(SERVICE_SRCS) $(SERVICE_PROTO) service/service.h \
		libpin/cache_proto.h include/pin_cache.h \
		$(LIBPIN_PUBLIC_HDRS) $(B)/lib/libpin.so.0
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_COMMON) -Ilibpin -pthread -o $@ $(SERVICE_SRCS) \
		$(SERVICE_PROTO) -L$(B)/lib -lpin -Wl,-rpath,'$$ORIGIN/../lib'

install: install-service
install-service: $(CACHED)
	install -d $(DESTDIR)$(PREFIX)/sbin
	install -m 0755 $(CACHED) $(DESTDIR)$(PREFIX)/sbin/
.PHONY: install-service
