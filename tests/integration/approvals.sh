#!/bin/bash
# approvals.sh: CONNECTs held for an operator's decision (issue 15).  A
# profile with `limit hold 3': a name it does not allow waits up to 3 s.
# A real ksb-gatewayd, fake guests on the bridge (ctlhold), a TLS origin,
# tests/integration/proxy_raw.py as the guest:
#  - a held CONNECT granted within its time gets through; `ksbctl
#    requests' listed it meanwhile;
#  - one not decided is refused when its time is up (403, the body says
#    what to ask for); one denied is refused at once (operator_denied);
#  - scopes: --once lets the next connection only, --for D until D has
#    passed, --until-stopped until the instance's lease ends;
#  - an unprivileged user can neither list nor decide;
#  - every decision is a chained audit record; `ksbctl audit verify'.
set -eu
. "$(dirname "$0")/../lib.sh"

ksb_need_root
ksb_need python3
ksb_need setpriv
HOLD=$KSB_BUILDDIR/tests/integration/ctlhold
RAW=$KSB_SRCDIR/tests/integration/proxy_raw.py
KSBCTL=$KSB_BUILDDIR/ksbctl/ksbctl
[ -x "$HOLD" ] || ksb_fail "$HOLD not built (make check builds it)"
ksb_env
ksb_origin
printf '%s held.test\n%s other.test\n' "$ORIGIN_IP" "$ORIGIN_IP" >> "$T/hosts"
cat > "$T/policy.d/test.policy" <<'POL'
profile default {
    allow allowed.test
    allow-address 10.78.0.0/24
    limit hold 3
}
profile strict {
    allow allowed.test
    allow-address 10.78.0.0/24
}
POL
ksb_gateway
ksb_fake_guest 1 ap1
ksb_fake_guest 2 st1 strict

fails=0
pass=0
ctl() { timeout 20 "$KSBCTL" -f "$T/ksb.conf" "$@"; }
tls() { ip netns exec "ksbt-$$-g$1" timeout 30 python3 "$RAW" 10.77.0.1 3128 tls "$2" "$2" -; }
# The CONNECT's answer only: 200 once the gateway let it through.
con() { ip netns exec "ksbt-$$-g$1" timeout 30 python3 "$RAW" 10.77.0.1 3128 connect "$2"; }
OK200="status 200 deny -"
body() { ip netns exec "ksbt-$$-g$1" timeout 30 python3 "$RAW" 10.77.0.1 3128 body "$2" 443; }
listed() { ctl requests 2>/dev/null | grep -q "^$1 *$2 *443 "; }
ms() { date +%s%3N; }

ksb_say "a held CONNECT granted within its time"
"$KSBCTL" -f "$T/ksb.conf" requests --follow > "$T/follow" 2>&1 &
F=$!
KSB_PIDS="$KSB_PIDS $F"
tls 1 held.test > "$T/g1" 2>&1 &
P=$!
ksb_check "ksbctl requests lists it while it waits" 'ksb_until 5 listed ap1 held.test'
ctl requests > "$T/req" 2>&1 || true
cat "$T/req"
ksb_check "ksbctl requests --follow printed it as it came" \
	'ksb_until 5 grep -q "^ap1 *held\.test *443 " "$T/follow"'
kill "$F" 2>/dev/null || true
t0=$(ms)
ctl allow ap1 held.test > "$T/allow" 2>&1 || true
echo "# ksbctl allow took $(( $(ms) - t0 )) ms"
ksb_check "ksbctl allow (once by default)" \
	'grep -q "^operator uid 0: allow ap1 held.test:443 once$" "$T/allow"'
wait "$P" || true
ksb_check "... and it gets through: '$(cat "$T/g1")' ($(( $(ms) - t0 )) ms after)" \
	'[ "$(cat "$T/g1")" = "tls $ORIGIN_BODY" ]'
ksb_check "its row is an allow" \
	'ksb_row_is 1 "instance = '"'ap1'"' AND host = '"'held.test'"' AND decision = '"'allow'"'"'
ksb_check "no longer listed" '! listed ap1 held.test'

ksb_say "once means once: the next one is held again; deny refuses it now"
con 1 held.test > "$T/g2" 2>&1 &
P=$!
ksb_check "held again" 'ksb_until 5 listed ap1 held.test'
ksb_check "ksbctl deny" 'ctl deny ap1 held.test > "$T/deny" 2>&1'
wait "$P" || true
ksb_check "denied at once: '$(cat "$T/g2")'" '[ "$(cat "$T/g2")" = "status 403 deny operator_denied" ]'

