#!/bin/bash
# failclosed.sh: kill -9 of ksb-gatewayd's privileged parent during a
# transfer (issue 6).  A guest (namespace on a veth in ksb0, lease held by
# tests/integration/ctlhold) streams through an allowed tunnel to an origin
# that counts what arrives (tests/integration/tunnel_peer.py; the proxy
# sees a real ClientHello with the SNI).  After kill -9 of the parent:
#   - the proxy process dies with it (PR_SET_PDEATHSIG);
#   - the origin's count stops growing (polled until stable, bounded)
#     and stays there while the guest keeps trying;
#   - new connections fail: to the proxy port and directly to the origin;
#   - nft list ruleset still shows both tables with their sets and the
#     guest in them.
# Restart: the guest re-registers (a fresh lease) and streams again.
set -eu
. "$(dirname "$0")/../lib.sh"

ksb_need_root
ksb_need python3 pgrep sysctl	# tunnel peers; processes; forwarding
HOLD=$KSB_BUILDDIR/tests/integration/ctlhold
PEER=$KSB_SRCDIR/tests/integration/tunnel_peer.py
[ -x "$HOLD" ] || ksb_fail "$HOLD not built (make check builds it)"
ksb_env
t_start=$(date +%s)
ip -n "$OR" addr add 10.78.0.5/24 dev ko1
echo "10.78.0.5 sink.test" >> "$T/hosts"
cat > "$T/policy.d/test.policy" <<'POL'
profile default {
    allow sink.test:8443
    allow-address 10.78.0.0/24:8443
}
POL
mkdir -p "$T/stats"
ip netns exec "$OR" python3 "$PEER" origin 10.78.0.5 8443 "$T/stats" > "$T/peer.log" 2>&1 &
KSB_PIDS="$KSB_PIDS $!"
ksb_wait_port "$OR" 10.78.0.5 8443
# The guest's replies would be routed, were anything forwarded.
ip netns exec "$GW" sysctl -qw net.ipv4.ip_forward=1
ip -n "$OR" route add 10.77.0.0/24 via 10.78.0.1
ksb_gateway

fails=0
pass=0
gwns() { ip netns exec "$GW" "$@"; }
ns=ksbt-$$-g1
ip netns add "$ns"
KSB_NETNS="$ns"
ip link add kvg1 netns "$GW" type veth peer name eth0 netns "$ns"
ip -n "$ns" link set lo up
ip -n "$ns" link set eth0 up
# lease N: REGISTER g1 (holder N, pid $HOLDPID), put its address on the
# guest's eth0.
lease() {
	mkfifo "$T/hold$1"
	ip netns exec "$GW" "$HOLD" "$T/gateway.sock" g1 default < "$T/hold$1" > "$T/lease$1" 2>&1 &
	HOLDPID=$!
	KSB_PIDS="$KSB_PIDS $!"
	exec {HOLDFD}>"$T/hold$1"
	rm -f "$T/hold$1"
	ksb_until 30 test -s "$T/lease$1" || true
	LEASE=$(sed -n 's/^ip=\([^ ]*\).*/\1/p' "$T/lease$1")
	[ -n "$LEASE" ] || ksb_fail "REGISTER g1: $(cat "$T/lease$1")"
	ip -n "$ns" addr flush dev eth0
	ip -n "$ns" addr add "$LEASE" dev eth0
	ip -n "$ns" route add default via 10.77.0.1
}
lease 1
ip -n "$GW" link set kvg1 master ksb0 up
in_g() { ip netns exec "$ns" timeout 60 "$@"; }
count() { cat "$T/stats/$1" 2>/dev/null || echo 0; }
# child: the proxy process's pid (polls <= 30 s: it is forked before the
# gateway says ready, and named ksb-proxy only once it runs).
child_now() { pgrep -P "$KSB_GATEWAY_PID" -x ksb-proxy; }
child() { ksb_until 30 child_now >/dev/null && child_now || true; }
# stable NAME: wait (<= 10 s) until the origin's count holds for 1 s.
stable() {
	local last=-1 same=0 c
	for _ in $(seq 1 50); do
		c=$(count "$1")
		if [ "$c" = "$last" ]; then
			same=$((same + 1))
			[ "$same" -ge 5 ] && { echo "$c"; return 0; }
		else
			same=0
		fi
		last=$c
		sleep 0.2
	done
	echo "$c"
	return 1
}

