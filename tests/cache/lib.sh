# SPDX-License-Identifier: GPL-2.0
# What the cache suites share (sourced by tests/cache/run-tests and
# tests/cache/run-hostile): the service and client under test, TAP
# results, and starting, asking and stopping a service in WORK.
#   . tests/cache/lib.sh WORKDIR
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
B=$top/build
cached=${PINMEM_CACHED:-$B/sbin/pinmem-cached}
client=${PINMEM_CACHE_CLIENT:-$B/tests/cache/cache-client}
raw="python3 $top/tests/cache/rawclient.py"
mkst="python3 $top/tests/cache/mkst.py"
# Not on tmpfs, whose files the service does not cache: the checkout's
# build/tmp unless a folder is given.
mkdir -p "$top/build/tmp"
own_work=
[ $# -ge 1 ] || own_work=1
work=${1:-$(mktemp -d "$top/build/tmp/cache.XXXXXX")}
mkdir -p "$work"
chmod 755 "$work"
sock=$work/cache.sock
backend=${PIN_BACKEND:-portable}
n=0
status=0
srv=

ok() { n=$((n + 1)); echo "ok $n - [$backend] $1"; }
not_ok() {
	n=$((n + 1)); status=1
	echo "not ok $n - [$backend] $1"
	shift
	printf '%s\n' "$@" | tail -n 60 | sed 's/^/# /'
}
check() { # NAME COND-RESULT EVIDENCE...
	local name=$1 res=$2
	shift 2
	if [ "$res" = 0 ]; then ok "$name"; else not_ok "$name" "$@"; fi
}
# Milliseconds since the epoch, for "within 1 s" checks.
ms() { echo $(($(date +%s%N) / 1000000)); }
# True on the debug kernel (KASAN, lockdep), where every step is slower.
debug_kernel() { uname -r | grep -q pinmem-debug; }

# A single user's tests give that user the whole budget; share= (empty)
# keeps the service's default share.
start() { # [service options...]
	"$cached" --socket "$sock" --backend "$backend" ${share---user-share 100} "$@" 2>>"$work/cached.log" &
	srv=$!
	for _ in $(seq 50); do "$cached" --list --socket "$sock" >/dev/null 2>&1 && return; sleep 0.1; done
}
# Wait (up to 10 s) until FILE holds a line matching PATTERN (a client's
# "how:" line unless given).
ready() { for _ in $(seq 200); do grep -q "${2:-^how:}" "$1" 2>/dev/null && return; sleep 0.05; done; }
stop() { [ -n "$srv" ] && kill "$srv" 2>/dev/null; wait "$srv" 2>/dev/null; srv=; rm -f "$sock"; }
list() { "$cached" --list --socket "$sock"; }
# Wait (up to 10 s) until the service's list holds TEXT.
listed() { for _ in $(seq 100); do [[ $(list) == *"$1"* ]] && return; sleep 0.1; done; }
get() { "$client" --socket "$sock" "$@"; }
# At exit: the service stopped, a folder made here removed.
finish() { stop; [ -z "$own_work" ] || rm -rf "$work"; }
trap finish EXIT
