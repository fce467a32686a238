#!/bin/bash
# e2e: a running guest learns its profile's new credentials (issue 28).
# One boot (agent mode, detached) of a profile without credentials; a
# reload adds one: ksb-run relays the placeholder and the gateway CA to
# the guest (CREDS, proto/ctl.h; SECRET and CA lines, proto/guestctl.h),
# and a new process in the guest finds /run/ksb/secrets/API_KEY, trusts
# the gateway CA and gets its request to a real TLS origin swapped (the
# origin sees the real value).  A second reload replaces the credential
# by another bound to the same host: API_KEY goes, API_KEY2 comes, and
# the old placeholder is refused (403 credential_misuse, its row); the
# origin never sees a placeholder.  A gateway restart with the policy
# changed meanwhile: RESUME's reply carries the profile's credentials now
# and the guest gets them the same way.  Needs root, QEMU and a guest kernel
# (exit 77).
set -eu
. "$(dirname "$0")/../lib.sh"

ksb_need_root
ksb_need qemu-system-x86_64 python3 curl
ksb_need_built ksb-run ksb-guest-init ksb-gatewayd ksbctl/ksbctl
ksb_kernel
ksb_env
fails=0
ctl() { timeout 120 "$KSB_BUILDDIR/ksbctl/ksbctl" -f "$T/ksb.conf" "$@"; }
I=$T/state/instances/rb

openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
	-keyout "$T/pki/api.key" -out "$T/pki/api.csr" -subj "/CN=api.test" \
	>/dev/null 2>&1
printf 'subjectAltName=DNS:api.test\n' > "$T/pki/api.ext"
openssl x509 -req -in "$T/pki/api.csr" -CA "$T/pki/ca.pem" \
	-CAkey "$T/pki/ca.key" -CAcreateserial -days 2 \
	-extfile "$T/pki/api.ext" -out "$T/pki/api.pem" >/dev/null 2>&1
umask 077
echo "sk-real-$$-$RANDOM$RANDOM" > "$T/key"
umask 022
ip -n "$OR" addr add 10.78.0.6/24 dev ko1
OLOG=$T/origin.jsonl
ip netns exec "$OR" python3 "$KSB_SRCDIR/tests/integration/cred_origin.py" \
	10.78.0.6 443 "$T/pki/api.pem" "$T/pki/api.key" "$T/key" "$OLOG" \
	> "$T/origin.err" 2>&1 &
KSB_PIDS="$KSB_PIDS $!"
ksb_wait_port "$OR" 10.78.0.6 443
echo '10.78.0.6 api.test' >> "$T/hosts"
echo "upstream-ca-file = $T/pki/ca.pem" >> "$T/ksb.conf"
policy() { # PROFILE-LINE
	cat > "$T/policy.d/test.policy" <<POL
credential api {
    host api.test
    header x-api-key
    source file $T/key
    secret API_KEY
}
credential api2 {
    host api.test
    header x-api-key
    source file $T/key
    secret API_KEY2
}
profile default {
    allow allowed.test
    allow api.test
    allow-address 10.78.0.0/24
    $1
}
POL
}
policy "# no credential"
ksb_gateway

# The agent: one turn per line, its output (one line) as the report.
cat > "$T/share/guest.sh" <<'GUEST'
echo guest-ready
while IFS= read -r task; do
	out=$(sh -c "$task" 2>&1 | tr '\n' ' ' | cut -c1-300)
	ksb-report done "OUT: $out"
done
GUEST
chmod 644 "$T/share/guest.sh"
(cd "$T" && timeout 300 ip netns exec "$GW" "$KSB_BUILDDIR/ksb-run" \
	-f "$T/ksb.conf" --detach --name rb --memory 1024 \
	--share-ro "$T/share:/ksb-test" --agent 'sh /ksb-test/guest.sh' \
	> /dev/null 2> "$T/err-run") ||
	{ cat "$T/err-run"; ksb_fail "ksb-run --detach failed"; }
KSB_PIDS="$KSB_PIDS $(sed -n 's/^pid=//p' "$I/state")"
turn() { # TASK: its report's OUT line (ksbctl escapes quotes as \x22)
	ctl prompt rb --wait --no-summary "$1" 2>&1 |
		sed -n 's/.*OUT: //; T; s/\\x22/"/g; p'
}
# The request a new process in the guest makes with the placeholder in
# FILE (ITS environment: the agent's, set at boot).
req() { echo "curl -sS --max-time 30 -H \"x-api-key: \$(cat $1)\" https://api.test/echo"; }

