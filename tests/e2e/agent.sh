#!/bin/bash
# e2e agent mode (real QEMU guest behind a real ksb-gatewayd, own
# namespaces and temp dir).  A scripted shell agent in tmux, started in
# ~/work (a clone of sandbox/<id> of a host repo):
#  - three turns with ksbctl prompt --wait, each writing a file,
#    committing and pushing sandbox/<id>, then ksb-report done; ksbctl
#    fetch --repo shows the three commits;
#  - ksbctl status shows the agent's state, turn and last report; ksbctl
#    attach shows its tmux session;
#  - a client killed mid-turn and the prompt resent with the same --key:
#    the same turn, typed once, ended (reported) once;
#  - the agent user floods ksb-report (oversized, forged frames, garbage)
#    and the pane: a prompt still gets through, ksb-run's memory and the
#    host logs stay bounded;
#  - the gateway restarted: the lease is resumed (the guest's curl works);
#  - a prompt to the stopped instance boots it and is delivered (the agent
#    starts fresh, in ~/work, where its earlier commits still are);
#  - ksbctl logs --screen shows the pane as it is now (the last turn, the
#    agent's start marker with its secret as [secret TOKEN]);
#  - the enforcement self-test reruns after a reload and on the lease
#    resumed after the restart (pass records); last, a hole opened during
#    a turn: the reload's test fails, the instance is stopped (exit 125,
#    a fail record), the turn in flight ends "exited"; logs --screen is
#    then refused;
#  - policy suggest on the whole run, applied: what ag1 used or was
#    refused (the audit's rows) is allowed, nothing else.
# Needs root, QEMU, tmux, git, python3 and a guest kernel (exit 77).
set -eu
. "$(dirname "$0")/../lib.sh"

ksb_need_root
# The guest's tmux and git are the host's (shared /usr); python3 floods.
ksb_need qemu-system-x86_64 /usr/bin/tmux /usr/bin/git /usr/bin/python3
ksb_need_built ksb-run ksb-guest-init ksb-gatewayd ksbctl/ksbctl
ksb_kernel
KSB_TEST_TEMPLATE=default # the default start: from a template under TCG
ksb_env
# Rules are added to the gateway's tables on purpose below; its own check
# (gateway/parent/rulecheck.c) would take them out again: off.
echo "nft-check-interval = 0" >> "$T/ksb.conf"
ksb_origin
ksb_gateway

fails=0
ctl() { timeout 120 "$KSB_BUILDDIR/ksbctl/ksbctl" -f "$T/ksb.conf" "$@"; }
secs() { echo "$(date +%s.%N) - $1" | bc; }
I=$T/state/instances

export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=$T/gitconfig \
	GIT_AUTHOR_NAME=host GIT_AUTHOR_EMAIL=host@example.invalid \
	GIT_COMMITTER_NAME=host GIT_COMMITTER_EMAIL=host@example.invalid
git config --global init.defaultBranch main
P=$T/proj
git init -q "$P"
echo "readme" > "$P/README"
git -C "$P" add README
git -C "$P" commit -qm "host: first"

# The scripted agent: one line per turn; its turn counter lives in its
# home (on the instance's disk), so it matches the host's turn ids only if
# every prompt arrives exactly once, also across a reboot.
cat > "$T/share/agent.sh" <<'AGENT'
echo "screen-mark: $(cat /run/ksb/secrets/TOKEN)"
n=$(cat ~/.turns 2>/dev/null || echo 0)
while IFS= read -r line; do
	n=$((n + 1))
	echo "$n" > ~/.turns
	case $line in
	commit*)
		# Egress by turn: one allowed host, one refused.
		curl -sS --cacert /data/ca.pem https://allowed.test/index.txt >/dev/null 2>&1
		curl -sS https://denied.test/ >/dev/null 2>&1
		f=turn$n.txt
		printf '%s\n' "$line" > "$f"
		if git add "$f" && git commit -qm "agent: $line" &&
			git push -q origin "HEAD:sandbox/$KSB_INSTANCE"; then
			r="committed $f"
		else
			r="commit failed"
		fi ;;
	sleep*) sleep "${line#sleep }"; r=slept ;;
	flood*) python3 /data/flood.py "${line#flood }" & r=flooding ;;
	curl*) r=$(curl -sS --cacert /data/ca.pem https://allowed.test/index.txt 2>&1 | head -c 80) ;;
	*) r=ok ;;
	esac
	ksb-report done "turn $n: $r in $(pwd)"
