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
#  - a tunnel an operator's grant let through outlives a reload;
#  - --permanent: a drop-in file in grants-dir (0640, root's, accepted by
#    `ksbctl policy check'), reloaded in; the held CONNECT goes on, the
#    next is not held, and after a gateway restart neither; a malformed
#    drop-in fails a reload (the old policy stays, the error names it)
#    and a permanent grant made meanwhile leaves the file as it was;
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
printf '%s held.test\n%s other.test\n%s perm.test\n%s perm2.test\n' \
	"$ORIGIN_IP" "$ORIGIN_IP" "$ORIGIN_IP" "$ORIGIN_IP" >> "$T/hosts"
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
# A tunnel the grant let through is not the policy's to revoke.
ip netns exec "ksbt-$$-g1" timeout 60 python3 -c '
import socket, sys
s = socket.create_connection(("10.77.0.1", 3128), timeout=30)
s.sendall(b"CONNECT held.test:443 HTTP/1.1\r\nHost: held.test:443\r\n\r\n")
b = b""
while b"\r\n\r\n" not in b:
    d = s.recv(4096)
    if not d:
        break
    b += d
print(b.split(b"\r\n")[0].decode(), flush=True)
s.settimeout(50)
try:
    print("eof" if s.recv(1) == b"" else "data", flush=True)
except OSError:
    print("timeout", flush=True)
' > "$T/tunnel" 2>&1 &
P=$!
ksb_until 10 grep -q " 200 " "$T/tunnel" || true
ctl reload > "$T/reload0" 2>&1 || true
ksb_check "a granted tunnel outlives a reload: $(head -n 1 "$T/reload0")" \
	'grep -q "revoked=0" "$T/reload0" && [ "$(wc -l < "$T/tunnel")" = 1 ]'
kill "$P" 2>/dev/null || true
wait "$P" 2>/dev/null || true
ksb_unguest 1
ksb_fake_guest 1 ap1
( ksb_until 5 listed ap1 held.test && ctl deny ap1 held.test ) > /dev/null 2>&1 &
D=$!
got=$(con 1 held.test) || true
wait "$D" || true
ksb_check "after a new lease: held, not granted: '$got'" '[ "$got" = "status 403 deny operator_denied" ]'

ksb_say "--permanent: a drop-in, reloaded in, through a restart"
G=$T/state/grants.d/default.policy
tls 1 perm.test > "$T/g3" 2>&1 &
P=$!
ksb_check "held" 'ksb_until 5 listed ap1 perm.test'
ctl allow ap1 perm.test --permanent > "$T/perm" 2>&1 || true
cat "$T/perm"
wait "$P" || true
ksb_check "ksbctl allow --permanent names the file" \
	'grep -qx "operator uid 0: allow ap1 perm.test:443 permanent $G" "$T/perm"'
ksb_check "the held CONNECT gets through: '$(cat "$T/g3")'" \
	'[ "$(cat "$T/g3")" = "tls $ORIGIN_BODY" ]'
ksb_check "the drop-in: root's, 0640, an extend block" \
	'[ "$(stat -c "%u %a" "$G")" = "0 640" ] && grep -qx "extend profile default {" "$G" && grep -qx "    allow perm.test:443" "$G" && grep -q "uid 0: ksbctl allow --permanent ap1 perm.test:443" "$G"'
ksb_check "no temporary file left" '[ "$(ls -A "$T/state/grants.d")" = default.policy ]'
ksb_check "ksbctl policy check accepts it" \
	'ctl policy check > "$T/pc" 2>&1 && grep -q "configuration OK" "$T/pc"'
ksb_check "policy show names it" \
	'ctl policy show default | grep -q "allow perm.test:443 .*grants.d/default.policy:"'
ksb_check "policy test: allowed by it" \
	'ctl policy test default perm.test | grep -q "grants.d/default.policy"'
t0=$(ms)
got=$(con 1 perm.test) || true
ksb_check "the next CONNECT is not held ($(( $(ms) - t0 )) ms): '$got'" \
	'[ "$got" = "$OK200" ] && [ $(( $(ms) - t0 )) -lt 2500 ]'
ksb_check "again: refused, nothing to write" \
	'! ctl allow ap1 perm.test --permanent > "$T/perm2" 2>&1 && grep -q "nothing written: default already allows perm.test:443" "$T/perm2"'
sum=$(cksum < "$G")
nobp() { setpriv --reuid=65534 --regid=65534 --clear-groups "$KSBCTL" -f "$T/ksb.conf" "$@"; }
ksb_check "nobody cannot make one" \
	'! nobp allow ap1 perm2.test --permanent > "$T/nob" 2>&1 && grep -q "permission denied" "$T/nob" && [ "$(cksum < "$G")" = "$sum" ]'

printf 'extend profile default {\n    limit rate 5\n}\n' > "$T/state/grants.d/bad.policy"
d0=$(ksb_sql "SELECT digest FROM policy_versions WHERE ok = 1 AND digest IS NOT NULL ORDER BY id DESC LIMIT 1")
ksb_check "a malformed drop-in fails the reload, naming it" \
	'! ctl reload > "$T/rl" 2>&1 && grep -q "grants.d/bad.policy:2:5: .limit. in an extend block" "$T/rl"'
ksb_check "... and a permanent grant then puts the file back" \
	'! ctl allow ap1 perm2.test --permanent > "$T/perm3" 2>&1 && grep -q "not granted: the reload failed" "$T/perm3" && [ "$(cksum < "$G")" = "$sum" ]'
ksb_check "the old policy still runs: perm.test through, perm2.test not" \
	'[ "$(con 1 perm.test)" = "$OK200" ] && [ "$(con 1 perm2.test)" = "status 403 deny not_in_allowlist" ]'
rm -f "$T/state/grants.d/bad.policy"
ksb_check "the digest did not change" \
	'[ "$(ksb_sql "SELECT digest FROM policy_versions WHERE ok = 1 AND digest IS NOT NULL ORDER BY id DESC LIMIT 1")" = "$d0" ]'

ksb_unguest 1
ksb_unguest 2
kill -TERM "$KSB_GATEWAY_PID"
ksb_wait_dead "$KSB_GATEWAY_PID" || true
rm -f "$T/gateway.sock"
ksb_gateway
ksb_fake_guest 1 ap1
ksb_fake_guest 2 st1 strict
t0=$(ms)
got=$(con 1 perm.test) || true
el=$(( $(ms) - t0 ))
ksb_check "after a restart: through without a hold ($el ms): '$got'" \
	'[ "$got" = "$OK200" ] && [ "$el" -lt 2500 ] && ! listed ap1 perm.test'
ksb_check "the other profile did not get it" '[ "$(con 2 perm.test)" != "$OK200" ]'

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
ksb_check "the permanent grant's record names the file" \
	'ksb_sql_is 1 "SELECT count(*) FROM policy_versions WHERE files = '"'operator uid 0: allow ap1 perm.test:443 permanent $G'"' AND seq IS NOT NULL"'
ksb_check "who, what, scope" \
	'ksb_sql_is 1 "SELECT count(*) FROM policy_versions WHERE files = '"'operator uid 0: allow ap1 other.test:443 6s'"'"'
ksb_check "ksbctl audit verify" 'ctl audit verify > "$T/verify" 2>&1'
cat "$T/verify"
echo "# $pass passed, $fails failed"
[ "$fails" = 0 ]