ksb_say "a transfer through the proxy"
C1=$(child)
in_g python3 "$PEER" client 10.77.0.1 3128 sink.test:8443 stream 40 > "$T/stream" 2>&1 &
SPID=$!
KSB_PIDS="$KSB_PIDS $SPID"
ksb_until 60 grep -q . "$T/stream" || true
ksb_check "streaming ($(head -n 1 "$T/stream"))" '[ "$(head -n 1 "$T/stream")" = streaming ]'
c0=$(count fc)
grew() { [ "$(count fc)" -gt "$c0" ]; }
ksb_until 20 grew || true
ksb_check "bytes reach the origin ($(count fc))" '[ "$(count fc)" -gt "$c0" ]'
ksb_check "its row is committed" \
	'[ "$(ksb_sql "SELECT count(*) FROM connections WHERE instance = '"'g1'"' AND decision = '"'allow'"'")" = 1 ]'

ksb_say "kill -9 of the parent during the transfer"
at_kill=$(count fc)
kill -9 "$KSB_GATEWAY_PID"
wait "$KSB_GATEWAY_PID" 2>/dev/null || true
# Dead: gone, or a zombie not yet reaped by init (kill -0 says alive).
[ -z "$C1" ] || ksb_wait_dead "$C1" || true
ksb_check "the proxy process died with it" '[ -n "$C1" ] && ksb_dead "$C1"'
final=$(stable fc) || true
ksb_check "the origin's count stopped ($at_kill at the kill, $final after)" 'stable fc >/dev/null'
# The guest keeps trying (its stream ends on the reset, or by itself).
timeout 45 tail --pid="$SPID" -f /dev/null || true
echo "# guest: $(tail -n 1 "$T/stream")"
sleep_bound=$(count fc)
ksb_check "no further byte reached the origin ($sleep_bound)" '[ "$sleep_bound" = "$final" ]'
for _ in $(seq 1 50); do
	ip netns exec "$OR" ss -Htn state established "( sport = :8443 )" | grep -q . || break
	sleep 0.1
done
ksb_check "the origin's side of the tunnel is gone" \
	'! ip netns exec "$OR" ss -Htn state established "( sport = :8443 )" | grep -q .'
got=$(in_g python3 "$PEER" client 10.77.0.1 3128 sink.test:8443 halfclose 10 2>&1 | tail -n 1) || true
ksb_check "a new tunnel fails: '$got'" '! echo "$got" | grep -q "^reply"'
ksb_check "a direct connection to the origin fails" \
	'! in_g python3 -c "import socket; socket.create_connection((\"10.78.0.5\", 8443), timeout=3)" 2>/dev/null'
gwns nft list ruleset > "$T/ruleset"
ksb_check "nft: table inet ksb with its set, the guest in it" \
	'gwns nft list set inet ksb guests | grep -qw "${LEASE%/*}"'
ksb_check "nft: table bridge ksb with its set" 'gwns nft list set bridge ksb guests >/dev/null'
ksb_check "nft: both tables in the ruleset" \
	'grep -q "^table inet ksb" "$T/ruleset" && grep -q "^table bridge ksb" "$T/ruleset"'
ksb_check "nothing listens on the proxy port" '! gwns ss -Hltn "sport = :3128" | grep -q LISTEN'

ksb_say "restart: the guest re-registers and works again"
exec {HOLDFD}>&-
# Its holder (the "ksb-run") is gone before the gateway is back, so the
# restart forgets g1 rather than waiting for it to resume.  (Told to go:
# children started since hold copies of HOLDFD.)
kill "$HOLDPID" 2>/dev/null || true
ksb_wait_dead "$HOLDPID" || true
rm -f "$T/gateway.sock"
ksb_gateway
C2=$(child)
ksb_check "a new proxy process" '[ -n "$C2" ] && [ "$C2" != "$C1" ]'
lease 2
got=$(in_g python3 "$PEER" client 10.77.0.1 3128 sink.test:8443 halfclose 200000 2>&1) || true
ksb_check "a tunnel works again: '$got'" 'echo "$got" | grep -q "^reply got 200000 up="'
ksb_check "the inet set holds exactly the new lease" \
	'[ "$(gwns nft list set inet ksb guests | tr -d "\n\t" | sed -n "s/.*elements = { \([^}]*\) }.*/\1/p")" = "${LEASE%/*}" ]'
exec {HOLDFD}>&-

echo "# $pass passed, $fails failed, $(( $(date +%s) - t_start )) s"
[ "$fails" = 0 ]