done
AGENT
# The flooder (the agent user can reach the host only through init: the
# ksb-report socket and its pane): oversized datagrams, frames forged in
# the text, bad states, binary garbage, as fast as it can, and binary
# output on the pane, for argv[1] seconds.
cat > "$T/share/flood.py" <<'FLOOD'
import os, socket, sys, time
end = time.time() + float(sys.argv[1])
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.setblocking(False)
msgs = [b"info " + b"x" * 60000,
	b"info forged\nACK 999\nREPORT 99 99 done forged\nHELLO 2 0\nEXIT 0\n",
	b"working \x00\x1b]0;pwned\x07\r\n%0A%",
	b"rooted x", b"", b"donex", os.urandom(700), b"info " + b"%0A" * 400]
out = sys.stdout.buffer
sent = full = i = 0
while time.time() < end:
	try:
		s.sendto(msgs[i % len(msgs)], "/run/ksb/agent/report.sock")
		sent += 1
	except OSError:
		full += 1
	i += 1
	if i % 32 == 0:
		out.write(os.urandom(2048).replace(b"\x1b", b"E") + b"\n")
		out.flush()
out.write(b"\nFLOOD END sent %d full %d\n" % (sent, full))
out.flush()
FLOOD
chmod 644 "$T/share/agent.sh" "$T/share/flood.py"

ksb_say "boot an agent instance on a host repo, with a first prompt"
# A secret the agent prints on its screen (logs --screen redacts it).
KSB_AGENT_SECRET=screen-secret-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')
export KSB_AGENT_SECRET
t0=$(date +%s.%N)
id=$(timeout 180 ip netns exec "$GW" "$KSB_BUILDDIR/ksb-run" -f "$T/ksb.conf" --detach \
	--name ag1 --repo "$P" --disk-size 1G --share-ro "$T/share:/data" --idle 30 \
	--secret TOKEN=env:KSB_AGENT_SECRET \
	--agent 'bash /data/agent.sh' --prompt 'hello' 2>"$T/err")
echo "detach returned after $(secs "$t0") s: $id"
cat "$T/err" >&2
ksb_check "--detach printed the ID" '[ "$id" = ag1 ]'
KSB_PIDS="$KSB_PIDS $(sed -n 's/^pid=//p' "$I/ag1/state")"	# stopped on exit
ksb_check "agent.sock exists" '[ -S "$I/ag1/agent.sock" ]'

ksb_say "three turns with prompt --wait: write, commit, push, report done"
for k in one two three; do
	t0=$(date +%s.%N)
	# Turn 4 may reach denied.test (a grant for that turn only).
	# and its output is JSON, with the summary before ksb.end.
	a=; [ $k = three ] && a="--allow denied.test --json"
	# shellcheck disable=SC2086
	ctl prompt ag1 "commit $k" $a --wait > "$T/w-$k" || true
	echo "turn round trip $(secs "$t0") s"
	cat "$T/w-$k"
done
ksb_check "turn 1 (--prompt) ended done" 'grep -q "^1 done turn 1: ok in /home/agent/work" <(cut -d" " -f2- "$I/ag1/agent.events")'
ksb_check "turn 2 committed, in ~/work" 'grep -q "turn 2 done: turn 2: committed turn2.txt in /home/agent/work" "$T/w-one"'
ksb_check "turn 3 committed" 'grep -q "turn 3 ended: done" "$T/w-two" && grep -q "committed turn3.txt" "$T/w-two"'
ksb_check "turn 4 committed (--json)" \
	'grep -q "\"type\":\"ksb.end\",\"event\":\"end\",\"turn\":4,\"state\":\"done\"" "$T/w-three" && grep -q "committed turn4.txt" "$T/w-three"'
ctl fetch ag1 --repo "$P" > "$T/fetch" 2>&1 || true
cat "$T/fetch"
git -C "$P" log --format='%s' main..refs/remotes/ksb/ag1 > "$T/commits" 2>&1 || true
cat "$T/commits"
ksb_check "ksbctl fetch shows the three commits" \
	'[ "$(cat "$T/commits")" = "$(printf "agent: commit three\nagent: commit two\nagent: commit one")" ]'
