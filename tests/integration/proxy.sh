#!/bin/bash
# proxy.sh: the CONNECT proxy against hostile and well-behaved "guests"
# (issue 3).  A real ksb-gatewayd in its own namespace, guests as network
# namespaces on veths in the bridge ksb0 with addresses leased by REGISTER
# (tests/integration/ctlhold), a real TLS origin, curl for the well-behaved
# client and tests/integration/proxy_raw.py for the malformed cases.  Every
# class checks the answer and the audit row.
#
# Phase 1: request parsing, host rules, ClientHello, screening, connect.
# Phase 2 (gateway restarted with small caps): per-instance concurrency
# and rate caps (429), slowloris, and a well-behaved guest served meanwhile;
# then the relay (splice) with a 2 s idle-timeout: half-close passed
# through with exact byte counts, idle_timeout, write_stalled
# (tests/integration/tunnel_peer.py at both ends, origin sink.test).
set -eu
. "$(dirname "$0")/../lib.sh"

ksb_need_root
ksb_need python3	# raw-socket client
HOLD=$KSB_BUILDDIR/tests/integration/ctlhold
RAW=$KSB_SRCDIR/tests/integration/proxy_raw.py
PEER=$KSB_SRCDIR/tests/integration/tunnel_peer.py
[ -x "$HOLD" ] || ksb_fail "$HOLD not built (make check builds it)"
ksb_env
ksb_origin

# Extra upstreams: .3 refuses (RST), .4 drops (connect timeout).
ip -n "$OR" addr add 10.78.0.3/24 dev ko1
ip -n "$OR" addr add 10.78.0.4/24 dev ko1
ip -n "$OR" addr add 10.78.0.5/24 dev ko1
mkdir -p "$T/stats"
ip netns exec "$OR" python3 "$PEER" origin 10.78.0.5 8443 "$T/stats" > "$T/peer.log" 2>&1 &
KSB_PIDS="$KSB_PIDS $!"
ip netns exec "$OR" nft -f - <<'NFT'
table inet ksbtest {
	chain in {
		type filter hook input priority 0;
		ip daddr 10.78.0.3 tcp dport 443 reject with tcp reset
		ip daddr 10.78.0.4 tcp dport 443 drop
	}
}
NFT
cat >> "$T/hosts" <<'HOSTS'
10.78.0.3 refused.test
10.78.0.3 multi.test
10.78.0.2 multi.test
10.78.0.4 blackhole.test
10.78.0.5 sink.test
10.78.0.2 otherport.test
192.168.7.7 private.test
127.0.0.1 loop.test
169.254.169.254 metadata.test
10.77.0.1 gateway.test
10.78.0.1 ownveth.test
10.78.0.1 ownexact.test
127.0.0.1 loopexact.test
::ffff:10.78.0.2 mapped.test
HOSTS
cat > "$T/policy.d/test.policy" <<'POL'
profile default {
    allow allowed.test
    allow refused.test
    allow multi.test
    allow blackhole.test
    allow sink.test:8443
    allow otherport.test:8443
    allow-address 10.78.0.5/32:8443
    allow private.test
    allow loop.test
    allow metadata.test
    allow gateway.test
    allow mapped.test
    allow nxdomain.test
    allow late.test
    allow-address 10.78.0.0/24
    # Ranges around the gateway's own 10.78.0.1 and loopback open neither;
    # a rule naming the address does (issue 17).
    allow ownveth.test
    allow-address 127.0.0.0/8
    allow ownexact.test:8444
    allow-address 10.78.0.1/32:8444
    allow loopexact.test:8445
    allow-address 127.0.0.1/32:8445
}
POL
cp "$T/ksb.conf" "$T/ksb.conf.base"
cat >> "$T/ksb.conf" <<'CONF'
header-timeout = 2
hello-timeout = 2
connect-timeout = 2
resolve-timeout = 2
CONF
ksb_gateway

