#!/bin/bash
# tests/bench/agents_per_host.sh [N]: how many idle agents one host carries.
# Starts N (default 4) named agent guests one after another, each the real
# Claude Code in its TUI (interactive mode, the pinned version of
# contrib/fetch-agents.sh) against tests/e2e/fakeapi.py, KSB_BENCH_MEMORY
# MiB each (default 2048); each gets a first turn (its TUI starts in it),
# and once it waits for the next prompt (done, or its pane quiet for 10 s)
# and has settled for KSB_BENCH_SETTLE s (default 30) a row is printed:
#   n         guests running
#   rss       the newest guest's QEMU RSS (MiB, /proc/<pid>/status)
#   anon      of it, QEMU's own (RssAnon: guest RAM, translated code,
#             heap); the rest (RssFile: the vmlinux QEMU loaded, its
#             binary and libraries) is page cache all guests share
#   held      what that guest's balloon says it holds (MiB: total - free;
#             free pages go back to the host by free page reporting)
#   rss-all   the sum of every guest's QEMU RSS (MiB)
#   anon-all  the sum of every guest's RssAnon (MiB): what they cost
#   idle-cpu  CPU of all guests' QEMU processes over KSB_BENCH_WINDOW s
#             (default 30), in % of one core, and per guest
#   avail     the host's MemAvailable (MiB); swap used (MiB)
#   boot-s    ksb-run --detach until the first turn ended
#   first/turn  a prompt to guest 1 (one tool call that commits, as in
#             tests/bench/agents.sh): s to the fake API's first request of
#             the turn, s to its end (done in agent.events)
# The goal (issue 19) is 16 idle 2 GiB guests on a 24 GiB host with no
# swapping and guest 1's turn at most 2x its time with one guest.  Stops
# early when a guest does not go idle in 600 s, MemAvailable falls under
# 1 GiB or swap is used.  Guests boot the cold way unless
# KSB_TEST_TEMPLATE=default (ksb-run's default start: from a template under
# TCG); the header says which.  Needs root, QEMU, the built tree, a guest kernel
# and the agents (exit 77); not in TESTS.
set -eu
. "$(dirname "$0")/../lib.sh"

N=${1:-4}
MEM=${KSB_BENCH_MEMORY:-2048}
SETTLE=${KSB_BENCH_SETTLE:-30}
WIN=${KSB_BENCH_WINDOW:-30}
CACHE=${KSB_AGENTS_CACHE:-/var/cache/ksb/agents}

ksb_need_root
command -v qemu-system-x86_64 >/dev/null || ksb_skip "needs qemu-system-x86_64"
ksb_need_built ksb-run ksb-guest-init ksb-gatewayd ksbctl/ksbctl
ksb_fetch_agents "$CACHE"
ksb_kernel
ksb_env
ksb_fakeapi
ksb_gateway
ksb_host_repo
# Detached guests outlive a killed ksb-run's caller: stop them first.
stop_all() {
	local d
	for d in "$T"/state/instances/a*; do
		[ -d "$d" ] && timeout 60 "$KSB_BUILDDIR/ksbctl/ksbctl" \
			-f "$T/ksb.conf" stop "${d##*/}" > /dev/null 2>&1
	done
	return 0
}
trap 'rc=$?; stop_all; (exit $rc); ksb_cleanup' EXIT
export KSBT_ANTHROPIC_KEY="sk-ant-api03-bench-$(openssl rand -hex 16)"
I=$T/state/instances
hz=$(getconf CLK_TCK)
ctl() { timeout 300 "$KSB_BUILDDIR/ksbctl/ksbctl" -f "$T/ksb.conf" "$@"; }
now() { date +%s.%N; }
qpid() { sed -n 's/^qemu_pid=//p' "$I/$1/state"; }
rss_mib() { awk '/^VmRSS/ { printf "%d", $2 / 1024 }' "/proc/$1/status"; }
anon_mib() { awk '/^RssAnon/ { printf "%d", $2 / 1024 }' "/proc/$1/status"; }
ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
meminfo() { awk -v k="$1" '$1 == k ":" { printf "%d", $2 / 1024 }' /proc/meminfo; }
held_mib() {
	ctl status --json "$1" | python3 -c 'import json, sys
m = json.load(sys.stdin).get("memory", {})
h = m.get("guest_held_bytes", -1)
print(h // 1048576 if h >= 0 else "-")'
}
# Waiting for a prompt: done (the Stop hook said so) or idle (pane quiet).
idle() { grep -Eqx 'agent_state=(done|idle)' "$I/$1/state" 2>/dev/null; }

boot() {	# ID
	timeout 300 ip netns exec "$GW" "$KSB_BUILDDIR/ksb-run" -f "$T/ksb.conf" \
		--detach --name "$1" --repo "$P" --disk-size 1G --memory "$MEM" \
		--ca-file "$T/api/ca.pem" --share-ro "$CACHE:/opt/ksb-agents" \
		--secret ANTHROPIC_API_KEY=env:KSBT_ANTHROPIC_KEY --idle 10 \
		--agent /opt/ksb-agents/node_modules/.bin/claude \
		--agent-mode interactive > "$T/$1.boot" 2>&1 || return 1
	KSB_PIDS="$KSB_PIDS $(sed -n 's/^pid=//p' "$I/$1/state")"
}

turn() {	# K: a turn to a1; prints "first-s turn-s"
	local t0 t1 first n
	t0=$(now)
	# Delivered, then its end in agent.events (a "blocked" report while
	# the pane is busy is not the end).
	timeout 900 "$KSB_BUILDDIR/ksbctl/ksbctl" -f "$T/ksb.conf" prompt a1 \
		"RUN: cd ~/work && echo $1 > f$1.txt && git add f$1.txt &&
git commit -qm a1-turn$1 && echo done-a1-turn$1" > "$T/turn.$1" 2>&1 || true
	n=$(sed -n 's/^turn \([0-9]*\).*/\1/p' "$T/turn.$1" | head -1)
	[ -n "$n" ] || { echo "- no-turn"; return; }
	ksb_until 900 grep -Eq "^[0-9]+ $n (done|failed|exited)( |\$)" \
		"$I/a1/agent.events" || { echo "- no-end"; return; }
	t1=$(now)
	first=$(ksb_api_turn "a1-turn$1" | sed -n 's/.* first=\([^ ]*\) .*/\1/p')
	[ -n "$first" ] && [ "$first" != - ] || first=$t1
	echo "$(echo "$first - $t0" | bc) $(echo "$t1 - $t0" | bc)"
}

ksb_say "load: $(uptime); MemAvailable $(meminfo MemAvailable) MiB"
# How the guests start (KSB_TEST_TEMPLATE=default: ksb-run's default, from
# a template under TCG; else the cold boot tests/lib.sh sets)
ksb_say "start: $("$KSB_BUILDDIR/ksb-run" -f "$T/ksb.conf" --print-config |
	grep '^template ')"
