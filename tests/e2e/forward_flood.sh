#!/bin/bash
# e2e forwards: the forward channel's caps under a flooding guest root
# (issue 29).  ksb-run runs tests/e2e/forward_flood_guest.py in place of
# QEMU (KSB_QEMU), on the real socketpair.  (1) 100,000 protocol errors
# (guest OPENs): forward.log grows by at most the budget (20 lines) plus
# one summary line, the channel is closed, ksb-run.log stays short.
# (2) 64 MiB of HELLOs whose answers the guest never reads: ksb-run's
# memory (VmHWM) grows by less than 24 MiB (the output queue's cap is
# 17 MiB), one line says so and the channel is closed; ksb-run stays up
# and ends with the guest's status.  (3) forward.log at 16 MiB becomes
# forward.log.1; a third screenshot while two are under way is refused.
# Needs root, python3 and a guest kernel file (exit 77); no QEMU.
set -eu
. "$(dirname "$0")/../lib.sh"

ksb_need_root
ksb_need python3
ksb_need_built ksb-run ksb-guest-init ksb-gatewayd ksbctl/ksbctl
ksb_kernel
ksb_env
ksb_gateway

fails=0
export KSB_TEST_OUT=$T/guest.out
kb() { awk -v k="$1:" '$1 == k { print $2 }' "/proc/$2/status"; }

# flood MODE NAME: ksb-run --detach with the flooding stand-in; sets rp.
flood() {
	: > "$KSB_TEST_OUT"
	chmod 0666 "$KSB_TEST_OUT" # the stand-in runs as QEMU's user
	KSB_QEMU="$KSB_SRCDIR/tests/e2e/forward_flood_guest.py" \
		KSB_TEST_FLOOD=$1 timeout 60 ip netns exec "$GW" \
		"$KSB_BUILDDIR/ksb-run" -f "$T/ksb.conf" --detach --name "$2" \
		--accel tcg --forward 127.0.0.1:0:80 -- unused 2>"$T/err.$2" ||
		ksb_fail "ksb-run --detach: $(cat "$T/err.$2")"
	rp=$(sed -n 's/^pid=//p' "$T/state/instances/$2/state")
	KSB_PIDS="$KSB_PIDS $rp"
}
done_() { grep -q "^flood done" "$KSB_TEST_OUT"; }
stop() {
	kill -TERM "$rp"
	ksb_check "ksb-run ends on SIGTERM" 'ksb_wait_dead "$rp" 30'
}

ksb_say "100,000 protocol errors on the forward channel"
flood errors fe
L=$T/state/instances/fe/forward.log
ksb_check "the flood ended" 'ksb_until 60 done_'
cat "$KSB_TEST_OUT"
closed() { grep -q "channel closed: more than 20 protocol errors in 10 s from the guest, the rest suppressed" "$L"; }
ksb_check "forward.log: the summary line, the channel closed" 'ksb_until 20 closed'
n=$(grep -c "guest-error" "$L" || true)
all=$(wc -l < "$L")
echo "# forward.log: $n guest-error line(s), $all in all ($(stat -c %s "$L") bytes)"
ksb_check "at most the budget of guest-error lines (20)" '[ "$n" -le 20 ]'
ksb_check "forward.log: budget + summary + ksb-run's own (< 26 lines)" '[ "$all" -lt 26 ]'
ksb_check "the guest saw the channel closed" 'grep -q "host closed the channel" "$KSB_TEST_OUT"'
logn=$(wc -l < "$T/state/instances/fe/ksb-run.log")
ksb_check "ksb-run.log stays short ($logn lines)" '[ "$logn" -lt 40 ]'
ksb_check "ksb-run.log: one summary line" '[ "$(grep -c "protocol errors in 10 s: the rest suppressed, channel closed" "$T/state/instances/fe/ksb-run.log")" = 1 ]'
ksb_check "ksb-run is still up" 'kill -0 "$rp"'
stop

ksb_say "64 MiB of HELLOs, their answers never read"
flood unread fu
hwm0=$(kb VmHWM "$rp")
ksb_check "the flood ended" 'ksb_until 120 done_'
cat "$KSB_TEST_OUT"
hwm1=$(kb VmHWM "$rp")
echo "# ksb-run VmHWM: $hwm0 kB before, $hwm1 kB after"
# Under the sanitizers (KSB_SANITIZED) ASan's redzones and quarantine
# take their share: the bound is four times as wide; the flood, 64 MiB.
lim=24576
[ -n "${KSB_SANITIZED:-}" ] && lim=$((4 * lim))
ksb_check "ksb-run's memory grew by less than $((lim / 1024)) MiB" '[ $((hwm1 - hwm0)) -lt "$lim" ]'
ksb_check "the guest saw the channel closed" 'grep -q "host closed the channel" "$KSB_TEST_OUT"'
L=$T/state/instances/fu/forward.log
ksb_check "forward.log: the channel closed, why" 'grep -q "channel closed: the guest does not read: output queue over" "$L"'
ksb_check "ksb-run.log: one line" '[ "$(grep -c "the guest does not read its replies" "$T/state/instances/fu/ksb-run.log")" = 1 ]'
ksb_check "ksb-run is still up" 'kill -0 "$rp"'
stop

ksb_say "forward.log at its cap; three screenshots at once"
L=$T/state/instances/fe/forward.log
head -c $((16 << 20)) /dev/zero | tr '\0' 'p' >> "$L"
flood hold fe
ksb_check "forward.log past 16 MiB became forward.log.1" \
	'ksb_until 20 test -e "$L.1" && [ "$(stat -c %s "$L.1")" -ge $((16 << 20)) ] && [ "$(stat -c %s "$L")" -lt 65536 ]'
shot() { timeout 60 "$KSB_BUILDDIR/ksbctl/ksbctl" -f "$T/ksb.conf" screenshot fe "$T/s$1.png" > "$T/shot$1" 2>&1; }
shot 1 & s1=$!
shot 2 & s2=$!
KSB_PIDS="$KSB_PIDS $s1 $s2"
two() { [ "$(grep -c "^host SHOT" "$KSB_TEST_OUT")" = 2 ]; }
ksb_check "two SHOTs reached the guest" 'ksb_until 20 two'
shot 3 || true
cat "$T/shot3"
ksb_check "a third is refused at once, saying why" 'grep -q "2 screenshots are under way already" "$T/shot3"'
kill "$s1" "$s2" 2>/dev/null || true
wait "$s1" "$s2" 2>/dev/null || true
stop

[ "$fails" = 0 ] || ksb_fail "$fails check(s) failed"
echo "PASS"
