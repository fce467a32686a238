#!/bin/bash
# login.sh: subscription logins owned by the gateway (issue 31).  A real
# ksb-gatewayd in its own namespace, the fake model API (tests/e2e/
# fakeapi.py) as the providers' TLS origin with their token endpoints'
# semantics (access tokens that expire after LIFE s, single-use rotating
# refresh tokens, 401 for an expired access token), fake guests
# (ctlhold leases in namespaces) using curl.  Checks: ksbctl credential
# import (errors, the store's modes), the swap of a guest's placeholder for
# the current access token, three guests over several lifetimes with no
# 401 and one refresh per lifetime (never a spent refresh token again),
# ksbctl credential list (state, no value), a gateway killed between the
# provider's answer and the store (the refresher finishes the store: the
# login lives on), a 401 refreshing at once, the agents' own refreshes answered by the gateway with
# placeholders (never upstream), and ksbctl credential revoke.
set -eu
. "$(dirname "$0")/../lib.sh"

ksb_need_root
ksb_need python3
ksb_need curl
HOLD=$KSB_BUILDDIR/tests/integration/ctlhold
KSBCTL=$KSB_BUILDDIR/ksbctl/ksbctl
[ -x "$HOLD" ] || ksb_fail "$HOLD not built (make check builds it)"
pass=0 fails=0
LIFE=10	# seconds an access token lives at the fake provider
ksb_env
ksb_fakeapi --oauth-lifetime "$LIFE" --oauth-login "$T/agent"
echo "$ORIGIN_IP auth.openai.com" >> "$T/hosts"
cat > "$T/policy.d/test.policy" <<POL
credential claude {
    host api.anthropic.com
    host platform.claude.com
    header authorization bearer
    source login claude
    secret CLAUDE_CODE_OAUTH_TOKEN
}
credential codex {
    host api.openai.com
    host auth.openai.com
    header authorization bearer
    source login work-codex
    secret CODEX_TOKEN
}
profile default {
    allow api.anthropic.com
    allow platform.claude.com
    allow api.openai.com
    allow auth.openai.com
    allow-address 10.78.0.0/24
    credential claude
    credential codex
}
POL
echo "upstream-ca-file = $T/api/ca.pem" >> "$T/ksb.conf"
ctl() { "$KSBCTL" -f "$T/ksb.conf" "$@"; }
STORE=$T/state/logins

ksb_say "import"
ksb_check "an unknown agent is refused, naming it" \
	'! ctl credential import gemini 2> "$T/e" && grep -q "unknown agent .gemini." "$T/e"'
echo '{"claudeAiOauth": {"accessToken": "x"}}' > "$T/bad.json"
ksb_check "a file without a refresh token is refused, naming the field" \
	'! ctl credential import claude --from "$T/bad.json" 2> "$T/e" && grep -q "refreshToken" "$T/e" && [ ! -e "$STORE/claude.json" ]'
ksb_check "a bad name is refused" \
	'! ctl credential import claude --name "A/b" --from "$T/agent/claude.json" 2>/dev/null'
ctl credential import claude --from "$T/agent/claude.json" > "$T/imp.out" 2>&1 || true
cat "$T/imp.out"
ksb_check "claude imported, with the warning not to use the host copy" \
	'grep -q "do not use" "$T/imp.out" && grep -q "setup-token" "$T/imp.out"'
ctl credential import codex --name work-codex --from "$T/agent/codex.json" > /dev/null 2>&1 || true
# Audit F4: one agent login under two names: two refreshers would spend
# its one refresh token against each other.
ksb_check "the same login under a second name is refused, naming the first" \
	'! ctl credential import claude --name claude2 --from "$T/agent/claude.json" 2> "$T/e" &&
	 grep -q "already imported as .claude." "$T/e" && [ ! -e "$STORE/claude2.json" ]'
# Audit F5: a FIFO as the file hung root's ksbctl (util_read_file).
mkfifo "$T/fifo"
ksb_check "a FIFO is refused at once, not waited on" \
	'! timeout 10 "$KSBCTL" -f "$T/ksb.conf" credential import claude --name fifo --from "$T/fifo" 2> "$T/e" &&
	 grep -q "not a regular file" "$T/e"'
