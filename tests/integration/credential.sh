#!/bin/bash
# credential.sh: credentials that never enter the guest (issue 14).  A real
# ksb-gatewayd in its own namespace with a policy binding credentials to
# hosts, fake guests (namespaces holding a lease, tests/integration/ctlhold)
# that get only placeholders, real TLS origins (cred_origin.py) that report
# whether they received the real value, curl and cred_client.py as guests.
# Checks: the swap (header, bearer, basic), keep-alive, streaming of
# server-sent events, Upgrade after the swap, the gateway CA, every misuse
# shape of the issue with its audit row, a wrong upstream certificate
# (502 and its reason), a guest offering only h2, ordinary tunnels, and
# heads dribbled a byte at a time (parses counted in the gateway's log).
set -eu
. "$(dirname "$0")/../lib.sh"
# Under the sanitizers (contrib/sanitize.sh sets KSB_SANITIZED) the heads
# dribbled a byte per TLS record take several times longer: the gateway's
# head timeouts and the client's per-read timeout are raised to match.
if [ -n "${KSB_SANITIZED:-}" ]; then
	KSB_TEST_CONF="header-timeout = 60
hello-timeout = 60${KSB_TEST_CONF:+
$KSB_TEST_CONF}"
	KSB_CLIENT_TIMEOUT=60
	export KSB_TEST_CONF KSB_CLIENT_TIMEOUT
fi

ksb_need_root
ksb_need python3
HOLD=$KSB_BUILDDIR/tests/integration/ctlhold
ORIGIN=$KSB_SRCDIR/tests/integration/cred_origin.py
CLIENT=$KSB_SRCDIR/tests/integration/cred_client.py
[ -x "$HOLD" ] || ksb_fail "$HOLD not built (make check builds it)"
ksb_env
pass=0 fails=0

# Origin certificates from the test CA: api.test (and its aliases), and
# one from a CA the gateway does not trust.
cert() { # NAME SANS [CA]
	openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
		-keyout "$T/pki/$1.key" -out "$T/pki/$1.csr" -subj "/CN=$1" \
		>/dev/null 2>&1
	printf 'subjectAltName=%s\n' "$2" > "$T/pki/$1.ext"
	openssl x509 -req -in "$T/pki/$1.csr" -CA "$T/pki/${3:-ca}.pem" \
		-CAkey "$T/pki/${3:-ca}.key" -CAcreateserial -days 2 \
		-extfile "$T/pki/$1.ext" -out "$T/pki/$1.pem" >/dev/null 2>&1
}
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
	-keyout "$T/pki/rogue.key" -out "$T/pki/rogue.pem" -days 2 \
	-subj "/CN=rogue CA" >/dev/null 2>&1
cert api.test "DNS:api.test,DNS:git.test,DNS:bearer.test"
cert untrusted.test "DNS:untrusted.test" rogue
umask 077
echo "sk-real-$$-$RANDOM$RANDOM" > "$T/apikey"
echo "ghp_real$$x$RANDOM" > "$T/gittoken"
umask 022
REAL=$(cat "$T/apikey")
for i in 6 7 8 9; do ip -n "$OR" addr add 10.78.0.$i/24 dev ko1; done
origin() { # ADDR CERT
	ip netns exec "$OR" python3 "$ORIGIN" "$1" 443 "$T/pki/$2.pem" \
		"$T/pki/$2.key" "$3" "$T/origin-$1.log" > "$T/o-$1.err" 2>&1 &
	KSB_PIDS="$KSB_PIDS $!"
	ksb_wait_port "$OR" "$1" 443
}
# (Not ksb_origin: its s_server would listen on every address.)
origin "$ORIGIN_IP" origin "$T/apikey"	# allowed.test: no credential
origin 10.78.0.6 api.test "$T/apikey"	# api.test, bearer.test
origin 10.78.0.7 api.test "$T/gittoken"	# git.test (basic), wrong.test
origin 10.78.0.8 untrusted.test "$T/apikey"
cat >> "$T/hosts" <<'HOSTS'
10.78.0.6 api.test
10.78.0.6 bearer.test
10.78.0.7 git.test
10.78.0.7 wrong.test
10.78.0.8 untrusted.test
HOSTS
cat >> "$T/ksb.conf" <<CONF
upstream-ca-file = $T/pki/ca.pem
CONF
cat > "$T/policy.d/test.policy" <<POL
credential api {
    host api.test
    header x-api-key
    source file $T/apikey
    secret API_KEY
    placeholder-prefix sk-
}
credential bearer {
    host bearer.test
    header authorization bearer
    source env KSB_TEST_BEARER
    secret BEARER_TOKEN
    allow-request GET /echo
    allow-request POST /upload
    allow-request GET /caf%C3%A9
}
credential git {
    host git.test
    basic
    source command /bin/cat $T/gittoken cache 1h
    secret GIT_TOKEN
}
credential wrong {
    host wrong.test
    host untrusted.test
    header x-api-key
    source file $T/apikey
    secret WRONG_KEY
}
profile default {
    allow allowed.test
    allow api.test
    allow bearer.test
    allow git.test
    allow wrong.test
    allow untrusted.test
    allow-address 10.78.0.0/24
    credential api
    credential bearer
    credential git
    credential wrong
}
POL
export KSB_TEST_BEARER=$REAL
ksb_gateway
ksb_fake_guest 1 g1
ksb_fake_guest 2 g2
ph() { sed -n "s|^cred=$2/[^/]*/||p" "$T/lease$1"; }
PH=$(ph 1 api) PHB=$(ph 1 bearer) PHG=$(ph 1 git) PH2=$(ph 2 api)
G1=ksbt-$$-g1 G2=ksbt-$$-g2
CA=$T/state/ca/ca.crt
gcurl() { # NS ARGS...
	local ns=$1
	shift
	ip netns exec "$ns" curl -sS --max-time 20 --proxy http://10.77.0.1:3128 \
		--cacert "$CA" "$@"
}
raw() { # NS HOST ALPN REQFILE
	KSB_PH=$PH ip netns exec "$1" python3 "$CLIENT" 10.77.0.1:3128 "$2" \
		"$CA" "$3" "$4"
}

