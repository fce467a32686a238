#!/bin/bash
# rebind.sh: reloads bind at once (issue 28).  A real ksb-gatewayd in its
# own namespace, a real TLS origin (cred_origin.py) logging whether each
# request carried a placeholder, a fake guest holding a lease (ctlhold)
# and a keep-alive client (rebind_client.py, Python's http.client) whose
# tunnel is open across each reload:
#   1. opaque -> bound: a reload binds the credential to the tunnel's
#      host; the tunnel is closed (credential_rebound) and the request
#      sent after the reload is swapped on a new, terminated tunnel;
#   2. a new value: the terminated tunnel is closed (credential_rebound),
#      the retry is swapped with the new value;
#   3. unbound: a reload removes the credential from the profile; the
#      placeholder sent on the open terminated tunnel is refused (403,
#      credential_misuse row).
# Never does the origin receive a placeholder.  A second lease holder
# (rebind_lease.py, playing ksb-run on the control protocol) is sent
# CREDS (proto/ctl.h) before RELOADED exactly when its instance's
# credentials changed: not for rounds 1 and 2 (same names and
# placeholders), an empty CREDS for round 3, its placeholder again when
# a 4th reload puts the credential back.
set -eu
. "$(dirname "$0")/../lib.sh"
ksb_need_root
ksb_need python3
HOLD=$KSB_BUILDDIR/tests/integration/ctlhold
KSBCTL=$KSB_BUILDDIR/ksbctl/ksbctl
ORIGIN=$KSB_SRCDIR/tests/integration/cred_origin.py
CLIENT=$KSB_SRCDIR/tests/integration/rebind_client.py
[ -x "$HOLD" ] || ksb_fail "$HOLD not built (make check builds it)"
ksb_env
pass=0 fails=0

openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
	-keyout "$T/pki/api.key" -out "$T/pki/api.csr" -subj "/CN=api.test" \
	>/dev/null 2>&1
printf 'subjectAltName=DNS:api.test,DNS:other.test\n' > "$T/pki/api.ext"
openssl x509 -req -in "$T/pki/api.csr" -CA "$T/pki/ca.pem" \
	-CAkey "$T/pki/ca.key" -CAcreateserial -days 2 \
	-extfile "$T/pki/api.ext" -out "$T/pki/api.pem" >/dev/null 2>&1
umask 077
echo "sk-first-$$-$RANDOM$RANDOM" > "$T/key1"
echo "sk-second-$$-$RANDOM$RANDOM" > "$T/key2"
umask 022
ip -n "$OR" addr add 10.78.0.6/24 dev ko1
OLOG=$T/origin.jsonl
# The origin calls key2 "real", key1 "other".
ip netns exec "$OR" python3 "$ORIGIN" 10.78.0.6 443 "$T/pki/api.pem" \
	"$T/pki/api.key" "$T/key2" "$OLOG" > "$T/origin.err" 2>&1 &
KSB_PIDS="$KSB_PIDS $!"
ksb_wait_port "$OR" 10.78.0.6 443
printf '10.78.0.6 api.test\n10.78.0.6 other.test\n' >> "$T/hosts"
echo "upstream-ca-file = $T/pki/ca.pem" >> "$T/ksb.conf"
policy() { # HOST KEYFILE [noprofile]
	cat > "$T/policy.d/test.policy" <<POL
credential api {
    host $1
    header x-api-key
    source file $2
    secret API_KEY
}
profile default {
    allow api.test
    allow other.test
    allow-address 10.78.0.0/24
    ${3:-credential api}
}
POL
}
policy other.test "$T/key1"
ksb_gateway
ksb_fake_guest 1 g1
PH=$(sed -n 's|^cred=api/[^/]*/||p' "$T/lease1")
mkfifo "$T/lease-in"
ip netns exec "$GW" python3 "$KSB_SRCDIR/tests/integration/rebind_lease.py" \
	"$T/gateway.sock" g9 default < "$T/lease-in" > "$T/lease9" 2>&1 &
