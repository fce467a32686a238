#!/bin/bash
# tests/bench/start.sh [RUNS]: guest command start in an empty directory
# (ksb-run -v -- /bin/true, an ephemeral instance: no disk, no mirror),
# RUNS times (default 5), with the median of each row of ksb-run -v's
# start-time breakdown (vmrunner/boottime.c) and of QEMU's CPU time to
# READY.  KSB_BENCH_OTHER=DIR also runs the ksb-run of another built tree
# (e.g. a worktree of main), alternating with this one, so both see the
# same load; its column comes second.  On a shared machine the wall
# figures are upper bounds; QEMU's CPU time is the steadier one.  The
# "this" column is this tree booting the guest (--template off), the
# "tpl" column this tree with --template on (vmrunner/template.c), the
# "default" column this tree with no template flag (template = auto: a
# template under TCG, a boot under KVM): a first run, not counted, boots
# and saves the template; each counted run restores it.
# KSB_BENCH_TEMPLATE=0 leaves the last two out.  KSB_BENCH_MACHINES=
# "microvm q35" adds a column per machine type (this tree booting it:
# --template off --machine M), alternating with the others.  Needs root,
# QEMU and a guest kernel (exit 77).
set -eu
. "$(dirname "$0")/../lib.sh"

ksb_need_root
command -v qemu-system-x86_64 >/dev/null || ksb_skip "needs qemu-system-x86_64"
ksb_need_built ksb-run ksb-guest-init ksb-gatewayd
ksb_kernel
KSB_TEST_TEMPLATE=default # ksb.conf: no template line (the default)
ksb_env
ksb_gateway
N=${1:-5}
OTHER=${KSB_BENCH_OTHER:-}
[ -z "$OTHER" ] || [ -x "$OTHER/ksb-run" ] || ksb_fail "$OTHER/ksb-run not built"
mkdir -p "$T/empty"
trees="this"
[ "${KSB_BENCH_TEMPLATE:-1}" = 0 ] || trees="$trees tpl default"
[ -z "$OTHER" ] || trees="$trees other"
for m in ${KSB_BENCH_MACHINES:-}; do trees="$trees $m"; done
# run_one TREE OUT: one ksb-run -v -- /bin/true of that tree.
run_one() {
	local b=$KSB_BUILDDIR extra=
	[ "$1" = other ] && b=$OTHER
	[ "$1" = this ] && extra="--template off"
	[ "$1" = tpl ] && extra="--template on"
	case " ${KSB_BENCH_MACHINES:-} " in
	*" $1 "*) extra="--template off --machine $1" ;;
	esac
	# shellcheck disable=SC2086 # extra: words or none
	( cd "$T/empty" && timeout 300 ip netns exec "$GW" "$b/ksb-run" \
		-f "$T/ksb.conf" -v $extra -- /bin/true < /dev/null > "$2.con" \
		2> "$2" )
}
if [ "${KSB_BENCH_TEMPLATE:-1}" != 0 ]; then
	run_one tpl "$T/tpl.warmup" ||
		ksb_fail "template warm-up: $(grep -v 'argv\[' "$T/tpl.warmup" | tail -5)"
	ksb_say "template built: $(grep -o 'booted and saved in .*' "$T/tpl.warmup")"
fi

ksb_say "load: $(uptime)"
for r in $(seq 1 "$N"); do
	for t in $trees; do
		run_one "$t" "$T/$t.$r" ||
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
cols=$(for t in $trees; do printf ' %8s' "$t"; done)
printf '%-40s%s\n' "median of $N (s)" "$cols"
# Every tree's rows, in the order they first appear.
cat $(for t in $trees; do echo "$T/$t.1.rows"; done) | cut -d'|' -f1 |
	awk '!seen[$0]++' | while read -r label; do
	printf '%-40s' "$label"
	for t in $trees; do
		printf ' %8s' "$(med "$t" "$label")"
	done
	echo
done
