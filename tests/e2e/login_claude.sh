#!/bin/bash
# e2e: one subscription login owned by the gateway, shared by three guests
# running the REAL Claude Code (issue 31; the pinned one,
# contrib/fetch-agents.sh), headless.  tests/e2e/fakeapi.py is the
# provider, with its token endpoint's semantics: access tokens that live
# LIFE s (401 after), single-use rotating refresh tokens (a spent one is
# refused and logged as reuse); every token it mints goes to a file, the
# values looked for where they must never be.
#
# The login is imported (ksbctl credential import claude), a credential
# `source login claude' gives each guest a placeholder as
# CLAUDE_CODE_OAUTH_TOKEN (the claude preset exports it), and the three
# instances take turns in rounds, each round after the gateway's next
# refresh (awaited in the audit, bounded), so the run spans several
# lifetimes.  Checks: every turn done, no 401 to any request; the gateway
# refreshed once per lifetime (the fake's counters, and one
# login_refreshes row each); no refresh token presented twice; whatever
# refresh the agents tried themselves was answered locally
# (login_answered: lc2 and lc3 have Claude Code's login file, written
# expired by the preset, and must refresh it) and none reached the
# provider; no minted token in the
# instance directories (disk images included), the turns' output or the
# guests' RAM (QMP pmemsave); ksbctl audit verify.
set -eu
. "$(dirname "$0")/../lib.sh"

CACHE=${KSB_AGENTS_CACHE:-/var/cache/ksb/agents}
LIFE=${KSB_LOGIN_LIFE:-40}	# seconds an access token lives
ROUNDS=3
IDS="lc1 lc2 lc3"

ksb_need_root
ksb_need qemu-system-x86_64 python3 /usr/bin/git /usr/bin/tmux
ksb_need_built ksb-run ksb-guest-init ksb-gatewayd ksbctl/ksbctl
ksb_fetch_agents "$CACHE"
ksb_kernel
ksb_env
T0=$SECONDS
ksb_fakeapi --oauth-lifetime "$LIFE" --oauth-login "$T/agent" \
	--oauth-tokens "$T/minted"
cat >> "$T/policy.d/test.policy" <<'POL'
credential sub {
    host api.anthropic.com
    host platform.claude.com
    header authorization bearer
    source login claude
    secret CLAUDE_CODE_OAUTH_TOKEN
}
profile sub extends default {
    credential sub
}
credential subfile {
    host api.anthropic.com
    host platform.claude.com
    header authorization bearer
    source login claude
    secret CLAUDE_AI_OAUTH
}
profile subfile extends default {
    credential subfile
}
POL
printf 'upstream-ca-file = %s\n' "$T/api/ca.pem" >> "$T/ksb.conf"
fails=0
ctl() { timeout "${CTL_TIMEOUT:-300}" "$KSB_BUILDDIR/ksbctl/ksbctl" -f "$T/ksb.conf" "$@"; }
I=$T/state/instances
ctl credential import claude --from "$T/agent/claude.json" > /dev/null 2>&1 ||
	ksb_fail "ksbctl credential import failed"
ksb_gateway
ksb_host_repo
TIMES=

oauth() { # FIELD=VALUE...: the fake provider's token requests that match
	python3 - "$T/api.log" "$@" <<'PY'
import json, sys
n = 0
for l in open(sys.argv[1]):
    r = json.loads(l)
    if r.get("api") != "oauth":
        continue
    n += all(str(r.get(k)) == v for k, v in (a.split("=", 1) for a in sys.argv[2:]))
print(n)
PY
}
refreshed() { ksb_sql "SELECT count(*) FROM login_refreshes WHERE login = 'claude' AND outcome = 'refreshed'"; }

boot() { # ID PROFILE: a named, detached, headless Claude Code instance
	 # (in the background: the caller records its pid, from its state)
	timeout 300 ip netns exec "$GW" "$KSB_BUILDDIR/ksb-run" -f "$T/ksb.conf" \
		--detach --name "$1" --repo "$P" --disk-size 1G --memory 1024 \
		--ca-file "$T/api/ca.pem" --share-ro "$CACHE:/opt/ksb-agents" \
		--profile "$2" --agent /opt/ksb-agents/node_modules/.bin/claude \
		--agent-mode headless > "$T/$1.boot" 2>&1 || true
}

ksb_say "three instances, one login"
# wait for these only: the fake API and the gateway are children too.
t0=$SECONDS waitfor=
# lc1 gets the placeholder as CLAUDE_CODE_OAUTH_TOKEN (Claude Code never
# refreshes it), lc2 and lc3 as their login file (CLAUDE_AI_OAUTH: the
# preset writes ~/.claude/.credentials.json, expired: Claude Code
# refreshes it at the gateway first).
for id in $IDS; do
	prof=subfile
	[ "$id" = lc1 ] && prof=sub
	boot "$id" "$prof" &
	waitfor="$waitfor $!"
done
wait $waitfor
TIMES="$TIMES boot=$((SECONDS - t0))s"
for id in $IDS; do
	KSB_PIDS="$KSB_PIDS $(sed -n 's/^pid=//p' "$I/$id/state" 2>/dev/null)"
	cat "$T/$id.boot"
	ksb_check "$id: booted detached" 'grep -qx "$id" "$T/$id.boot"'
done