ksb_check "the store is root-only: directory 0700, files 0600" \
	'[ "$(stat -c %a "$STORE")" = 700 ] && [ "$(stat -c %a "$STORE/claude.json")" = 600 ] && [ "$(stat -c %a "$STORE/work-codex.json")" = 600 ]'
CLAUDE_REAL=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["claudeAiOauth"]["accessToken"])' "$T/agent/claude.json")

ksb_gateway
CA=$T/state/ca/ca.crt
# The guests trust the gateway's CA and the provider's (as a real guest
# trusts the real one's): a host no longer terminated is reached end to end.
CAS=$T/cas.pem
cat "$CA" "$T/api/ca.pem" > "$CAS"
for n in 1 2 3; do ksb_fake_guest "$n" "g$n"; done
ph() { sed -n "s|^cred=$2/[^/]*/||p" "$T/lease$1"; }
turn() { # N API: one request of guest N, prints the HTTP status
	local host=api.anthropic.com path=/v1/messages cred=claude
	[ "$2" = codex ] && host=api.openai.com path=/v1/responses cred=codex
	ip netns exec "ksbt-$$-g$1" curl -sS --max-time 20 -o "$T/body$1" \
		-w '%{http_code}' --proxy http://10.77.0.1:3128 --cacert "$CAS" \
		-H "authorization: Bearer $(ph "$1" "$cred")" \
		-H 'content-type: application/json' \
		-d '{"model": "m", "messages": [{"role": "user", "content": "hi"}], "input": "hi"}' \
		"https://$host$path" 2>/dev/null || true
}
ksb_check "each guest holds its own placeholder, never the token" \
	'[ "$(ph 1 claude)" != "$(ph 2 claude)" ] && ! grep -q "$CLAUDE_REAL" "$T/lease1"'

ksb_say "three guests over three lifetimes"
oauth_ok() { # PROVIDER: refreshes the fake provider answered 200
	python3 - "$T/api.log" "$1" <<'PY'
import json, sys
n = 0
for l in open(sys.argv[1]):
    r = json.loads(l)
    n += r.get("api") == "oauth" and r.get("provider") == sys.argv[2] and r.get("reply") == 200
print(n)
PY
}
t0=$SECONDS
: > "$T/statuses"
for n in 1 2 3; do
	( end=$((SECONDS + 3 * LIFE))
	  i=0
	  while [ "$SECONDS" -lt "$end" ] && [ "$i" -lt 200 ]; do
		echo "$(turn "$n" claude) $(turn "$n" codex)" >> "$T/statuses"
		i=$((i + 1))
		sleep 0.5	# pacing between turns, not a synchronisation
	  done ) &
	eval "L$n=$!"
done
wait "$L1" "$L2" "$L3"
el=$((SECONDS - t0))
sort "$T/statuses" | uniq -c
total=$(wc -l < "$T/statuses")
ksb_check "every turn of each guest was answered 200 (claude and codex): $total pairs" \
	'[ "$total" -ge 12 ] && ! grep -qv "^200 200$" "$T/statuses"'
nc=$(oauth_ok claude) nx=$(oauth_ok codex)
echo "refreshes in ${el}s with ${LIFE}s tokens: claude $nc, codex $nx"
# A refresh at 4/5 of each lifetime: el / (0.8 LIFE), give or take one.
want=$((el * 10 / (8 * LIFE)))
ksb_check "one refresh per lifetime, not one per guest (about $want)" \
	'[ "$nc" -ge $((want - 1)) ] && [ "$nc" -le $((want + 1)) ] && [ "$nx" -ge $((want - 1)) ] && [ "$nx" -le $((want + 1)) ]'
ksb_check "no refresh token was presented twice; no refresh was refused" \
	'python3 - "$T/api.log" <<'"'"'PY'"'"'
import json, sys
seen = set()
for l in open(sys.argv[1]):
    r = json.loads(l)
    if r.get("api") != "oauth":
        continue
    assert r["reply"] == 200 and not r.get("reuse"), r
    assert r["refresh"] not in seen, r
    seen.add(r["refresh"])
PY'
ksb_check "the store holds the new pair, the first access token is gone" \
	'! grep -q "$CLAUDE_REAL" "$STORE/claude.json"'
ctl credential list > "$T/list.out" 2>&1 || true
cat "$T/list.out"
ksb_check "credential list: state ok, refreshes counted, no failure, no value" \
	'grep -Eq "^claude +claude +ok .* [1-9][0-9]* +0$" "$T/list.out" && ! grep -q "sk-ant-" "$T/list.out"'
