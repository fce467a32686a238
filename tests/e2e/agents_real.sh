#!/bin/bash
# e2e with the REAL agent programs (issue 13): the pinned Claude Code and
# Codex CLI (contrib/fetch-agents.sh, the only thing fetched from outside)
# in a QEMU guest behind ksb-gatewayd, talking to tests/e2e/fakeapi.py: a
# TLS origin in the test's own namespace under the real API hostnames
# (api.anthropic.com, platform.claude.com, api.openai.com: the gateway's
# hosts file), with a test CA given to the guest as --ca-file.  The fake's
# scripted replies make the agent run the "RUN:" line of the prompt with
# its shell tool: write a file, commit, push sandbox/<id>.
#
# For each agent (argv, default: claude codex) and mode (KSB_TEST_MODES,
# default: interactive headless), a named instance on a host repo:
#  - three turns with ksbctl prompt --wait, each delivered once and ended
#    once (agent.events; the fake API saw one tool call and one tool result
#    per turn, and the turn's text once in the conversation);
#  - the three commits brought back with ksbctl fetch;
#  - allowed audit rows for the API host;
#  - headless: prompt --wait --json streams the agent's events and a
#    ksb.end line; after ksbctl stop a 4th prompt boots the instance and
#    the fake API sees turn 1's text in that turn's request (resumed);
#  - the secret's value (and its base64) is in no file under the
#    instance directory.
# The fake API key is a credential of the gateway (KSB_AGENTS_SECRETS=1:
# a ksb secret, as before): the guest holds a placeholder, the fake logs a
# hash of the credential it got, which must be the real key's; the guest's
# RAM (QMP pmemsave) holds the placeholder and never the key.
# Needs root, QEMU, python3, node/npm (or the agents already in the cache)
# and a guest kernel; skips (77) when the npm registry cannot be reached.
# Development aid: KSB_AGENTS_DEV_SHIM=FILE replaces the preset with a
# hand-made agent: `bash FILE AGENT MODE' (no --agent-mode given then);
# KSB_AGENTS_RUN_ARGS: more ksb-run arguments (split on blanks).
set -eu
. "$(dirname "$0")/../lib.sh"

AGENTS=${*:-claude codex}
MODES=${KSB_TEST_MODES:-interactive headless}
CACHE=${KSB_AGENTS_CACHE:-/var/cache/ksb/agents}

ksb_need_root
# python3: the fake model API; the guest's git and tmux are the host's.
ksb_need qemu-system-x86_64 python3 /usr/bin/git /usr/bin/tmux
ksb_need_built ksb-run ksb-guest-init ksb-gatewayd ksbctl/ksbctl
ksb_fetch_agents "$CACHE"
ksb_kernel
ksb_env
T0=$SECONDS

ksb_fakeapi
# Fake keys: a value that is nowhere else, so grep finds only leaks.
export KSBT_ANTHROPIC_KEY="sk-ant-api03-ksbt$$-$(openssl rand -hex 24)"
export KSBT_OPENAI_KEY="sk-proj-ksbt$$-$(openssl rand -hex 24)"
# The keys as credentials (issue 14; KSB_AGENTS_SECRETS=1: as --secret):
# the gateway (its environment) holds them, the guest a placeholder.
if [ -z "${KSB_AGENTS_SECRETS:-}" ]; then
	cat >> "$T/policy.d/test.policy" <<-'POL'
	credential anthropic {
	    host api.anthropic.com
	    header x-api-key
	    source env KSBT_ANTHROPIC_KEY
	    secret ANTHROPIC_API_KEY
	    placeholder-prefix sk-ant-api03-
	}
	credential openai {
	    host api.openai.com
	    header authorization bearer
	    source env KSBT_OPENAI_KEY
	    secret OPENAI_API_KEY
	    placeholder-prefix sk-proj-
	}
	profile creds extends default {
	    credential anthropic
	    credential openai
	}
	POL
	printf 'upstream-ca-file = %s\n' "$T/api/ca.pem" >> "$T/ksb.conf"
fi
ksb_gateway

ksb_host_repo
sha12() { printf %s "$1" | sha256sum | cut -c1-12; }

# had_text LOG MARKER OLD: a request of the turn MARKER carries OLD's text.
had_text() {
	python3 - "$@" <<'PY'
import json, sys
log, marker, old = sys.argv[1:4]
for line in open(log):
    r = json.loads(line)
    texts = r.get("user_texts") or []
    runs = [t for t in texts if "RUN:" in t]
    if runs and marker in runs[-1] and any(old in t for t in texts[:-1]):
        sys.exit(0)
sys.exit(1)
PY
}

fails=0
ctl() { timeout "${CTL_TIMEOUT:-300}" "$KSB_BUILDDIR/ksbctl/ksbctl" -f "$T/ksb.conf" "$@"; }
I=$T/state/instances
TIMES=