ksb_check "with the agent's files" '[ "$(git -C "$P" show refs/remotes/ksb/ag1:turn3.txt)" = "commit two" ]'
# Egress by turn: ksb-run told the gateway each turn (TURN); the rows of
# turns 2-4 carry them, and --wait ends with the turn's summary.
for t in 2 3; do
	ksb_check "audit: turn $t reached allowed.test and was refused denied.test" \
		'ksb_row_is 1 "instance = '"'ag1'"' AND turn = $t AND host = '"'allowed.test'"' AND decision = '"'allow'"'" && ksb_row_is 1 "instance = '"'ag1'"' AND turn = $t AND host = '"'denied.test'"' AND reason = '"'not_in_allowlist'"'"'
done
ksb_check "audit: turn 4 (prompt --allow denied.test) reached both" \
	'ksb_row_is 1 "instance = '"'ag1'"' AND turn = 4 AND host = '"'allowed.test'"' AND decision = '"'allow'"'" && ksb_row_is 1 "instance = '"'ag1'"' AND turn = 4 AND host = '"'denied.test'"' AND decision = '"'allow'"'"'
ksb_check "the turn's grant is a chained record" \
	'ksb_sql_is 1 "SELECT count(*) FROM policy_versions WHERE files = '"'operator uid 0: allow ag1 denied.test:443 turn:4'"' AND seq IS NOT NULL"'
# The turn is chained (schema 8): the chain verifies, and a copy of the
# database with one turn changed does not.
ksb_check "ksbctl audit verify: the chain with the turns" 'ctl audit verify > /dev/null'
ksb_sql ".backup '$T/tamper.db'"
sqlite3 "$T/tamper.db" "UPDATE connections SET turn = 9 WHERE instance = 'ag1' AND turn = 3"
{ cat "$T/ksb.conf"; echo "audit-db = $T/tamper.db"; } > "$T/tamper.conf"
ksb_check "... a turn changed afterwards is found" \
	'! "$KSB_BUILDDIR/ksbctl/ksbctl" -f "$T/tamper.conf" audit verify > "$T/tamper.out" 2>&1 && grep -q "hash mismatch" "$T/tamper.out"'
ctl policy suggest --instance ag1 --name default > "$T/suggest" 2>&1 || true
cat "$T/suggest"
ksb_check "policy suggest on this run: allowed.test used, denied.test refused" \
	'grep -Eq "^    allow allowed\.test:443 +# used" "$T/suggest" && grep -Eq "^    allow denied\.test:443 +# used 1, refused 2$" "$T/suggest"'
ctl audit --instance ag1 --turn 3 --csv > "$T/turn3.csv" 2>&1 || true
ksb_check "ksbctl audit --turn 3: its two rows only" \
	'[ "$(tail -n +2 "$T/turn3.csv" | wc -l)" = 2 ] && ! grep -v "^id," "$T/turn3.csv" | grep -qv ",3$"'
# The JSON summary of turn 4, checked against the audit's rows.
# (Bytes are not compared: a tunnel's close may commit after the turn's end.)
sum4=$(ksb_sql "SELECT group_concat(h, ' ') FROM (SELECT host || ':' || port || ':' || count(*) AS h FROM connections WHERE instance = 'ag1' AND turn = 4 AND decision = 'allow' GROUP BY host, port ORDER BY host)")
ksb_check "prompt --wait --json: the summary is one object before ksb.end, as the audit says ($sum4)" \
	'python3 - "$T/w-three" "$sum4" <<-"PY"
	import json, sys
	lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
	s, end = lines[-2], lines[-1]
	assert end["type"] == "ksb.end" and s["type"] == "ksb.summary", (s, end)
	assert s["instance"] == "ag1" and s["turn"] == 4 and s["refused"] == []
	got = " ".join("%s:%d:%d" % (r["host"], r["port"], r["connections"])
	    for r in sorted(s["reached"], key=lambda r: r["host"]))
	assert got == sys.argv[2], (got, sys.argv[2])
	assert [r["host"] for r in sorted(s["reached"], key=lambda r: r["host"])] == ["allowed.test", "denied.test"]
	assert s["allowed_connections"] == 2 and s["pushed"] is True and s["before"] != s["after"]
	assert s["bytes_down"] == sum(r["bytes_down"] for r in s["reached"])
	PY'
ksb_check "prompt --wait ends with the turn summary" \
	'grep -q "^turn 2: 1 host reached, 1 refused" "$T/w-one" && grep -q "^  reached allowed.test:443  1 conn" "$T/w-one" && grep -q "^  refused denied.test:443  not_in_allowlist (1)" "$T/w-one" && grep -q "^  branch: pushed " "$T/w-one"'