ksb_say "not decided: refused when its time is up"
t0=$(ms)
got=$(body 1 other.test) || true
el=$(( $(ms) - t0 ))
ksb_check "403 after the 3 s hold ($el ms): '$got'" \
	'[ "$el" -ge 2900 ] && case "$got" in "status 403 deny not_in_allowlist body ksb: refused CONNECT other.test:443 (not_in_allowlist): held for an operator'"'"'s decision and none came; ask the operator to run: ksbctl allow ap1 other.test:443, or to add "*) true ;; *) false ;; esac'
got=$(body 2 other.test) || true
ksb_check "a profile without limit hold refuses at once: '$got'" \
	'case "$got" in "status 403 deny not_in_allowlist body "*"is not in the allowlist of profile strict"*) true ;; *) false ;; esac'

ksb_say "the guest's self-test name is never held"
t0=$(ms)
got=$(con 1 ksb-selftest.invalid) || true
el=$(( $(ms) - t0 ))
ksb_check "refused at once under limit hold ($el ms): '$got'" \
	'[ "$el" -lt 2500 ] && [ "$got" = "status 403 deny not_in_allowlist" ] && ! listed ap1 ksb-selftest.invalid'
ksb_check "policy suggest does not propose it" \
	'ctl policy suggest --instance ap1 > "$T/sugg" 2>&1 && ! grep -q ksb-selftest "$T/sugg"'

ksb_say "--for 6s: allowed until it has passed"
ctl allow ap1 other.test --for 6s > /dev/null
t0=$(ms)
ksb_check "within 6 s: through" '[ "$(con 1 other.test)" = "$OK200" ]'
ksb_check "and again (not once)" '[ "$(con 1 other.test)" = "$OK200" ]'
left=$(( 6100 - ($(ms) - t0) ))
[ "$left" -le 0 ] || sleep "$(awk "BEGIN { print $left / 1000 }")"	# the scope is time itself
( ksb_until 5 listed ap1 other.test && ctl deny ap1 other.test ) > /dev/null 2>&1 &
D=$!
got=$(body 1 other.test) || true
wait "$D" || true
ksb_check "after 6 s: held, then refused: '${got%% body*}'" \
	'case "$got" in "status 403 deny "*) true ;; *) false ;; esac'

ksb_say "--until-stopped: until the lease ends"
ctl allow ap1 held.test --until-stopped > /dev/null
ksb_check "through" '[ "$(con 1 held.test)" = "$OK200" ]'
ksb_check "through again" '[ "$(con 1 held.test)" = "$OK200" ]'
ksb_unguest 1
ksb_fake_guest 1 ap1
( ksb_until 5 listed ap1 held.test && ctl deny ap1 held.test ) > /dev/null 2>&1 &
D=$!
got=$(con 1 held.test) || true
wait "$D" || true
ksb_check "after a new lease: held, not granted: '$got'" '[ "$got" = "status 403 deny operator_denied" ]'

ksb_say "only root or the control group decides"
nob() { setpriv --reuid=65534 --regid=65534 --clear-groups "$KSBCTL" -f "$T/ksb.conf" "$@"; }
ksb_check "nobody cannot allow" \
	'! nob allow ap1 held.test > "$T/nob" 2>&1 && grep -q "permission denied" "$T/nob"'
ksb_check "nobody cannot deny" '! nob deny ap1 held.test > "$T/nob" 2>&1 && grep -q "permission denied" "$T/nob"'
ksb_check "nobody cannot list requests" '! nob requests > "$T/nob" 2>&1 && grep -q "permission denied" "$T/nob"'
ksb_check "a bad scope and a bad target are refused" \
	'! ctl allow ap1 "held.test:99999" >/dev/null 2>&1 && ! ctl allow ap1 "a%2eb" >/dev/null 2>&1 && ! ctl allow nosuch held.test >/dev/null 2>&1'

ksb_say "the decisions are in the audit chain"
ksb_check "one chained record per decision" \
	'[ "$(ksb_sql "SELECT count(*) FROM policy_versions WHERE files LIKE '"'operator uid 0: %'"' AND seq IS NOT NULL")" -ge 6 ]'
ksb_check "who, what, scope" \
	'ksb_sql_is 1 "SELECT count(*) FROM policy_versions WHERE files = '"'operator uid 0: allow ap1 other.test:443 6s'"'"'
ksb_check "ksbctl audit verify" 'ctl audit verify > "$T/verify" 2>&1'
cat "$T/verify"
echo "# $pass passed, $fails failed"
[ "$fails" = 0 ]
