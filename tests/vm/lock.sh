# shellcheck shell=bash
# SPDX-License-Identifier: GPL-2.0
# The guest lock, first come first served (sourced by tests/vm/run).
# flock alone wakes its waiters in no order: a guest once waited 40
# minutes while later arrivals went first. Each waiter leaves a ticket in
# LOCK.queue/, named by its arrival time in nanoseconds and its pid and
# holding its process's start time (so a reused pid is not taken for it).
# Only the oldest ticket whose process lives waits on the flock; once it
# holds the lock it drops its ticket and the next one moves up. Tickets of
# dead waiters are removed by whoever finds them.
#   vm_lock LOCK    take LOCK on fd 9 (held until the process exits);
#                   sets vm_ticket while waiting, for the caller's cleanup

# The start time of process $1 (field 22 of /proc/PID/stat), or nothing.
vm_lock_started() {
	local s

	s=$(cat "/proc/$1/stat" 2>/dev/null) || return 0
	s=${s##*) }
	# shellcheck disable=SC2086 # the fields, split
	set -- $s
	echo "${20}"
}

# The oldest ticket in directory $1 whose waiter still lives.
vm_lock_first() {
	local t pid

	for t in "$1"/*; do
		[ -f "$t" ] || continue
		pid=${t##*-}
		if [ -n "$pid" ] && [ "$(vm_lock_started "$pid")" = "$(cat "$t" 2>/dev/null)" ]; then
			echo "$t"
			return
		fi
		rm -f "$t"
	done
}

# (Re)write this waiter's ticket whole: a reader must never find it empty
# and take it for a dead waiter's (the glob skips the hidden temporary).
vm_lock_ticket() {
	local tmp=${vm_ticket%/*}/.${vm_ticket##*/}

	[ -f "$vm_ticket" ] && return
	vm_lock_started "$BASHPID" >"$tmp" && mv -f "$tmp" "$vm_ticket"
}

vm_lock() {
	local lock=$1 queue=$1.queue said=0 LC_ALL=C

	mkdir -p "$queue" && chmod 1777 "$queue" 2>/dev/null
	vm_ticket=$queue/$(date +%s%N)-$BASHPID
	vm_lock_ticket
	exec 9>>"$lock"
	while [ "$(vm_lock_first "$queue")" != "$vm_ticket" ] ||
		! flock -n 9; do
		vm_lock_ticket
		if [ "$said" = 0 ]; then
			echo "pinmem-rig: waiting for another guest to finish ($lock: $(head -c 300 "$lock"))"
			said=1
		fi
		sleep 0.2
	done
	rm -f "$vm_ticket"
	vm_ticket=
}