ksb_say "status and attach"
ctl status ag1 > "$T/status"
cat "$T/status"
ksb_check "status shows state and turn" 'grep -q "^agent: *done, turn 4 (4 given)" "$T/status"'
ksb_check "status shows the last report" 'grep -q "^report: *turn 4: committed turn4.txt" "$T/status"'
ctl status ag1 --json > "$T/status.json"
ksb_check "status --json has the agent" 'grep -q "\"agent\":{\"state\":\"done\",\"turn\":4,\"turns\":4," "$T/status.json"'
timeout 3 "$KSB_BUILDDIR/ksbctl/ksbctl" -f "$T/ksb.conf" attach ag1 < /dev/null > "$T/attach" 2>&1 || true
ksb_check "attach shows the agent's tmux pane" 'grep -aq "commit three" "$T/attach"'

ksb_say "a policy reload: the agent's guest runs the self-test again"
ctl reload > /dev/null
ksb_check "reload: a pass record for ag1, in agent mode (the agent keeps running: turn 5 below)" \
	'ksb_sql_is 1 "SELECT count(*) FROM selftests WHERE instance = '"'ag1'"' AND trigger = '"'reload'"' AND result = '"'ok'"' AND probes = 7"'

ksb_say "a client killed mid-turn; the prompt resent with its key"
ctl prompt ag1 "sleep 4" --key ks --wait > "$T/ks1" 2>&1 &
kp=$!
for _ in $(seq 1 200); do grep -q delivered "$T/ks1" && break; sleep 0.1; done
kill "$kp"; wait "$kp" 2>/dev/null || true
cat "$T/ks1"
ctl prompt ag1 "sleep 4" --key ks --wait --json > "$T/ks2" || true
cat "$T/ks2"
ksb_check "the resend is the same turn" 'grep -q "turn 5 delivered" "$T/ks1" && grep -q "\"turn\":5,\"dup\":true" "$T/ks2"'
ksb_check "it ended once, done, by the agent's 5th line" \
	'[ "$(grep -c "\"event\":\"end\"" "$T/ks2")" = 1 ] && grep -q "turn 5: slept" "$T/ks2"'
ksb_check "agent.events: turn 5 ended once" '[ "$(grep -c "^[0-9]* 5 done " "$I/ag1/agent.events")" = 1 ]'

ksb_say "the agent floods ksb-report and its pane; a prompt still gets through"
rp=$(sed -n 's/^pid=//p' "$I/ag1/state")
rss0=$(awk '/^VmRSS/ {print $2}' "/proc/$rp/status")
cpu0=$(awk '{print $14 + $15}' "/proc/$rp/stat")
ev0=$(stat -c %s "$I/ag1/agent.events")
lg0=$(wc -l < "$I/ag1/ksb-run.log")
nreports() { grep -acE "^[0-9]+ [0-9]+ (info|working) " "$I/ag1/agent.events" || true; }
rep0=$(nreports)
ctl prompt ag1 "flood 20" --wait > "$T/f1" || true
cat "$T/f1"
# The next prompt goes in while the flooder runs: once its first reports
# are shown (python takes ~2 s to start under TCG; it floods for 20 s).
flooding() { [ "$(nreports)" -gt "$rep0" ]; }
ksb_check "the flooder runs" 'ksb_until 120 flooding'
t0=$(date +%s.%N)
ctl prompt ag1 "commit during the flood" --wait > "$T/f2" || true
echo "turn round trip during the flood: $(secs "$t0") s"
cat "$T/f2"
ksb_check "after turn 4 the grant is gone: denied.test refused again" \
	'[ "$(ksb_rows "instance = '"'ag1'"' AND turn > 4 AND host = '"'denied.test'"' AND reason = '"'not_in_allowlist'"'")" -ge 1 ] && [ "$(ksb_rows "instance = '"'ag1'"' AND turn > 4 AND host = '"'denied.test'"' AND decision = '"'allow'"'")" = 0 ]'
ksb_check "a prompt during the flood was delivered and ended done" \
	'grep -q "turn 7 delivered" "$T/f2" && grep -q "turn 7: committed turn7.txt" "$T/f2"'
