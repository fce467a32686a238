#!/bin/bash
# ctl_garbage.sh: a guest that writes 160 KiB (more than 64) of garbage to the control
# port, then EXIT 7 (issue 17): ksb-run throttles it (64 KiB/s) but keeps
# listening, and exits 7, the guest's status; the unasked SELFTEST lines
# in its garbage forge no audit record.  Then a guest that closes its
# control port after READY: a reload's self-test still fails in 30 s and
# stops it (exit 125, a fail record).  ksb-run runs
# tests/e2e/garbage_guest.py in place of QEMU (KSB_QEMU).  Needs root,
# python3 and a guest kernel file (exit 77); no QEMU.
set -eu
. "$(dirname "$0")/../lib.sh"

ksb_need_root
ksb_need python3 sqlite3
ksb_need_built ksb-run ksb-guest-init ksb-gatewayd
ksb_kernel
ksb_env
ksb_gateway
fails=0
pass=0
t0=$SECONDS
KSB_QEMU="$KSB_SRCDIR/tests/e2e/garbage_guest.py" KSB_TEST_GARBAGE_KIB=160 \
	timeout 120 ip netns exec "$GW" "$KSB_BUILDDIR/ksb-run" -f "$T/ksb.conf" \
	--accel tcg -- /bin/true < /dev/null > "$T/out" 2> "$T/err" && rc=0 || rc=$?
dt=$((SECONDS - t0))
cat "$T/err" | grep -v "^$" | tail -n 8
ksb_check "ksb-run exits with the guest's status after 160 KiB of garbage: $rc" '[ "$rc" = 7 ]'
ksb_check "it never stopped listening" '! grep -q "no longer listening\|reported no exit status" "$T/err"'
took=$(sed -n 's/^garbage guest: [0-9]* bytes in \([0-9]*\)\..*/\1/p' "$T/err")
# The guest's own time is shown, not checked: the socketpair under the
# control port buffers up to ~256 KiB, which a guest may write at once
# however slowly ksb-run reads (seen: 0 s in one CI run, 3+ s in others).
ksb_check "the garbage was throttled (64 KiB/s; the guest took ${took:-?} s)" \
	'grep -q "control bytes/s: throttled" "$T/err"'
ksb_check "unasked SELFTEST lines are ignored and said so" \
	'grep -q "guest sent a second, late or unasked SELFTEST, ignored" "$T/err"'
ksb_check "only the boot self-test is recorded: no forged record" \
	'ksb_sql_is "boot|ok|7" "SELECT group_concat(trigger || '"'|'"' || result || '"'|'"' || probes) FROM selftests"'

# A guest that closes its control port after READY takes no SELFTEST
# request: a reload's test still fails within ksb-run's 30 s of the
# notice (the instance is stopped, exit 125, a fail record), instead of
# the guest running on untested under the new policy.
ksb_say "a deaf guest after a reload"
KSB_QEMU="$KSB_SRCDIR/tests/e2e/garbage_guest.py" KSB_TEST_DEAF=1 \
	timeout 150 ip netns exec "$GW" "$KSB_BUILDDIR/ksb-run" -f "$T/ksb.conf" \
	--accel tcg -- /bin/true < /dev/null > "$T/out2" 2> "$T/err2" &
deaf=$!
KSB_PIDS="$KSB_PIDS $deaf"
ksb_until 60 grep -q "deaf guest: control port closed" "$T/err2" ||
	{ cat "$T/err2"; ksb_fail "the deaf guest did not start"; }
kill -HUP "$KSB_GATEWAY_PID"
t1=$SECONDS
ksb_wait_dead "$deaf" 90 || { cat "$T/err2"; ksb_fail "ksb-run kept the deaf guest"; }
wait "$deaf" && rc=0 || rc=$?
dt=$((SECONDS - t1))
grep -v "^$" "$T/err2" | tail -n 4
ksb_check "deaf guest: stopped, exit 125, ${dt} s after the reload: $rc" \
	'[ "$rc" = 125 ] && [ "$dt" -lt 75 ]'
ksb_check "deaf guest: a reload fail record (timeout, stopped)" \
	'ksb_sql_is 1 "SELECT count(*) FROM selftests WHERE trigger = '"'reload'"' AND result = '"'fail'"' AND failed = '"'timeout'"' AND action = '"'stopped'"'"'
# Both runs sent SELFTEST (the deaf one right before it stopped) and
# then UNREGISTER on the lease's connection: every answer matched its
# request (UNREGISTER's taken after SELFTEST's, not instead of it).
lease_talk() {
	! grep -E "answered no request|unexpected line from ksb-gatewayd|refused (SELFTEST|an earlier)|UNREGISTER" "$1"
}
ksb_check "the gateway's answers matched to ksb-run's requests, UNREGISTER's last" \
	'lease_talk "$T/err" && lease_talk "$T/err2"'
ksb_check "both leases ended" \
	'[ "$(grep -c "^ksb-gatewayd: unregister " "$T/gatewayd.log")" = 2 ]'
echo "# $pass passed, $fails failed"
[ "$fails" = 0 ]