KSB_PIDS="$KSB_PIDS $!"
exec {LEASEFD}>"$T/lease-in"
ksb_until 30 grep -q '^OK ' "$T/lease9" || ksb_fail "REGISTER g9: $(cat "$T/lease9")"
PH9=$(sed -n 's|^OK .* cred=api/API_KEY/\([^ ]*\).*|\1|p' "$T/lease9")
G1=ksbt-$$-g1
cat "$T/pki/ca.pem" "$T/state/ca/ca.crt" > "$T/cas.pem"
reload() {
	"$KSBCTL" -f "$T/ksb.conf" reload > "$T/reload.out" 2>&1 ||
		{ cat "$T/reload.out"; ksb_fail "ksbctl reload failed"; }
}
# round N: the client's first request, the reload (policy args), its
# second request; its lines in $T/client-N.
round() {
	local n=$1 out=$T/client-$1
	shift
	rm -f "$T/go"
	mkfifo "$T/go"
	KSB_PH=$PH ip netns exec "$G1" timeout 60 python3 "$CLIENT" \
		10.77.0.1:3128 api.test "$T/cas.pem" "$T/go" > "$out" 2>&1 &
	local pid=$!
	ksb_until 30 grep -q '^before ' "$out" || true
	policy "$@"
	reload
	echo go > "$T/go"
	wait "$pid" || true
	sed 's/^/# /' "$out"
}
rebound() { ksb_sql "SELECT count(*) FROM connections WHERE close_reason = 'credential_rebound'"; }

ksb_say "1. a reload binds the credential to an open opaque tunnel's host"
round 1 api.test "$T/key1"
ksb_check "before the reload the tunnel was opaque: the placeholder went as sent" \
	'grep -q "^before reused 200 - .*\"placeholder\": true" "$T/client-1"'
ksb_check "after it the tunnel was closed and a new one swapped key1" \
	'grep -q "^after new 200 - .*\"key\": \"other\", .*\"placeholder\": false" "$T/client-1"'
ksb_check "the origin never got /after with a placeholder" \
	'! grep "\"/after\"" "$OLOG" | grep -q "\"placeholder\": true"'
ksb_check "the opaque tunnel's row: close_reason credential_rebound" \
	'ksb_until 20 test "$(rebound)" = 1'
: > "$OLOG"

ksb_say "2. a reload gives the credential a new value: the terminated tunnel goes"
round 2 api.test "$T/key2"
ksb_check "before: swapped with key1" \
	'grep -q "^before reused 200 - .*\"key\": \"other\", .*\"placeholder\": false" "$T/client-2"'
ksb_check "after: a new tunnel swapped key2" \
	'grep -q "^after new 200 - .*\"key\": \"real\", .*\"placeholder\": false" "$T/client-2"'
ksb_check "a second credential_rebound row" 'ksb_until 20 test "$(rebound)" = 2'
: > "$OLOG"

ksb_say "3. a reload removes the credential: its placeholder is refused"
round 3 api.test "$T/key2" "# no credential"
ksb_check "before: swapped" \
	'grep -q "^before reused 200 - .*\"key\": \"real\"" "$T/client-3"'
ksb_check "after, on the same tunnel: 403 credential_misuse" \
	'grep -q "^after reused 403 credential_misuse" "$T/client-3"'
ksb_check "nothing of /after reached the origin" '! grep -q "\"/after\"" "$OLOG"'
ksb_check "its requests row" \
	'ksb_sql_is 1 "SELECT count(*) FROM requests WHERE reason = \"credential_misuse\""'
ksb_check "no third credential_rebound row" '[ "$(rebound)" = 2 ]'
ksb_check "no placeholder in any audit row" \
	'ksb_sql_is 0 "SELECT count(*) FROM requests WHERE path LIKE \"%ksbph_%\" OR method LIKE \"%ksbph_%\""'

ksb_say "4. the lease holder is told the credentials when they change"
policy api.test "$T/key2"
reload
ksb_until 30 grep -q '^RELOADED 4$' "$T/lease9" || true
sed 's/^/# lease: /' "$T/lease9"
ksb_check "REGISTER's OK gave g9 its placeholder" '[ -n "$PH9" ]'
ksb_check "rounds 1 and 2 (same credentials): RELOADED only" \
	'[ "$(sed -n 2,3p "$T/lease9" | tr "\n" " ")" = "RELOADED 1 RELOADED 2 " ]'
ksb_check "round 3 (credential gone): CREDS alone, then RELOADED 3" \
	'[ "$(sed -n 4,5p "$T/lease9" | tr "\n" " ")" = "CREDS RELOADED 3 " ]'
ksb_check "round 4 (back): CREDS with the same placeholder, then RELOADED 4" \
	'[ "$(sed -n 6,7p "$T/lease9" | tr "\n" " ")" = "CREDS cred=api/API_KEY/$PH9 RELOADED 4 " ]'

echo
echo "rebind: $pass passed, $fails failed"
[ "$fails" = 0 ]
