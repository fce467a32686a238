#!/bin/bash
# credpath.sh: a credential's allow-request rules through the real
# gateway, on the path as the origin reads it (ksb-policy(5), policy/
# urlpath.c).  A real ksb-gatewayd in its own namespace, a fake guest
# holding a lease (ctlhold), a TLS origin of its own (cred_reflect.py)
# that logs every request it receives; curl --path-as-is sends each path
# exactly as written.  Checks: whole segments only (/repos/org does not
# allow /repos/org-other); normalised spellings of an allowed path
# (repeated slashes, decoded unreserved escapes, hex case) get the value;
# a path with no single reading (%2F, ';' or %3B, double encoding) is
# refused with 400 request_path_ambiguous and its reason in one line;
# dot segments (also behind an encoded '/') are refused by the HTTP
# parser before any rule; the query is not matched;
# nothing refused reaches the origin, and every refusal has its row.
set -eu
. "$(dirname "$0")/../lib.sh"

ksb_need_root
ksb_need python3
ksb_need curl
HOLD=$KSB_BUILDDIR/tests/integration/ctlhold
[ -x "$HOLD" ] || ksb_fail "$HOLD not built (make check builds it)"
ksb_env
pass=0 fails=0

openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
	-keyout "$T/pki/p.key" -out "$T/pki/p.csr" -subj "/CN=path.test" \
	>/dev/null 2>&1
printf 'subjectAltName=DNS:path.test\n' > "$T/pki/p.ext"
openssl x509 -req -in "$T/pki/p.csr" -CA "$T/pki/ca.pem" \
	-CAkey "$T/pki/ca.key" -CAcreateserial -days 2 \
	-extfile "$T/pki/p.ext" -out "$T/pki/p.pem" >/dev/null 2>&1
mkdir -p "$T/c/expect"
# An Anthropic-format key: sk-ant-api03- and 95 more bytes (108).
KEY=sk-ant-api03-$(head -c 200 /dev/urandom | base64 -w0 | tr -dc 'A-Za-z0-9' | head -c 93)AA
( umask 077 && printf '%s\n' "$KEY" > "$T/c/key" )
printf 'x-api-key\n%s' "$KEY" > "$T/c/expect/pathkey"
chmod 755 "$T/c" "$T/c/expect"
chmod 644 "$T/c/expect/pathkey"
ip -n "$OR" addr add 10.78.0.7/24 dev ko1
ip netns exec "$OR" python3 "$KSB_SRCDIR/tests/integration/cred_reflect.py" \
	10.78.0.7 443 "$T/pki/p.pem" "$T/pki/p.key" "$T/c/expect" \
	"$T/origin.log" > "$T/origin.err" 2>&1 &
KSB_PIDS="$KSB_PIDS $!"
ksb_wait_port "$OR" 10.78.0.7 443
echo "10.78.0.7 path.test" >> "$T/hosts"
echo "upstream-ca-file = $T/pki/ca.pem" >> "$T/ksb.conf"
cat > "$T/policy.d/test.policy" <<POL
credential pathkey {
    host path.test
    header x-api-key
    source file $T/c/key
    secret PATH_KEY
    allow-request GET /repos/org
    allow-request GET /check/pathkey
    allow-request * /v1/
}
profile p1 {
    allow path.test
    allow-address 10.78.0.0/24
    credential pathkey
}
POL
ksb_gateway
ksb_fake_guest 1 g1 p1
PH=$(sed -n 's|^cred=pathkey/[^/]*/||p' "$T/lease1")
[ -n "$PH" ] || ksb_fail "no placeholder in the lease: $(cat "$T/lease1")"
CA=$T/state/ca/ca.crt
n=0 nrefused=0 namb=0 bad=
# one WANT METHOD PATH: the status the guest gets, and whether it reached
# the origin with the real value (200) or not at all (anything else).
one() {
	local want=$1 m=$2 p=$3 out code
	n=$((n + 1))
	out=$(ip netns exec ksbt-$$-g1 curl -sS --max-time 20 --path-as-is \
		--proxy http://10.77.0.1:3128 --cacert "$CA" -X "$m" \
		-H "x-api-key: $PH" -w '\n%{http_code}' \
		"https://path.test$p" 2>&1) || true
	code=${out##*$'\n'}
	case $want in
	200) grep -qF "\"target\": \"$p\"" "$T/origin.log" || bad="$bad [$m $p: never arrived]" ;;
	400) namb=$((namb + 1)) ;;
	esac
	[ "$want" = 200 ] || nrefused=$((nrefused + 1))
	[ "$code" = "$want" ] || bad="$bad [$m $p: $code, want $want]"
	echo "$m $p $code" >> "$T/asked"
}
for p in /repos/org /repos/org/ /repos/org/issues /repos//org \
	/repos/org//x /repos/%6Frg /repos/%6frg/pulls /%72epos/org \
	/repos/org/%2a /repos/org/a:b@c /v1 /v1/messages '/v1/x?q=/etc/passwd' \
	'/repos/org?to=/repos/other'; do
	one 200 GET "$p"