ksb_until 60 grep -aq "FLOOD END" "$I/ag1/agent.log" || true
ksb_check "the flood ran to its end" 'grep -aq "FLOOD END" "$I/ag1/agent.log"'
grep -a "FLOOD END" "$I/ag1/agent.log" | tail -n 1
rss1=$(awk '/^VmRSS/ {print $2}' "/proc/$rp/status")
hwm=$(awk '/^VmHWM/ {print $2}' "/proc/$rp/status")
cpu1=$(awk '{print $14 + $15}' "/proc/$rp/stat")
ev1=$(stat -c %s "$I/ag1/agent.events")
lg1=$(wc -l < "$I/ag1/ksb-run.log")
echo "ksb-run: RSS $rss0 -> $rss1 KiB (peak $hwm), CPU $(( (cpu1 - cpu0) * 10 )) ms," \
	"agent.events +$((ev1 - ev0)) bytes, ksb-run.log +$((lg1 - lg0)) lines"
ksb_check "ksb-run alive, memory bounded (RSS +$((rss1 - rss0)) KiB)" \
	'kill -0 "$rp" && [ $((rss1 - rss0)) -lt 8192 ]'
ksb_check "agent.events and ksb-run.log stay small" '[ $((ev1 - ev0)) -lt 1048576 ] && [ $((lg1 - lg0)) -lt 50 ]'
ksb_check "no forged frame took effect" '! grep -q "forged$" <(grep -E "^[0-9]+ [0-9]+ done" "$I/ag1/agent.events")'

ksb_say "gateway restart: the lease is resumed"
kill -TERM "$KSB_GATEWAY_PID"
timeout 20 tail --pid="$KSB_GATEWAY_PID" -f /dev/null || true
ksb_gateway
ksb_until 60 grep -q "lease resumed" "$I/ag1/ksb-run.log" || true
ksb_check "ksb-run resumed its lease" 'grep -q "lease resumed" "$I/ag1/ksb-run.log"'
# The policy may have changed across the restart: the resumed lease is
# announced RELOADED and the guest tests again (a second reload record).
ksb_check "the resumed lease's guest ran the self-test again: a pass record" \
	'ksb_sql_is 2 "SELECT count(*) FROM selftests WHERE instance = '"'ag1'"' AND trigger = '"'reload'"' AND result = '"'ok'"' AND probes = 7"'
ctl prompt ag1 "curl please" --wait > "$T/w-curl" || true
cat "$T/w-curl"
ksb_check "the guest's curl after the restart works" 'grep -q "$ORIGIN_BODY" "$T/w-curl"'
ct=$(sed -n 's/^turn \([0-9]*\) .*/\1/p' "$T/w-curl" | head -n 1)
ksb_check "the resumed lease was told the turn again (turn ${ct:-?})" \
	'[ -n "$ct" ] && ksb_row_is 1 "instance = '"'ag1'"' AND turn = $ct AND host = '"'allowed.test'"' AND decision = '"'allow'"'"'

sent=$(grep -ao "FLOOD END sent [0-9]*" "$I/ag1/agent.log" | tail -n 1 | awk '{print $4}')
shown=$(grep -cE "^[0-9]+ [0-9]+ (info|working) " "$I/ag1/agent.events" || true)
ksb_check "the reports were rate-limited ($sent sent, $shown shown)" '[ "$((shown * 4))" -lt "${sent:-0}" ]'

ksb_say "logs"
ctl logs ag1 > "$T/logs"
grep -av '^FLOOD\|^.\{200\}' "$T/logs" | tail -n 8
ksb_check "logs show the pane" 'grep -aq "commit three" "$T/logs"'
ksb_check "logs show the reports" 'grep -aq "done turn 4: committed turn4.txt" "$T/logs"'
ksb_check "every prompt typed exactly once" '[ "$(grep -ac "^sleep 4" "$T/logs")" = 1 ] && [ "$(grep -ac "^commit two" "$T/logs")" = 1 ]'
ctl logs ag1 --screen > "$T/screen" 2> "$T/screen.err" && sr=0 || sr=$?
cat "$T/screen.err"; tail -n 5 "$T/screen"
ksb_check "logs --screen shows the pane now (the last turn), exit 0" \
	'[ "$sr" = 0 ] && grep -aq "^curl please" "$T/screen"'
ksb_check "logs --screen: no terminal control passes" \
	'! grep -aqP "[\x00-\x08\x0b-\x1f\x7f]" "$T/screen"'
ksb_check "logs --screen: not the history (turn 2 scrolled off)" \
	'! grep -aq "^commit one" "$T/screen"'

