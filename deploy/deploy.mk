# SPDX-License-Identifier: GPL-2.0
# The module on a real machine: its source for DKMS and the files that make
# /dev/pinmem usable (udev rule, modules-load.d, modprobe.d example).
#
#   make install-dkms [DESTDIR=...]   /usr/src/pinmem-$(VERSION)/ (Kbuild,
#        kmod/, include/uapi/, VERSION, dkms.conf), then
#        /usr/lib/udev/rules.d/60-pinmem.rules,
#        /usr/lib/modules-load.d/pinmem.conf, /etc/modprobe.d/pinmem.conf
# Then, as root: groupadd --system pinmem; dkms install pinmem/$(VERSION);
# modprobe pinmem (the Debian package pinmem-dkms does all of it).

DKMS_SRC := /usr/src/pinmem-$(VERSION)

install-dkms:
	install -d $(DESTDIR)$(DKMS_SRC)/kmod $(DESTDIR)$(DKMS_SRC)/include/uapi \
		$(DESTDIR)/usr/lib/udev/rules.d $(DESTDIR)/usr/lib/modules-load.d \
		$(DESTDIR)/etc/modprobe.d
	install -m 0644 Kbuild VERSION $(DESTDIR)$(DKMS_SRC)/
	install -m 0644 $(filter-out kmod/testgate.c,$(wildcard kmod/*.c)) \
		kmod/*.h $(DESTDIR)$(DKMS_SRC)/kmod/
	install -m 0644 include/uapi/pinmem.h $(DESTDIR)$(DKMS_SRC)/include/uapi/
	sed 's|@VERSION@|$(VERSION)|g' deploy/dkms.conf.in >$(DESTDIR)$(DKMS_SRC)/dkms.conf
	install -m 0644 deploy/60-pinmem.rules $(DESTDIR)/usr/lib/udev/rules.d/
	install -m 0644 deploy/modules-load.conf $(DESTDIR)/usr/lib/modules-load.d/pinmem.conf
	install -m 0644 deploy/modprobe.conf $(DESTDIR)/etc/modprobe.d/pinmem.conf

.PHONY: install-dkms

# The Debian packages (pinmem-dkms, libpin1, libpin-dev, pinmem-tools,
# python3-pinmem) from debian/, built in a copy of the checkout's files
# (build/deb/pinmem-$(VERSION)/, so that dpkg-buildpackage's output stays
# under build/deb/). debian/changelog is written there from VERSION.
DEB_DIR := $(B)/deb
DEB_SRC := $(DEB_DIR)/pinmem-$(VERSION)

deb:
	rm -rf $(DEB_DIR)
	mkdir -p $(DEB_SRC)
	git ls-files -z --cached --others --exclude-standard | \
		xargs -0 cp --parents -t $(DEB_SRC)
	{ echo "pinmem ($(VERSION)) unstable; urgency=medium"; echo; \
	  echo "  * Release $(VERSION); see CHANGELOG.md."; echo; \
	  echo " -- pinmem developers <pinmem@example.org>  $$(date -R -d @$$(git log -1 --format=%ct))"; \
	} >$(DEB_SRC)/debian/changelog
	cd $(DEB_SRC) && dpkg-buildpackage -b -us -uc -j2 >$(DEB_DIR)/build.log 2>&1 || \
		{ tail -n 40 $(DEB_DIR)/build.log; exit 1; }
	ls $(DEB_DIR)/*.deb

.PHONY: deb
