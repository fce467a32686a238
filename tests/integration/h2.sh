#!/bin/bash
# h2.sh: HTTP/2 through terminated hosts (issue 32).  A real ksb-gatewayd
# in its own namespace, fake guests (namespaces holding a lease,
# tests/integration/ctlhold) with placeholders only, a real h2 TLS origin
# (h2_origin.py, python3-h2) that reports what it received, an HTTP/1.1
# one (cred_origin.py), curl --http2 and a hostile h2 client
# (h2_attack.py) as guests.  Checks: ALPN (h2 only where the upstream
# chose it), the swap per stream, several streams on one connection, the
# misuse cases of the HTTP/1.1 path over h2 (another authority, the
# placeholder in another header, the path, DATA), allow-request rules,
# response HEADERS, DATA and trailers masked, a row per stream, and the
# flood bounds (rapid reset, CONTINUATION, HPACK bomb, PING, SETTINGS,
# WINDOW_UPDATE, stream exhaustion), each bounded in time and leaving
# the gateway serving another guest.
set -eu
. "$(dirname "$0")/../lib.sh"

ksb_need_root
ksb_need python3
ksb_need curl
PY=/usr/bin/python3
$PY -c 'import h2, hpack' 2>/dev/null || ksb_skip "python3-h2 missing (apt-get install python3-h2)"
curl -V | grep -q 'nghttp2' || ksb_skip "curl without HTTP/2"
HOLD=$KSB_BUILDDIR/tests/integration/ctlhold
ATTACK=$KSB_SRCDIR/tests/integration/h2_attack.py
[ -x "$HOLD" ] || ksb_fail "$HOLD not built (make check builds it)"
ksb_env
pass=0 fails=0

cert() { # NAME SANS
	openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
		-keyout "$T/pki/$1.key" -out "$T/pki/$1.csr" -subj "/CN=$1" \
		>/dev/null 2>&1
	printf 'subjectAltName=%s\n' "$2" > "$T/pki/$1.ext"
	openssl x509 -req -in "$T/pki/$1.csr" -CA "$T/pki/ca.pem" \
		-CAkey "$T/pki/ca.key" -CAcreateserial -days 2 \
		-extfile "$T/pki/$1.ext" -out "$T/pki/$1.pem" >/dev/null 2>&1
}
cert api.test "DNS:api.test,DNS:bearer.test,DNS:h1.test,DNS:grpc.test,DNS:auth.openai.com"
umask 077
# a real format: sk-ant-api03- and 95 characters (Anthropic's keys)
echo "sk-ant-api03-$(head -c 96 /dev/urandom | base64 -w0 | tr -dc 'A-Za-z0-9' | head -c 80)AA" > "$T/apikey"
umask 022
REAL=$(cat "$T/apikey")
for i in 6 7 8; do ip -n "$OR" addr add 10.78.0.$i/24 dev ko1; done
ip netns exec "$OR" $PY "$KSB_SRCDIR/tests/integration/h2_origin.py" 10.78.0.6 443 \
	"$T/pki/api.test.pem" "$T/pki/api.test.key" "$T/apikey" "$T/origin.log" \
	> "$T/o6.err" 2>&1 &
KSB_PIDS="$KSB_PIDS $!"
ip netns exec "$OR" python3 "$KSB_SRCDIR/tests/integration/cred_origin.py" 10.78.0.7 443 \
	"$T/pki/api.test.pem" "$T/pki/api.test.key" "$T/apikey" "$T/origin7.log" \
	> "$T/o7.err" 2>&1 &
KSB_PIDS="$KSB_PIDS $!"
GRPC_OK=
if $PY -c 'import grpc' 2>/dev/null; then
	GRPC_OK=1
	ip netns exec "$OR" $PY "$KSB_SRCDIR/tests/integration/h2_grpc.py" server 10.78.0.8 443 \
		"$T/pki/api.test.pem" "$T/pki/api.test.key" "$T/apikey" "$T/grpc.log" \
		> "$T/o8.err" 2>&1 &
	KSB_PIDS="$KSB_PIDS $!"
	ksb_wait_port "$OR" 10.78.0.8 443
