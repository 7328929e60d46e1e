#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# GPU check for libpin's CUDA registration, for a machine WITH a GPU, the
# CUDA driver and the toolkit in /usr/local/cuda (modules cannot be loaded
# there, so libpin runs on its portable backend). Two halves:
#  1. tests/gpu/bandwidth (libpin's core sources compiled in, linked with
#     -lcuda): registration time of a region, H2D/D2H bandwidth from the
#     registered region vs cuMemHostAlloc vs malloc;
#  2. tests/gpu/frameworks.py under $PYTHON (default python3, which needs
#     jax with CUDA and/or torch): a pinmem view as JAX's pinned_host array,
#     device_put GB/s from pinmem.jax arrays (a view, load_safetensors's)
#     against JAX's own pinned_host buffer (target >= 0.95x) and pageable
#     memory; .cuda(non_blocking=True) GB/s from load_file tensors (private
#     and shared=True) against pin_memory() (target >= 0.95x) and pageable
#     memory, torch's own is_pinned() of each, a non_blocking copy that
#     returns before it completes (CUDA events); every low-bit dtype the
#     torch has (the float8s, float4_e2m1fn_x2, bf16) loaded and copied to
#     the GPU and back bit for bit; issue 26216's loop on the GPU. It
#     loads build/tests/gpu/lib/libpin.so.1, built here with liburing linked
#     in (a GPU machine may have no liburing); built on another machine,
#     that folder can be carried over as it is.
#   tests/gpu/check.sh [GiB [iterations]]     (default 4 GiB, 5)
#   tests/gpu/check.sh --build-only            compile, do not run
# Exits 77 with a message where there is no GPU or no toolkit. The whole
# run takes a few minutes (most of it the 4 GiB registration runs).
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

# The whole of libpin for pinmem's Python binding. liburing's archive is
# linked in where there is one, so the library needs only libc; one that is
# already there (carried from the machine that built it) is kept.
pylib=$out/lib/libpin.so.1
if [ ! -e "$pylib" ] || [ "$build_only" = 1 ]; then
	# libpin's layers, as its makefile names them
	layers=$(sed -n 's/^LIBPIN_LAYERS[[:space:]]*:=[[:space:]]*//p' libpin/libpin.mk)
	uring=-luring
	[ -e /usr/lib/x86_64-linux-gnu/liburing.a ] && uring=-l:liburing.a
	mkdir -p "$out/lib"
	if ${CC:-cc} -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -O2 -g -fPIC -shared \
		-Iinclude -I"$out/include" -Ilibpin -DPIN_HAVE_CUDA_H -I"$cuda/include" \
		-Wl,-soname,libpin.so.1 -Wl,--version-script=libpin/libpin.map -Wl,-z,defs \
		-o "$pylib.tmp" $(for l in $layers; do echo "libpin/$l/"*.c; done) \
		$uring -ldl; then
		mv "$pylib.tmp" "$pylib"
		echo "check.sh: built $pylib ($uring)"
	else
		rm -f "$pylib.tmp"
		echo "check.sh: could not build $pylib (no liburing?): the framework half will not run" >&2
	fi
fi
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
status=0
PIN_BACKEND=portable "$out/bandwidth" "$@" || status=1

echo
py=${PYTHON:-python3}
if [ ! -e "$pylib" ]; then
	echo "check.sh: frameworks: skipped, no $pylib"
	exit $status
fi
rc=0
PINMEM_LIBPIN=$pylib timeout 420 "$py" tests/gpu/frameworks.py || rc=$?
case $rc in
0) ;;
77) echo "check.sh: frameworks: neither jax nor torch imports in $py" ;;
*) status=1 ;;
esac
echo "check.sh: $([ $status = 0 ] && echo 'all checks passed' || echo FAILED)"
exit $status
