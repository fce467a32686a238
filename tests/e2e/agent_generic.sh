#!/bin/bash
# e2e: the generic --agent path (no preset), real QEMU guests behind a real
# ksb-gatewayd, own namespaces and temp dir:
#  - a command whose first word is on no directory of the guest's PATH is
#    refused before boot, with the word, exit 1;
#  - headless: the command line is run whole by /bin/sh (a `;' list, `&&',
#    a NAME=value prefix), the turn's text is its last word, the secret is
#    in the agent's environment (shown as [secret TOKEN]); a turn that
#    eats the guest's memory ends and says the guest ran out of memory;
#    the guest's PATH has contrib/fetch-agents.sh's bin; a prompt to the
#    stopped instance boots it, saying a headless agent resumes;
#  - interactive, --agent-ready/--agent-busy: an agent that drops what is
#    typed before it is ready (tcflush) gets each turn once, and only when
#    the pane shows the ready string and not the busy one;
#  - interactive without a pattern: the prompt waits for a still pane.
# Needs root, QEMU, tmux, python3 and a guest kernel (exit 77).
set -eu
. "$(dirname "$0")/../lib.sh"

ksb_need_root
ksb_need qemu-system-x86_64 /usr/bin/tmux /usr/bin/python3
ksb_need_built ksb-run ksb-guest-init ksb-gatewayd ksbctl/ksbctl
ksb_kernel
KSB_TEST_TEMPLATE=default # the default start: from a template under TCG
ksb_env
ksb_gateway

fails=0
ctl() { timeout 120 "$KSB_BUILDDIR/ksbctl/ksbctl" -f "$T/ksb.conf" "$@"; }
run() { timeout 180 ip netns exec "$GW" "$KSB_BUILDDIR/ksb-run" -f "$T/ksb.conf" "$@"; }
I=$T/state/instances

# Headless: the turn, by its text.
cat > "$T/share/turn.sh" <<'TURN'
case $2 in
eat) exec python3 -c 'a = []
while True: a.append(bytearray(8 << 20))' ;;
*) printf 'said %s %s [%s] %s\n' "$1" "$X" "$TOKEN" "$2"
	case :$PATH: in
	*:/usr/local/lib/ksb-agents/node_modules/.bin:*) echo "fetch-agents.sh's bin on PATH" ;;
	esac ;;
esac
TURN
# Interactive: a TUI that flushes what was typed before it is ready; it
# shows "READY>" with "BUSY" below it while busy, then "READY>" alone.
cat > "$T/share/tui.py" <<'TUI'
import os, socket, sys, termios, time
pattern = len(sys.argv) > 1
n = 0
while True:
	if pattern:
		sys.stdout.write("\033[H\033[2JREADY>\nBUSY\n")
	else:
		sys.stdout.write("\033[H\033[2J")
	sys.stdout.flush()
	time.sleep(3)
	termios.tcflush(0, termios.TCIFLUSH)
	sys.stdout.write("\033[H\033[2JREADY>\n")
	sys.stdout.flush()
	line = sys.stdin.readline().strip()
	n += 1
	s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
	s.sendto(("done turn %d got %s" % (n, line)).encode(), "/run/ksb/agent/report.sock")
TUI
chmod 644 "$T/share/turn.sh" "$T/share/tui.py"

ksb_say "a missing agent binary: refused before boot"
rc=0
run --detach --name gm --agent 'FOO=1 no-such-agent-ksb --x' > "$T/out-m" 2> "$T/err-m" || rc=$?
cat "$T/out-m" "$T/err-m"
ksb_check "exit 1" '[ "$rc" = 1 ]'
ksb_check "one line naming the word" \
	'grep -q "agent: .no-such-agent-ksb. not found on the guest.s PATH" "$T/err-m"'