ksb_check "each refresh is in the gateway's log, no value" \
	'[ "$(grep -c "login claude: refreshed" "$T/gatewayd.log")" = "$nc" ] && ! grep -q "sk-ant-o" "$T/gatewayd.log"'

ksb_say "the agents' own refreshes are answered by the gateway"
agent_refresh() { # N HOST PATH CRED: the guest's POST to the token endpoint
	ip netns exec "ksbt-$$-g$1" curl -sS --max-time 20 \
		--proxy http://10.77.0.1:3128 --cacert "$CA" \
		-H 'content-type: application/json' \
		-d "{\"grant_type\": \"refresh_token\", \"refresh_token\": \"$(ph "$1" "$4")\", \"client_id\": \"x\"}" \
		"https://$2$3" 2>&1 || true
}
oauth_all() { grep -c '"api": "oauth"' "$T/api.log" || true; }
n0=$(oauth_all)
out=$(agent_refresh 1 platform.claude.com /v1/oauth/token claude)
echo "$out"
ksb_check "claude: 200 with the guest's own placeholder as both tokens, an expiry" \
	'echo "$out" | python3 -c "import json,sys; a=json.load(sys.stdin); p=sys.argv[1]; assert a[\"access_token\"]==p==a[\"refresh_token\"] and a[\"expires_in\"]>0" "$(ph 1 claude)"'
out2=$(agent_refresh 2 auth.openai.com /oauth/token codex)
ksb_check "codex: the same, with guest 2's placeholder" \
	'echo "$out2" | grep -q "\"access_token\":\"$(ph 2 codex)\""'
ksb_check "no real token in either answer" \
	'! echo "$out$out2" | grep -q -e "sk-ant-oat" -e "sk-ant-ort" -e "rt_"'
ksb_check "nothing reached the provider's token endpoint from a guest" \
	'[ "$(oauth_all)" -le "$((n0 + 2))" ] && ! grep "\"api\": \"oauth\"" "$T/api.log" | grep -q -e "$(printf %s "$(ph 1 claude)" | sha256sum | cut -c1-12)"'
ksb_check "audit rows: login_answered, the credential, per instance" \
	'ksb_sql_is "g1|/v1/oauth/token|200|claude|login_answered" "SELECT c.instance, r.path, r.status, r.credential, r.reason FROM requests r JOIN connections c ON c.id = r.conn_id WHERE r.reason = \"login_answered\" AND c.instance = \"g1\""'
ksb_check "and the API still works for that guest after it" '[ "$(turn 1 claude)" = 200 ]'

ksb_say "an open tunnel masks the refreshed token too"
out=$(ip netns exec "ksbt-$$-g1" python3 "$KSB_SRCDIR/tests/integration/login_reflect.py" \
	10.77.0.1:3128 "$CA" "$(ph 1 claude)" "$STORE/claude.json" 2>&1) || true
echo "$out"
ksb_check "both answers on one tunnel, before and after a refresh, masked" \
	'[ "$(echo "$out" | grep -c "Bearer \*\*\*\*")" = 2 ] && ! echo "$out" | grep -q "sk-ant-o"'
echo_auths() { # the credential hashes the fake API's echo-auth saw
	python3 - "$T/api.log" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    if r.get("path") == "/fakeapi/echo-auth":
        print(r["auth"]["sha256"])
PY
}
ksb_check "the open tunnel got the refreshed token for its second request" \
	'[ "$(echo_auths | wc -l)" = 2 ] && [ "$(echo_auths | sort -u | wc -l)" = 2 ]'

ksb_say "a 401 from the API refreshes at once"
# A proactive refresh between the expiry and the turn would hide the 401:
# then again (at most 3 times).
for try in 1 2 3; do
	ip netns exec "$OR" curl -sS -k --max-time 10 -X POST -o /dev/null \
		--resolve "api.anthropic.com:443:$ORIGIN_IP" \
		https://api.anthropic.com/fakeapi/expire || true
	n0=$(oauth_ok claude)
	s1=$(turn 1 claude)
	[ "$s1" = 200 ] || break
	echo "# try $try: a proactive refresh came first"
