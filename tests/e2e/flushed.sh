#!/bin/bash
# e2e: the enforcement self-test has a positive control (issue 29).  With
# the gateway's nftables rules flushed (the tables, chains and sets still
# there) nothing refuses a guest's direct connections, and a probe that
# only failed (a closed port's RST, the host's ICMP) must not pass: the
# boot self-test fails and the command never runs (exit 125), and the
# self-test after a reload fails and the instance is stopped (exit 125).
# The gateway's canary on its port 22 sees the guest's connect.  (With
# the gateway's own check on, the default, it restores the rules first.)  Needs
# root, QEMU, nft and a guest kernel; exits 77 naming what is missing.
set -eu
. "$(dirname "$0")/../lib.sh"

ksb_need_root
ksb_need qemu-system-x86_64 pgrep nft sqlite3
ksb_need_built ksb-run ksb-guest-init ksb-gatewayd ksbctl/ksbctl
ksb_kernel
# The gateway's own check of its rules (gateway/parent/rulecheck.c,
# tests/integration/rulecheck.sh) would restore them at the REGISTER and
# the reload: off, so that this tests the guests' self-test alone.
KSB_TEST_CONF="nft-check-interval = 0"
ksb_env
ksb_gateway

fails=0
flush() {
	ip netns exec "$GW" nft flush table inet ksb
	ip netns exec "$GW" nft flush table bridge ksb
}
# The rules of inet ksb: the lines nft -a ends with a handle, but for
# the table's, chains' and sets' own.
rules() {
	ip netns exec "$GW" nft -a list table inet ksb | grep -E '# handle [0-9]+$' |
		grep -vcE '^\s*(table|chain|set|map) ' || true
}

ksb_say "rules flushed before the boot: the boot self-test fails"
flush
ksb_check "the flush left no rule ($(rules))" '[ "$(rules)" = 0 ]'
set +e
timeout 240 ip netns exec "$GW" "$KSB_BUILDDIR/ksb-run" -f "$T/ksb.conf" \
	-- /bin/sh -c 'echo COMMAND-RAN' </dev/null >"$T/out1" 2>"$T/err1"
rc=$?
set -e
cat "$T/out1"; cat "$T/err1" >&2
ksb_check "boot: ksb-run exits 125 ($rc)" '[ "$rc" = 125 ]'
ksb_check "boot: the command did not run" '! grep -q COMMAND-RAN "$T/out1"'
ksb_check "boot: the self-test failed" \
	'grep -q "enforcement self-test FAILED: probe tcp-outside-unrefused was not refused by the gateway" "$T/err1"'
ksb_check "boot: no 'command started'" '! grep -q "command started" "$T/err1"'
ksb_check "boot: a fail record, command refused" \
	'ksb_sql_is 1 "SELECT count(*) FROM selftests WHERE trigger = '"'boot'"' AND result = '"'fail'"' AND action = '"'refused'"'"'
ksb_check "boot: the gateway's canary saw the guest's probe" \
	'grep -q "self-test canary: TCP connect from 10.77.0." "$T/gatewayd.log"'

ksb_say "the gateway restarted (its rules whole); flushed while an instance runs: the reload's self-test stops it"
kill -TERM "$KSB_GATEWAY_PID"
ksb_wait_dead "$KSB_GATEWAY_PID"
ksb_gateway
ksb_check "the restart put the rules back ($(rules))" '[ "$(rules)" -gt 10 ]'
ip netns exec "$GW" "$KSB_BUILDDIR/ksb-run" -f "$T/ksb.conf" --name fl-run \
	-- /bin/sleep 600 </dev/null >"$T/out2" 2>"$T/err2" &
pid=$!
started() { grep -q "instance fl-run: command started" "$T/err2" || ! kill -0 "$pid" 2>/dev/null; }
ksb_until 240 started || true
ksb_check "reload: the instance passed its boot self-test with the rules in place" \
	'grep -q "enforcement self-test passed" "$T/err2"'
flush
"$KSB_BUILDDIR/ksbctl/ksbctl" -f "$T/ksb.conf" reload
set +e
timeout 60 tail --pid="$pid" -f /dev/null
wait "$pid"
rc=$?
set -e
cat "$T/err2" >&2
ksb_check "reload: ksb-run stopped the instance, exit 125 ($rc)" '[ "$rc" = 125 ]'
ksb_check "reload: the failure is named" \
	'grep -Eq "enforcement self-test after the reload FAILED: [a-z-]+-unrefused; stopping the instance" "$T/err2"'
ksb_check "reload: a fail record says the instance was stopped" \
	'ksb_sql_is 1 "SELECT count(*) FROM selftests WHERE instance = '"'fl-run'"' AND trigger = '"'reload'"' AND result = '"'fail'"' AND action = '"'stopped'"'"'
ksb_check "reload: no QEMU left behind" '! pgrep -f "ksb.id=fl-run " >/dev/null'

[ "$fails" = 0 ] || ksb_fail "$fails check(s) failed"
echo "PASS"
