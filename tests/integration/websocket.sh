#!/bin/bash
# websocket.sh: WebSocket through a terminated tunnel (issue 28).  A real
# ksb-gatewayd, a fake guest holding a lease (ctlhold), a WebSocket origin
# of python3-websockets over TLS (ws_origin.py) bound to a credential, the
# same library as the guest's client (ws_client.py) and hand-made frames
# (ws_raw.py).  Checks: the swap on the upgrade request, no extension
# negotiated (permessage-deflate offered, stripped), frames both ways
# (fragmented, pings between, 16- and 64-bit lengths); the placeholder in
# any frame (text, binary, split across fragments, across a ping, in a
# ping, a pong, a Close reason, a byte per TLS record) and every protocol
# violation closed with a Close 1008, a row, nothing of it at the origin;
# a real value the origin sends back (split across two frames, in a
# ping) masked in what the guest's client received.
set -eu
. "$(dirname "$0")/../lib.sh"
ksb_need_root
ksb_need python3
# Debian's python3 and its python3-websockets (not another python first
# in $PATH, which would not see Debian's modules)
PY=/usr/bin/python3
ksb_need $PY /usr/lib/python3/dist-packages/websockets
HOLD=$KSB_BUILDDIR/tests/integration/ctlhold
D=$KSB_SRCDIR/tests/integration
[ -x "$HOLD" ] || ksb_fail "$HOLD not built (make check builds it)"
ksb_env
pass=0 fails=0

openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
	-keyout "$T/pki/api.test.key" -out "$T/pki/api.test.csr" \
	-subj "/CN=api.test" >/dev/null 2>&1
printf 'subjectAltName=DNS:api.test\n' > "$T/pki/api.test.ext"
openssl x509 -req -in "$T/pki/api.test.csr" -CA "$T/pki/ca.pem" \
	-CAkey "$T/pki/ca.key" -CAcreateserial -days 2 \
	-extfile "$T/pki/api.test.ext" -out "$T/pki/api.test.pem" >/dev/null 2>&1
umask 077
echo "sk-ant-api03-$(head -c 70 /dev/urandom | base64 -w0 | tr '+/' '-_' | head -c 93)AA" > "$T/apikey"
umask 022
export KSB_REALFILE=$T/apikey
ip -n "$OR" addr add 10.78.0.6/24 dev ko1
ip netns exec "$OR" $PY "$D/ws_origin.py" 10.78.0.6 443 "$T/pki/api.test.pem" \
	"$T/pki/api.test.key" "$T/apikey" "$T/origin.log" > "$T/o.err" 2>&1 &
KSB_PIDS="$KSB_PIDS $!"
ksb_wait_port "$OR" 10.78.0.6 443
echo "10.78.0.6 api.test" >> "$T/hosts"
echo "upstream-ca-file = $T/pki/ca.pem" >> "$T/ksb.conf"
cat > "$T/policy.d/test.policy" <<POL
credential api {
    host api.test
    header x-api-key
    source file $T/apikey
    secret API_KEY
    placeholder-prefix sk-
}
profile default {
    allow api.test
    allow-address 10.78.0.0/24
    credential api
}
POL
ksb_gateway
ksb_fake_guest 1 g1
PH=$(sed -n "s|^cred=api/[^/]*/||p" "$T/lease1")
G1=ksbt-$$-g1
CA=$T/state/ca/ca.crt
client() { KSB_PH=$PH ip netns exec "$G1" $PY "$D/ws_client.py" 10.77.0.1:3128 api.test "$CA" "$1" 2>&1; }
rawc() { KSB_PH=$PH ip netns exec "$G1" $PY "$D/ws_raw.py" 10.77.0.1:3128 api.test "$CA" "$1" 2>&1; }
rows() { # REASON: the count of /ws rows with it
	ksb_sql "SELECT count(*) FROM requests WHERE path = '/ws' AND status = 101 AND reason = '$1'"
}
rows_are() { # REASON N: (the audit writes rows a moment later)
	ksb_sql_is "$2" "SELECT count(*) FROM requests WHERE path = '/ws' AND status = 101 AND reason = '$1'"
}

ksb_say "a real WebSocket client through the terminated tunnel"
out=$(client echo) || true
echo "$out"
ksb_check "the origin got the real key on the upgrade" \
	'head -1 "$T/origin.log" | grep -q "\"key\": \"real\""'
ksb_check "permessage-deflate offered, stripped: none negotiated" \
	'echo "$out" | grep -q "^extensions: \[\]" && head -1 "$T/origin.log" | grep -q "\"offered\": null, \"extensions\": \[\]"'
ksb_check "a text message echoed" 'echo "$out" | grep -q "^text: True"'
ksb_check "a message in three fragments, pings between: echoed whole" \
	'echo "$out" | grep -q "^fragmented: True"'
ksb_check "binary of 300 (16-bit length) and 70000 bytes (64-bit)" \
	'echo "$out" | grep -q "^binary 300: True" && echo "$out" | grep -q "^binary 70000: True"'
