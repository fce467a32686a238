#!/bin/bash
# ctl_unread.sh: a guest that asks and never reads (issue 29).  In agent
# mode ksb-run runs tests/e2e/ctl_unread_guest.py in place of QEMU
# (KSB_QEMU): after READY and HELLO it sends PINGs, each answered by a
# PONG, and never reads its control port again.  The queue toward it is
# capped (4 MiB, agent.c): past it one line, and the instance is stopped
# (nothing, its STOP included, reaches a guest that does not read; closing
# the port would lose its EXIT).  ksb-run's memory stays bounded and its
# log short.  Then a guest sending 1000 REPORTs a second for 8 s: its
# rate lines in ksb-run.log stop at 3.  Needs root, python3 and a guest kernel file (exit 77); no QEMU.
set -eu
. "$(dirname "$0")/../lib.sh"

ksb_need_root
ksb_need python3
ksb_need_built ksb-run ksb-guest-init ksb-gatewayd
ksb_kernel
ksb_env
ksb_gateway

fails=0
export KSB_TEST_OUT=$T/guest.out
: > "$KSB_TEST_OUT"
chmod 0666 "$KSB_TEST_OUT" # the stand-in runs as QEMU's user
I=$T/state/instances/cu
KSB_QEMU="$KSB_SRCDIR/tests/e2e/ctl_unread_guest.py" timeout 60 \
	ip netns exec "$GW" "$KSB_BUILDDIR/ksb-run" -f "$T/ksb.conf" \
	--detach --name cu --accel tcg --agent 'true # the fake guest runs nothing' > /dev/null 2> "$T/err" ||
	{ cat "$T/err"; ksb_fail "ksb-run --detach"; }
rp=$(sed -n 's/^pid=//p' "$I/state")
KSB_PIDS="$KSB_PIDS $rp"
# ksb-run's peak memory, sampled until it ends (at most 60 s).
hwm=0
for _ in $(seq 1 600); do
	h=$(awk '/^VmHWM/ { print $2 }' "/proc/$rp/status" 2>/dev/null) || break
	[ -n "$h" ] || break
	hwm=$h
	kill -0 "$rp" 2>/dev/null || break
	sleep 0.1
done
echo "# ksb-run VmHWM: $hwm kB"
ksb_check "ksb-run stops the instance" 'ksb_wait_dead "$rp" 60'
ksb_check "ksb-run said the guest does not read, once" '[ "$(grep -c "the guest asks and does not read its control port" "$I/ksb-run.log")" = 1 ]'
lim=32768 # KSB_SANITIZED: ASan's redzones and quarantine, four times
[ -n "${KSB_SANITIZED:-}" ] && lim=$((4 * lim))
ksb_check "ksb-run's memory stayed under $((lim / 1024)) MiB" '[ "$hwm" -gt 0 ] && [ "$hwm" -lt "$lim" ]'
ksb_check "the stand-in was stopped (SIGHUP, QEMU_STOP_SIGNAL), not left running" 'grep -q "QEMU killed by signal 1)" "$I/ksb-run.log"'
ksb_check "the state says stopped" 'grep -q "^phase=stopped" "$I/state"'
n=$(wc -l < "$I/ksb-run.log")
ksb_check "ksb-run.log stays short ($n lines)" '[ "$n" -lt 30 ]'
ksb_say "1000 reports a second for 8 s: the rate lines are capped too"
: > "$KSB_TEST_OUT"
I=$T/state/instances/cr
KSB_TEST_MODE=reports KSB_QEMU="$KSB_SRCDIR/tests/e2e/ctl_unread_guest.py" timeout 60 \
	ip netns exec "$GW" "$KSB_BUILDDIR/ksb-run" -f "$T/ksb.conf" \
	--detach --name cr --accel tcg --agent 'true # the fake guest runs nothing' > /dev/null 2> "$T/err" ||
	{ cat "$T/err"; ksb_fail "ksb-run --detach"; }
rp=$(sed -n 's/^pid=//p' "$I/state")
KSB_PIDS="$KSB_PIDS $rp"
reported() { grep -q "^reported" "$KSB_TEST_OUT"; }
ksb_check "the guest reported" 'ksb_until 60 reported'
n=$(grep -c "reports a second" "$I/ksb-run.log" || true)
ksb_check "at most 3 rate lines in ksb-run.log ($n), the last says so" \
	'[ "$n" -le 3 ] && [ "$n" -ge 1 ] && grep -q "no more such lines" "$I/ksb-run.log"'
kill -TERM "$rp"
ksb_check "ksb-run ends on SIGTERM" 'ksb_wait_dead "$rp" 30'

[ "$fails" = 0 ] || { cat "$I/ksb-run.log"; ksb_fail "$fails check(s) failed"; }
echo "PASS"
