#!/bin/bash
# budget.sh: the per-instance audit budget (issue 17).  With
# audit-budget-bytes = 8K a day, guest 1 makes 80 denied requests: the
# first ones get their rows (403), the one that goes over is replaced by
# a single audit_budget row, and the rest are refused (429 audit_budget)
# without rows; guest 2, with its own budget, is still served and
# audited.  The records-a-second budget: a burst of 30 from guest 2 under
# audit-budget-records = 10.
set -eu
. "$(dirname "$0")/../lib.sh"

ksb_need_root
ksb_need python3
HOLD=$KSB_BUILDDIR/tests/integration/ctlhold
RAW=$KSB_SRCDIR/tests/integration/proxy_raw.py
[ -x "$HOLD" ] || ksb_fail "$HOLD not built (make check builds it)"
ksb_env
ksb_origin
cat >> "$T/ksb.conf" <<'CONF'
audit-budget-bytes = 8K
audit-budget-records = 10
CONF
ksb_gateway
fails=0
pass=0
raw() { local n=$1; shift; ip netns exec "ksbt-$$-g$n" timeout 60 python3 "$RAW" 10.77.0.1 3128 "$@"; }
ksb_fake_guest 1 b1
ksb_fake_guest 2 b2
# Slowly enough (one at a time, each answered) that the records-a-second
# budget (10) is not what stops it: 80 x ~200 bytes > 8 KiB.
out=$(for i in $(seq 1 8); do raw 1 seq 10; sleep 1.1; done)
echo "$out"
n403=$(echo "$out" | grep -o 'status_403_deny_not_in_allowlist=[0-9]*' | cut -d= -f2 | paste -sd+ | bc)
n429=$(echo "$out" | grep -o 'status_429_deny_audit_budget=[0-9]*' | cut -d= -f2 | paste -sd+ | bc)
ksb_check "guest 1: $n403 answered 403, then $n429 refused 429 audit_budget" \
	'[ "${n403:-0}" -ge 20 ] && [ "${n429:-0}" -ge 20 ]'
ksb_check "exactly one audit_budget row for guest 1" \
	'ksb_row_is 1 "instance = '"'b1'"' AND reason = '"'audit_budget'"'"'
rows=$(ksb_rows "instance = 'b1'")
ksb_check "guest 1's rows bounded by the budget: $rows (<= 8192 / 128 = 64)" '[ "$rows" -le 64 ]'
ksb_check "the gateway says so once" \
	'[ "$(grep -c "b1: audit budget spent (bytes a day)" "$T/gatewayd.log")" = 1 ]'
got=$(ip netns exec "ksbt-$$-g2" timeout 30 curl -sS --max-time 20 \
	--proxy http://10.77.0.1:3128 --cacert "$T/pki/ca.pem" \
	https://allowed.test/index.txt 2>&1) || true
ksb_check "guest 2 still served: '$got'" '[ "$got" = "$ORIGIN_BODY" ]'
ksb_check "and audited" 'ksb_row_is 1 "instance = '"'b2'"' AND decision = '"'allow'"'"'
out=$(raw 2 flood 30)
# (All 30 are accepted before the first decision: they are answered, but
# only the rows within the budget are written.)
ksb_check "guest 2's burst of 30 over 10 records a second: one audit_budget row" \
	'ksb_row_is 1 "instance = '"'b2'"' AND reason = '"'audit_budget'"'"'
n=$(ksb_rows "instance = 'b2' AND reason = 'not_in_allowlist'")
ksb_check "and at most 10 rows of the burst: $n ($out)" '[ "$n" -le 10 ]'
ksb_check "gateway alive" 'kill -0 "$KSB_GATEWAY_PID"'
echo "# $pass passed, $fails failed"
[ "$fails" = 0 ]