ksb_say "placeholders and the gateway CA"
ksb_check "g1 has three placeholders, sk- prefixed for api" \
	'case $PH in sk-ksbph_*) [ ${#PH} = 49 ] ;; *) false ;; esac && [ -n "$PHB" ] && [ -n "$PHG" ]'
ksb_check "placeholders differ per instance" '[ "$PH" != "$PH2" ]'
ksb_check "the CA key is root-only, the certificate readable" \
	'[ "$(stat -c %a "$T/state/ca/ca.key")" = 600 ] && [ "$(stat -c %a "$CA")" = 644 ]'
ksb_check "the CA is a CA (pathlen 0)" \
	'openssl x509 -in "$CA" -noout -ext basicConstraints | grep -q "CA:TRUE, pathlen:0"'

ksb_say "the swap"
out=$(gcurl "$G1" -H "x-api-key: $PH" https://api.test/echo) || true
echo "$out"
ksb_check "x-api-key: the origin got the real value, no placeholder" \
	'echo "$out" | grep -q "\"key\": \"real\"" && echo "$out" | grep -q "\"placeholder\": false"'
ksb_check "its audit row: method, path without query, status, credential" \
	'ksb_sql_is "GET|/echo|200|api|" "SELECT method, path, status, credential, coalesce(reason, \"\") FROM requests WHERE path = \"/echo\" AND conn_id IN (SELECT id FROM connections WHERE instance = \"g1\")"'
out=$(gcurl "$G1" -H "x-api-key: $PH" "https://api.test/echo?q=secret-query" \
	"https://api.test/echo2" -w '\n%{num_connects}\n' 2>&1) || true
echo "$out"
ksb_check "keep-alive: two requests on one tunnel, both swapped" \
	'[ "$(echo "$out" | grep -c "\"key\": \"real\"")" = 2 ]'
ksb_check "the query string is not recorded" \
	'ksb_sql_is 0 "SELECT count(*) FROM requests WHERE path LIKE \"%secret-query%\""'
out=$(gcurl "$G1" -H "authorization: Bearer $PHB" https://bearer.test/echo) || true
ksb_check "bearer: the origin got the real token" \
	'echo "$out" | grep -q "\"auth\": \"real\""'
out=$(gcurl "$G1" -u "agent:$PHG" https://git.test/echo) || true
ksb_check "basic: the password decoded, swapped, re-encoded" \
	'echo "$out" | grep -q "\"auth\": \"real\""'
big=$T/big.bin
head -c 3000000 /dev/urandom | base64 -w0 | tr -d 'k' > "$big"
out=$(gcurl "$G1" -H "x-api-key: $PH" --data-binary "@$big" https://api.test/upload) || true
ksb_check "a 4 MB body streamed through the scan" \
	'echo "$out" | grep -q "\"len\": $(stat -c %s "$big")"'

ksb_say "server-sent events are relayed as they come"
ip netns exec "$G1" curl -sN --max-time 20 --proxy http://10.77.0.1:3128 \
	--cacert "$CA" -H "x-api-key: $PH" -d '{}' \
	https://api.test/v1/messages > "$T/sse.out" 2>&1 &
SSE=$!
ksb_until 10 grep -q "event: one" "$T/sse.out" || true
ksb_check "event one arrived while event two does not exist yet" \
	'grep -q "event: one" "$T/sse.out" && ! grep -q "event: two" "$T/sse.out"'
gcurl "$G2" https://api.test/go > /dev/null || true
wait "$SSE" || true
ksb_check "then event two, and the stream ends" 'grep -q "event: two" "$T/sse.out"'

ksb_say "Upgrade after the swap"
printf 'GET /ws HTTP/1.1\r\nHost: api.test\r\nx-api-key: @PH@\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n\x81\x8b\0\0\0\0hello-frame' > "$T/ws.req"
out=$(raw "$G1" api.test http/1.1 "$T/ws.req")
echo "$out"
ksb_check "101, then bytes both ways" 'echo "$out" | grep -q "HTTP/1.1 101"'
ksb_check "the origin saw the real key on the upgrade request" \
	'grep "\"/ws\"" "$T/origin-10.78.0.6.log" | grep -q "\"key\": \"real\""'
ksb_check "the origin's bytes after the 101 are no frames: upstream_bad_response" \
	'ksb_sql_is 1 "SELECT count(*) FROM requests WHERE path = \"/ws\" AND status = 101 AND reason = \"upstream_bad_response\""'

printf 'GET /wsext HTTP/1.1\r\nHost: api.test\r\nx-api-key: @PH@\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Extensions: permessage-deflate\r\n\r\n' > "$T/ws.req"
out=$(raw "$G1" api.test http/1.1 "$T/ws.req")
echo "$out"
ksb_check "a 101 naming an extension the upstream was not offered: 502, not relayed" \
	'! echo "$out" | grep -q "HTTP/1.1 101" && echo "$out" | grep -q "HTTP/1.1 502" && ksb_sql_is 1 "SELECT count(*) FROM requests WHERE path = \"/wsext\" AND status = 502 AND reason = \"upstream_bad_response\""'

ksb_say "misuse: refused with 403 and a credential_misuse row"
misuse() { # DESC NS HOST REQFILE
	local out
	out=$(raw "$2" "$3" http/1.1 "$4")
	ksb_check "$1: 403 credential_misuse" \
		'echo "$out" | grep -q "HTTP/1.1 403" && echo "$out" | grep -qi "x-ksb-deny: credential_misuse"'
}
req() { printf "$@" > "$T/req"; }
req 'GET /echo HTTP/1.1\r\nHost: api.test\r\nx-api-key: @PH@\r\nx-other: @PH@\r\n\r\n'
misuse "the placeholder in a second header" "$G1" api.test "$T/req"
req 'GET /echo HTTP/1.1\r\nHost: api.test\r\nx-api-key: @PH@\r\nx-api-key: @PH@\r\n\r\n'
misuse "the declared header twice" "$G1" api.test "$T/req"
req 'GET /echo?k=@PH@ HTTP/1.1\r\nHost: api.test\r\n\r\n'
misuse "the placeholder in the URL" "$G1" api.test "$T/req"
req 'POST /upload HTTP/1.1\r\nHost: api.test\r\nx-api-key: @PH@\r\nContent-Length: 60\r\n\r\n{"leak": "@PH@"}'
misuse "the placeholder in the body" "$G1" api.test "$T/req"
req 'POST /upload HTTP/1.1\r\nHost: api.test\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nksbp\r\n3c\r\nh_@PH@xxxxxxxxxxxxx\r\n0\r\n\r\n'
misuse "the mark split across chunks of the body" "$G1" api.test "$T/req"
req 'POST /upload HTTP/1.1\r\nHost: api.test\r\nTransfer-Encoding: chunked\r\n\r\n5;n=@PH@\r\nhello\r\n0\r\n\r\n'
misuse "the placeholder in a chunk extension" "$G1" api.test "$T/req"
req 'POST /upload HTTP/1.1\r\nHost: api.test\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0;@PH@\r\n\r\n'
misuse "the placeholder in the last chunk's extension" "$G1" api.test "$T/req"
req 'POST /upload HTTP/1.1\r\nHost: api.test\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\nx-leak: @PH@\r\n\r\n'
misuse "the placeholder in a trailer" "$G1" api.test "$T/req"
ksb_check "the five body-side refusals each have a credential_misuse row" \
	'ksb_sql_is 5 "SELECT count(*) FROM requests WHERE path = \"/upload\" AND reason = \"credential_misuse\""'
req 'GET /ws HTTP/1.1\r\nHost: api.test\r\nx-api-key: @PH@\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n\x81\xb7\0\0\0\0frame @PH@'
raw "$G1" api.test http/1.1 "$T/req" > /dev/null
ksb_check "the placeholder after an upgrade: closed, a credential_misuse row" \
	'ksb_sql_is 1 "SELECT count(*) FROM requests WHERE path = \"/ws\" AND status = 101 AND reason = \"credential_misuse\""'
req 'GET /echo HTTP/1.1\r\nHost: bearer.test\r\nx-api-key: @PH@\r\n\r\n'
misuse "api's placeholder sent to another bound host" "$G1" bearer.test "$T/req"
req 'GET /echo HTTP/1.1\r\nHost: wrong.test\r\nx-api-key: @PH@\r\n\r\n'
out=$(raw "$G1" api.test http/1.1 "$T/req")
ksb_check "Host not the SNI's (bound) host: 421 misdirected_request" \
	'echo "$out" | grep -q "HTTP/1.1 421" && echo "$out" | grep -qi "x-ksb-deny: misdirected_request"'
KSB_PH=$PH2 out=$(KSB_PH=$PH2 ip netns exec "$G1" python3 "$CLIENT" 10.77.0.1:3128 api.test "$CA" http/1.1 "$T/req" 2>&1)
req 'GET /echo HTTP/1.1\r\nHost: api.test\r\nx-api-key: @PH@\r\n\r\n'
out=$(KSB_PH=$PH2 ip netns exec "$G1" python3 "$CLIENT" 10.77.0.1:3128 api.test "$CA" http/1.1 "$T/req" 2>&1)
ksb_check "another instance's placeholder: 403" 'echo "$out" | grep -qi "x-ksb-deny: credential_misuse"'
req 'GET /echo HTTP/1.1\r\nHost: api.test\r\nx-api-key: @PH@\r\n\r\nGET /echo HTTP/1.1\r\nHost: api.test\r\nx-leak: @PH@\r\n\r\n'
out=$(raw "$G1" api.test http/1.1 "$T/req")
ksb_check "after a good keep-alive request: 200, then 403" \
	'[ "$(echo "$out" | grep "^HTTP" | tr -d "\r" | tr "\n" " ")" = "HTTP/1.1 200 OK HTTP/1.1 403 Forbidden " ]'
req 'GET /echo HTTP/1.1\r\nHost: api.test\r\nHost: api.test\r\nx-api-key: @PH@\r\n\r\n'
out=$(raw "$G1" api.test http/1.1 "$T/req")
ksb_check "two Host headers: 400 http_bad_host, nothing upstream" \
	'echo "$out" | grep -qi "x-ksb-deny: http_bad_host"'
req 'POST /upload HTTP/1.1\r\nHost: api.test\r\nx-api-key: @PH@\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /echo HTTP/1.1\r\nHost: api.test\r\nx-leak: @PH@\r\n\r\n'
out=$(raw "$G1" api.test http/1.1 "$T/req")
ksb_check "CL.TE smuggling: 400 http_ambiguous_length" \
	'echo "$out" | grep -qi "x-ksb-deny: http_ambiguous_length"'
req 'POST /upload HTTP/1.1\r\nHost: api.test\r\nx-api-key: @PH@\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\nhello'
out=$(raw "$G1" api.test http/1.1 "$T/req")
ksb_check "Content-Length twice: 400 http_ambiguous_length" \
	'echo "$out" | grep -qi "x-ksb-deny: http_ambiguous_length"'
req 'POST /upload HTTP/1.1\r\nHost: api.test\r\nx-api-key: @PH@\r\nTransfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n'
out=$(raw "$G1" api.test http/1.1 "$T/req")
ksb_check "TE.TE (chunked, identity): refused" \
	'echo "$out" | grep -q "HTTP/1.1 50[01]\|HTTP/1.1 400"'
req 'GET /echo HTTP/1.1\r\nHost: api.test\r\nx-api-key: @PH@\r\nX-Fold: a\r\n b\r\n\r\n'
out=$(raw "$G1" api.test http/1.1 "$T/req")
ksb_check "obs-fold: 400" 'echo "$out" | grep -q "HTTP/1.1 400"'
ip netns exec "$G1" curl -s --max-time 10 --proxy http://10.77.0.1:3128 \
	--proxy-header "x-api-key: $PH" --cacert "$T/pki/ca.pem" \
	https://allowed.test/ > "$T/plain.out" 2>&1 || true
ksb_check "the placeholder in the CONNECT head of an ordinary tunnel: 403" \
	'ksb_row_is 1 "reason = \"credential_misuse\" AND host = \"allowed.test\""'
# The placeholder as a CONNECT host, a host label, a Basic credential's
# password (base64 of user:placeholder): refused, and never stored.
lo=$(printf '%s' "$PH" | tr 'A-Z' 'a-z')
out=$(ip netns exec "$G1" python3 - "$lo" <<'PY'
import base64, socket, sys
ph = sys.argv[1].encode()
for head in [b"CONNECT %s.evil.test:443 HTTP/1.1\r\nHost: x\r\n\r\n" % ph,
             b"CONNECT %s:443 HTTP/1.1\r\nHost: x\r\n\r\n" % ph,
             b"CONNECT allowed.test:443 HTTP/1.1\r\nHost: allowed.test:443\r\n"
             b"Proxy-Authorization: Basic %s\r\n\r\n" % base64.b64encode(b"agent:" + ph),
             b"CONNECT allowed.test:443 HTTP/1.1\r\nHost: allowed.test:443\r\n"
             b"Proxy-Authorization: basic %s\r\n\r\n" % base64.b64encode(b"u:" + ph).rstrip(b"=")]:
    s = socket.create_connection(("10.77.0.1", 3128), timeout=10)
    s.sendall(head)
    print(s.recv(4096).split(b"\r\n")[0].decode(), flush=True)
    s.close()
PY
)
echo "$out"
ksb_check "the placeholder as a CONNECT host, label, Basic password: 403 each" \
	'[ "$(echo "$out" | grep -c "^HTTP/1.1 403")" = 4 ]'
ksb_check "their rows: credential_misuse, the host as [placeholder]" \
	'ksb_rows_ge 5 "reason = \"credential_misuse\"" && ksb_row_is 2 "reason = \"credential_misuse\" AND host LIKE \"%[placeholder]%\""'
ksb_check "no table of audit.db holds a placeholder" \
	'[ "$(sqlite3 "$T/state/audit.db" .dump | grep -ci ksbph_)" = 0 ]'
ksb_check "the origins never saw a placeholder" \
	'! grep -q "\"placeholder\": true" "$T"/origin-*.log'
ksb_check "the misuse rows are recorded" \
	'ksb_sql_is 1 "SELECT count(*) >= 9 FROM requests WHERE reason = \"credential_misuse\""'

ksb_say "a percent-encoded placeholder is the placeholder"
# The placeholder as a server decoding a URL or a form would read it.
enc() { # HOW: the placeholder, its mark percent-encoded so
	case $1 in
	underscore) echo "${PH/ksbph_/ksbph%5F}" ;;
	lower) echo "${PH/ksbph_/ksbph%5f}" ;;
	mixed) echo "${PH/ksbph_/%6bSbPh%5F}" ;;
	all) echo "${PH/ksbph_/%6B%73%62%70%68%5f}" ;;
	esac
}
encreq() { # HOW: send T/req with @PH@ as enc HOW
	KSB_PH=$(enc "$1") ip netns exec "$G1" python3 "$CLIENT" 10.77.0.1:3128 \
		api.test "$CA" http/1.1 "$T/req"
}
for how in underscore lower mixed all; do
	req 'GET /pct-query?k=@PH@ HTTP/1.1\r\nHost: api.test\r\nx-api-key: @PH@\r\n\r\n'
	sed -i "s|x-api-key: @PH@|x-api-key: $PH|" "$T/req"
	out=$(encreq $how)
	ksb_check "in the query ($how): 403 credential_misuse" \
		'echo "$out" | grep -qi "x-ksb-deny: credential_misuse"'
	req 'GET /pct-path/@PH@ HTTP/1.1\r\nHost: api.test\r\n\r\n'
	out=$(encreq $how)
	ksb_check "in the path ($how): 403 credential_misuse" \
		'echo "$out" | grep -qi "x-ksb-deny: credential_misuse"'