ksb_say "stop; a prompt to the stopped instance boots it and is delivered"
ctl stop ag1 >/dev/null
ksb_check "stopped" 'ctl list | grep -Eq "^ag1 +stopped"'
t0=$(date +%s.%N)
ctl prompt ag1 "commit after a reboot" --wait > "$T/w-boot" 2> "$T/w-boot.err" || true
echo "boot + turn round trip $(secs "$t0") s"
cat "$T/w-boot.err" "$T/w-boot"
KSB_PIDS="$KSB_PIDS $(sed -n 's/^pid=//p' "$I/ag1/state")"
ksb_check "the prompt booted the instance" 'grep -q "is stopped: booting it" "$T/w-boot.err"'
ksb_check "delivered to the fresh agent, in ~/work, as turn 9" \
	'grep -q "turn 9: committed turn9.txt in /home/agent/work" "$T/w-boot"'
ctl fetch ag1 --repo "$P" > /dev/null 2>&1 || true
ksb_check "its commit follows the earlier ones" \
	'[ "$(git -C "$P" log -1 --format=%s refs/remotes/ksb/ag1)" = "agent: commit after a reboot" ] &&
	 [ "$(git -C "$P" rev-list --count main..refs/remotes/ksb/ag1)" = 5 ]'
ksb_say "logs --screen after the reboot: the start marker, its secret redacted"
ctl logs ag1 --screen > "$T/screen2" 2> "$T/screen2.err" || true
cat "$T/screen2.err" "$T/screen2"
ksb_check "the screen shows the marker and the last turn" \
	'grep -aq "^screen-mark: " "$T/screen2" &&
	 grep -aq "^commit after a reboot" "$T/screen2"'
ksb_check "the secret on the screen shows as [secret TOKEN]" \
	'grep -aqF "screen-mark: [secret TOKEN]" "$T/screen2" &&
	 ! grep -aqF "$KSB_AGENT_SECRET" "$T/screen2"'

# Last (the instance ends here): a hole opened on purpose while a turn
# runs, as in boot.sh (the gateway's port 22, which tcp-gateway probes,
# accepted both ways, and a listener there); the reload's self-test finds
# it, the instance is stopped (exit 125) and the turn in flight ends.
ksb_say "a hole opened during a turn: the reload's self-test stops the agent's instance"
rp=$(sed -n 's/^pid=//p' "$I/ag1/state")
# No client waits on this turn: its end must still be reported.
ctl prompt ag1 "sleep 300" > "$T/w-hole" 2>&1 || true
ht=$(sed -n 's/^turn \([0-9]*\)$/\1/p' "$T/w-hole" | head -n 1)
ksb_until 120 grep -q "^[0-9]* ${ht:-x} delivered " "$I/ag1/agent.events" || true
ksb_open_hole "$T/hole.log"
ctl reload > /dev/null
timeout 90 tail --pid="$rp" -f /dev/null || true
cat "$T/w-hole"; tail -n 4 "$I/ag1/ksb-run.log"; tail -n 2 "$I/ag1/agent.events"
ksb_check "hole: the probe got through (the listener saw it)" \
	'grep -q "connect from 10.77.0." "$T/hole.log"'
ksb_check "hole: ksb-run stopped the instance, exit 125" \
	'! kill -0 "$rp" 2>/dev/null && grep -q "^exit_status=125$" "$I/ag1/state" && ctl list | grep -Eq "^ag1 +stopped"'
ksb_check "hole: the failed probe is named" \
	'grep -q "enforcement self-test after the reload FAILED: tcp-gateway; stopping the instance" "$I/ag1/ksb-run.log" &&
	 tail -n 3 "$I/ag1/ksb-run.log" | grep -q "stopped: the enforcement self-test after a policy reload failed, probe tcp-gateway"'
ksb_check "hole: a fail record says the instance was stopped" \
	'ksb_sql_is 1 "SELECT count(*) FROM selftests WHERE instance = '"'ag1'"' AND trigger = '"'reload'"' AND result = '"'fail'"' AND failed = '"'tcp-gateway'"' AND action = '"'stopped'"'"'
ksb_check "hole: the turn in flight (${ht:-?}), no client waiting, is reported ended in agent.events" \
	'[ -n "$ht" ] && grep -q "^[0-9]* $ht exited the" "$I/ag1/agent.events"'
