# SPDX-License-Identifier: GPL-2.0
# pinmem's Kubernetes device plugin (deploy/kubernetes/device-plugin/): a
# Python package run by Debian's python3 with python3-grpcio and
# python3-protobuf. make puts the package, with api_pb2.py made by protoc
# from api.proto, in build/device-plugin/; make install puts it in
# $(PREFIX)/share/pinmem-device-plugin/ and the command in sbin/.

DP_DIR		:= deploy/kubernetes/device-plugin
DP_SRCS		:= $(sort $(wildcard $(DP_DIR)/pinmem_device_plugin/*.py))
DP_OUT		:= $(B)/device-plugin/pinmem_device_plugin
DP_BUILT	:= $(patsubst $(DP_DIR)/pinmem_device_plugin/%,$(DP_OUT)/%,$(DP_SRCS)) \
		   $(DP_OUT)/api_pb2.py
DP_LIBDIR	:= $(PREFIX)/share/pinmem-device-plugin

all: device-plugin
device-plugin: $(DP_BUILT)

$(DP_OUT)/%.py: $(DP_DIR)/pinmem_device_plugin/%.py
	@mkdir -p $(@D)
	cp $< $@

$(DP_OUT)/api_pb2.py: $(DP_DIR)/api.proto
	@mkdir -p $(@D)
	protoc -I$(DP_DIR) --python_out=$(@D) $<

install: install-device-plugin
install-device-plugin: $(DP_BUILT)
	install -d $(DESTDIR)$(DP_LIBDIR)/pinmem_device_plugin \
		$(DESTDIR)$(PREFIX)/sbin $(DESTDIR)$(PREFIX)/share/man/man8
	install -m 0644 $(DP_BUILT) $(DESTDIR)$(DP_LIBDIR)/pinmem_device_plugin/
	sed 's|@LIBDIR@|$(DP_LIBDIR)|' $(DP_DIR)/pinmem-device-plugin.in \
		>$(DESTDIR)$(PREFIX)/sbin/pinmem-device-plugin
	chmod 0755 $(DESTDIR)$(PREFIX)/sbin/pinmem-device-plugin
	install -m 0644 $(DP_DIR)/pinmem-device-plugin.8 $(DESTDIR)$(PREFIX)/share/man/man8/

.PHONY: device-plugin install-device-plugin