done
req 'POST /pct-form HTTP/1.1\r\nHost: api.test\r\nx-api-key: @PH@\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 100\r\n\r\nk=@PH@&pad=xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx'
sed -i "s|x-api-key: @PH@|x-api-key: $PH|" "$T/req"
out=$(encreq underscore)
ksb_check "in a form body: 403 credential_misuse" \
	'echo "$out" | grep -qi "x-ksb-deny: credential_misuse"'
ksb_check "no query or path one reached the origin" \
	'! grep -q "/pct-query\|/pct-path" "$T/origin-10.78.0.6.log"'
ksb_check "the audit holds none of them (paths as [placeholder])" \
	'ksb_sql_is "0|4" "SELECT sum(path LIKE \"%ksbph%\" OR path LIKE \"%sbph%\" OR path LIKE \"%\%6b%\"), sum(path LIKE \"/pct-path/%[placeholder%]\") FROM requests WHERE path LIKE \"/pct-%\""'

ksb_say "pipelined requests: each checked on its own, answered in order"
smug='GET /smuggled HTTP/1.1\r\nHost: api.test\r\nx-leak: none\r\n\r\n'
nsmug=$(printf "$smug" | wc -c)
req "GET /pipe1 HTTP/1.1\r\nHost: api.test\r\nx-api-key: @PH@\r\n\r\nPOST /pipe2 HTTP/1.1\r\nHost: api.test\r\nx-api-key: @PH@\r\nContent-Length: $nsmug\r\n\r\n${smug}POST /pipe3 HTTP/1.1\r\nHost: api.test\r\nx-api-key: @PH@\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\nGET /pipe4 HTTP/1.1\r\nHost: wrong.test\r\nx-api-key: @PH@\r\n\r\nGET /pipe5 HTTP/1.1\r\nHost: api.test\r\nx-api-key: @PH@\r\n\r\n"
out=$(raw "$G1" api.test http/1.1 "$T/req")
echo "$out"
ksb_check "5 requests in one write: 200 200, the tunnel ends after the one with a body" \
	'[ "$(echo "$out" | grep "^HTTP" | tr -d "\r" | tr "\n" " ")" = "HTTP/1.1 200 OK HTTP/1.1 200 OK " ]'