printf '%3s %6s %6s %6s %8s %8s %14s %8s %6s %8s %8s %8s\n' n rss anon held \
	rss-all anon-all "idle-cpu %(1)" avail swap first-s turn-s boot-s
swap0=$(( $(meminfo SwapTotal) - $(meminfo SwapFree) ))
for n in $(seq 1 "$N"); do
	t0=$SECONDS
	boot "a$n" || { echo "a$n: did not boot: $(tail -3 "$T/a$n.boot")"; break; }
	# A first turn (the TUI's start is in it), then idle: the agent
	# waits for the next prompt.
	timeout 1200 "$KSB_BUILDDIR/ksbctl/ksbctl" -f "$T/ksb.conf" prompt "a$n" \
		"RUN: echo warm-a$n" --wait > "$T/a$n.warm" 2>&1 || true
	grep -q ended "$T/a$n.warm" || { echo "a$n: first turn: $(tail -3 "$T/a$n.warm")"; break; }
	bt=$((SECONDS - t0))
	ksb_until 120 idle "a$n" || { echo "a$n: not idle 120 s after its turn"; break; }
	sleep "$SETTLE"
	pids=$(for i in $(seq 1 "$n"); do qpid "a$i"; done)
	c0=0; for p in $pids; do c0=$((c0 + $(ticks "$p"))); done
	sleep "$WIN"
	c1=0; for p in $pids; do c1=$((c1 + $(ticks "$p"))); done
	all=0; for p in $pids; do all=$((all + $(rss_mib "$p"))); done
	anon=0; for p in $pids; do anon=$((anon + $(anon_mib "$p"))); done
	cpu=$(echo "scale=1; ($c1 - $c0) * 100 / $hz / $WIN" | bc)
	per=$(echo "scale=1; $cpu / $n" | bc)
	swap=$(( $(meminfo SwapTotal) - $(meminfo SwapFree) - swap0 ))
	read -r first tt <<< "$(turn "$n")"
	printf '%3s %6s %6s %6s %8s %8s %14s %8s %6s %8s %8s %8s\n' "$n" \
		"$(rss_mib "$(qpid "a$n")")" "$(anon_mib "$(qpid "a$n")")" \
		"$(held_mib "a$n")" "$all" "$anon" "$cpu ($per)" \
		"$(meminfo MemAvailable)" "$swap" "$first" "$tt" "$bt"
	[ "$(meminfo MemAvailable)" -ge 1024 ] && [ "$swap" -le 0 ] ||
		{ echo "stopping: host memory is short"; break; }
done
ksb_say "load: $(uptime)"
ksb_say "templates: $(find "$T/state/templates" -type f ! -name .lock \
	2>/dev/null | wc -l) saved"