fails=0
pass=0
in_g() { local n=$1; shift; ip netns exec "ksbt-$$-g$n" timeout 30 "$@"; }
raw() { local n=$1; shift; in_g "$n" python3 "$RAW" 10.77.0.1 3128 "$@"; }
curl_g() {
	local n=$1; shift
	in_g "$n" curl -sS --max-time 20 --proxy http://10.77.0.1:3128 \
		--cacert "$T/pki/ca.pem" "$@"
}
expect() {	# expect WHAT WANT-OUTPUT ROW-WHERE COMMAND...
	local what=$1 want=$2 where=$3 got
	shift 3
	got=$("$@" 2>&1) || true
	ksb_check "$what: '$got'" '[ "$got" = "$want" ]'
	[ -z "$where" ] || ksb_check "$what: audit row" 'ksb_row_is 1 "$where"'
}

ksb_fake_guest 1 pg1
ksb_fake_guest 2 pg2

ksb_say "phase 1: request head"
I="instance = 'pg1'"
expect "absolute-URI GET -> 405" "status 405 deny method_not_allowed" \
	"$I AND reason = 'method_not_allowed'" \
	raw 1 raw 'GET http://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\n\r\n'
expect "space before colon -> 400" "status 400 deny bad_request" "" \
	raw 1 raw 'CONNECT allowed.test:443 HTTP/1.1\r\nHost : x\r\n\r\n'
expect "bare CR -> 400" "status 400 deny bad_request" "" \
	raw 1 raw 'CONNECT allowed.test:443 HTTP/1.1\r\nX-A: a\rb\r\n\r\n'
expect "NUL -> 400" "status 400 deny bad_request" "" \
	raw 1 raw 'CONNECT allowed.test:443 HTTP/1.1\r\nX-A: a\x00b\r\n\r\n'
expect "obs-fold -> 400" "status 400 deny bad_request" "" \
	raw 1 raw 'CONNECT allowed.test:443 HTTP/1.1\r\nX-A: a\r\n b\r\n\r\n'
expect "duplicate Host -> 400" "status 400 deny bad_request" "" \
	raw 1 raw 'CONNECT allowed.test:443 HTTP/1.1\r\nHost: a\r\nhost: a\r\n\r\n'
expect "body -> 400" "status 400 deny bad_request" "" \
	raw 1 raw 'CONNECT allowed.test:443 HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc'
ksb_check "five more 400 rows" 'ksb_row_is 6 "$I AND reason = '"'"'bad_request'"'"'"'
expect "HTTP/2.0 -> 505" "status 505 deny version_not_supported" "" \
	raw 1 raw 'CONNECT allowed.test:443 HTTP/2.0\r\n\r\n'
expect "9 KiB head -> 431" "status 431 deny header_too_large" \
	"$I AND reason = 'header_too_large'" raw 1 big 9000
expect "silent guest -> 408" "status 408 deny header_timeout" \
	"$I AND reason = 'header_timeout'" raw 1 silent

ksb_say "phase 1: host rules"
expect "not in allowlist -> 403" "status 403 deny not_in_allowlist" \
	"$I AND host = 'denied.test' AND reason = 'not_in_allowlist'" \
	raw 1 raw 'CONNECT denied.test:443 HTTP/1.1\r\n\r\n'
expect "apex/subdomain not implied -> 403" "status 403 deny not_in_allowlist" "" \
	raw 1 raw 'CONNECT www.allowed.test:443 HTTP/1.1\r\n\r\n'
expect "wrong port -> 403" "status 403 deny not_in_allowlist" "" \
	raw 1 raw 'CONNECT allowed.test:8443 HTTP/1.1\r\n\r\n'
expect "decimal IP literal -> 403" "status 403 deny ip_literal" \
	"$I AND host = '10.78.0.2' AND reason = 'ip_literal'" \
	raw 1 raw 'CONNECT 172883970:443 HTTP/1.1\r\n\r\n'