# Rounds of one turn per instance (in parallel), each after the gateway's
# next refresh: the turns span ROUNDS lifetimes.
for r in $(seq 1 "$ROUNDS"); do
	n0=$(refreshed)
	t0=$SECONDS waitfor=
	for id in $IDS; do
		ctl prompt "$id" "say ok ($id round $r)" --wait > "$T/$id.$r" 2> "$T/$id.$r.err" &
		waitfor="$waitfor $!"
	done
	wait $waitfor
	TIMES="$TIMES round$r=$((SECONDS - t0))s"
	for id in $IDS; do
		ksb_check "$id round $r: the turn ended done" \
			"grep -qE '^[0-9]+ $r done' '$I/$id/agent.events'"
	done
	more() { [ "$(refreshed)" -gt "$n0" ]; }
	[ "$r" = "$ROUNDS" ] || ksb_until $((2 * LIFE)) more ||
		ksb_check "round $r: a refresh within 2 lifetimes" false
done
el=$((SECONDS - T0))

ksb_say "the login"
n401=$(grep -c '"reply": 401' "$T/api.log" || true)
ksb_check "no request of any guest got a 401 ($n401)" '[ "$n401" = 0 ]'
nok=$(oauth reply=200)
want=$((el * 10 / (8 * LIFE)))
echo "# refreshes: $nok in ${el}s with ${LIFE}s tokens (about $want)"
ksb_check "the gateway refreshed once per lifetime, not per guest: $nok (about $want)" \
	'[ "$nok" -ge "$ROUNDS" ] && [ "$nok" -ge $((want - 1)) ] && [ "$nok" -le $((want + 1)) ]'
rows_ok() { [ "$(refreshed)" -ge "$nok" ]; }
ksb_check "each refresh is one audit row" 'ksb_until 10 rows_ok'
ksb_check "no refresh token presented twice, none refused" \
	'[ "$(oauth reuse=True)" = 0 ] && [ "$(oauth)" = "$nok" ]'
answered() { # ID: its refreshes the gateway answered itself
	ksb_sql "SELECT count(*) FROM requests r JOIN connections c ON c.id = r.conn_id WHERE r.reason = 'login_answered' AND r.status = 200 AND c.instance = '$1'"
}
echo "# the agents' own refreshes, answered by the gateway: lc1 $(answered lc1), lc2 $(answered lc2), lc3 $(answered lc3)"
ksb_check "Claude Code on its login file refreshed it itself, answered by the gateway" \
	'[ "$(answered lc2)" -ge 1 ] && [ "$(answered lc3)" -ge 1 ]'
ksb_check "and went on with the answer's fresh placeholders: none refused as misuse" \
	'[ "$(ksb_sql "SELECT count(*) FROM requests WHERE reason = '\''credential_misuse'\''")" = 0 ]'
ksb_check "every token request the provider saw was the gateway's (none a guest's placeholder)" \
	'[ "$(oauth reply=400)" = 0 ]'
ksb_check "the guests' API requests got the login's token swapped in" \
	'ksb_sql_is 1 "SELECT count(*) >= $((3 * ROUNDS)) FROM requests WHERE credential IN ('\''sub'\'', '\''subfile'\'') AND status = 200 AND reason IS NOT '\''login_answered'\''"'

ksb_say "no real token in a guest"
nmint=$(wc -l < "$T/minted")
ksb_check "the fake minted tokens ($nmint)" '[ "$nmint" -ge 4 ]'
for id in $IDS; do
	ksb_check "$id: no token in the instance's files (its disk included)" \
		"! grep -rqaF -f '$T/minted' '$I/$id'"
	ksb_check "$id: nor in what its turns answered" \
		"! cat '$T/$id'.* | grep -qaF -f '$T/minted'"
	dumpdir=$(mktemp -d /tmp/ksbt-ram.XXXXXX)
	chmod 1733 "$dumpdir"
	python3 - "$I/$id/qmp.sock" "$dumpdir/ram" <<'PY' || true
import json, socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
f = s.makefile("rw")
f.readline()
for cmd in ({"execute": "qmp_capabilities"},
            {"execute": "pmemsave", "arguments": {
                "val": 0, "size": 1024 << 20, "filename": sys.argv[2]}}):
    f.write(json.dumps(cmd) + "\n")
    f.flush()
    while "return" not in (r := json.loads(f.readline())) and "error" not in r:
        pass
    if "error" in r:
        print("# qmp:", r)
PY
	ksb_check "$id: RAM dumped, the placeholder in it (the dump works)" \
		"[ \"\$(stat -c %s '$dumpdir/ram' 2>/dev/null)\" = $((1024 << 20)) ] && grep -qaF ksbph_ '$dumpdir/ram'"
	ksb_check "$id: no token in the guest's RAM (its environment, its agent)" \
		"! grep -qaF -f '$T/minted' '$dumpdir/ram'"
	rm -rf "$dumpdir"
done
for id in $IDS; do ctl stop "$id" > /dev/null 2>&1 || true; done
ksb_check "ksbctl audit verify" 'ctl audit verify > "$T/verify" 2>&1 || { cat "$T/verify"; false; }'

echo "# times:$TIMES total=$((SECONDS - T0))s"
[ "$fails" = 0 ] || ksb_fail "$fails check(s) failed"
echo "PASS"
