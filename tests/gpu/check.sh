#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# GPU check for libpin's CUDA registration, for a machine WITH a GPU, the
# CUDA driver and the toolkit in /usr/local/cuda (modules cannot be loaded
# there, so libpin runs on its portable backend). Builds tests/gpu/bandwidth
# (libpin's core sources compiled in, linked with -lcuda) and runs it:
# registration time of a region, H2D/D2H bandwidth from the registered
# region vs cuMemHostAlloc vs malloc.
#   tests/gpu/check.sh [GiB [iterations]]     (default 4 GiB, 5)
#   tests/gpu/check.sh --build-only            compile, do not run
# Exits 77 with a message where there is no GPU or no toolkit.
set -eu
cd "$(dirname "$0")/../.."
cuda=${CUDA_HOME:-/usr/local/cuda}
out=build/tests/gpu
build_only=0
if [ "${1:-}" = --build-only ]; then
	build_only=1
	shift
fi

if [ ! -f "$cuda/include/cuda.h" ]; then
	echo "check.sh: no CUDA toolkit ($cuda/include/cuda.h missing): cannot build" >&2
	exit 77
fi
# Link against the driver if installed, else the toolkit's stub (build only).
libdir=
for d in /usr/lib/x86_64-linux-gnu /usr/lib64 /usr/lib "$cuda/lib64/stubs"; do
	if [ -e "$d/libcuda.so" ] || [ -e "$d/libcuda.so.1" ]; then
		libdir=$d
		break
	fi
done
if [ -z "$libdir" ]; then
	echo "check.sh: no libcuda.so to link with (driver or $cuda/lib64/stubs)" >&2
	exit 77
fi
# The stub is named libcuda.so; a driver install may only have libcuda.so.1.
cudalib=-lcuda
[ -e "$libdir/libcuda.so" ] || cudalib=-l:libcuda.so.1

# libpin's core layer, libpin/core/ (not the loader above it: io_uring,
# the step-by-step fill and safetensors are not needed here, and liburing
# may be missing on a GPU machine).
srcs=$(ls libpin/core/*.c)
mkdir -p "$out"
libpin/gen-version-h VERSION "$out/include/pin_version.h"
${CC:-cc} -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -O2 -g \
	-Iinclude -I"$out/include" -Ilibpin -DPIN_HAVE_CUDA_H -I"$cuda/include" \
	-o "$out/bandwidth" tests/gpu/bandwidth.c $srcs \
	-L"$libdir" $cudalib -ldl
echo "check.sh: built $out/bandwidth (linked against $libdir)"
[ "$build_only" = 1 ] && exit 0

# A GPU: device nodes and a loadable driver.
if ! ls /dev/nvidia[0-9]* >/dev/null 2>&1; then
	echo "check.sh: no GPU here (no /dev/nvidia0 ...): nothing measured" >&2
	exit 77
fi
if ! ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1 '; then
	echo "check.sh: no CUDA driver here (libcuda.so.1 not in the loader cache): nothing measured" >&2
	exit 77
fi
command -v nvidia-smi >/dev/null && nvidia-smi -L || true
# pinned memory of the whole region: lift the memlock limit where allowed.
ulimit -l unlimited 2>/dev/null || true
PIN_BACKEND=portable "$out/bandwidth" "$@"
