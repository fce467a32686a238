#!/bin/bash
# forwards.sh: ksb-run's port forward records (FORWARD, proto/ctl.h) into
# the audit's forwards table, against the real ksb-gatewayd in its own
# namespaces (tests/lib.sh).  tests/integration/fwdaudit.py stands in for
# two ksb-runs holding leases fa1 and fa2:
#   - every event of fa1 on its lease's connection is one chained row with
#     its fields (the 100 MB download's counts, the peer, the reasons);
#   - hostile lines (stream 0, a negative count, another instance's id, an
#     unknown id, control bytes) are refused with "ERR forward:", write no
#     row, and are counted in the gateway's refusals;
#   - fa2's own record on its own connection is taken;
#   - a flood past audit-budget-records writes one `budget' row, the rest
#     of that second's records are dropped, refusals at most one a second;
#   - ksbctl audit forwards and audit verify see them.
set -eu
. "$(dirname "$0")/../lib.sh"

ksb_need_root
ksb_need python3 sqlite3
python3 -c 'import socket; socket.recv_fds' 2>/dev/null || ksb_skip "needs Python >= 3.9"
ksb_need_built ksb-gatewayd ksbctl/ksbctl
ksb_env
echo "audit-budget-records = 100" >> "$T/ksb.conf"
ksb_gateway

fails=0
ctl() { timeout 60 "$KSB_BUILDDIR/ksbctl/ksbctl" -f "$T/ksb.conf" "$@"; }
fwd() { ksb_sql "SELECT count(*) FROM forwards WHERE $1"; }
has_done() { grep -qx done "$T/fa.log" 2>/dev/null; }

mkfifo "$T/hold"
ip netns exec "$GW" python3 "$KSB_SRCDIR/tests/integration/fwdaudit.py" \
	"$T/gateway.sock" "$T/fa.log" < "$T/hold" > "$T/fa.err" 2>&1 &
KSB_PIDS="$KSB_PIDS $!"
exec 9>"$T/hold"
ksb_until 60 has_done || { cat "$T/fa.log" "$T/fa.err"; ksb_fail "the driver did not finish"; }
cat "$T/fa.log"

ksb_say "fa1's records on its lease's connection"
ksb_check "add, open, close, refused, remove: one row each" \
	'ksb_sql_is "add open close refused remove" "SELECT group_concat(event, '"' '"') FROM (SELECT event FROM forwards WHERE instance = '"'fa1'"' AND (event != '"'open'"' OR stream = 1) AND event != '"'budget'"' ORDER BY seq)"'
ksb_check "the close's counts and reason" \
	'[ "$(ksb_sql "SELECT bytes_to_guest, bytes_from_guest, duration_ms, reason FROM forwards WHERE instance = '"'fa1'"' AND event = '"'close'"'")" = "82|104857807|5004|done" ]'
ksb_check "the open's stream and peer; refused's peer and reason" \
	'[ "$(fwd "instance = '"'fa1'"' AND event = '"'open'"' AND stream = 1 AND peer = '"'127.0.0.1'"' AND bytes_to_guest IS NULL")" = 1 ] &&
	 [ "$(fwd "event = '"'refused'"' AND peer = '"'::1'"' AND reason = '"'limit'"' AND stream IS NULL")" = 1 ]'
ksb_check "no answer to a record that was taken" '! grep -q "^reply" <(sed -n "/^sent good/,/^sent hostile/p" "$T/fa.log")'

ksb_say "hostile lines: refused, no row"
ksb_check "each refused with ERR forward: (5)" \
	'[ "$(grep -c "^reply ERR forward: " <(sed -n "/^sent hostile/,/^sent flood/p" "$T/fa.log"))" = 5 ]'
ksb_check "another instance's id on this connection is not taken" \
	'grep -q "^reply ERR forward: no such instance on this connection" "$T/fa.log" && [ "$(fwd "instance = '"'fa2'"' AND listen_port = 9090")" = 1 ]'
ksb_check "no row for stream 0, a negative count, an unknown id, control bytes" \
	'[ "$(fwd "stream = 0 OR stream = 2 OR instance = '"'nosuch'"' OR instance NOT IN ('"'fa1'"', '"'fa2'"')")" = 0 ]'
ksb_check "the gateway counted the refusals" 'grep -q "control: .*FORWARD refused to uid" "$T/gatewayd.log"'

ksb_say "a flood past the budget (100 records a second)"
# The 400 lines come in one write and are read in well under a second,
# but may straddle a second's end: then two windows, two budget rows.
budget_seen() { [ "$(fwd "event = 'budget'")" -ge 1 ]; }
ksb_until 20 budget_seen || true
nb=$(fwd "instance = 'fa1' AND event = 'budget' AND reason = 'records'")
n=$(fwd "instance = 'fa1' AND event = 'open' AND stream >= 10")
echo "# flood: $n of 400 opens written, $nb budget row(s)"
ksb_check "one budget row (records) per second it went over" '[ "$nb" -ge 1 ] && [ "$nb" -le 2 ]'
ksb_check "at most the budget written per second, the rest dropped" \
	'[ "$n" -ge 1 ] && [ "$n" -le $((100 * nb)) ] && [ "$n" -lt 400 ]'
ksb_check "refusals at most one a second (not one per record)" \
	'[ "$(grep -c "^reply ERR forward: audit budget" "$T/fa.log")" -le 3 ]'
ksb_check "the gateway logged the budget" 'grep -q "fa1: audit budget spent (records a second): forward records dropped" "$T/gatewayd.log"'

ksb_say "ksbctl"
ctl audit forwards --instance fa1 --limit 3 > "$T/af"; cat "$T/af"
ksb_check "audit forwards: the budget row last" 'tail -n 1 "$T/af" | grep -Eq " fa1 +budget +127.0.0.1:8080->80 .* records$"'
ksb_check "audit verify: the chain holds the forward records" 'ctl audit verify'
exec 9>&-

[ "$fails" = 0 ] || ksb_fail "$fails check(s) failed"
echo "PASS"
