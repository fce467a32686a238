#!/bin/bash
# teardown.sh: two gateways in one network namespace (issue 17), told
# apart by bridge, nft-table and tap-prefix (ksb.conf(5)), and
# `ksb-gatewayd --teardown' removing what one of them left after a kill -9
# (its tables, its bridge, a tap left on it) while the other
# one keeps serving.  --teardown is refused while its gateway runs.
set -eu
. "$(dirname "$0")/../lib.sh"

ksb_need_root
HOLD=$KSB_BUILDDIR/tests/integration/ctlhold
[ -x "$HOLD" ] || ksb_fail "$HOLD not built (make check builds it)"
ksb_env
ksb_origin
ksb_gateway
fails=0
pass=0
G=$KSB_BUILDDIR/ksb-gatewayd
mkdir -p "$T/stateb"
cat > "$T/b.conf" <<CONF
bridge = ksb1
bridge-address = 10.79.0.1/24
nft-table = ksbb
tap-prefix = ksbu
proxy-port = 3129
control-socket = $T/b.sock
state-dir = $T/stateb
hosts-file = $T/hosts
resolver = 127.0.0.1:53
policy = $T/policy.d/*.policy
CONF
ip netns exec "$GW" "$G" -d -f "$T/b.conf" > "$T/b.log" 2>&1 &
BP=$!
KSB_PIDS="$KSB_PIDS $BP"
ksb_until 60 grep -q '^ksb-gatewayd: ready: ' "$T/b.log" || { cat "$T/b.log"; ksb_fail "gateway B did not start"; }
ksb_check "gateway B runs beside A: $(sed -n 's/^ksb-gatewayd: ready: //p' "$T/b.log" | cut -c1-60)" 'kill -0 "$BP" && kill -0 "$KSB_GATEWAY_PID"'
ksb_fake_guest 1 ta
mkfifo "$T/bhold"
ip netns exec "$GW" "$HOLD" "$T/b.sock" tb default < "$T/bhold" > "$T/blease" 2>&1 &
KSB_PIDS="$KSB_PIDS $!"
exec {BH}>"$T/bhold"
ksb_until 30 test -s "$T/blease" || true
ksb_check "B leases from its own pool and tap prefix: $(cat "$T/blease")" \
	'grep -q "^ip=10.79.0.2/24 .*tap=ksbu2\|tap=ksbu2.*ip=10.79.0.2" "$T/blease" || grep -q "ksbu2" "$T/blease"'
tables() { ip netns exec "$GW" nft list tables | sort | tr '\n' ' '; }
ksb_check "four tables: $(tables)" \
	'[ "$(tables)" = "table bridge ksb table bridge ksbb table inet ksb table inet ksbb " ]'
ksb_check "ksbu2 is on ksb1" 'ip -n "$GW" -o link show ksbu2 | grep -q "master ksb1"'
out=$(ip netns exec "$GW" "$G" -f "$T/b.conf" --teardown 2>&1) && rc=0 || rc=$?
ksb_check "--teardown refused while B runs: $out" '[ "$rc" = 1 ] && echo "$out" | grep -q "another ksb-gatewayd"'

ksb_say "kill -9 B; a tap left on its bridge"
kill -9 "$BP"
ksb_wait_dead "$BP" || true
# (A tap lives while a descriptor holds it, QEMU's; this one persists.)
ip -n "$GW" tuntap add ksbu9 mode tap
ip -n "$GW" link set ksbu9 master ksb1
ksb_check "B's tables and bridge stay (fail closed), a tap on it" \
	'ip netns exec "$GW" nft list table inet ksbb > /dev/null && ip -n "$GW" -o link show ksbu9 | grep -q "master ksb1"'
# B's lock goes with the last process holding it (the killed parent, its
# proxy process seeing the socketpair close): wait for it, bounded.
flock -w 20 "$T/stateb/gatewayd.lock" true ||
	ksb_say "B's gatewayd.lock still held after 20 s: $(fuser -v "$T/stateb/gatewayd.lock" 2>&1 | tr '\n' ' ')"
out=$(ip netns exec "$GW" "$G" -f "$T/b.conf" --teardown 2>&1) && rc=0 || rc=$?
echo "$out"
ksb_check "--teardown B: exit $rc" '[ "$rc" = 0 ]'
ksb_check "B's tables gone, A's stay: $(tables)" \
	'[ "$(tables)" = "table bridge ksb table inet ksb " ]'
ksb_check "ksb1 and ksbu9 gone, ksb0 stays" \
	'echo "$out" | grep -q "removed tap ksbu9" && ! ip -n "$GW" link show ksb1 > /dev/null 2>&1 && ! ip -n "$GW" link show ksbu9 > /dev/null 2>&1 && ip -n "$GW" link show ksb0 > /dev/null'
got=$(ip netns exec "ksbt-$$-g1" timeout 30 curl -sS --max-time 20 \
	--proxy http://10.77.0.1:3128 --cacert "$T/pki/ca.pem" \
	https://allowed.test/index.txt 2>&1) || true
ksb_check "A still serves its guest: '$got'" '[ "$got" = "$ORIGIN_BODY" ]'
out=$(ip netns exec "$GW" "$G" -f "$T/b.conf" --teardown 2>&1) && rc=0 || rc=$?
ksb_check "--teardown again: nothing left, exit 0 ($out)" '[ "$rc" = 0 ]'
exec {BH}>&-
echo "# $pass passed, $fails failed"
[ "$fails" = 0 ]