fi
ksb_wait_port "$OR" 10.78.0.6 443
ksb_wait_port "$OR" 10.78.0.7 443
cat >> "$T/hosts" <<'HOSTS'
10.78.0.6 api.test
10.78.0.6 bearer.test
10.78.0.7 h1.test
10.78.0.8 grpc.test
10.78.0.6 auth.openai.com
HOSTS
cat >> "$T/ksb.conf" <<CONF
upstream-ca-file = $T/pki/ca.pem
CONF
cat > "$T/policy.d/test.policy" <<POL
credential api {
    host api.test
    host h1.test
    header x-api-key
    source file $T/apikey
    secret API_KEY
    placeholder-prefix sk-
}
credential bearer {
    host bearer.test
    header authorization bearer
    source file $T/apikey
    secret BEARER_TOKEN
    allow-request GET /echo
}
credential codex {
    host auth.openai.com
    header authorization bearer
    source login codex
    secret CODEX_TOKEN
}
credential grpc {
    host grpc.test
    header authorization bearer
    source file $T/apikey
    secret GRPC_TOKEN
}
profile default {
    allow auth.openai.com
    allow grpc.test
    allow api.test
    allow bearer.test
    allow h1.test
    allow-address 10.78.0.0/24
    credential api
    credential bearer
    credential grpc
    credential codex
}
POL
# A Codex login (~/.codex/auth.json) whose access token lives an hour: the
# gateway owns it; the agent's refresh must be answered by the gateway.
$PY - "$T/codex.json" <<'PY'
import base64, json, sys, time, uuid
b64 = lambda o: base64.urlsafe_b64encode(json.dumps(o).encode()).rstrip(b"=").decode()
acc = "%s.%s.fakesig" % (b64({"alg": "none"}), b64({"exp": int(time.time()) + 3600, "jti": uuid.uuid4().hex}))
json.dump({"OPENAI_API_KEY": None, "tokens": {"id_token": b64({"alg": "none"}) + ".e30.sig",
	"access_token": acc, "refresh_token": "rt_" + uuid.uuid4().hex, "account_id": "acct-fake"},
	"last_refresh": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}, open(sys.argv[1], "w"))
PY
"$KSB_BUILDDIR/ksbctl/ksbctl" -f "$T/ksb.conf" credential import codex --from "$T/codex.json" > "$T/imp.out" 2>&1 ||
	{ cat "$T/imp.out"; ksb_fail "credential import codex"; }
ksb_gateway
ksb_fake_guest 1 g1
ksb_fake_guest 2 g2
ph() { sed -n "s|^cred=$2/[^/]*/||p" "$T/lease$1"; }
PH=$(ph 1 api) PHB=$(ph 1 bearer) PH2=$(ph 2 api) PHG=$(ph 1 grpc) PHC=$(ph 1 codex)
G1=ksbt-$$-g1 G2=ksbt-$$-g2
CA=$T/state/ca/ca.crt
gcurl() { # NS ARGS...
	local ns=$1
	shift
	ip netns exec "$ns" curl -sS --max-time 20 --http2 \
		--proxy http://10.77.0.1:3128 --cacert "$CA" "$@"
}
attack() { # NS NAME [PH]
	ip netns exec "$1" timeout 60 $PY "$ATTACK" 10.77.0.1:3128 api.test \
		"$CA" "$2" "${3:-}" 2>&1 || true
}
sql() { ksb_sql "$1"; }