expect "hex dotted literal -> 403" "status 403 deny ip_literal" "" \
	raw 1 raw 'CONNECT 0xa.78.0.2:443 HTTP/1.1\r\n\r\n'
expect "[::1] -> 403" "status 403 deny ip_literal" "" \
	raw 1 raw 'CONNECT [::1]:443 HTTP/1.1\r\n\r\n'
expect "IPv4-mapped literal -> 403" "status 403 deny ip_literal" "" \
	raw 1 raw 'CONNECT [::ffff:10.78.0.2]:443 HTTP/1.1\r\n\r\n'
expect "percent-encoding -> 400" "status 400 deny bad_host" \
	"$I AND reason = 'bad_host'" \
	raw 1 raw 'CONNECT allowed%2etest:443 HTTP/1.1\r\n\r\n'
expect "non-ASCII -> 400" "status 400 deny bad_request" "" \
	raw 1 raw 'CONNECT allow\xc3\xa9d.test:443 HTTP/1.1\r\n\r\n'
ksb_check "answers never echo the guest's bytes" \
	'! raw 1 raw "CONNECT <script>:443 HTTP/1.1\r\n\r\n" | grep -q script'

ksb_say "phase 1: allowed tunnels and the ClientHello"
got=$(curl_g 1 https://allowed.test/index.txt 2>&1) || true
ksb_check "curl through the tunnel: '$got'" '[ "$got" = "$ORIGIN_BODY" ]'
ksb_check "allow row with SNI, upstream and bytes" \
	'ksb_row_is 1 "$I AND host = '"'"'allowed.test'"'"' AND decision = '"'"'allow'"'"' AND sni = '"'"'allowed.test'"'"' AND upstream_addr = '"'"'10.78.0.2'"'"' AND bytes_down > 0 AND close_reason IS NOT NULL"'
expect "ClientHello in 1-byte TCP writes" "tls $ORIGIN_BODY" "" \
	raw 1 tls allowed.test allowed.test "$T/pki/ca.pem" 1
expect "request and ClientHello pipelined in one write" "tls $ORIGIN_BODY" "" \
	raw 1 tls allowed.test allowed.test "$T/pki/ca.pem" 0 pipeline
expect "SNI mismatch -> TLS alert" "alert TLSV1_UNRECOGNIZED_NAME" \
	"$I AND host = 'allowed.test' AND sni = 'denied.test' AND reason = 'sni_mismatch'" \
	raw 1 tls allowed.test denied.test "$T/pki/ca.pem"
expect "no SNI -> TLS alert" "alert TLSV1_UNRECOGNIZED_NAME" "$I AND reason = 'sni_missing'" \
	raw 1 tls allowed.test - -
expect "non-TLS bytes after the 200 -> decode_error alert" "alert 50" "$I AND reason = 'not_tls'" \
	raw 1 bytes allowed.test 'GET / HTTP/1.1'
expect "no ClientHello -> hello_timeout, internal_error alert" "alert 80" \
	"$I AND reason = 'hello_timeout'" raw 1 bytes allowed.test ''

ksb_say "phase 1: resolution, screening, connect"
for h in private:rfc1918 loop:loopback metadata:metadata gateway:gateway mapped:ipv4_in_ipv6; do
	expect "${h%%:*}.test screened (${h#*:}) -> 403" "status 403 deny address_screened" \
		"$I AND host = '${h%%:*}.test' AND reason = 'address_screened' AND decision = 'deny'" \
		raw 1 tls "${h%%:*}.test" "${h%%:*}.test" -
done
expect "the gateway's own 10.78.0.1 inside an allowed range: screened -> 403" "status 403 deny address_screened" \
	"$I AND host = 'ownveth.test' AND reason = 'address_screened' AND upstream_addr = '10.78.0.1'" \
	raw 1 tls ownveth.test ownveth.test -
ksb_check "loop.test inside allow-address 127.0.0.0/8: still screened" \
	'ksb_row_is 1 "$I AND host = '"'loop.test'"' AND reason = '"'address_screened'"'"'
expect "10.78.0.1 named exactly (/32:8444): connected, refused -> 502" "status 502 deny connect_refused" \
	"$I AND host = 'ownexact.test' AND reason = 'connect_refused' AND upstream_addr = '10.78.0.1'" \
	raw 1 tls ownexact.test:8444 ownexact.test -
expect "127.0.0.1 named exactly (/32:8445): connected, refused -> 502" "status 502 deny connect_refused" \
	"$I AND host = 'loopexact.test' AND reason = 'connect_refused' AND upstream_addr = '127.0.0.1'" \
	raw 1 tls loopexact.test:8445 loopexact.test -
expect "unresolvable name -> 502" "status 502 deny resolve_failed" "$I AND host = 'nxdomain.test' AND reason = 'resolve_failed'" \
	raw 1 tls nxdomain.test nxdomain.test -
expect "refused upstream -> 502" "status 502 deny connect_refused" \
	"$I AND host = 'refused.test' AND reason = 'connect_refused' AND upstream_addr = '10.78.0.3'" \
	raw 1 tls refused.test refused.test -
expect "first address refuses, the next one serves" "tls $ORIGIN_BODY" \
	"$I AND host = 'multi.test' AND decision = 'allow' AND upstream_addr = '10.78.0.2'" \
	raw 1 tls multi.test multi.test -
expect "blackholed upstream -> 504 connect_timeout" "status 504 deny connect_timeout" \
	"$I AND host = 'blackhole.test' AND reason = 'connect_timeout'" \
	raw 1 tls blackhole.test blackhole.test -
ksb_say "phase 1: what a refused guest reads (one line: target, why, command)"
body_has() {	# body_has WHAT NEEDLE HOST PORT
	local what=$1 needle=$2 got
	got=$(raw 1 body "$3" "$4" 2>&1) || true
	ksb_check "$what: '$got'" 'case "$got" in *"$needle"*) true ;; *) false ;; esac'
}
body_has "not listed" 'status 403 deny not_in_allowlist body ksb: refused CONNECT denied.test:443 (not_in_allowlist): denied.test:443 is not in the allowlist of profile default; ask the operator to run: ksbctl allow pg1 denied.test:443, or to add "allow denied.test:443" to profile default and run: ksbctl reload' denied.test 443
body_has "listed on another port" 'allowed.test:8443 is not in the allowlist of profile default (only other ports are: allow allowed.test:443)' allowed.test 8443
body_has "screened" 'status 403 deny address_screened body ksb: refused CONNECT private.test:443 (address_screened): it resolves to 192.168.7.7 (rfc1918), an address guests may not reach; ask the operator to add "allow-address 192.168.7.7/32:443" to profile default and run: ksbctl reload' private.test 443
body_has "allow-address without a port: 443 only" 'it resolves to 10.78.0.2 (rfc1918), an address guests may not reach; the rule "allow-address 10.78.0.0/24:443" covers 10.78.0.2 on other ports only (allow-address without a port means 443); ask the operator to add "allow-address 10.78.0.2/32:8443"' otherport.test 8443
body_has "unresolvable" 'status 502 deny resolve_failed body ksb: refused CONNECT nxdomain.test:443 (resolve_failed): the gateway could not resolve the name; ask the operator to check the gateway'"'"'s resolver and hosts-file; the operator sees it with: ksbctl audit --instance pg1 --host nxdomain.test' nxdomain.test 443
body_has "refused upstream" 'status 502 deny connect_refused body ksb: refused CONNECT refused.test:443 (connect_refused): the upstream 10.78.0.3 refused the connection' refused.test 443
body_has "bad host: nothing echoed" 'status 400 deny bad_host body ksb: refused the request (bad_host): invalid host name' 'allowed%2etest' 443

ksb_say "phase 1: the hosts file is re-read on reload"
KSBCTL=$KSB_BUILDDIR/ksbctl/ksbctl
expect "late.test not in the hosts file yet -> 502" "status 502 deny resolve_failed" \
	"$I AND host = 'late.test' AND reason = 'resolve_failed'" \
	raw 1 tls late.test late.test -
echo "10.78.0.2 late.test" >> "$T/hosts"
ksb_check "ksbctl reload after the edit" \
	'"$KSBCTL" -f "$T/ksb.conf" reload > "$T/reload.out" 2>&1'
expect "late.test resolves after the reload" "tls $ORIGIN_BODY" \
	"$I AND host = 'late.test' AND decision = 'allow' AND upstream_addr = '10.78.0.2'" \
	raw 1 tls late.test late.test -
mv "$T/hosts" "$T/hosts.real"
mkdir "$T/hosts"
ksb_check "an unreadable hosts file fails the reload" \
	'! "$KSBCTL" -f "$T/ksb.conf" reload > "$T/reload.out" 2>&1 && grep -q "hosts-file: cannot read" "$T/reload.out"'
rmdir "$T/hosts"
mv "$T/hosts.real" "$T/hosts"
expect "... and keeps the hosts file in force" "tls $ORIGIN_BODY" "" \
	raw 1 tls late.test late.test -

ksb_check "deny rows are not reported as tunnels" \
	'[ "$(ksb_rows "$I AND decision = '"'"'deny'"'"' AND bytes_up > 0")" = 0 ]'

ksb_say "phase 2: caps, slowloris, a well-behaved guest meanwhile"
ksb_unguest 1
ksb_unguest 2
kill "$KSB_GATEWAY_PID"
timeout 10 tail --pid="$KSB_GATEWAY_PID" -f /dev/null || true
cp "$T/ksb.conf.base" "$T/ksb.conf"
cat >> "$T/ksb.conf" <<'CONF'
header-timeout = 2
max-connections-per-instance = 4
connection-rate-per-instance = 10
idle-timeout = 2
CONF
rm -f "$T/gateway.sock"
ksb_gateway
ksb_fake_guest 3 pg3
ksb_fake_guest 4 pg4
I3="instance = 'pg3'"
# pg3 holds 4 connections open dripping a byte every 0.3 s (slowloris) ...
# ... so its fifth, opened by the same process once the four are, gets 429
# (before the 2 s header deadline frees them), while pg4 is served.
raw 3 hold 4 0.3 allowed.test > "$T/hold.out" &
HP=$!
ksb_until 30 grep -q '^extra ' "$T/hold.out" || true
expect "fifth connection of pg3 -> 429" "status 429 deny instance_connection_limit" \
	"$I3 AND reason = 'instance_connection_limit'" \
	sed -n 's/^extra //p' "$T/hold.out"
got=$(curl_g 4 https://allowed.test/index.txt 2>&1) || true
ksb_check "pg4 served while pg3 is at its cap: '$got'" '[ "$got" = "$ORIGIN_BODY" ]'
wait "$HP" || true
ksb_check "slowloris cut at the 2 s header deadline: $(cat "$T/hold.out")" \
	'grep -q "^4/4 answered, max [0-3]\.[0-9] s: \[.HTTP/1.1 408 Request Timeout.\]" "$T/hold.out"'
out=$(raw 3 seq 40)
ksb_check "burst over the rate cap -> 429 instance_rate_limited: $out" \
	'echo "$out" | grep -q "status_429_deny_instance_rate_limited=" && echo "$out" | grep -q "status_403_deny_not_in_allowlist="'
ksb_check "rate refusals audited" 'ksb_rows_ge 1 "$I3 AND reason = '"'"'instance_rate_limited'"'"'"'
got=$(curl_g 4 https://allowed.test/index.txt 2>&1) || true
ksb_check "pg4 still served after pg3's flood: '$got'" '[ "$got" = "$ORIGIN_BODY" ]'

ksb_say "phase 2: the relay (splice), idle-timeout 2 s"
I4="instance = 'pg4'"
ksb_wait_port "$OR" 10.78.0.5 8443
peer() { local n=$1; shift; in_g "$n" python3 "$PEER" client 10.77.0.1 3128 sink.test:8443 "$@"; }
# Half-close: 300000 bytes up, then SHUT_WR; the origin answers after EOF.
got=$(peer 4 halfclose 300000 2>&1) || true
up=${got##*up=}
ksb_check "half-close passed through, answer after it: '$got'" \
	'echo "$got" | grep -q "^reply got 300000 up=[0-9]*$" && [ "$(cat "$T/stats/hc")" = 300000 ]'
ksb_check "its row: closed, bytes_up $up, bytes_down 11" \
	'ksb_row_is 1 "$I4 AND host = '"'sink.test'"' AND close_reason = '"'closed'"' AND bytes_up = $up AND bytes_down = 11"'
# Idle: nothing after the first bytes; closed after ~2 s either way.
got=$(peer 4 idle 2>&1) || true
ksb_check "idle tunnel closed: '$got'" 'echo "$got" | grep -Eq "^closed after (1\.[5-9]|[2-4]\.[0-9]) s$"'
ksb_check "its row says idle_timeout" 'ksb_row_is 1 "$I4 AND close_reason = '"'idle_timeout'"'"'
for _ in $(seq 1 50); do [ -s "$T/stats/idle" ] && break; sleep 0.1; done
ksb_check "the origin saw the close" '[ "$(cat "$T/stats/idle" 2>/dev/null)" = eof ]'
# write_stalled: the origin floods, the guest stops reading; once the row
# says so the guest reads again and must find the tunnel's end (what the
# socket buffers held, then EOF), not an endless flood.
mkfifo "$T/noread"
peer 4 noread < "$T/noread" > "$T/noread.out" 2>&1 &
NP=$!
exec {NRFD}>"$T/noread"
t0=$(date +%s%N)
ksb_check "a guest that stops reading is cut: write_stalled" \
	'ksb_row_is 1 "$I4 AND close_reason = '"'write_stalled'"' AND bytes_down > 0" ||
	 ksb_row_is 1 "$I4 AND close_reason = '"'write_stalled'"' AND bytes_down > 0"'
echo "# write_stalled after $(( ($(date +%s%N) - t0) / 1000000 )) ms"
# (The row may be committed a moment before the proxy resets the sockets;
# a FIN queued behind unread data would stay for as long as the guest does
# not read, which it does not until told below.)
finwait() { ip netns exec "$GW" ss -Htn state fin-wait-1 "( sport = :3128 )" | wc -l; }
no_finwait() { [ "$(finwait)" = 0 ]; }
ksb_until 10 no_finwait || true
finwait=$(finwait)
ksb_check "a stalled tunnel is reset, not left in FIN-WAIT-1 behind unread data ($finwait)" '[ "$finwait" = 0 ]'
ksb_until 20 test -s "$T/stats/flood.err" || true
ksb_check "the origin's flood ended with the tunnel: $(cat "$T/stats/flood.err" 2>/dev/null)" '[ -s "$T/stats/flood.err" ]'
echo go >&"$NRFD"
exec {NRFD}>&-
wait "$NP" || true
got=$(tail -n 1 "$T/noread.out")
ksb_check "the guest, reading again, finds the tunnel reset: '$got'" 'echo "$got" | grep -q "^ConnectionResetError after [0-9]* bytes$"'
got=$(curl_g 4 https://allowed.test/index.txt 2>&1) || true
ksb_check "pg4 still served: '$got'" '[ "$got" = "$ORIGIN_BODY" ]'
ksb_check "gateway alive" 'kill -0 "$KSB_GATEWAY_PID"'

echo "# $pass passed, $fails failed"
[ "$fails" = 0 ]
