#!/bin/bash
# `ksbctl policy suggest' on a recorded run (issue 15): an audit database
# made from the schema with rows as the gateway writes them (names used,
# refused, a screened address, three siblings, request errors), then the
# draft: `ksbctl policy check' accepts it, and applied it allows what was
# used and refused and nothing else (a wildcard only for the siblings).
# No root, no network; needs sqlite3.
set -eu
B=${KSB_BUILDDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
S=${KSB_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
. "$(dirname "$0")/../lib.sh"
ksb_need sqlite3
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0
pass=0
check() {
	if eval "$2"; then echo "ok - $1"; pass=$((pass + 1))
	else echo "not ok - $1"; fails=$((fails + 1)); fi
}
mkdir -p "$T/policy.d" "$T/try"
printf 'profile dev {\n    allow used.test\n}\n' > "$T/policy.d/dev.policy"
printf 'audit-db = %s/audit.db\npolicy = %s/policy.d/*.policy\n' "$T" "$T" > "$T/ksb.conf"
sqlite3 "$T/audit.db" < "$S/audit/schema/audit.sql"
row() {	# row HOST PORT DECISION REASON [UPSTREAM] [INSTANCE]
	sqlite3 "$T/audit.db" "INSERT INTO connections (ts_ms, instance, profile, client_addr, client_port, host, port, decision, reason, upstream_addr) VALUES ($(date +%s)000, '${6:-ag1}', 'dev', '10.77.0.2', 4000, $1, $2, '$3', '$4', ${5:-NULL})"
}
row "'used.test'" 443 allow allowed "'192.0.2.1'"
row "'used.test'" 443 allow allowed "'192.0.2.1'"
row "'new.test'" 443 deny not_in_allowlist
row "'new.test'" 8443 deny not_in_allowlist
row "'a.cdn.example.org'" 443 deny not_in_allowlist
row "'b.cdn.example.org'" 443 deny not_in_allowlist
row "'c.cdn.example.org'" 443 deny not_in_allowlist
row "'x.two.example'" 443 deny not_in_allowlist
row "'y.two.example'" 443 deny not_in_allowlist
row "'inner.test'" 443 deny address_screened "'10.1.2.3'"
row "'198.51.100.7'" 443 deny ip_literal
row NULL NULL deny bad_request
row "'allowed%2etest'" 443 deny bad_host
row "'other.test'" 443 deny not_in_allowlist NULL other
K() { "$B/ksbctl/ksbctl" -f "$T/ksb.conf" "$@"; }

K policy suggest --instance ag1 --name dev > "$T/draft" 2> "$T/err" || true
cat "$T/draft" "$T/err"
check "a wildcard for three siblings only" \
	'grep -q "^    allow \*\.cdn\.example\.org:443$" "$T/draft" && ! grep -q "\*\.two\.example" "$T/draft"'
check "two siblings stay exact names" \
	'grep -q "^    allow x\.two\.example:443 " "$T/draft" && grep -q "^    allow y\.two\.example:443 " "$T/draft"'
check "a refused name with both its ports" 'grep -Eq "^    allow new\.test:(443,8443|8443,443) +# refused 2$" "$T/draft"'
check "a used name" 'grep -Eq "^    allow used\.test:443 +# used 2$" "$T/draft"'
check "the screened address and the IP literal" \
	'grep -q "^    allow-address 10\.1\.2\.3/32:443 " "$T/draft" && grep -q "^    allow-address 198\.51\.100\.7/32:443 " "$T/draft"'
check "another instance's names and bad hosts are not in it" \
	'! grep -q "other\.test\|%2e\|allowed" "$T/draft"'
check "request errors counted" 'grep -q "^# 2 connection(s) suggest nothing" "$T/draft"'

# Applied in place of the profile: what was used and refused is allowed.
cp "$T/draft" "$T/try/dev.policy"
printf 'audit-db = %s/audit.db\npolicy = %s/try/*.policy\n' "$T" "$T" > "$T/try.conf"
check "ksbctl policy check accepts the draft" \
	'"$B/ksbctl/ksbctl" -f "$T/try.conf" policy check "$T/try/dev.policy" > "$T/check" 2>&1'
KT() { "$B/ksbctl/ksbctl" -f "$T/try.conf" policy test dev "$1" >/dev/null 2>&1; }
for h in used.test new.test new.test:8443 a.cdn.example.org b.cdn.example.org \
	x.two.example 198.51.100.7; do
	check "applied: $h allowed" "KT $h"
done
for h in other.test z.two.example used.test:8443 cdn.example.org 198.51.100.8 \
	evil.test; do
	check "applied: $h still refused" "! KT $h"
done
check "--instance and --profile together are refused" \
	'! K policy suggest --instance ag1 --profile dev >/dev/null 2>&1'
K policy suggest --profile dev > "$T/byprof" 2>&1 || true
check "--profile: that profile's rows (the other instance's too)" \
	'grep -q "allow other\.test:443" "$T/byprof" && grep -q "^profile dev-suggested {" "$T/byprof"'
echo "# $pass passed, $fails failed"
[ "$fails" = 0 ]
