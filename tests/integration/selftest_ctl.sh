#!/bin/bash
# selftest_ctl.sh: the enforcement self-test's audit records from the
# gateway's side (issue 15), against the real ksb-gatewayd in its own
# namespaces: tests/integration/selftest_ctl.py plays two ksb-runs (the
# lease holders) and a root client.  Only the lease holder's report
# counts, a boot result once, a reload result only for the RELOADED the
# gateway announced last and once; malformed reports are refused; a lease
# that ends awaiting a result leaves an aborted record; a lease resumed
# after a gateway restart is announced RELOADED and its result recorded.
# The records written are exactly these, chained (ksbctl audit verify).
# No guest boots.
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
	"$T/gateway.sock" "$T/restart" &
py=$!
# The lease resumed after a restart is tested again (RELOADED).
ksb_until 60 test -e "$T/restart" || true
cp "$T/gatewayd.log" "$T/gatewayd-1.log"
kill -TERM "$KSB_GATEWAY_PID"
timeout 20 tail --pid="$KSB_GATEWAY_PID" -f /dev/null || true
ksb_gateway
wait "$py" || fails=$((fails + 1))
ksb_check "exactly the accepted reports are records; st-b's lease ended awaiting one: aborted" \
	'ksb_sql_is "st-a|boot|ok|7|none st-a|reload|fail|tcp-gateway|stopped st-b|reload|ok|7|none st-a|reload|ok|7|none st-b|reload|fail|aborted|stopped st-a|reload|ok|7|none" "SELECT group_concat(r, '"' '"') FROM (SELECT instance || '"'|'"' || trigger || '"'|'"' || result || '"'|'"' || coalesce(failed, probes) || '"'|'"' || action AS r FROM selftests ORDER BY seq)"'
ksb_check "the resumed lease's record has the restarted gateway's policy" \
	'ksb_sql_is 1 "SELECT (SELECT policy_digest FROM selftests ORDER BY seq DESC LIMIT 1) = (SELECT digest FROM policy_versions WHERE ok = 1 ORDER BY seq DESC LIMIT 1)"'
ksb_check "the aborted record has no duration and the digest announced" \
	'ksb_sql_is 1 "SELECT count(*) FROM selftests WHERE failed = '"'aborted'"' AND probes = 0 AND duration_ms IS NULL AND length(policy_digest) = 64"'
ksb_check "the gateway logged the refusals and the aborted test" \
	'grep -q "instance st-a: self-test report refused: a boot result was recorded already" "$T/gatewayd-1.log" && grep -q "instance st-b: its lease ended before the self-test after reload 2 reported" "$T/gatewayd-1.log"'
"$KSB_BUILDDIR/ksbctl/ksbctl" -f "$T/ksb.conf" audit export --format ocsf \
	> "$T/ocsf.jsonl"
ksb_check "OCSF: self-tests as Compliance Findings (2003), Pass/Fail/Warning" \
	'python3 - "$T/ocsf.jsonl" <<"PY"
import json, sys
evs = [json.loads(l) for l in open(sys.argv[1])]
st = [e for e in evs if e["unmapped"]["kind"] == "selftest"]
assert len(st) == 6, len(st)
want = {None: (1, "Pass", 1), "tcp-gateway": (3, "Fail", 4),
        "aborted": (2, "Warning", 3)}
for e in st:
    u, c = e["unmapped"], e["compliance"]
    assert (e["class_uid"], e["category_uid"], e["activity_id"],
            e["type_uid"]) == (2003, 2, 1, 200301), e
    assert (c["status_id"], c["status"], e["severity_id"]) == \
        want[u.get("failed")], e
    assert c["standards"] and e["resource"]["name"] == u["instance"]
    assert e["finding_info"]["uid"] == "ksb-selftest-%d" % u["seq"]
    assert u["instance"] in e["finding_info"]["title"]
    assert c.get("status_detail") == u.get("failed")
PY'
ksb_check "audit verify: the records are chained" \
	'"$KSB_BUILDDIR/ksbctl/ksbctl" -f "$T/ksb.conf" audit verify'
[ "$fails" = 0 ] || ksb_fail "$fails check(s) failed"
echo PASS