ctl status ag1 > "$T/status-hole" 2>&1 || true
ksb_check "hole: status says the agent exited at that turn" \
	'grep -q "^agent: *exited, turn $ht" "$T/status-hole"'
ksb_check "hole: no QEMU left behind" '! pgrep -f "ksb.id=ag1 " >/dev/null'
# The lease's connection carried TURN and SELFTEST lines, RELOADED
# notices, a resumed lease, and last the failed test's SELFTEST right
# before UNREGISTER: ksb-run matched every answer to its request.
ksb_check "every gateway answer matched ksb-run's request, UNREGISTER's last" \
	'! grep -E "answered no request|unexpected line from ksb-gatewayd|ksb-gatewayd refused|UNREGISTER" "$I/ag1/ksb-run.log"'
ctl logs ag1 --screen > "$T/screen3" 2>&1 && sr=0 || sr=$?
cat "$T/screen3"
ksb_check "logs --screen of a stopped instance: refused, exit 1" \
	'[ "$sr" = 1 ] && grep -q "not running" "$T/screen3"'

# The whole recorded run (the instance is stopped: its rows are all in):
# `policy suggest' drafts a profile; beside the test's own policy files
# `policy check' accepts it, and `policy test' on it allows every name
# (and port) the audit says ag1 used or was refused, and nothing else.
# The names come from the audit rows (sqlite3 as the witness); the
# self-test's probe name is refused by design and not suggested.
ksb_say "policy suggest on the recorded run, applied"
ctl policy suggest --instance ag1 --name suggested \
	> "$T/draft" 2> "$T/draft.err" || true
cat "$T/draft" "$T/draft.err"
mkdir -p "$T/try"
cp "$T/policy.d/"*.policy "$T/try/"
cp "$T/draft" "$T/try/suggested.policy"
sed "s|^policy = .*|policy = $T/try/*.policy|" "$T/ksb.conf" > "$T/try.conf"
KC() { "$KSB_BUILDDIR/ksbctl/ksbctl" -f "$T/try.conf" "$@"; }
KT() { KC policy test suggested "$1" > /dev/null 2>&1; }
ksb_check "ksbctl policy check accepts the draft with the test's policy" \
	'KC policy check > "$T/try.check" 2>&1 &&
	 grep -q "configuration OK" "$T/try.check"'
q="SELECT DISTINCT host || ':' || port FROM connections WHERE instance ="
q="$q 'ag1' AND host IS NOT NULL AND host != 'ksb-selftest.invalid' AND"
used=$(ksb_sql "$q decision = 'allow'")
refused=$(ksb_sql "$q decision = 'deny' AND
	reason IN ('not_in_allowlist', 'ip_literal')")
echo "audit: used $(echo $used), refused $(echo $refused)"
ksb_check "the run has both used and refused names" \
	'[ -n "$used" ] && [ -n "$refused" ]'
for h in $refused; do
	ksb_check "refused $h: refused by the test's policy" \
		'! ctl policy test default "$h" > /dev/null 2>&1'
done
names=$(printf '%s\n' $used $refused | sort -u)
for h in $names; do
	ksb_check "applied: $h allowed" 'KT "$h"'
done
never=never-asked-$$.test
ksb_check "$never is not in the audit" \
	'[ "$(ksb_rows "host = '"'$never'"'")" = 0 ]'
ksb_check "applied: $never still refused" '! KT "$never"'
seen=
for h in $names; do
	n=${h%:*}; port=${h##*:}
	case $n in *[!0-9.]*) ;; *) continue ;; esac	# an address
	sib=ksb-sibling-$$.${n#*.}
	if grep -qF "allow *.${n#*.}:" "$T/draft"; then
		echo "# a wildcard *.${n#*.} was proposed: $sib covered"
	elif [ "${seen#* $sib:$port }" = "$seen" ]; then
		seen="$seen $sib:$port "
		ksb_check "applied: sibling $sib:$port refused (no wildcard)" \
			'! KT "$sib:$port"'
	fi
	o=$((port == 443 ? 8443 : 443))
	w="instance = 'ag1' AND host = '$n' AND port = $o"
	if [ "$(ksb_rows "$w")" = 0 ]; then
		ksb_check "applied: $n:$o (a port never asked) refused" \
			'! KT "$n:$o"'
	fi
done

ksb_check_template
[ "$fails" = 0 ] || ksb_fail "$fails check(s) failed"
echo "PASS"