done
ksb_until 10 test "$(oauth_ok claude)" -gt "$n0" || true
s2=$(turn 1 claude)
ksb_check "tokens revoked early: the turn gets 401 ($s1), the gateway refreshes, the next gets 200 ($s2)" \
	'[ "$s1" = 401 ] && [ "$s2" = 200 ] && [ "$(oauth_ok claude)" -gt "$n0" ] && [ "$(oauth_ok claude)" -le $((n0 + 2)) ]'
ksb_check "the refresh says why in the log" \
	'grep -q "login claude: the upstream refused its access token (401)" "$T/gatewayd.log"'

ksb_say "a gateway killed between the provider's answer and the store"
for n in 1 2 3; do ksb_unguest "$n"; done
kill "$KSB_GATEWAY_PID"
ksb_wait_dead "$KSB_GATEWAY_PID" || ksb_fail "the gateway did not stop"
export KSB_TEST_LOGIN_PAUSE=$T/pause
before=$(oauth_ok claude)
ksb_gateway
unset KSB_TEST_LOGIN_PAUSE
ksb_until $((2 * LIFE + 10)) test -e "$T/pause" || ksb_fail "no refresher reached the pause"
ksb_check "the provider answered (and rotated) before the kill" \
	'[ "$(oauth_ok claude)" -gt "$before" ] || [ "$(oauth_ok codex)" -gt 0 ]'
kill -9 "$KSB_GATEWAY_PID"
ksb_wait_dead "$KSB_GATEWAY_PID" || ksb_fail "the gateway did not die"
stored=$(sha256sum < "$STORE/claude.json")
stored_x=$(sha256sum < "$STORE/work-codex.json")
rm -f "$T/pause"
lock_free() { flock -n "$STORE/claude.lock" true && flock -n "$STORE/work-codex.lock" true; }
ksb_until 30 lock_free || ksb_fail "the refresher did not finish"
ksb_check "the orphaned refresher stored the answer it held" \
	'[ "$(sha256sum < "$STORE/claude.json")" != "$stored" ] || [ "$(sha256sum < "$STORE/work-codex.json")" != "$stored_x" ]'
ksb_gateway
ksb_fake_guest 4 g4
n0=$(oauth_ok claude)
ksb_until $((3 * LIFE)) test "$(oauth_ok claude)" -gt "$n0" || true
s=$(turn 4 claude)
ksb_check "after the restart the login refreshes again and works ($s)" \
	'[ "$(oauth_ok claude)" -gt "$n0" ] && [ "$s" = 200 ]'
ksb_check "still no spent refresh token presented, no refusal" \
	'! grep "\"api\": \"oauth\"" "$T/api.log" | grep -q "\"reply\": 400"'

ksb_say "revoke"
# Audit F2: a revoke written while a refresher held the store was undone
# by the refresher's write.  Every writer takes NAME.lock: with it held
# (as a refresher holds it from its read to its write), revoke waits, and
# writes after the holder is done.
flock "$STORE/claude.lock" sh -c 'touch "$1"; sleep 2' _ "$T/held" &
holder=$!
ksb_until 10 test -e "$T/held" || ksb_fail "the lock holder did not start"
ctl credential revoke claude > "$T/rev.out" 2>&1 || true
cat "$T/rev.out"
wait "$holder" || true
ksb_check "revoke waits for a holder of the login's store (a refresh)" \
	'grep -q "the gateway is refreshing login .claude.: waiting for it" "$T/rev.out" &&
	 grep -q "revoked" "$T/rev.out"'
ksb_check "the store says revoked" \
	'python3 -c "import json,sys; assert json.load(open(sys.argv[1]))[\"revoked\"]" "$STORE/claude.json"'
s=$(turn 4 claude)
ksb_check "after revoke the guest's placeholder reaches the provider as it is: 401 ($s)" '[ "$s" = 401 ]'
n0=$(oauth_ok claude)
ksb_until $((2 * LIFE)) test "$(oauth_ok claude)" -gt "$n0" || true
ksb_check "a revoked login is not refreshed any more" '[ "$(oauth_ok claude)" = "$n0" ]'
ksb_check "the other login still works" '[ "$(turn 4 codex)" = 200 ]'
ctl credential list > "$T/list.out" 2>&1 || true
ksb_check "credential list says revoked" 'grep -Eq "^claude +claude +revoked" "$T/list.out"'

echo "# pass $pass, fail $fails"
[ "$fails" = 0 ]
