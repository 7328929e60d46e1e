#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# Install every Debian package that building and testing pinmem needs, then
# the venv of the venv Python suites (tests/python-venv: exact versions from
# tests/python-requirements.lock, from PyPI, outside the checkout).
# Idempotent: does nothing when all are present; otherwise one apt-get
# update, then one non-interactive install of what is missing.
set -eu

pkgs="build-essential make gcc pkg-config
qemu-system-x86 linux-image-amd64 linux-headers-amd64
linux-image-6.12-amd64 linux-headers-6.12-amd64 linux-source
busybox-static kmod cpio e2fsprogs xfsprogs dmsetup xz-utils
sparse cppcheck valgrind strace trace-cmd liburing-dev fio groff-base
python3 python3-numpy python3-pytest python3-setuptools python3-wheel python3-pip
python3-grpcio python3-protobuf protobuf-compiler
python3-venv
debhelper dh-dkms dh-python dkms python3-all lintian mmdebstrap systemd-container
clang libfuzzer-14-dev libjansson-dev universal-ctags abigail-tools
ccache bc flex bison libelf-dev libssl-dev linux-source-6.1
python3-torch"

missing=
for p in $pkgs; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
		missing="$missing $p"
	fi
done

venv() {
	if tests/python-venv check; then
		echo "deps: python venv present ($(tests/python-venv path))"
	elif [ "$(id -u)" -ne 0 ]; then
		echo "deps: python venv missing: run tests/python-venv ensure as root" >&2
		exit 1
	else
		tests/python-venv ensure
	fi
}
cd "$(dirname "$0")/.."

if [ -z "$missing" ]; then
	echo "deps: all installed"
	venv
	exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
	echo "deps: missing:$missing (run as root, or install them)" >&2
	exit 1
fi

echo "deps: installing:$missing"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
# shellcheck disable=SC2086
apt-get install -y -q $missing
venv