# run_cmd ID N: the turn's command: a file, a commit, a push of sandbox/ID.
run_cmd() {
	echo "RUN: cd ~/work && echo $2 > f$2.txt && git add f$2.txt &&" \
		"git commit -qm $1-turn$2 && git push -q origin" \
		"HEAD:refs/heads/sandbox/$1 && echo pushed-$1-turn$2"
}

# turn ID N [--json]: ksbctl prompt --wait; output in $T/ID.N.
turn() {
	local t0=$SECONDS
	ctl prompt "$1" "$(run_cmd "$1" "$2")" --wait ${3:-} > "$T/$1.$2" 2> "$T/$1.$2.err" || true
	TIMES="$TIMES $1.$2=$((SECONDS - t0))s"
	cat "$T/$1.$2.err" "$T/$1.$2" | cut -c1-300 | tail -n 12
}

# check_turn ID N: delivered once, ended once, done; the fake API saw one
# tool call and one tool result, with the secret as the credential.
check_turn() {
	local id=$1 n=$2 ev=$I/$1/agent.events c
	c=$(ksb_api_turn "$id-turn$n")
	echo "# $id turn $n: fake API: $c"
	ksb_check "$id turn $n: delivered once" \
		"[ \"\$(grep -c '^[0-9]* $n delivered' '$ev')\" = 1 ]"
	ksb_check "$id turn $n: ended once, done" \
		"[ \"\$(grep -cE '^[0-9]+ $n (done|failed|exited|blocked)' '$ev')\" = 1 ] &&
		 grep -qE '^[0-9]+ $n done' '$ev'"
	ksb_check "$id turn $n: one tool call, one tool result, text once" \
		"case '$c' in 'tools=1 results=1 seen=1 '*) true ;; *) false ;; esac"
	ksb_check "$id turn $n: the credential is the secret's" \
		"case '$c' in *'auth=$KEY_SHA') true ;; *) false ;; esac"
}

# boot ID AGENT MODE: a named, detached instance on $P.
boot() {
	local id=$1 agent=$2 mode=$3 t0=$SECONDS cmd
	local -a extra=()
	cmd=/opt/ksb-agents/node_modules/.bin/$agent
	extra=(--agent-mode "$mode")
	if [ -n "${KSB_AGENTS_DEV_SHIM:-}" ]; then
		install -m 644 "$KSB_AGENTS_DEV_SHIM" "$T/share/shim.sh"
		cmd="bash /opt/t/shim.sh $agent $mode" extra=()
	fi
	timeout 300 ip netns exec "$GW" "$KSB_BUILDDIR/ksb-run" -f "$T/ksb.conf" \
		--detach --name "$id" --repo "$P" --disk-size 1G --memory 1024 \
		--ca-file "$T/api/ca.pem" --share-ro "$CACHE:/opt/ksb-agents" \
		--share-ro "$T/share:/opt/t" $SECRET_ARGS \
		--agent "$cmd" "${extra[@]}" ${KSB_AGENTS_RUN_ARGS:-} > "$T/$id.boot" 2>&1 || true
	cat "$T/$id.boot"
	TIMES="$TIMES $id.boot=$((SECONDS - t0))s"
	KSB_PIDS="$KSB_PIDS $(sed -n 's/^pid=//p' "$I/$id/state" 2>/dev/null)"
	ksb_check "$id: booted detached" 'grep -qx "$id" "$T/$id.boot"'
}

# finish ID HOST: stop the instance; its audit rows for the API host; the
# secret in no file of its directory.
finish() {
	local id=$1 host=$2
	ctl stop "$id" > /dev/null 2>&1 || true
	ksb_check "$id: allowed audit rows for $host" \
		"ksb_rows_ge 1 \"instance = '$id' AND host = '$host' AND decision = 'allow' AND bytes_down > 0\""
	# Refused by the policy or a limit: none.  A guest that goes away
	# (ksbctl stop) between its CONNECT and its ClientHello leaves a
	# denied row of its own making (guest_closed, guest_reset,
	# hello_timeout, header_timeout): those are shown, not failed.
	ksb_check "$id: no row for $host refused by policy or a limit" \
		"[ \"\$(ksb_rows \"instance = '$id' AND host = '$host' AND decision = 'deny' AND reason NOT IN ('guest_closed', 'guest_reset', 'hello_timeout', 'header_timeout')\")\" = 0 ]"
	ksb_sql "SELECT host, decision, reason, count(*) FROM connections WHERE instance = '$id' GROUP BY 1, 2, 3" | sed 's/^/# audit: /'
	ksb_check "$id: the secret is in no file of the instance dir" \
		"! grep -rqaF -e '$KEY' -e '$(printf %s "$KEY" | base64 -w0)' '$I/$id'"
	[ -n "${KSB_AGENTS_SECRETS:-}" ] && return 0
	ksb_check "$id: the API host's requests used the credential" \
		"ksb_sql_is 1 \"SELECT count(*) > 0 FROM requests WHERE credential IS NOT NULL AND status = 200 AND conn_id IN (SELECT id FROM connections WHERE instance = '$id')\""
	ksb_check "$id: no request refused as credential_misuse" \
		"[ \"\$(ksb_sql \"SELECT count(*) FROM requests WHERE reason = 'credential_misuse'\")\" = 0 ]"
}

