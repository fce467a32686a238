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
# placeholders (never upstream), and ksbctl credential revoke.  Every
# refresh is a login_refreshes row (schema 11): refreshed, failed (the
# provider's 503), refused (after a 401), orphan (the killed gateway's,
# recorded by the next); ksbctl audit logins, audit verify.
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
turn() { # N API [TOKEN]: one request of guest N (with its placeholder,
	 # or TOKEN), prints the HTTP status
	local host=api.anthropic.com path=/v1/messages cred=claude
	[ "$2" = codex ] && host=api.openai.com path=/v1/responses cred=codex
	ip netns exec "ksbt-$$-g$1" curl -sS --max-time 20 -o "$T/body$1" \
		-w '%{http_code}' --proxy http://10.77.0.1:3128 --cacert "$CAS" \
		-H "authorization: Bearer ${3:-$(ph "$1" "$cred")}" \
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
# oauth_more PROVIDER N: more than N refreshes answered 200 (ksb_until
# runs it again each time, unlike a $(...) in its arguments).
oauth_more() { [ "$(oauth_ok "$1")" -gt "$2" ]; }
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
ctl status > "$T/status.out" 2>&1 || true
grep login "$T/status.out" || true
ksb_check "ksbctl status: each login's state, expiry, last refresh, failures; no value" \
	'grep -Eq "^OK +login claude +claude, ok: expires [0-9T:Z-]+, last refresh [0-9T:Z-]+ \([1-9][0-9]* so far\), 0 failures$" "$T/status.out" &&
	 grep -Eq "^OK +login work-codex +codex, ok: " "$T/status.out" && ! grep -q -e "sk-ant-o" -e "rt_" "$T/status.out"'
ksb_check "ksbctl status --json: the login's fields" \
	'ctl status --json 2>/dev/null | python3 -c "import json,sys; r=[x for x in json.load(sys.stdin) if x.get(\"login\")==\"claude\"][0]; assert r[\"state\"]==\"ok\" and r[\"failures\"]==0 and r[\"expires_ms\"]>0 and r[\"refreshes\"]>0, r"'
# The gateway goes on refreshing: equal at a moment when none is in flight.
log_match() { [ "$(grep -c "login claude: refreshed" "$T/gatewayd.log")" = "$(oauth_ok claude)" ]; }
ksb_check "each refresh is in the gateway's log, no value" \
	'ksb_until 20 log_match && ! grep -q "sk-ant-o" "$T/gatewayd.log"'

ksb_say "refreshes in the audit (login_refreshes, schema 11)"
rows() { # LOGIN OUTCOME [TRIGGER]: its rows in the audit
	ksb_sql "SELECT count(*) FROM login_refreshes WHERE login = '$1' AND outcome = '$2'${3:+ AND trigger = '$3'}"
}
# The gateway goes on refreshing: equal at a moment when none is in flight.
rows_match() {
	[ "$(rows claude refreshed expiry)" = "$(oauth_ok claude)" ] &&
	[ "$(rows work-codex refreshed expiry)" = "$(oauth_ok codex)" ]
}
ksb_check "one row per refresh the provider answered, trigger expiry (claude $(oauth_ok claude), codex $(oauth_ok codex))" \
	'ksb_until 20 rows_match'
ksb_check "a row: provider, no error, the new expiry, a duration" \
	'ksb_sql_is "0" "SELECT count(*) FROM login_refreshes WHERE outcome = '\''refreshed'\'' AND (error IS NOT NULL OR expires_ms <= ts_ms OR duration_ms < 0 OR provider <> CASE login WHEN '\''claude'\'' THEN '\''claude'\'' ELSE '\''codex'\'' END)"'
ksb_check "no token in the audit database" \
	'! sqlite3 "$T/state/audit.db" .dump | grep -Eq "sk-ant-o|rt_[0-9a-f]{32}|fakesig"'
ctl audit logins --limit 3 > "$T/al" 2>&1 || true
cat "$T/al"
ksb_check "ksbctl audit logins shows them" \
	'[ "$(grep -Ec " (claude +claude|work-codex +codex) +expiry +refreshed " "$T/al")" = 3 ]'
ksb_check "ksbctl audit export --jsonl carries them (kind login_refresh), no token" \
	'ctl audit export --jsonl > "$T/export" 2>&1 && grep -q "\"kind\": *\"login_refresh\".*\"outcome\": *\"refreshed\"" "$T/export" &&
	 ! grep -Eq "sk-ant-o|rt_[0-9a-f]{32}|fakesig" "$T/export"'

ksb_say "a failed refresh: audited, the login kept"
fake_ctl() { # PATH: the fake API's control
	ip netns exec "$OR" curl -sS -k --max-time 10 -X POST -o /dev/null \
		--resolve "api.anthropic.com:443:$ORIGIN_IP" \
		"https://api.anthropic.com$1" || true
}
failed_rows() {
	ksb_sql "SELECT count(*) FROM login_refreshes WHERE outcome = 'failed' AND error = 'HTTP 503 temporarily_unavailable' AND expires_ms IS NULL"
}
f0=$(failed_rows)
more_failed() { [ "$(failed_rows)" -gt "$f0" ]; }
fake_ctl /fakeapi/fail-refresh
ksb_check "the provider's 503: a failed row saying so, no value" \
	'ksb_until $((2 * LIFE)) more_failed'
fl=$(ksb_sql "SELECT login || ' ' || seq FROM login_refreshes WHERE outcome = 'failed' ORDER BY seq DESC LIMIT 1")
after_ok() {
	test "$(ksb_sql "SELECT count(*) FROM login_refreshes WHERE login = '${fl% *}' AND outcome = 'refreshed' AND seq > ${fl#* }")" -gt 0
}
ksb_check "the next attempt of that login (${fl% *}) refreshes it" 'ksb_until $((2 * LIFE)) after_ok'
ksb_check "credential list: its failures back to 0 after it" \
	'ctl credential list | grep -Eq "^${fl% *} +[a-z]+ +ok .* 0$"'

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
field() { python3 -c "import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])" "$1" "$2" 2>/dev/null || true; }
acc1=$(field "$out" access_token) ref1=$(field "$out" refresh_token)
ksb_check "claude: 200, fresh placeholders (access, refresh: neither the guest's own), an expiry" \
	'echo "$acc1 $ref1" | grep -Eq "^ksbph_[0-9a-f]{40} ksbph_[0-9a-f]{40}$" && [ "$acc1" != "$ref1" ] &&
	 [ "$acc1" != "$(ph 1 claude)" ] && [ "$ref1" != "$(ph 1 claude)" ] && [ "$(field "$out" expires_in)" -gt 0 ]'
out2=$(agent_refresh 2 auth.openai.com /oauth/token codex)
acc2=$(field "$out2" access_token)
ksb_check "codex: the same for guest 2" \
	'echo "$acc2" | grep -Eq "^ksbph_[0-9a-f]{40}$" && [ "$acc2" != "$(ph 2 codex)" ] && [ "$acc2" != "$acc1" ]'
sleep 1	# a second answer in another second: another issue time
out3=$(agent_refresh 1 platform.claude.com /v1/oauth/token claude)
ksb_check "a second refresh of guest 1 gets other placeholders again" \
	'[ -n "$(field "$out3" access_token)" ] && [ "$(field "$out3" access_token)" != "$acc1" ] && [ "$(field "$out3" refresh_token)" != "$ref1" ]'
ksb_check "no real token in any answer" \
	'! echo "$out$out2$out3" | grep -q -e "sk-ant-oat" -e "sk-ant-ort" -e "rt_"'
ksb_check "nothing reached the provider's token endpoint from a guest" \
	'[ "$(oauth_all)" -le "$((n0 + 2))" ] && ! grep "\"api\": \"oauth\"" "$T/api.log" | grep -q -e "$(printf %s "$(ph 1 claude)" | sha256sum | cut -c1-12)"'
ksb_check "audit rows: login_answered, the credential, per instance" \
	'ksb_sql_is "g1|/v1/oauth/token|200|claude|login_answered|2" "SELECT c.instance, r.path, r.status, r.credential, r.reason, count(*) FROM requests r JOIN connections c ON c.id = r.conn_id WHERE r.reason = \"login_answered\" AND c.instance = \"g1\" GROUP BY 1, 2, 3, 4, 5"'
ksb_check "the answered access placeholder gets the real token swapped in" \
	'[ "$(turn 1 claude "$acc1")" = 200 ] && [ "$(turn 2 codex "$acc2")" = 200 ]'
ksb_check "the previous one stays valid until its expiry, the guest's own too (ksb-policy(5))" \
	'[ "$(turn 1 claude "$(field "$out3" access_token)")" = 200 ] && [ "$(turn 1 claude)" = 200 ]'
ksb_check "the refresh placeholder is no access token: 403" '[ "$(turn 1 claude "$ref1")" = 403 ]'
ksb_check "guest 1's answered placeholder from guest 2: 403 (per instance)" '[ "$(turn 2 claude "$acc1")" = 403 ]'
forged=ksbph_${acc1:6:8}$(printf %032d 0)
ksb_check "a forged one (a valid issue time, no MAC): 403" '[ "$(turn 1 claude "$forged")" = 403 ]'

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
# then again (at most 3 times).  The pair must be old enough for a 401 to
# refresh it (a quarter of LIFE) and not yet due (4/5 of it): between.
pair_age_ok() {
	python3 - "$STORE/claude.json" "$LIFE" <<'PY'
import json, sys, time
age = time.time() * 1000 - json.load(open(sys.argv[1]))["obtained_ms"]
life = float(sys.argv[2]) * 1000
sys.exit(0 if life * 0.3 <= age <= life * 0.6 else 1)
PY
}
for try in 1 2 3; do
	ksb_until $((2 * LIFE)) pair_age_ok || true
	ip netns exec "$OR" curl -sS -k --max-time 10 -X POST -o /dev/null \
		--resolve "api.anthropic.com:443:$ORIGIN_IP" \
		https://api.anthropic.com/fakeapi/expire || true
	n0=$(oauth_ok claude)
	s1=$(turn 1 claude)
	[ "$s1" = 200 ] || break
	echo "# try $try: a proactive refresh came first"
done
ksb_until 10 oauth_more claude "$n0" || true
s2=$(turn 1 claude)
ksb_check "tokens revoked early: the turn gets 401 ($s1), the gateway refreshes, the next gets 200 ($s2)" \
	'[ "$s1" = 401 ] && [ "$s2" = 200 ] && [ "$(oauth_ok claude)" -gt "$n0" ] && [ "$(oauth_ok claude)" -le $((n0 + 2)) ]'
ksb_check "the refresh says why in the log" \
	'grep -q "login claude: the upstream refused its access token (401)" "$T/gatewayd.log"'
refused_row() { [ "$(rows claude refreshed refused)" -ge 1 ]; }
ksb_check "and in the audit: trigger refused" 'ksb_until 10 refused_row'

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
ksb_until $((3 * LIFE)) oauth_more claude "$n0" || true
s=$(turn 4 claude)
ksb_check "after the restart the login refreshes again and works ($s)" \
	'[ "$(oauth_ok claude)" -gt "$n0" ] && [ "$s" = 200 ]'
ksb_check "still no spent refresh token presented, no refusal" \
	'! grep "\"api\": \"oauth\"" "$T/api.log" | grep -q "\"reply\": 400"'
orphans() { [ "$(ksb_sql "SELECT count(*) FROM login_refreshes WHERE trigger = 'orphan' AND outcome = 'refreshed'")" -ge 1 ]; }
ksb_check "the dead gateway's refresh audited by the next one (trigger orphan)" \
	'ksb_until 10 orphans'

ksb_say "revoke"
acc4=$(field "$(agent_refresh 4 platform.claude.com /v1/oauth/token claude)" access_token)
ksb_check "guest 4's answered placeholder works before the revoke" '[ "$(turn 4 claude "$acc4")" = 200 ]'
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
ksb_check "and so does its answered one: 401" '[ "$(turn 4 claude "$acc4")" = 401 ]'
n0=$(oauth_ok claude)
ksb_until $((2 * LIFE)) oauth_more claude "$n0" || true
ksb_check "a revoked login is not refreshed any more" '[ "$(oauth_ok claude)" = "$n0" ]'
ksb_check "the other login still works" '[ "$(turn 4 codex)" = 200 ]'
ctl credential list > "$T/list.out" 2>&1 || true
ksb_check "credential list says revoked" 'grep -Eq "^claude +claude +revoked" "$T/list.out"'
ksb_check "ksbctl status says revoked" 'ctl status 2>/dev/null | grep -Eq "^OK +login claude +claude, revoked: "'

ksb_check "ksbctl audit verify: the chain holds the refreshes" \
	'ctl audit verify > "$T/verify" 2>&1 || { cat "$T/verify"; false; }'

echo "# pass $pass, fail $fails"
[ "$fails" = 0 ]