done
one 200 POST /v1/messages
for p in /repos/org-other /repos/orgx /repos/org%2Dother /repos /repos/ \
	/ /Repos/org /repos/ORG /v1x /v10/a '/other?/repos/org'; do
	one 403 GET "$p"
done
one 403 POST /repos/org
for p in /repos/org%2Fx /repos/org%2fx/y '/repos/org;jsessionid=1' \
	/repos/org%3B/x /repos/org/%252e%252e/admin \
	/repos/org/%c0%ae%c0%ae/admin /repos/org/..%20/admin \
	/repos/org/.../admin /repos/org/%2e%2e%3f; do
	one 400 GET "$p"
done
for p in /repos/org/../other /repos/org/./x /repos/org/%2e%2e/x /.. \
	/repos/org%2f..%2fother \
	'/repos/org\x' /repos/org%00 /repos/org%zz; do
	one 400 GET "$p"
	namb=$((namb - 1))
done
echo "# $n paths tried${bad:+; failed:$bad}"
ksb_check "$n paths: whole segments, normalised; the ambiguous refused" \
	'[ -z "$bad" ] && [ "$n" -ge 40 ]'
ksb_check "the allowed requests carried the real value (exact field)" \
	'ip netns exec ksbt-$$-g1 curl -sS --max-time 20 --path-as-is \
		--proxy http://10.77.0.1:3128 --cacert "$CA" \
		-H "x-api-key: $PH" "https://path.test/check/pathkey" |
	 grep -q "\"match\": true"'
ksb_check "nothing refused reached the origin" \
	'! grep -E "\"target\": \"/(repos/(org-|orgx|org%2D|ORG|org%2F|org%2f|org;|org%3B|org/%25|org/\.|org/%2e|org/%c0)|Repos|v1x|v10|other|\.\.)" "$T/origin.log" &&
	 ! grep -qE "\"target\": \"/repos/?\"|\"target\": \"/\"" "$T/origin.log" &&
	 ! grep -q "\"method\": \"POST\", \"target\": \"/repos" "$T/origin.log"'
ksb_check "each 403 has its request_not_allowed row, with the credential" \
	'ksb_sql_is 12 "SELECT count(*) FROM requests WHERE status = 403 AND reason = \"request_not_allowed\" AND credential = \"pathkey\""'
ksb_check "each ambiguous path has its request_path_ambiguous row" \
	'ksb_sql_is "$namb" "SELECT count(*) FROM requests WHERE status = 400 AND reason = \"request_path_ambiguous\" AND credential = \"pathkey\""'
ksb_check "the rows keep the path as sent (no placeholder in any)" \
	'ksb_sql_is 1 "SELECT count(*) FROM requests WHERE path = \"/repos/org%2fx/y\"" &&
	 ksb_sql_is 0 "SELECT count(*) FROM requests WHERE path LIKE \"%ksbph%\""'
ksb_check "the guest is told why, in one line" \
	'ip netns exec ksbt-$$-g1 curl -sS --max-time 20 --path-as-is \
		--proxy http://10.77.0.1:3128 --cacert "$CA" \
		-H "x-api-key: $PH" "https://path.test/repos/org%2Fx" |
	 tail -1 | grep -qx "ksb: the path has no single reading (encoded '"'"'/'"'"'): refused, not guessed"'
ksb_check "without the placeholder the rules do not apply (nothing swapped)" \
	'ip netns exec ksbt-$$-g1 curl -sS --max-time 20 -o /dev/null -w "%{http_code}" \
		--proxy http://10.77.0.1:3128 --cacert "$CA" \
		"https://path.test/repos/org-other" | grep -qx 200'
[ "$fails" = 0 ]