ksb_check "each of the two swapped, in order" \
	'[ "$(echo "$out" | grep -o "\"path\": \"/pipe[0-9]\", \"key\": \"real\"" | tr "\n" " ")" = "\"path\": \"/pipe1\", \"key\": \"real\" \"path\": \"/pipe2\", \"key\": \"real\" " ]'
ksb_check "a request in a body is body: the origin read $nsmug bytes, no /smuggled" \
	'grep "\"/pipe2\"" "$T/origin-10.78.0.6.log" | grep -q "\"placeholder\": false" && echo "$out" | grep -q "\"len\": $nsmug" && ! grep -q "/smuggled" "$T/origin-10.78.0.6.log"'
ksb_check "nothing after the request with a body reached the origin" \
	'! grep -q "/pipe[345]" "$T/origin-10.78.0.6.log"'
ksb_check "a row each: /pipe1-2 200 api" \
	'ksb_sql_is "/pipe1|200|api|/pipe2|200|api" "SELECT group_concat(path || \"|\" || status || \"|\" || coalesce(credential, \"\") || coalesce(\"|\" || reason, \"\"), \"|\") FROM (SELECT * FROM requests WHERE path LIKE \"%/pipe%\" ORDER BY rowid)"'

ksb_say "CL.0: no request follows one with a body on an upstream connection"
# GET /echo at the origin answers without reading a body (as some real
# endpoints do): what the body holds would be the start of the next
# request, the gateway's next (swapped) one joined onto it.
smug='GET /admin-smug HTTP/1.1\r\nX-Ignore: '
req "GET /echo HTTP/1.1\r\nHost: bearer.test\r\nContent-Length: $(printf "$smug" | wc -c)\r\n\r\n${smug}GET /echo HTTP/1.1\r\nHost: bearer.test\r\nauthorization: Bearer @PH@\r\n\r\n"
out=$(KSB_PH=$PHB ip netns exec "$G1" python3 "$CLIENT" 10.77.0.1:3128 bearer.test "$CA" http/1.1 "$T/req")
smug='GET /echo/smug-host HTTP/1.1\r\nHost: wrong.test\r\nX-Ignore: '
req "GET /echo HTTP/1.1\r\nHost: api.test\r\nContent-Length: $(printf "$smug" | wc -c)\r\n\r\n${smug}GET /echo HTTP/1.1\r\nHost: api.test\r\nx-api-key: @PH@\r\n\r\n"
out="$out
$(raw "$G1" api.test http/1.1 "$T/req")"
echo "$out"
ksb_check "a body the upstream left unread: one answer each, then the tunnel ends" \
	'[ "$(echo "$out" | grep -c "^HTTP/1.1 200")" = 2 ]'
