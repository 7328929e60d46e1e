# SPDX-License-Identifier: GPL-2.0
# TAP helpers for the libpin suites (sourced). Each result is one line,
# "ok N - name", "ok N - name # SKIP why" or "not ok N - name" followed by
# the evidence as "# " comments; tap_done prints the plan and exits 1 if
# anything failed.

tap_n=0
tap_status=0

# tap_result RC NAME OUTPUT: exit status 0 pass, 77 skip, else fail.
tap_result() {
	local rc=$1 name=$2 out=$3 why
	tap_n=$((tap_n + 1))
	case $rc in
	0)
		echo "ok $tap_n - $name" ;;
	77)
		why=$(printf '%s\n' "$out" | sed -n 's/^SKIP: //p' | head -1)
		[ -n "$why" ] || why=$(printf '%s\n' "$out" | tail -1)
		echo "ok $tap_n - $name # SKIP $why" ;;
	*)
		echo "not ok $tap_n - $name (exit $rc)"
		printf '%s\n' "$out" | tail -40 | sed 's/^/# /'
		tap_status=1 ;;
	esac
}

# tap_run NAME CMD...: one test from a command's exit status.
tap_run() {
	local name=$1 out rc
	shift
	out=$(timeout -k 5 "${LIBPIN_TEST_TIMEOUT:-120}" "$@" 2>&1)
	rc=$?
	tap_result "$rc" "$name" "$out"
}

# tap_run_dir DIR LABEL [PREFIX-CMD...]: every program in DIR, one test each.
tap_run_dir() {
	local dir=$1 label=$2 t
	shift 2
	if ! [ -x "$(ls -d "$dir"/* 2>/dev/null | head -1)" ]; then
		tap_result 1 "$label: test programs" "no programs in $dir (make all first)"
		return
	fi
	for t in "$dir"/*; do
		tap_run "$label$(basename "$t")" "$@" "$t"
	done
}

tap_done() {
	echo "1..$tap_n"
	exit $tap_status
}

# tap_rc WANT NAME CMD...: one test, passes if CMD exits with status WANT.
tap_rc() {
	local want=$1 name=$2 out rc
	shift 2
	out=$(timeout -k 5 "${LIBPIN_TEST_TIMEOUT:-120}" "$@" 2>&1)
	rc=$?
	if [ "$rc" -eq "$want" ]; then
		tap_result 0 "$name" "$out"
	else
		tap_result 1 "$name" "exit $rc, expected $want: $*
$out"
	fi
}
