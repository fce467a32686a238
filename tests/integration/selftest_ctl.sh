#!/bin/bash
# selftest_ctl.sh: the enforcement self-test's audit records from the
# gateway's side (issue 15), against the real ksb-gatewayd in its own
# namespaces: tests/integration/selftest_ctl.py plays two ksb-runs (the
# lease holders) and a root client.  Only the lease holder's report
# counts, a boot result once, a reload result only for the RELOADED the
# gateway announced last and once (also one announced while the
# restarted gateway waited for the lease's RESUME), or a failure for an
# older one, once; malformed reports are refused.  The records written
# are exactly the accepted ones, chained (ksbctl audit verify).  No guest
# boots.
set -eu
. "$(dirname "$0")/../lib.sh"

ksb_need_root
ksb_need python3 sqlite3
python3 -c 'import socket; socket.recv_fds' 2>/dev/null || ksb_skip "needs Python >= 3.9"
ksb_need_built ksb-gatewayd ksbctl/ksbctl
ksb_env
ksb_gateway
fails=0

ip netns exec "$GW" python3 "$KSB_SRCDIR/tests/integration/selftest_ctl.py" \
	"$T/gateway.sock" || fails=$((fails + 1))
ksb_check "the gateway logged the refusals" \
	'grep -q "instance st-a: self-test report refused: a boot result was recorded already" "$T/gatewayd.log"'
# A reload while the restarted gateway waits for a lease's RESUME: the
# RESUME's reply names it (reload=N), its result counts.
coproc PY { ip netns exec "$GW" timeout 120 python3 \
	"$KSB_SRCDIR/tests/integration/selftest_ctl.py" "$T/gateway.sock" resume; }
pypid=$PY_PID
KSB_PIDS="$KSB_PIDS $pypid"
exec {pyout}<&"${PY[0]}" {pyin}>&"${PY[1]}"
while read -r -t 30 got <&"$pyout" && [ "$got" != registered ]; do
	echo "$got"
done
[ "$got" = registered ] || ksb_fail "st-c was not registered"
kill -9 "$KSB_GATEWAY_PID"
ksb_wait_dead "$KSB_GATEWAY_PID" 30 || ksb_fail "the gateway did not die"
ksb_gateway
"$KSB_BUILDDIR/ksbctl/ksbctl" -f "$T/ksb.conf" reload >/dev/null
echo go >&"$pyin"
while read -r -t 30 got <&"$pyout"; do echo "$got"; done
wait "$pypid" || fails=$((fails + 1))
ksb_check "exactly the accepted reports are records" \
	'ksb_sql_is "st-a|boot|ok|7|none st-a|reload|fail|tcp-gateway|stopped st-b|reload|ok|7|none st-b|reload|fail|tcp-gateway|stopped st-c|reload|ok|7|none" "SELECT group_concat(r, '"' '"') FROM (SELECT instance || '"'|'"' || trigger || '"'|'"' || result || '"'|'"' || coalesce(failed, probes) || '"'|'"' || action AS r FROM selftests ORDER BY seq)"'
ksb_check "audit verify: the records are chained" \
	'"$KSB_BUILDDIR/ksbctl/ksbctl" -f "$T/ksb.conf" audit verify'
[ "$fails" = 0 ] || ksb_fail "$fails check(s) failed"
echo PASS