ksb_check "the session's row: 101, no reason" \
	'ksb_sql_is 1 "SELECT count(*) >= 1 FROM requests WHERE path = \"/ws\" AND status = 101 AND reason IS NULL"'

ksb_say "what the origin sends back: real values masked"
out=$(client reflect) || true
echo "$out"
ksb_check "the real value split across two frames: masked, same length" \
	'echo "$out" | grep -q "^reflect: real False, masked True"'
out=$(rawc reflect) || true
echo "$out"
ksb_check "byte for byte, what the raw client got holds no real value" \
	'echo "$out" | grep -q "^real: no" && echo "$out" | grep -q "^text real=\*\*\*\*"'
out=$(rawc reflect-ping) || true
echo "$out"
ksb_check "the real value as a ping's payload: masked" \
	'echo "$out" | grep -q "^real: no" && echo "$out" | grep -q "^ping \*\*\*\*"'
ksb_check "rows: credential_reflected" 'ksb_until 10 eval "[ \$(rows credential_reflected) -ge 3 ]"'

ksb_say "a real value split across fragments, control frames between (F1)"
splitc() { KSB_PH=$PH ip netns exec "$G1" $PY "$D/ws_split.py" 10.77.0.1:3128 api.test "$CA" "$1" 2>&1; }
before=$(rows credential_reflected)
for c in ping pong several in-ping ping-head close; do
	out=$(splitc $c) || true
	echo "$out"
	ksb_check "split at 1..63, $c between: 63 masked to the byte, no part" \
		'echo "$out" | grep -q "^$c: 63 masked, 0 bad" && echo "$out" | grep -q "^parts: none"'
done
ksb_check "the pings between went through" \
	'splitc ping | grep -q "^pings: 63"'
ksb_check "rows: credential_reflected for each (close: 63 tunnels)" \
	'ksb_until 10 eval "[ \$(rows credential_reflected) -ge \$((before + 68)) ]"'
before=$(rows credential_reflected)
out=$(splitc closehead) || true
echo "$out"
ksb_check "a Close whose reason is most of a value, then the end: masked" \
	'echo "$out" | grep -q "^closehead: 4 masked, 0 bad" && echo "$out" | grep -q "^parts: none"'
ksb_check "... each row: credential_reflected, whatever ended it" \
	'ksb_until 10 eval "[ \$(rows credential_reflected) -ge \$((before + 4)) ]"'
out=$(splitc many) || true
echo "$out"
ksb_check "9 control frames inside the message: closed, no part of the value" \
	'echo "$out" | grep -q "^many: 0 masked, 0 bad" && echo "$out" | grep -q "^parts: none"'
ksb_check "... its row: upstream_bad_response" \
	'ksb_until 10 eval "[ \$(rows upstream_bad_response) -ge 1 ]"'
out=$(client pings) || true
echo "$out"
ksb_check "a client answering pings: pongs through, held or not" \
	'echo "$out" | grep -q "^pingme: masked True" && echo "$out" | grep -q "^pingme: pong ok pong2 ok"'

ksb_say "the placeholder in a frame: Close 1008, credential_misuse, nothing at the origin"
n=0
out=$(client split) || true
echo "$out"
ksb_check "library: split across two fragments, a ping between: closed 1008" \
	'echo "$out" | grep -q "^closed 1008 a placeholder in a WebSocket frame"'
n=$((n + 1))
out=$(client ping) || true
echo "$out"
ksb_check "library: the placeholder as a ping's payload: closed 1008" \
	'echo "$out" | grep -q "^closed 1008"'
n=$((n + 1))
for c in text binary fragments fragments-ping-between ping pong close-reason dribble-text; do
	out=$(rawc $c) || true
	ksb_check "raw $c: Close 1008 with the reason" \
		'echo "$out" | grep -q "^close 1008 a placeholder in a WebSocket frame is refused"'
	n=$((n + 1))
done
ksb_check "$n credential_misuse rows" 'rows_are credential_misuse $n'
ksb_check "the origin never got a frame holding the mark" \
	'! grep -q "\"placeholder\": true" "$T/origin.log"'

ksb_say "protocol violations: Close 1008, websocket_violation"
n=0
for c in unmasked reserved-opcode rsv1 ping-126 fragmented-ping len64-high-bit; do
	out=$(rawc $c) || true
	ksb_check "raw $c: Close 1008 saying why" \
		'echo "$out" | grep -q "^close 1008 .*WebSocket"'
	n=$((n + 1))
done
ksb_check "$n websocket_violation rows" 'rows_are websocket_violation $n'
out=$(rawc ok) || true
ksb_check "a good frame still passes after them" 'echo "$out" | grep -q "^text hello"'
ksb_check "the gateway log never shows the real value" \
	'! grep -qF "$(cat "$T/apikey")" "$T/gatewayd.log"'

[ "$fails" = 0 ]