# memscan ID: the guest's whole RAM (QMP pmemsave, while it runs) holds
# the placeholder (the dump works) and never the real key.
memscan() {
	local id=$1 dump dumpdir ph
	# QEMU runs as its own user (ksb-run(1)): the dump goes where that
	# user may write, $T being root's 0700.
	dumpdir=$(mktemp -d /tmp/ksbt-ram.XXXXXX)
	chmod 1733 "$dumpdir"
	dump=$dumpdir/$id.ram
	python3 - "$I/$id/qmp.sock" "$dump" <<'PY' || true
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
	ksb_check "$id: guest RAM dumped (1 GiB)" \
		"[ \"\$(stat -c %s '$dump' 2>/dev/null)\" = $((1024 << 20)) ]"
	ksb_check "$id: the placeholder is in the guest's RAM" \
		"grep -qaF 'ksbph_' '$dump'"
	ksb_check "$id: the real key is nowhere in the guest's RAM" \
		"! grep -qaF -e '$KEY' -e '$(printf %s "$KEY" | base64 -w0)' '$dump'"
	rm -rf "$dumpdir"
}

# one ID AGENT MODE: the three turns, fetch, audit; headless: resume.
one() {
	local id=$1 agent=$2 mode=$3 n host
	case $agent in
	claude) SECRET="ANTHROPIC_API_KEY=env:KSBT_ANTHROPIC_KEY" KEY=$KSBT_ANTHROPIC_KEY
		host=api.anthropic.com ;;
	codex) SECRET="OPENAI_API_KEY=env:KSBT_OPENAI_KEY" KEY=$KSBT_OPENAI_KEY
		host=api.openai.com ;;
	esac
	KEY_SHA=$(sha12 "$KEY")
	SECRET_ARGS="--secret $SECRET"
	[ -z "${KSB_AGENTS_SECRETS:-}" ] && SECRET_ARGS="--profile creds"
	ksb_say "$agent, $mode mode: instance $id"
	boot "$id" "$agent" "$mode"
	for n in 1 2 3; do
		turn "$id" "$n" $([ "$mode" = headless ] && [ "$n" = 3 ] && echo --json)
		check_turn "$id" "$n"
		# A turn that never ended holds the next ones back: stop here.
		grep -q 'ended\|ksb.end' "$T/$id.$n" && continue
		ksb_check "$id turn $n ended (the rest of $id is not run)" false
		finish "$id" "$host"
		return 0
	done
	if [ "$mode" = headless ]; then
		ksb_check "$id: prompt --json streamed the agent's events" \
			"grep -q '\"type\": *\"\\(result\\|turn.completed\\)\"' '$T/$id.3'"
		ksb_check "$id: prompt --json ended with ksb.end, done, exit 0" \
			"tail -n 1 '$T/$id.3' | grep '\"type\": *\"ksb.end\"' | grep -q '\"exit\": *0'"
	fi
	[ -z "${KSB_AGENTS_SECRETS:-}" ] && memscan "$id"
	ctl fetch "$id" --repo "$P" > "$T/$id.fetch" 2>&1 || true
	git -C "$P" log --format=%s "main..refs/remotes/ksb/$id" > "$T/$id.commits" 2>&1 || true
	cat "$T/$id.fetch" "$T/$id.commits"
	ksb_check "$id: ksbctl fetch brought the three commits" \
		"[ \"\$(cat '$T/$id.commits')\" = \"\$(printf '%s\n' $id-turn3 $id-turn2 $id-turn1)\" ]"
	ksb_check "$id: the agent's files came with them" \
		"[ \"\$(git -C '$P' show refs/remotes/ksb/$id:f3.txt)\" = 3 ]"
	if [ "$mode" = headless ]; then
		ctl stop "$id" > /dev/null || true
		ksb_check "$id: stopped" "ctl list | grep -Eq '^$id +stopped'"
		turn "$id" 4
		KSB_PIDS="$KSB_PIDS $(sed -n 's/^pid=//p' "$I/$id/state" 2>/dev/null)"
		ksb_check "$id: the 4th prompt booted the stopped instance" \
			"grep -q 'is stopped: booting it' '$T/$id.4.err'"
		check_turn "$id" 4
		ksb_check "$id: turn 4's request carries turn 1 (conversation resumed)" \
			"had_text '$T/api.log' '$id-turn4' '$id-turn1'"
	fi
	finish "$id" "$host"
}

for agent in $AGENTS; do
	for mode in $MODES; do
		one "${agent:0:2}-${mode:0:1}" "$agent" "$mode"
	done
done

echo "# times:$TIMES total=$((SECONDS - T0))s"
[ "$fails" = 0 ] || ksb_fail "$fails check(s) failed"
echo "PASS"
