# SPDX-License-Identifier: GPL-2.0
# pinmem-cached (service/): one pinned copy of a checkpoint per host. It
# links libpin and compiles the cache protocol's files (libpin/cache/*.c,
# and the message sender they share with pin_fd_send(), scm_send.c, which
# libpin.so keeps to itself) into the binary. Installed to sbin/;
# with install-service, beside the systemd units and the sysusers.d file
# (deploy/pinmem-cached.*) and the manual page. Its options are parsed as
# the tools' are (tools/lib/args.c). The SHA-256 of the files keyed by
# their bytes is libcrypto's (OpenSSL; Debian: libssl-dev to build,
# libssl3 to run).

SERVICE_SRCS	:= $(sort $(wildcard service/*.c))
SERVICE_PROTO	:= libpin/cache/cache_proto.c libpin/cache/cache_msg.c \
		   libpin/core/scm_send.c tools/lib/args.c
CACHED		:= $(B)/sbin/pinmem-cached

all: $(CACHED)

$(CACHED): $(SERVICE_SRCS) $(SERVICE_PROTO) service/service.h \
		service/loop.h libpin/cache/cache_proto.h libpin/internal.h include/pin_cache.h \
		tools/lib/args.h $(LIBPIN_PUBLIC_HDRS) $(B)/lib/libpin.so.1
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_COMMON) -Ilibpin -Ilibpin/cache -Itools -pthread -o $@ $(SERVICE_SRCS) \
		$(SERVICE_PROTO) -L$(B)/lib -lpin -lcrypto -Wl,-rpath,'$$ORIGIN/../lib'

SYSTEMD_UNITDIR	?= /usr/lib/systemd/system
SYSUSERSDIR	?= /usr/lib/sysusers.d

# With ASan+UBSan over libpin's sanitized build, for the host suite.
CACHED_SAN	:= $(B)/sbin-san/pinmem-cached
all: $(CACHED_SAN) $(B)/tests/cache-san/cache-client
$(CACHED_SAN): $(SERVICE_SRCS) $(SERVICE_PROTO) service/service.h \
		service/loop.h libpin/cache/cache_proto.h libpin/internal.h include/pin_cache.h \
		tools/lib/args.h $(LIBPIN_PUBLIC_HDRS) $(B)/lib-san/libpin.a
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_COMMON) $(SANFLAGS) -Ilibpin -Ilibpin/cache -Itools -pthread -o $@ \
		$(SERVICE_SRCS) $(SERVICE_PROTO) $(B)/lib-san/libpin.a -ldl -luring -lcrypto
$(B)/tests/cache-san/cache-client: tests/cache/cache-client.c \
		include/pin_cache.h $(LIBPIN_PUBLIC_HDRS) $(B)/lib-san/libpin.a
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_COMMON) $(SANFLAGS) -o $@ $< $(B)/lib-san/libpin.a -ldl -luring

install: install-service
install-service: $(CACHED)
	install -d $(DESTDIR)$(PREFIX)/sbin $(DESTDIR)$(SYSTEMD_UNITDIR) \
		$(DESTDIR)$(SYSUSERSDIR) $(DESTDIR)$(PREFIX)/share/man/man8
	install -m 0755 $(CACHED) $(DESTDIR)$(PREFIX)/sbin/
	sed 's|/usr/sbin/|$(PREFIX)/sbin/|' deploy/pinmem-cached.service \
		>$(DESTDIR)$(SYSTEMD_UNITDIR)/pinmem-cached.service
	install -m 0644 deploy/pinmem-cached.socket $(DESTDIR)$(SYSTEMD_UNITDIR)/
	install -m 0644 deploy/pinmem-cached.sysusers \
		$(DESTDIR)$(SYSUSERSDIR)/pinmem-cached.conf
	install -m 0644 service/pinmem-cached.8 $(DESTDIR)$(PREFIX)/share/man/man8/
.PHONY: install-service

# The SHA-256 against sha256sum (host.d/26-cache-digest): key.c alone.
all: $(B)/tests/cache-san/key-digest
$(B)/tests/cache-san/key-digest: tests/cache/key-digest.c service/key.c service/service.h \
		service/loop.h libpin/cache/cache_proto.h include/pin_cache.h $(LIBPIN_PUBLIC_HDRS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_COMMON) $(SANFLAGS) -Iservice -Ilibpin -Ilibpin/cache -Itools -pthread \
		-o $@ $< service/key.c -lcrypto

# The tenant keys' pod cut (host.d/26-cache-tenant): tenant.c alone.
all: $(B)/tests/cache-san/tenant-key
$(B)/tests/cache-san/tenant-key: tests/cache/tenant-key.c service/tenant.c service/service.h \
		include/pin_cache.h $(LIBPIN_PUBLIC_HDRS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_COMMON) $(SANFLAGS) -Iservice -Ilibpin -Ilibpin/cache -Itools -pthread \
		-o $@ $< service/tenant.c
