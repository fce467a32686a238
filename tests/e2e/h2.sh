#!/bin/bash
# e2e: HTTP/2 and gRPC through a terminated host from a real guest (issue
# 32).  One boot of a guest (QEMU, TCG) whose agent runs, with the
# placeholders it was given and the agent's environment (HTTPS_PROXY,
# SSL_CERT_FILE: the gateway CA), the host's curl --http2 and a Python
# gRPC client (python3-grpcio, tests/integration/h2_grpc.py) against the
# h2 origin (h2_origin.py) and a gRPC server in the origin's namespace;
# the origins check what they received (the real value, no
# placeholder), the guest that what came back holds no real value.
# Needs root, QEMU, a guest kernel, curl with HTTP/2, python3-h2,
# python3-grpcio.
set -eu
. "$(dirname "$0")/../lib.sh"

ksb_need_root
ksb_need qemu-system-x86_64 curl
ksb_need_built ksb-run ksb-guest-init ksb-gatewayd
PY=/usr/bin/python3
$PY -c 'import h2, grpc' 2>/dev/null || ksb_skip "python3-h2 or python3-grpcio missing"
S=$KSB_SRCDIR/tests/integration
ksb_kernel
ksb_env
pass=0 fails=0
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
	-keyout "$T/pki/h.key" -out "$T/pki/h.csr" -subj "/CN=api.test" \
	>/dev/null 2>&1
printf 'subjectAltName=DNS:api.test,DNS:grpc.test\n' > "$T/pki/h.ext"
openssl x509 -req -in "$T/pki/h.csr" -CA "$T/pki/ca.pem" -CAkey "$T/pki/ca.key" \
	-CAcreateserial -days 2 -extfile "$T/pki/h.ext" -out "$T/pki/h.pem" \
	>/dev/null 2>&1
umask 077
echo "sk-ant-api03-$(head -c 96 /dev/urandom | base64 -w0 | tr -dc 'A-Za-z0-9' | head -c 80)AA" > "$T/apikey"
umask 022
REAL=$(cat "$T/apikey")
ip -n "$OR" addr add 10.78.0.6/24 dev ko1
ip -n "$OR" addr add 10.78.0.8/24 dev ko1
ip netns exec "$OR" $PY "$S/h2_origin.py" 10.78.0.6 443 "$T/pki/h.pem" \
	"$T/pki/h.key" "$T/apikey" "$T/origin.log" > "$T/o6.err" 2>&1 &
KSB_PIDS="$KSB_PIDS $!"
ip netns exec "$OR" $PY "$S/h2_grpc.py" server 10.78.0.8 443 "$T/pki/h.pem" \
	"$T/pki/h.key" "$T/apikey" "$T/grpc.log" > "$T/o8.err" 2>&1 &
KSB_PIDS="$KSB_PIDS $!"
ksb_wait_port "$OR" 10.78.0.6 443
ksb_wait_port "$OR" 10.78.0.8 443
printf '10.78.0.6 api.test\n10.78.0.8 grpc.test\n' >> "$T/hosts"
echo "upstream-ca-file = $T/pki/ca.pem" >> "$T/ksb.conf"
cat > "$T/policy.d/test.policy" <<POL
credential api {
    host api.test
    header x-api-key
    source file $T/apikey
    secret API_KEY
}
credential grpc {
    host grpc.test
    header authorization bearer
    source file $T/apikey
    secret GRPC_TOKEN
}
profile p1 {
    allow api.test
    allow grpc.test
    allow-address 10.78.0.0/24
    credential api
    credential grpc
}
POL
ksb_gateway
cp "$S/h2_grpc.py" "$T/share/"
chmod 644 "$T/share/h2_grpc.py"
cat > "$T/share/h2-guest.sh" <<'GUEST'
# Runs in the guest as the agent.  One RESULT line per check.
r() { echo "RESULT $1 $2"; }
ph() { eval "v=\${$1:-}"; [ -n "$v" ] || v=$(cat /run/ksb/secrets/$1); printf %s "$v"; }
A=$(ph API_KEY) G=$(ph GRPC_TOKEN)
case $A in *ksbph_*) r placeholders ok ;; *) r placeholders "bad: $A" ;; esac
out=$(curl -sS --http2 --max-time 60 -H "x-api-key: $A" -w '\nversion=%{http_version}\n' https://api.test/echo 2>&1)
echo "$out" | sed 's/^/# curl: /'
echo "$out" | grep -q '"key": "real"' && echo "$out" | grep -q '^version=2$' && r curl ok || r curl bad
curl -sS --http2 --max-time 60 -H "x-api-key: $A" -D "$HOME/r.head" -o "$HOME/r.body" https://api.test/reflect
grep -q '^x-echo: \*\*\*\*' "$HOME/r.head" && grep -q 'before \*\*\*\*' "$HOME/r.body" && r masked ok || r masked bad
out=$(/usr/bin/python3 /ksb-test/h2_grpc.py client "${HTTPS_PROXY#http://}" grpc.test "$SSL_CERT_FILE" "$G" 2>&1)
echo "$out" | sed 's/^/# grpc: /'
echo "$out" | grep -q '^unary auth=real status OK$' && r grpc_unary ok || r grpc_unary bad
echo "$out" | grep -q '^deny PERMISSION_DENIED denied here$' && r grpc_status ok || r grpc_status bad
echo "$out" | grep -q '^bidi echo:0:m0 echo:1:m1 echo:2:m2$' && r grpc_bidi ok || r grpc_bidi bad
echo "$out" | grep -q '^trailer \*\*\*\*' && r grpc_masked ok || r grpc_masked bad
exit 0
GUEST
chmod 644 "$T/share/h2-guest.sh"

ksb_say "ksb-run: curl --http2 and gRPC in the guest"
t0=$SECONDS
set +e
timeout -k 10 600 ip netns exec "$GW" "$KSB_BUILDDIR/ksb-run" -f "$T/ksb.conf" \
	--name h2 --state-dir "$T/state" --profile p1 --disk-size 256M \
	--memory 1024 --share-ro "$T/share:/ksb-test" \
	-- /bin/bash /ksb-test/h2-guest.sh > "$T/guest.out" 2> "$T/run.err"
rc=$?
set -e
grep -v '^RESULT' "$T/guest.out" | tail -n 20
grep '^RESULT' "$T/guest.out" || true
tail -n 5 "$T/run.err" >&2
echo "# ksb-run exit status $rc after $((SECONDS - t0)) s"
ksb_check "ksb-run exited 0" '[ "$rc" = 0 ]'
for r in placeholders curl masked grpc_unary grpc_status grpc_bidi grpc_masked; do
	ksb_check "guest: $r" "grep -qx 'RESULT $r ok' '$T/guest.out'"
done
ksb_check "the origins saw the real value, never a placeholder" \
	'grep -q "\"key\": \"real\"" "$T/origin.log" && ! grep -q "\"placeholder\": true" "$T/origin.log" "$T/grpc.log" && [ "$(grep -c "\"auth\": \"real\"" "$T/grpc.log")" = 3 ]'
ksb_check "the guest's output holds no real value" \
	'! grep -qF "$REAL" "$T/guest.out" "$T/run.err"'
ksb_check "each stream has its row: /echo, /reflect, the gRPC calls" \
	'ksb_sql_is 1 "SELECT count(*) >= 5 FROM requests WHERE credential IN (\"api\", \"grpc\") AND status = 200"'
[ "$fails" = 0 ]
