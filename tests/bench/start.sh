#!/bin/bash
# tests/bench/start.sh [RUNS]: guest command start in an empty directory
# (ksb-run -v -- /bin/true, an ephemeral instance: no disk, no mirror),
# RUNS times (default 5), with the median of each row of ksb-run -v's
# start-time breakdown (vmrunner/boottime.c) and of QEMU's CPU time to
# READY.  KSB_BENCH_OTHER=DIR also runs the ksb-run of another built tree
# (e.g. a worktree of main), alternating with this one, so both see the
# same load; its column comes second.  On a shared machine the wall
# figures are upper bounds; QEMU's CPU time is the steadier one.  Needs
# root, QEMU and a guest kernel (exit 77).
set -eu
. "$(dirname "$0")/../lib.sh"

ksb_need_root
command -v qemu-system-x86_64 >/dev/null || ksb_skip "needs qemu-system-x86_64"
ksb_need_built ksb-run ksb-guest-init ksb-gatewayd
ksb_kernel
ksb_env
ksb_gateway
N=${1:-5}
OTHER=${KSB_BENCH_OTHER:-}
[ -z "$OTHER" ] || [ -x "$OTHER/ksb-run" ] || ksb_fail "$OTHER/ksb-run not built"
mkdir -p "$T/empty"
trees="this"
[ -z "$OTHER" ] || trees="this other"

ksb_say "load: $(uptime)"
for r in $(seq 1 "$N"); do
	for t in $trees; do
		b=$KSB_BUILDDIR
		[ "$t" = other ] && b=$OTHER
		( cd "$T/empty" && timeout 300 ip netns exec "$GW" "$b/ksb-run" \
			-f "$T/ksb.conf" -v -- /bin/true < /dev/null > "$T/$t.$r.con" \
			2> "$T/$t.$r" ) ||
			ksb_fail "$t run $r: $(grep -v 'argv\[' "$T/$t.$r" | tail -5)
console: $(tail -c 3000 "$T/$t.$r.con")"
		# The breakdown's rows: "label  N.NN s" after "start time".
		sed -n '/start time/,/QEMU CPU time/p' "$T/$t.$r" | sed -n 's/^ksb-run:  *\(.*[^ ]\)  *\([0-9.-]*\) s$/\1|\2/p' \
			> "$T/$t.$r.rows"
		echo "$t run $r: $(grep '^total' "$T/$t.$r.rows" | cut -d'|' -f2) s to READY," \
			"QEMU CPU $(grep '^QEMU CPU' "$T/$t.$r.rows" | cut -d'|' -f2) s"
	done
done
ksb_say "load: $(uptime)"

# med TREE LABEL: the median of that row over the runs.
med() {
	local r
	for r in $(seq 1 "$N"); do
		awk -F'|' -v l="$2" '$1 == l { print $2; exit }' "$T/$1.$r.rows"
	done | sort -g | sed -n "$(( (N + 1) / 2 ))p"
}
echo
printf '%-40s %8s %8s\n' "median of $N (s)" this "${OTHER:+other}"
cut -d'|' -f1 "$T/this.1.rows" | while read -r label; do
	printf '%-40s %8s %8s\n' "$label" "$(med this "$label")" \
		"$( [ -n "$OTHER" ] && med other "$label")"
done
if [ -n "$OTHER" ]; then
	echo "(other rows missing in this tree's list are not shown:" \
		"$(cut -d'|' -f1 "$T/other.1.rows" | grep -vxFf <(cut -d'|' -f1 "$T/this.1.rows") | tr '\n' ';'))"
fi
