#!/bin/bash
# tests/bench/agent_idle.sh [SECONDS]: what agent mode costs an idle
# guest (heartbeats every 5 s both ways, the tmux server, the console's
# tmux client): QEMU's and ksb-run's CPU time (utime + stime from
# /proc/<pid>/stat) over SECONDS (default 60) of an idle guest, first a
# plain one (`-- sleep`), then an agent one (`--agent sleep`), one after
# the other, after 10 s to settle; and prompt delivery latency (ksbctl
# prompt until the guest's ACK) over 10 prompts (the agent prints a line:
# a blank pane is not ready).  Needs root, QEMU, tmux
# and a guest kernel (exit 77).  Prints a table.
set -eu
. "$(dirname "$0")/../lib.sh"

ksb_need_root
ksb_need qemu-system-x86_64 /usr/bin/tmux
ksb_kernel
ksb_env
ksb_gateway
S=${1:-60}
I=$T/state/instances
ctl() { timeout 120 "$KSB_BUILDDIR/ksbctl/ksbctl" -f "$T/ksb.conf" "$@"; }
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)

measure() {	# name: prints "qemu-ms ksb-run-ms"
	local q r q0 r0
	q=$(sed -n 's/^qemu_pid=//p' "$I/$1/state")
	r=$(sed -n 's/^pid=//p' "$I/$1/state")
	sleep 10
	q0=$(ticks "$q"); r0=$(ticks "$r")
	sleep "$S"
	echo "$(( ($(ticks "$q") - q0) * 1000 / hz )) $(( ($(ticks "$r") - r0) * 1000 / hz ))"
}

ip netns exec "$GW" "$KSB_BUILDDIR/ksb-run" -f "$T/ksb.conf" --detach --name plain \
	-- sleep 100000 > /dev/null
KSB_PIDS="$KSB_PIDS $(sed -n 's/^pid=//p' "$I/plain/state")"
read -r pq pr <<< "$(measure plain)"
ctl stop plain > /dev/null

ip netns exec "$GW" "$KSB_BUILDDIR/ksb-run" -f "$T/ksb.conf" --detach --name agent \
	--agent 'echo ready; exec cat > /dev/null' --idle 1 > /dev/null
KSB_PIDS="$KSB_PIDS $(sed -n 's/^pid=//p' "$I/agent/state")"
read -r aq ar <<< "$(measure agent)"
lat=$(for k in $(seq 1 10); do
	ctl prompt agent "prompt $k" --wait --json > /dev/null &
	p=$!; sleep 3; kill "$p" 2>/dev/null; wait "$p" 2>/dev/null || true
done; grep -o 'delivered [0-9]* ms' "$I/agent/agent.events" | awk '{print $2}' | sort -n | tr '\n' ' ')
ctl stop agent > /dev/null

printf '\nidle %s s under %s         QEMU CPU      ksb-run CPU\n' "$S" "$(sed -n 's/^accel=//p' "$I/agent/state")"
printf 'plain guest (-- sleep)    %6d ms (%4.1f %%)  %5d ms\n' "$pq" "$(echo "$pq / $S / 10" | bc -l)" "$pr"
printf 'agent guest (--agent)     %6d ms (%4.1f %%)  %5d ms\n' "$aq" "$(echo "$aq / $S / 10" | bc -l)" "$ar"
printf 'prompt delivery latency (ms, sorted): %s\n' "$lat"