ksb_say "ALPN and the swap over h2"
out=$(gcurl "$G1" -H "x-api-key: $PH" -w '\nversion=%{http_version}\n' https://api.test/echo) || true
echo "$out"
ksb_check "curl --http2 speaks h2 to the gateway" 'echo "$out" | grep -q "^version=2$"'
ksb_check "the h2 origin got the real value, no placeholder" \
	'echo "$out" | grep -q "\"key\": \"real\"" && echo "$out" | grep -q "\"placeholder\": false"'
ksb_check "its :authority is the bound host" 'echo "$out" | grep -q "\"authority\": \"api.test\""'
ksb_check "its row: GET /echo 200 api, no reason" \
	'ksb_sql_is "GET|/echo|200|api|" "SELECT method, path, status, credential, coalesce(reason, \"\") FROM requests WHERE path = \"/echo\" AND conn_id IN (SELECT id FROM connections WHERE instance = \"g1\")"'
out=$(gcurl "$G1" -H "x-api-key: $PH" -w '\nconnects=%{num_connects}\n' \
	https://api.test/echo https://api.test/echo2 -d 'a body of bytes') || true
ksb_check "two requests on one connection, both swapped, the body relayed" \
	'[ "$(echo "$out" | grep -c "\"key\": \"real\"")" = 2 ] && echo "$out" | grep -q "\"len\": 15" && [ "$(echo "$out" | grep -c "^connects=1")" = 1 ]'
out=$(gcurl "$G1" -H "authorization: Bearer $PHB" https://bearer.test/echo) || true
ksb_check "bearer: the real token" 'echo "$out" | grep -q "\"auth\": \"real\""'
out=$(gcurl "$G1" --parallel -H "x-api-key: $PH" -w 'connects=%{num_connects}\n' \
	https://api.test/p1 https://api.test/p2 https://api.test/p3 https://api.test/p4) || true
ksb_check "four parallel streams on one connection, each swapped" \
	'[ "$(echo "$out" | grep -c "\"key\": \"real\"")" = 4 ] && [ "$(echo "$out" | grep -c "^connects=1$")" = 1 ]'
out=$(gcurl "$G1" -H "x-api-key: $PH" -w '\nversion=%{http_version}\n' https://h1.test/echo) || true
ksb_check "an HTTP/1.1-only upstream: the guest is offered http/1.1 only" \
	'echo "$out" | grep -q "^version=1.1$" && echo "$out" | grep -q "\"key\": \"real\""'

head -c 1000000 /dev/urandom | base64 -w0 | tr -d 'k' > "$T/big.bin"
out=$(gcurl "$G1" -H "x-api-key: $PH" --data-binary "@$T/big.bin" -w '\ncode=%{http_code} t=%{time_total}\n' \
	https://api.test/early 2>&1) || true
echo "$out" | tail -2
ksb_check "an answer before the request body's end: the rest dropped, the stream ends" \
	'echo "$out" | grep -q "^early$" && echo "$out" | grep -q "^code=200 t=\([0-9]\)\."'

ksb_say "Node's http2 module"
if command -v node >/dev/null 2>&1; then
	out=$(ip netns exec "$G1" timeout 30 node "$KSB_SRCDIR/tests/integration/h2_node.js" \
		10.77.0.1:3128 api.test "$CA" "$PH" 2>&1) || true
	echo "$out"
	ksb_check "node: ALPN h2, three streams on one session, each swapped" \
		'echo "$out" | grep -q "^alpn h2$" && [ "$(echo "$out" | grep -c "^status 200 .*\"key\": \"real\"")" = 3 ]'
else
	echo "# node missing: its check skipped"
fi

ksb_say "gRPC (python3-grpcio) client and server"
if [ -n "$GRPC_OK" ]; then
	out=$(ip netns exec "$G1" timeout 60 $PY "$KSB_SRCDIR/tests/integration/h2_grpc.py" client \
		10.77.0.1:3128 grpc.test "$CA" "$PHG" 2>&1) || true
	echo "$out"
	ksb_check "unary: bearer metadata swapped, status OK" 'echo "$out" | grep -q "^unary auth=real status OK$"'
	ksb_check "the trailing metadata's real value reached the client masked" \
		'echo "$out" | grep -q "^trailer \*\*\*\*" && ! echo "$out" | grep -qF "$REAL"'
	ksb_check "grpc-status in trailers relayed: PERMISSION_DENIED, its message" \
		'echo "$out" | grep -q "^deny PERMISSION_DENIED denied here$"'
	ksb_check "a bidirectional stream, message by message" \
		'echo "$out" | grep -q "^bidi echo:0:m0 echo:1:m1 echo:2:m2$"'
	ksb_check "the placeholder in other metadata: refused, not OK" \
		'echo "$out" | grep -q "^misuse " && ! echo "$out" | grep -q "^misuse none"'
	ksb_check "the gRPC server never saw a placeholder, saw real values" \
		'! grep -q "\"placeholder\": true" "$T/grpc.log" && [ "$(grep -c "\"auth\": \"real\"" "$T/grpc.log")" = 3 ]'
	ksb_check "a row per call: /t.T/Unary, /t.T/Deny, /t.T/Bidi" \
		'ksb_sql_is 3 "SELECT count(DISTINCT path) FROM requests WHERE path LIKE \"/t.T/%\" AND credential = \"grpc\""'
else
	echo "# python3-grpcio missing: its checks skipped"
fi

ksb_say "a login's refresh over h2 is answered by the gateway"
out=$(gcurl "$G1" -H 'content-type: application/json' -w '\nversion=%{http_version}\n' \
	-d "{\"grant_type\": \"refresh_token\", \"refresh_token\": \"$PHC\"}" \
	https://auth.openai.com/oauth/token) || true
echo "$out"
tok() { echo "$out" | grep -o "\"$1\": *\"[^\"]*\"" | sed 's/.*"\([^"]*\)"$/\1/'; }
acc=$(tok access_token) ref=$(tok refresh_token)
ksb_check "200 over h2, fresh placeholders (access, refresh: neither the guest's own)" \
	'echo "$out" | grep -q "^version=2$" && echo "$acc $ref" | grep -Eq "^ksbph_[0-9a-f]{40} ksbph_[0-9a-f]{40}$" &&
	 [ "$acc" != "$ref" ] && [ "$acc" != "$PHC" ] && [ "$ref" != "$PHC" ]'
ksb_check "nothing reached the origin; its row says login_answered" \
	'! grep -q "oauth" "$T/origin.log" && ksb_sql_is "POST|/oauth/token|200|codex|login_answered" "SELECT method, path, status, credential, reason FROM requests WHERE reason = \"login_answered\""'

ksb_say "misuse over h2: refused on its stream, with a row"
code() { gcurl "$@" -o "$T/m.out" -w '%{http_code}' || true; }
out=$(code "$G1" -H "Host: other.test" -H "x-api-key: $PH" https://api.test/echo)
ksb_check "another :authority: 421 misdirected_request" \
	'[ "$out" = 421 ] && ksb_sql_is 1 "SELECT count(*) FROM requests WHERE reason = \"misdirected_request\" AND path LIKE \"https://other.test%\""'
out=$(code "$G1" -H "x-other: $PH" https://api.test/echo)
ksb_check "the placeholder in another header: 403 credential_misuse" \
	'[ "$out" = 403 ] && grep -q "outside its declared header" "$T/m.out"'
out=$(code "$G1" -H "x-api-key: $PH" "https://api.test/echo/$PH")
ksb_check "the placeholder in the path: 403, the row names it, not its value" \
	'[ "$out" = 403 ] && ksb_sql_is 1 "SELECT count(*) FROM requests WHERE path = \"/echo/[placeholder api]\" AND reason = \"credential_misuse\""'
out=$(code "$G1" -H "x-api-key: $PH" -d "token=$PH" https://api.test/upload)
ksb_check "the placeholder in DATA: 403 credential_misuse" '[ "$out" = 403 ]'
out=$(code "$G1" -H "x-api-key: $PH2" https://api.test/echo)
ksb_check "another instance's placeholder: 403" '[ "$out" = 403 ]'
out=$(code "$G1" -X DELETE -H "authorization: Bearer $PHB" https://bearer.test/echo)
ksb_check "allow-request rules per stream: DELETE 403 request_not_allowed" \
	'[ "$out" = 403 ] && ksb_sql_is 1 "SELECT count(*) FROM requests WHERE reason = \"request_not_allowed\" AND method = \"DELETE\""'
out=$(code "$G1" -H "x-api-key: $PH" "https://api.test//evil.test/x")
ksb_check "a network-path target: 400 http_bad_target" '[ "$out" = 400 ]'
out=$(attack "$G1" trailers "$PH")
echo "trailers: $out"
ksb_check "the placeholder in request trailers: 400 on its stream, the next answered" \
	'case $out in "trailers 400 then seen "*) true ;; *) false ;; esac && ksb_sql_is 1 "SELECT count(*) > 0 FROM requests WHERE reason = \"http_trailer_refused\" AND path = \"/upload\""'
n=$(grep -c '"placeholder": true' "$T/origin.log" || true)
ksb_check "the origin never saw a placeholder" '[ "$n" = 0 ]'

LOW=$(echo "$REAL" | tr 'A-Z' 'a-z')
for u in api.test h1.test; do
	gcurl "$G1" -H "x-api-key: $PH" -D "$T/hn.head" -o /dev/null "https://$u/hname" 2>&1 || true
	ksb_check "$u: the real value lowercased in a response field's name is masked" \
		'! grep -qiF "$LOW" "$T/hn.head" && grep -q "^x-\*\*\*\*" "$T/hn.head"'
done
ksb_check "their rows say credential_reflected" \
	'ksb_sql_is 2 "SELECT count(*) FROM requests WHERE path = \"/hname\" AND reason = \"credential_reflected\""'

ksb_say "malformed streams, protocol errors: a row each, with the reason"
out=$(attack "$G1" malformed "$PH")
echo "malformed: $out"
ksb_check "nine malformed streams: each RST_STREAM PROTOCOL_ERROR" \
	'case $out in "rst 9 "*) true ;; *) false ;; esac'
ksb_check "each has its requests row, h2_protocol_error, nothing sent upstream" \
	'ksb_sql_is 9 "SELECT count(*) FROM requests WHERE reason = \"h2_protocol_error\" AND (path LIKE \"/bad/%\" OR path = \"-\")"'
ksb_check "a refused stream's placeholder in its path: the row names it" \
	'ksb_sql_is 1 "SELECT count(*) FROM requests WHERE path = \"/bad/[placeholder api]\" AND reason = \"h2_protocol_error\" AND bytes_up = 0"'
before=$(ksb_rows "close_reason = 'h2_protocol_error'")
out=$(attack "$G1" stream0 "$PH")
echo "stream0: $out"
ksb_check "HEADERS on stream 0: GOAWAY PROTOCOL_ERROR (1)" \
	'case $out in "goaway 1 "*) true ;; *) false ;; esac'
ksb_check "its tunnel's close record says h2_protocol_error" \
	'ksb_until 10 ksb_rows_ge_now $((before + 1)) "close_reason = '"'"'h2_protocol_error'"'"'"'
ksb_check "the stream open at that end: its row has the end's reason" \
	'ksb_sql_is 1 "SELECT count(*) FROM requests WHERE path = \"/hold-stream0\" AND reason = \"h2_protocol_error\""'
before=$(ksb_rows "close_reason = 'upstream_bad_response'")
gcurl "$G1" -H "x-api-key: $PH" -o /dev/null https://api.test/push 2>/dev/null || true
ksb_check "an origin's PUSH_PROMISE: the tunnel closed upstream_bad_response" \
	'ksb_until 10 ksb_rows_ge_now $((before + 1)) "close_reason = '"'"'upstream_bad_response'"'"'"'
ksb_check "its stream's row says upstream_bad_response" \
	'ksb_sql_is 1 "SELECT count(*) FROM requests WHERE path = \"/push\" AND reason = \"upstream_bad_response\""'

ksb_say "what flows back is masked"
gcurl "$G1" -H "x-api-key: $PH" -D "$T/r.head" -o "$T/r.body" https://api.test/reflect 2>&1 || true
cat "$T/r.head" "$T/r.body"
ksb_check "the response header, body (split over DATA frames) and trailer hold no real value" \
	'! grep -qF "$REAL" "$T/r.head" "$T/r.body" && grep -q "^x-echo: \*\*\*\*" "$T/r.head" && grep -q "before \*\*\*\*.* after" "$T/r.body"'
ksb_check "its row says credential_reflected" \
	'ksb_sql_is 1 "SELECT count(*) FROM requests WHERE path = \"/reflect\" AND reason = \"credential_reflected\""'

ksb_say "floods: the guest's connection closed with a row, bounded, others unaffected"
for a in rapid-reset continuation hpack-bomb ping settings window; do
	before=$(ksb_rows "close_reason = 'h2_flood'")
	out=$(attack "$G1" "$a")
	echo "$a: $out"
	ksb_check "$a: GOAWAY ENHANCE_YOUR_CALM (11) or closed, within 20 s" \
		'case $out in "goaway 11 "*|"eof "*) [ "${out##* }" \< 20 ] ;; *) false ;; esac'
	ksb_check "$a: the tunnel's close record says h2_flood" \
		'ksb_until 10 ksb_rows_ge_now $((before + 1)) "close_reason = '"'"'h2_flood'"'"'"'
	out=$(gcurl "$G2" -H "x-api-key: $PH2" https://api.test/echo) || true
	ksb_check "$a: another guest is served meanwhile" 'echo "$out" | grep -q "\"key\": \"real\""'
done
ksb_check "rapid reset: the reset streams' rows say guest_reset, never guest_closed" \
	'ksb_sql_is 0 "SELECT count(*) FROM requests WHERE reason = \"guest_closed\" AND path = \"/echo\" AND method = \"GET\" AND conn_id IN (SELECT id FROM connections WHERE close_reason = \"h2_flood\")" &&
	 ksb_sql_is 1 "SELECT count(*) > 0 FROM requests WHERE reason = \"guest_reset\" AND bytes_up = 0"'
out=$(attack "$G2" reconnect)
echo "reconnect: $out"
secs=${out##* }
secs=${secs%.*}
rr() { [ "$(ksb_sql "SELECT count(*) FROM connections WHERE instance = 'g2' AND close_reason IS NULL")" = 0 ]; }
ksb_until 20 rr || true
n=$(ksb_sql "SELECT count(*) FROM requests WHERE path = '/rr'")
echo "# reconnect: $n rows for /rr in $secs s"
ksb_check "rapid reset over 30 connections: rows bounded by the instance's budget" \
	'[ "$n" -gt 0 ] && [ "$n" -le $((200 * (secs + 2) + 100)) ]'
ksb_check "reconnect: another guest is served meanwhile" \
	'gcurl "$G1" -H "x-api-key: $PH" https://api.test/echo | grep -q "\"key\": \"real\""'
out=$(attack "$G1" streams "$PH")
echo "streams: $out"
ksb_check "150 streams: 50 refused (REFUSED_STREAM), the connection still answers" \
	'case $out in "refused 50 answered yes "*) true ;; *) false ;; esac'

ksb_say "the log and the audit"
ksb_check "the gateway log never shows the real value" '! grep -qF "$REAL" "$T/gatewayd.log"'
ksb_check "the audit chain verifies" \
	'"$KSB_BUILDDIR/ksbctl/ksbctl" -f "$T/ksb.conf" audit verify >/dev/null'
ksb_check "g1's traffic counts (LIST) are its audit rows' bytes" \
	'ksb_until 10 ksb_traffic_is_audit g1'
echo "# g1 gateway: $(ksb_traffic g1); audit: $(ksb_audit_bytes g1)"
ksb_check "the gateway is alive" 'kill -0 "$KSB_GATEWAY_PID"'

ksb_say "a proxy crash with three streams open"
ip netns exec "$G1" curl -sS --max-time 30 --http2 --parallel \
	--proxy http://10.77.0.1:3128 --cacert "$CA" -H "x-api-key: $PH" \
	https://api.test/hold1 https://api.test/hold2 https://api.test/hold3 > /dev/null 2>&1 &
HC=$!
holds() { [ "$(grep -c '"path": "/hold[0-9]"' "$T/origin.log")" = 3 ]; }
ksb_check "the origin got three streams at once, each with its request_opens row" \
	'ksb_until 20 holds && ksb_sql_is 3 "SELECT count(*) FROM request_opens WHERE path LIKE \"/hold_\""'
P1=$(pgrep -P "$KSB_GATEWAY_PID" -x ksb-proxy | head -n 1)
kill -KILL "$P1"
ended() { [ "$(ksb_sql "SELECT count(*) FROM requests WHERE path LIKE '/hold%' AND reason = 'proxy_restarted'")" = 3 ]; }
ksb_check "the parent ends each of the three proxy_restarted" 'ksb_until 20 ended'
wait "$HC" || true
out=$(gcurl "$G2" -H "x-api-key: $PH2" https://api.test/echo) || true
ksb_check "the restarted proxy serves h2" 'echo "$out" | grep -q "\"key\": \"real\""'
ksb_check "the audit chain verifies after it" \
	'"$KSB_BUILDDIR/ksbctl/ksbctl" -f "$T/ksb.conf" audit verify >/dev/null'

[ "$fails" = 0 ]
