# SPDX-License-Identifier: GPL-2.0
# Reads abidiff --leaf-changes-only output; exits 0 if every change is an
# extensible struct (pin.h's conventions: it begins with its size) that
# grew at its end, each new member at an offset past the old size (abidiff
# counts one as "one"), and 1
# (printing the first line that is not) otherwise.
BEGIN {
	ext = "^'struct pin_(cache_opts|dev_opts|dev_info|region_opts|region_info|holder|ref_range|io_opts|io_stats|st_load_opts|st_tensor|st_phases|st_step|cuda_opts) at "
	bad = ""; old = -1; impacted = 0
}
function fail(why) { if (bad == "") bad = why ": " $0 }
/^(Leaf changes summary|Changed leaf types summary|Removed\/Changed\/Added (functions|variables) summary):/ {
	if ($0 ~ /summary: [1-9][0-9]* Removed/ || $0 ~ /, [1-9][0-9]* Changed/)
		fail("removed or changed")
	next
}
/^$/ { next }
/^'/ {
	impacted = 0; old = -1
	if ($0 !~ ext || $0 !~ /' changed:$/)
		fail("not a growing extensible struct")
	next
}
/^  type size changed from [0-9]+ to [0-9]+ \(in bits\)$/ {
	old = $5 + 0
	if ($7 + 0 <= old)
		fail("shrank")
	next
}
/^  ([0-9]+|one) data member insertions?:$/ { next }
/^    '.*', at offset [0-9]+ \(in bits\)/ {
	if (impacted)
		next
	match($0, /at offset [0-9]+/)
	off = substr($0, RSTART + 10, RLENGTH - 10) + 0
	if (old < 0 || off < old)
		fail("inserted before the end")
	next
}
/^  ([0-9]+|one) impacted interfaces?:$/ { impacted = 1; next }
/^    / { if (impacted) next }
{ fail("a change other than growth") }
END {
	if (bad != "") { print bad; exit 1 }
	exit 0
}