ksb_say "three guests: headless, interactive with patterns, without"
KSB_AGENT_SECRET=tok-$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')
export KSB_AGENT_SECRET
# shellcheck disable=SC2016
run --detach --name gh --share-ro "$T/share:/data" --agent-mode headless \
	--secret TOKEN=env:KSB_AGENT_SECRET \
	--agent 'W=word; true && X=x sh /data/turn.sh "$W"' > /dev/null 2> "$T/err-h" &
h=$!
run --detach --name gp --share-ro "$T/share:/data" --agent-ready 'READY>' \
	--agent-busy 'BUSY' --agent-hooks end \
	--agent 'python3 /data/tui.py pattern' > /dev/null 2> "$T/err-p" &
p=$!
run --detach --name gs --share-ro "$T/share:/data" \
	--agent 'python3 /data/tui.py' > /dev/null 2> "$T/err-s" &
s=$!
for j in $h $p $s; do wait "$j" || fails=$((fails + 1)); done
cat "$T/err-h" "$T/err-p" "$T/err-s"
for n in gh gp gs; do KSB_PIDS="$KSB_PIDS $(sed -n 's/^pid=//p' "$I/$n/state" 2>/dev/null || true)"; done

ctl prompt gh --wait 'hello there' > "$T/w-h1" 2>&1 || true
cat "$T/w-h1"
ksb_check "headless: the whole line ran, the text its last word, the secret set" \
	'grep -q "said word x \[\[secret TOKEN\]\] hello there" "$T/w-h1"'
ksb_check "headless: the turn ended done" 'grep -q "turn 1 ended: done" "$T/w-h1"'
ksb_check "the guest's PATH has fetch-agents.sh's bin" 'grep -q "fetch-agents.sh.s bin on PATH" "$T/w-h1"'

for k in 1 2; do
	ctl prompt gp --wait "ping $k" > "$T/w-p$k" 2>&1 || true
	cat "$T/w-p$k"
done
ksb_check "patterns: turn 1 typed once, when ready" 'grep -q "turn 1 done: turn 1 got ping 1" "$T/w-p1"'
ksb_check "patterns: turn 2 too, not while BUSY showed" 'grep -q "turn 2 done: turn 2 got ping 2" "$T/w-p2"'

ctl prompt gs --wait "pong" > "$T/w-s1" 2>&1 || true
cat "$T/w-s1"
ksb_check "no pattern: typed once the pane was still" 'grep -q "turn 1 done: turn 1 got pong" "$T/w-s1"'

ksb_say "a turn that eats the guest's memory"
ctl prompt gh --wait 'eat' > "$T/w-h2" 2>&1 || true
cat "$T/w-h2"
ksb_check "the turn ended failed" 'grep -q "turn 2 ended: failed" "$T/w-h2"'
ksb_check "and said the guest ran out of memory" \
	'grep -q "the guest ran out of memory.*--memory" "$T/w-h2" && grep -q "guest: the guest ran out of memory" "$I/gh/ksb-run.log"'

grep guest: "$I/gh/ksb-run.log" || true

ksb_say "a prompt to the stopped headless instance boots it"
ctl stop gh > /dev/null
ksb_check "stopped" 'ctl list | grep -Eq "^gh +stopped"'
ctl prompt gh --wait 'again' > "$T/w-h3" 2> "$T/w-h3.err" || true
cat "$T/w-h3.err" "$T/w-h3"
KSB_PIDS="$KSB_PIDS $(sed -n 's/^pid=//p' "$I/gh/state")"
ksb_check "booting it, not saying a headless agent starts fresh" \
	'grep -q "booting it (a headless agent resumes its conversation" "$T/w-h3.err"'
ksb_check "the turn after the boot" 'grep -q "said word x \[\[secret TOKEN\]\] again" "$T/w-h3"'
for n in gh gp gs; do ctl stop "$n" > /dev/null 2>&1 || true; done
[ "$fails" = 0 ] || ksb_fail "$fails checks failed"
echo "PASS"