ksb_say "boot without a credential"
out=$(turn 'ls /run/ksb/secrets 2>&1; grep -c BEGIN /etc/ssl/certs/ca-certificates.crt')
echo "# $out"
ksb_check "no placeholder file in the guest" '! echo "$out" | grep -q API_KEY'
nca0=$(echo "$out" | awk '{print $NF}')

ksb_say "a reload adds credential api"
policy "credential api"
ctl reload | sed 's/^/# /'
ksb_check "ksb-run relayed it" \
	'ksb_until 60 grep -q "credential api: the guest.s API_KEY gets a placeholder" "$I/ksb-run.log"'
ksb_check "and the gateway CA" 'grep -q "the gateway CA goes to the guest" "$I/ksb-run.log"'
PH=$(turn 'cat /run/ksb/secrets/API_KEY; stat -c " %a %U" /run/ksb/secrets/API_KEY')
echo "# $PH"
ksb_check "a new process sees the placeholder file, 0400, the agent's" \
	'echo "$PH" | grep -Eq "^ksbph_[0-9a-f]{40} +400 agent"'
PH=${PH%% *}
out=$(turn 'grep -c BEGIN /etc/ssl/certs/ca-certificates.crt')
ksb_check "the bundle gained the gateway CA" '[ "$out" = "$((nca0 + 1)) " ] || [ "$out" = "$((nca0 + 1))" ]'
out=$(turn "$(req /run/ksb/secrets/API_KEY)")
echo "# $out"
ksb_check "its request through the gateway is swapped: the origin got the real value" \
	'echo "$out" | grep -q "\"key\": \"real\", \"auth\": \"none\", \"placeholder\": false"'
ksb_check "the origin's log: the real value, no placeholder" \
	'grep -q "\"key\": \"real\"" "$OLOG" && ! grep -q "\"placeholder\": true" "$OLOG"'

ksb_say "a reload replaces it by api2 (the same host)"
policy "credential api2"
ctl reload | sed 's/^/# /'
ksb_check "ksb-run relayed it" \
	'ksb_until 60 grep -q "credential api left the profile" "$I/ksb-run.log"'
out=$(turn 'ls /run/ksb/secrets')
echo "# $out"
ksb_check "API_KEY is gone, API_KEY2 is there" \
	'echo "$out" | grep -qw API_KEY2 && ! echo "$out" | grep -qw API_KEY'
echo "$PH" > "$T/share/old-ph"
chmod 644 "$T/share/old-ph"
out=$(turn "$(req /ksb-test/old-ph) -D - -o /dev/null")
echo "# $out"
ksb_check "the old placeholder is refused: 403 credential_misuse" \
	'echo "$out" | grep -q "HTTP/1.1 403" && echo "$out" | grep -qi "x-ksb-deny: credential_misuse"'
ksb_check "its requests row" \
	'ksb_sql_is 1 "SELECT count(*) FROM requests WHERE reason = \"credential_misuse\""'
out=$(turn "$(req /run/ksb/secrets/API_KEY2)")
ksb_check "API_KEY2's placeholder is swapped" \
	'echo "$out" | grep -q "\"key\": \"real\", \"auth\": \"none\", \"placeholder\": false"'
ksb_check "the origin never saw a placeholder" '! grep -q "\"placeholder\": true" "$OLOG"'

ksb_say "a gateway restart with a changed policy: RESUME brings api back"
kill -TERM "$KSB_GATEWAY_PID"
ksb_wait_dead "$KSB_GATEWAY_PID" 30 || true
policy "credential api"
ksb_gateway
ksb_check "ksb-run resumed its lease" 'ksb_until 60 grep -q "lease resumed" "$I/ksb-run.log"'
ksb_check "and relayed the profile's credentials as RESUME gave them" \
	'ksb_until 60 grep -q "credential api2 left the profile" "$I/ksb-run.log"'
out=$(turn 'ls /run/ksb/secrets')
echo "# $out"
ksb_check "after the restart: API_KEY is back, API_KEY2 gone" \
	'echo "$out" | grep -qw API_KEY && ! echo "$out" | grep -qw API_KEY2'
out=$(turn "$(req /run/ksb/secrets/API_KEY)")
ksb_check "its placeholder is swapped" \
	'echo "$out" | grep -q "\"key\": \"real\", \"auth\": \"none\", \"placeholder\": false"'

ctl stop rb > /dev/null 2>&1 || true
echo
echo "rebind e2e: $fails failed"
[ "$fails" = 0 ]
