#!/bin/bash
# selftest_ctl.sh: the enforcement self-test's audit records from the
# gateway's side (issue 15), against the real ksb-gatewayd in its own
# namespaces: tests/integration/selftest_ctl.py plays two ksb-runs (the
# lease holders) and a root client.  Only the lease holder's report
# counts, a boot result once, a reload result only for the RELOADED the
# gateway announced last and once; malformed reports are refused.  The
# records written are exactly the accepted ones, chained (ksbctl audit
# verify).  No guest boots.
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
ksb_check "exactly the accepted reports are records" \
	'ksb_sql_is "st-a|boot|ok|7|none st-a|reload|fail|tcp-gateway|stopped st-b|reload|ok|7|none" "SELECT group_concat(r, '"' '"') FROM (SELECT instance || '"'|'"' || trigger || '"'|'"' || result || '"'|'"' || coalesce(failed, probes) || '"'|'"' || action AS r FROM selftests ORDER BY seq)"'
ksb_check "the gateway logged the refusals" \
	'grep -q "instance st-a: self-test report refused: a boot result was recorded already" "$T/gatewayd.log"'
ksb_check "audit verify: the records are chained" \
	'"$KSB_BUILDDIR/ksbctl/ksbctl" -f "$T/ksb.conf" audit verify'
[ "$fails" = 0 ] || ksb_fail "$fails check(s) failed"
echo PASS