ksb_check "neither a path (allow-request) nor a Host (421) the gateway never saw got the real value" \
	'! grep "admin-smug\|smug-host" "$T/origin-10.78.0.6.log" | grep -q "\"real\""'
out=$(gcurl "$G1" -v -H "x-api-key: $PH" -d "a=1" https://api.test/upload \
	-d "a=2" https://api.test/upload -w '%{num_connects}\n' 2>&1) || true
ksb_check "a POST's answer says Connection: close; curl opens a new tunnel for the next" \
	'echo "$out" | grep -qi "^< connection: close" && [ "$(echo "$out" | grep -c "\"key\": \"real\"")" = 2 ] && [ "$(echo "$out" | grep -x "[0-9]" | tr "\n" " ")" = "1 1 " ]'

ksb_say "allow-request: re-routing fields and non-ASCII paths"
i=0
for h in X-HTTP-Method-Override X-HTTP-Method X-Method-Override \
	X-Original-URL X-Rewrite-URL X-Forwarded-Host X-Host X-Forwarded-Prefix; do
	i=$((i + 1))
	req "GET /echo/rr-$i HTTP/1.1\r\nHost: bearer.test\r\nauthorization: Bearer @PH@\r\n$h: /v1/admin\r\n\r\n"
	out=$(KSB_PH=$PHB ip netns exec "$G1" python3 "$CLIENT" 10.77.0.1:3128 bearer.test "$CA" http/1.1 "$T/req")
	ksb_check "$h on a request allow-request checks: 400" \
		'echo "$out" | grep -q "HTTP/1.1 400" && echo "$out" | grep -qi "x-ksb-deny: request_not_allowed"'
done
ksb_check "none reached the origin; a row each" \
	'! grep -q "/echo/rr-" "$T/origin-10.78.0.6.log" && ksb_sql_is 8 "SELECT count(*) FROM requests WHERE path LIKE \"/echo/rr-%\" AND status = 400 AND reason = \"request_not_allowed\" AND credential = \"bearer\""'
out=$(gcurl "$G1" -H "X-Forwarded-Host: other.test" https://bearer.test/echo/rr-free) || true
ksb_check "without the credential the field passes" 'echo "$out" | grep -q "\"auth\": \"none\""'
out=$(gcurl "$G1" -H "x-api-key: $PH" -H "X-Forwarded-Host: wrong.test" -i https://api.test/echo/xfh-other) || true
out2=$(gcurl "$G1" -H "x-api-key: $PH" -H "X-Host: api.test:443" -H "X-Original-URL: /x" https://api.test/echo/xfh-same) || true
ksb_check "X-Forwarded-Host naming another host, no rules: 421; the bound one passes" \
	'echo "$out" | grep -qi "x-ksb-deny: misdirected_request" && ! grep -q xfh-other "$T/origin-10.78.0.6.log" && echo "$out2" | grep -q "\"key\": \"real\""'
for p in /echo/%ef%bc%8e%ef%bc%8e/admin /echo/%e2%80%a4%e2%80%a4/admin /echo/caf%C3%A9; do
	req "GET ${p//%/%%} HTTP/1.1\r\nHost: bearer.test\r\nauthorization: Bearer @PH@\r\n\r\n"
	out=$(KSB_PH=$PHB ip netns exec "$G1" python3 "$CLIENT" 10.77.0.1:3128 bearer.test "$CA" http/1.1 "$T/req")
	ksb_check "$p (a byte over 0x7F past the rule's prefix): 400 request_path_ambiguous" \
		'echo "$out" | grep -q "HTTP/1.1 400" && echo "$out" | grep -qi "x-ksb-deny: request_path_ambiguous"'
done
req "GET /caf%%c3%%a9/menu HTTP/1.1\r\nHost: bearer.test\r\nauthorization: Bearer @PH@\r\n\r\n"
out=$(KSB_PH=$PHB ip netns exec "$G1" python3 "$CLIENT" 10.77.0.1:3128 bearer.test "$CA" http/1.1 "$T/req")
ksb_check "inside a rule's own non-ASCII prefix (/caf%C3%A9): 200" 'echo "$out" | grep -q "HTTP/1.1 200"'
ksb_check "no ambiguous path reached the origin" '! grep -q "%ef%bc\|%e2%80\|/echo/caf" "$T/origin-10.78.0.6.log"'

ksb_say "an absolute-form target on a TLS tunnel must be https://"
req 'GET http://api.test/abs-http HTTP/1.1\r\nHost: api.test\r\nx-api-key: @PH@\r\n\r\n'
out=$(raw "$G1" api.test http/1.1 "$T/req")
ksb_check "http:// absolute-form: 400 http_bad_target, a row, nothing upstream" \
	'echo "$out" | grep -q "HTTP/1.1 400" && echo "$out" | grep -qi "x-ksb-deny: http_bad_target" && ! grep -q abs-http "$T/origin-10.78.0.6.log" && ksb_sql_is 1 "SELECT count(*) FROM requests WHERE path = \"/abs-http\" AND status = 400 AND reason = \"http_bad_target\""'
req 'GET https://api.test/abs-https HTTP/1.1\r\nHost: api.test\r\nx-api-key: @PH@\r\n\r\n'
out=$(raw "$G1" api.test http/1.1 "$T/req")
ksb_check "https:// absolute-form: swapped, 200" 'echo "$out" | grep -q "\"key\": \"real\""'
out=$(KSB_PH=$PH ip netns exec "$G1" python3 "$KSB_SRCDIR/tests/integration/cred_pipeline.py" 10.77.0.1:3128 api.test "$CA" 6 2>&1) || true
echo "$out"
ksb_check "http.client pipelining 6: 6 responses in order, each swapped" \
	'[ "$(echo "$out" | grep -c "^200 .*\"key\": \"real\"")" = 6 ] && [ "$(echo "$out" | grep -o "/pipe-c[0-9]" | tr "\n" " ")" = "/pipe-c0 /pipe-c1 /pipe-c2 /pipe-c3 /pipe-c4 /pipe-c5 " ]'
req 'GET /echo HTTP/1.1\r\nHost: bearer.test\r\nauthorization: Bearer @PH@\r\n\r\nGET /echo HTTP/1.1\r\nHost: bearer.test\r\nauthorization: Bearer @PH@\r\n\r\nPATCH /echo/x HTTP/1.1\r\nHost: bearer.test\r\nauthorization: Bearer @PH@\r\n\r\nGET /echo HTTP/1.1\r\nHost: bearer.test\r\nauthorization: Bearer @PH@\r\n\r\n'
out=$(KSB_PH=$PHB ip netns exec "$G1" python3 "$CLIENT" 10.77.0.1:3128 bearer.test "$CA" http/1.1 "$T/req")
echo "$out"
ksb_check "allow-request per pipelined request: 200 200, then 403 for PATCH" \
	'[ "$(echo "$out" | grep "^HTTP" | tr -d "\r" | tr "\n" " ")" = "HTTP/1.1 200 OK HTTP/1.1 200 OK HTTP/1.1 403 Forbidden " ] && echo "$out" | grep -qi "x-ksb-deny: request_not_allowed"'
req 'GET /echo HTTP/1.1\r\nHost: api.test\r\nx-api-key: @PH@\r\n\r\nPOST /upload HTTP/1.1\r\nHost: api.test\r\nx-api-key: @PH@\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /smuggled2 HTTP/1.1\r\nHost: api.test\r\n\r\n'
out=$(raw "$G1" api.test http/1.1 "$T/req")
ksb_check "CL and TE in the second of a pipeline: 200, then 400, nothing smuggled" \
	'[ "$(echo "$out" | grep "^HTTP" | tr -d "\r" | tr "\n" " ")" = "HTTP/1.1 200 OK HTTP/1.1 400 Bad Request " ] && ! grep -q "/smuggled2" "$T/origin-10.78.0.6.log"'

ksb_say "large and slow bodies streamed, the proxy's memory bounded"
PXPID=$(sed -n 's/^ksb-gatewayd: proxy process \([0-9]*\) started$/\1/p' "$T/gatewayd.log" | tail -1)
hwm() { sed -n 's/^VmHWM:[[:space:]]*\([0-9]*\) kB$/\1/p' "/proc/$PXPID/status"; }
rss() { sed -n 's/^VmRSS:[[:space:]]*\([0-9]*\) kB$/\1/p' "/proc/$PXPID/status"; }
h0=$(hwm) r0=$(rss)
big64=$T/big64.bin
head -c 52000000 /dev/urandom | base64 -w0 | tr -d 'k' | head -c 67108864 > "$big64"
bigcurl() { ip netns exec "$G1" curl -sS --max-time 300 --proxy http://10.77.0.1:3128 --cacert "$CA" "$@"; }
out=$(bigcurl -H "x-api-key: $PH" --data-binary "@$big64" -w '\n%{time_total}' https://api.test/upload) || true
echo "$out"
ksb_check "a 64 MiB upload: all of it at the origin, swapped" \
	'echo "$out" | grep -q "\"key\": \"real\".*\"len\": 67108864"'
bigcurl -H "x-api-key: $PH" -o "$T/big.down" -w '%{time_total}\n' \
	"https://api.test/big?mb=64" || true
ksb_check "a 64 MiB download, a real value in each MiB: all masked" \
	'[ "$(stat -c %s "$T/big.down")" = 67108864 ] && [ "$(grep -cF "$REAL" "$T/big.down")" = 0 ] && [ "$(grep -c "^\*\{${#REAL}\}a" "$T/big.down")" = 64 ]'
ksb_check "its row: credential_reflected" \
	'ksb_sql_is "200|credential_reflected" "SELECT status, reason FROM requests WHERE path = \"/big\""'
h1=$(hwm) r1=$(rss)
echo "# proxy RSS ${r0} kB -> ${r1} kB, peak ${h0} kB -> ${h1} kB (2 x 64 MiB moved)"
# (Under ASan, freed memory waits in its quarantine, 256 MiB: no bound.)
[ -n "${KSB_SANITIZED:-}" ] ||
	ksb_check "the proxy's peak RSS grew by less than 16 MiB ($(( (h1 - h0) / 1024 )) MiB)" \
		'[ $((h1 - h0)) -lt 16384 ]'
# Past the 64 KiB a body is held for (scanned before its head goes), so
# that it streams: 64 KiB at once, then 40 bytes a byte per 50 ms.
fast=$(head -c 65536 /dev/zero | tr '\0' f)
slow=$(head -c 40 /dev/zero | tr '\0' s)
req "POST /trickle HTTP/1.1\r\nHost: api.test\r\nx-api-key: @PH@\r\nContent-Length: 65576\r\n\r\n$fast@SLOW@$slow"
rm -f "$T/origin-10.78.0.6.log.trickle"
raw "$G1" api.test http/1.1 "$T/req" > "$T/trickle.out" &
TR=$!
trickled() { # N: the origin has read N bytes (its count file may be mid-write)
	local v
	v=$(cat "$T/origin-10.78.0.6.log.trickle" 2>/dev/null) || v=0
	[ "${v:-0}" -ge "$1" ] 2>/dev/null
}
ksb_check "a body's last 40 bytes a byte per 50 ms: 5 of them at the origin while the guest sends" \
	'ksb_until 30 trickled 65541 && ! ksb_dead $TR && ! trickled 65576'
wait "$TR" || true
ksb_check "then all of it, answered" \
	'trickled 65576 && grep -q "\"len\": 65576" "$T/trickle.out"'

ksb_say "heads dribbled a byte at a time"
parses() { # HOST: head parses of g2's tunnel to HOST, from its close line
	local l="ksb-gatewayd: term g2 $1: "
	ksb_until 10 grep -q "^$l" "$T/gatewayd.log" || true
	sed -n "s/^$l.*, \([0-9]*\) head parses\$/\1/p" "$T/gatewayd.log" |
		tail -1
}
pad=$(head -c 2000 /dev/zero | tr '\0' a)
req 'GET /echo HTTP/1.1\r\nHost: git.test\r\nx-pad-1: %s\r\nx-pad-2: %s\r\nx-pad-3: %s\r\nx-pad-4: %s\r\nConnection: close\r\n\r\n' \
	"$pad" "$pad" "$pad" "$pad"
out=$(KSB_DRIBBLE=1 raw "$G2" git.test http/1.1 "$T/req")
ksb_check "CONNECT a byte per write, 8 KiB of head a byte per record: 200" \
	'echo "$out" | grep -q "HTTP/1.1 200"'
np=$(parses git.test)
echo "head parses: ${np:-none}"
# Each request head is parsed once more when its request_opens row is
# committed (term_opened_cb, issue 29): + 1 per request, not per line.
ksb_check "heads parsed at most once per line (8 + the response's 1 + 1)" \
	'[ -n "$np" ] && [ "$np" -le 10 ]'
req 'GET /dribble HTTP/1.1\r\nHost: bearer.test\r\n\r\n'
out=$(raw "$G2" bearer.test http/1.1 "$T/req")
ksb_check "a response head of 8 KiB, one byte per TLS record: 200" \
	'echo "$out" | grep -q "HTTP/1.1 200"'
np=$(parses bearer.test)
echo "head parses: ${np:-none}"
ksb_check "heads parsed at most once per line (1 + the response's 8 + 1)" \
	'[ -n "$np" ] && [ "$np" -le 10 ]'

ksb_say "the upstream's certificate"
out=$(gcurl "$G1" -H "x-api-key: $PH" -w '%{http_code}' -o "$T/w.out" https://wrong.test/echo) || true
ksb_check "for another name: 502 upstream_cert_name" \
	'[ "$out" = 502 ] && grep -q "not for wrong.test" "$T/w.out"'
out=$(gcurl "$G1" -w '%{http_code}' -o "$T/u.out" https://untrusted.test/echo) || true
ksb_check "from an untrusted CA: 502 upstream_cert_invalid" \
	'[ "$out" = 502 ] && grep -q "does not verify" "$T/u.out"'
ksb_check "both with their rows" \
	'ksb_sql_is 2 "SELECT count(*) FROM requests WHERE status = 502 AND reason IN (\"upstream_cert_name\", \"upstream_cert_invalid\")"'

ksb_say "a guest offering only h2"
req 'GET /echo HTTP/1.1\r\nHost: api.test\r\n\r\n'
out=$(raw "$G1" api.test h2 "$T/req")
echo "$out"
ksb_check "refused with a TLS alert" 'echo "$out" | grep -q "^tls-error:"'
ksb_check "the tunnel's close record says tls_alpn_refused" \
	'ksb_row_is 1 "close_reason = \"tls_alpn_refused\""'

ksb_say "allow-request rules and reloads"
out=$(gcurl "$G1" -X DELETE -H "authorization: Bearer $PHB" -w '%{http_code}' \
	-o "$T/d.out" https://bearer.test/echo/x) || true
ksb_check "DELETE is not among bearer's rules: 403 request_not_allowed" \
	'[ "$out" = 403 ] && ksb_row_is 1 "id IN (SELECT conn_id FROM requests WHERE reason = \"request_not_allowed\" AND method = \"DELETE\" AND credential = \"bearer\")"'
chmod 644 "$T/apikey"
ctl_out=$("$KSB_BUILDDIR/ksbctl/ksbctl" -f "$T/ksb.conf" reload 2>&1) || true
ksb_check "a reload with the key file readable by others fails, saying why" \
	'echo "$ctl_out" | grep -q "mode 0644: want root-owned, mode 0600 or 0400"'
out=$(gcurl "$G1" -H "x-api-key: $PH" https://api.test/echo) || true
ksb_check "the running credentials stay" 'echo "$out" | grep -q "\"key\": \"real\""'
chmod 600 "$T/apikey"
ksb_check "the gateway log never shows a real value" \
	'! grep -qF -e "$REAL" -e "$(cat "$T/gittoken")" "$T/gatewayd.log"'
ksb_check "ksbctl policy show prints sources, not values" \
	'"$KSB_BUILDDIR/ksbctl/ksbctl" -f "$T/ksb.conf" policy show > "$T/show.out" && grep -q "source file $T/apikey" "$T/show.out" && ! grep -qF "$REAL" "$T/show.out"'

ksb_say "an ordinary tunnel is not terminated"
out=$(ip netns exec "$G1" curl -sS --max-time 10 --proxy http://10.77.0.1:3128 \
	--cacert "$T/pki/ca.pem" https://allowed.test/echo) || true
ksb_check "allowed.test: the origin's own certificate, end to end" \
	'echo "$out" | grep -q "\"host\": \"allowed.test\""'
ksb_check "the audit chain verifies" \
	'"$KSB_BUILDDIR/ksbctl/ksbctl" -f "$T/ksb.conf" audit verify >/dev/null'
# Terminated tunnels and plain ones: the gateway's live counts (LIST,
# for ksbctl top) end where the audit's rows do.
ksb_check "g1's traffic counts (LIST) are its audit rows' bytes" \
	'ksb_until 10 ksb_traffic_is_audit g1'
echo "# g1 gateway: $(ksb_traffic g1); audit: $(ksb_audit_bytes g1)"

[ "$fails" = 0 ]
