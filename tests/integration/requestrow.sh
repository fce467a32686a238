#!/bin/bash
# requestrow.sh: a terminated tunnel's request is in the audit before its
# first byte goes upstream (issue 29).  A real ksb-gatewayd in its own
# namespace, a credential bound to api.test, a real TLS origin
# (hold_origin.py) that holds the response of /hold until the test says,
# a fake guest (tests/integration/ctlhold) and curl.  Checks: a request's
# request_opens row is committed before its requests row (and both are
# chained); while the origin holds a request that carried the real key,
# its request_opens row is already committed and it has no requests row;
# SIGKILL of the real proxy process then: the parent restarts it and
# ends the request (requests row, reason proxy_restarted) and the tunnel
# (proxy_restarted), while the same gateway runs; the chain verifies.
set -eu
. "$(dirname "$0")/../lib.sh"

ksb_need_root
ksb_need python3 pgrep curl
HOLD=$KSB_BUILDDIR/tests/integration/ctlhold
[ -x "$HOLD" ] || ksb_fail "$HOLD not built (make check builds it)"
ksb_env
pass=0 fails=0

openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
	-keyout "$T/pki/api.key" -out "$T/pki/api.csr" -subj "/CN=api.test" \
	>/dev/null 2>&1
printf 'subjectAltName=DNS:api.test\n' > "$T/pki/api.ext"
openssl x509 -req -in "$T/pki/api.csr" -CA "$T/pki/ca.pem" \
	-CAkey "$T/pki/ca.key" -CAcreateserial -days 2 \
	-extfile "$T/pki/api.ext" -out "$T/pki/api.pem" >/dev/null 2>&1
ip -n "$OR" addr add 10.78.0.6/24 dev ko1
mkdir -p "$T/o"
ip netns exec "$OR" python3 "$KSB_SRCDIR/tests/integration/hold_origin.py" \
	10.78.0.6 443 "$T/pki/api.pem" "$T/pki/api.key" "$T/o" \
	> "$T/origin.err" 2>&1 &
KSB_PIDS="$KSB_PIDS $!"
ksb_wait_port "$OR" 10.78.0.6 443
echo "10.78.0.6 api.test" >> "$T/hosts"
umask 077
echo "sk-real-$$-$RANDOM$RANDOM" > "$T/apikey"
umask 022
REAL=$(cat "$T/apikey")
printf 'upstream-ca-file = %s/pki/ca.pem\n' "$T" >> "$T/ksb.conf"
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
gcurl() {
	ip netns exec "$G1" timeout 40 curl -sS --max-time 30 \
		--proxy http://10.77.0.1:3128 --cacert "$T/state/ca/ca.crt" \
		-H "x-api-key: $PH" "$@"
}
logged_now() { grep -q -- "$1" "$T/gatewayd.log"; }
proxy_pid() { pgrep -P "$KSB_GATEWAY_PID" -x ksb-proxy | head -n 1; }

ksb_say "a request's row before its end"
ksb_check "a request through the terminated tunnel is answered" \
	'[ "$(gcurl https://api.test/fast)" = ok ]'
ksb_check "its request_opens row (credential api), chained" \
	'ksb_sql_is "GET|/fast|api|1" "SELECT method, path, credential, seq > 0 FROM request_opens"'
ksb_check "its requests row follows it, status 200" \
	'ksb_sql_is 1 "SELECT count(*) FROM requests r, request_opens o WHERE r.conn_id = o.conn_id AND r.path = \"/fast\" AND r.status = 200 AND r.seq > o.seq"'

ksb_say "a crash while the origin holds the response"
P1=$(proxy_pid)
ksb_check "a proxy process runs" '[ -n "$P1" ]'
gcurl -o /dev/null https://api.test/hold > "$T/curl.out" 2>&1 &
CURL=$!
got() { [ -s "$T/o/got" ]; }
ksb_check "the origin received the request, with the real key" \
	'ksb_until 30 got && [ "$(cat "$T/o/got")" = "$REAL" ]'
ksb_check "... and its row was committed before: request_opens has it" \
	'[ "$(ksb_sql "SELECT count(*) FROM request_opens WHERE path = '"'/hold'"' AND credential = '"'api'"'")" = 1 ]'
ksb_check "... no requests row yet (it has not ended)" \
	'ksb_sql_is 0 "SELECT count(*) FROM requests WHERE path = \"/hold\""'
kill -KILL "$P1"
ksb_check "the parent restarts the killed proxy" \
	'ksb_until 20 logged_now "proxy process $P1: .*restarting it"'
ended() { [ "$(ksb_sql "SELECT coalesce(status, 'NULL') || '|' || reason FROM requests WHERE path = '/hold'")" = "NULL|proxy_restarted" ]; }
ksb_check "the request is ended proxy_restarted (status NULL), the gateway running" \
	'ksb_until 20 ended && kill -0 "$KSB_GATEWAY_PID"'
ksb_check "... after its open row, on the same tunnel, closed proxy_restarted" \
	'ksb_sql_is "1|proxy_restarted" "SELECT r.seq > o.seq, c.close_reason FROM requests r JOIN request_opens o ON o.conn_id = r.conn_id AND o.path = r.path JOIN connections c ON c.id = r.conn_id WHERE r.path = \"/hold\""'
touch "$T/o/release"
wait "$CURL" || true
sed 's/^/# curl: /' "$T/curl.out"
ksb_check "a request after the restart is recorded as before" \
	'[ "$(gcurl https://api.test/fast)" = ok ] && ksb_sql_is 2 "SELECT count(*) FROM request_opens WHERE path = \"/fast\""'
ksb_check "every request_opens row has its end" \
	'ksb_sql_is 0 "SELECT (SELECT count(*) FROM request_opens) - (SELECT count(*) FROM requests)"'
ksb_check "the chain verifies" \
	'ip netns exec "$GW" "$KSB_BUILDDIR/ksbctl/ksbctl" -f "$T/ksb.conf" audit verify'
ksb_say "the export carries them"
kctl() { ip netns exec "$GW" "$KSB_BUILDDIR/ksbctl/ksbctl" -f "$T/ksb.conf" "$@"; }
kctl audit export --jsonl > "$T/export.jsonl"
ksb_check "--jsonl: every request and request_open record, as in the tables" \
	'[ "$(grep -c "\"kind\": *\"request\"" "$T/export.jsonl")" = "$(ksb_sql "SELECT count(*) FROM requests")" ] &&
	 [ "$(grep -c "\"kind\": *\"request_open\"" "$T/export.jsonl")" = "$(ksb_sql "SELECT count(*) FROM request_opens")" ] &&
	 grep -q "\"kind\": *\"request\".*\"path\": *\"\\/hold\".*\"reason\": *\"proxy_restarted\"" "$T/export.jsonl"'
kctl audit export --format ocsf > "$T/export.ocsf"
ksb_check "--format ocsf: a GET request is HTTP Activity 4002, activity 3 Get" \
	'python3 -c "import json,sys; e=[json.loads(l) for l in open(sys.argv[1])]; sys.exit(not any(x[\"class_uid\"] == 4002 and x[\"activity_id\"] == 3 and x[\"unmapped\"][\"kind\"] == \"request\" for x in e))" "$T/export.ocsf" || { head -c 600 "$T/export.ocsf"; false; }'
ksb_unguest 1

echo "# $pass passed, $fails failed"
[ "$fails" = 0 ]
