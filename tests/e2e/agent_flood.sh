#!/bin/bash
# e2e agent mode, the host side under a hostile guest root: ksb-run runs
# tests/e2e/agent_flood_guest.py in place of QEMU (KSB_QEMU), which speaks
# the agent protocol on the real control socketpair and floods it with
# overlong lines, binary garbage, forged and malformed frames, pings,
# reports and pane output for 12 s.  While it floods, ksbctl prompt --wait
# still gets its turn through, once; ksb-run stays up, its memory, its
# log and the agent's logs stay bounded.  (A real guest's init keeps the
# agent user from writing to the port; see tests/e2e/agent.sh for that
# path.)  Needs root, python3 and a guest kernel file (exit 77); no QEMU.
set -eu
. "$(dirname "$0")/../lib.sh"

ksb_need_root
ksb_need python3	# the fake guest
ksb_need_built ksb-run ksb-guest-init ksb-gatewayd ksbctl/ksbctl
ksb_kernel
ksb_env
ksb_gateway

fails=0
ctl() { timeout 30 "$KSB_BUILDDIR/ksbctl/ksbctl" -f "$T/ksb.conf" "$@"; }
secs() { echo "$(date +%s.%N) - $1" | bc; }
I=$T/state/instances

ksb_say "ksb-run with a flooding fake guest"
id=$(KSB_QEMU="$KSB_SRCDIR/tests/e2e/agent_flood_guest.py" KSB_TEST_FLOOD_S=12 \
	timeout 60 ip netns exec "$GW" "$KSB_BUILDDIR/ksb-run" -f "$T/ksb.conf" \
	--detach --name fl --accel tcg --agent 'true # the fake guest runs nothing' 2>"$T/err")
cat "$T/err" >&2
ksb_check "--detach returned the ID" '[ "$id" = fl ]'
rp=$(sed -n 's/^pid=//p' "$I/fl/state")
KSB_PIDS="$KSB_PIDS $rp"
sleep 2
rss0=$(awk '/^VmRSS/ {print $2}' "/proc/$rp/status")
cpu0=$(awk '{print $14 + $15}' "/proc/$rp/stat")
worst=0
kill -0 "$rp" || { cat "$I/fl/ksb-run.log"; ksb_fail "ksb-run died"; }
for k in 1 2 3 4 5; do
	t0=$(date +%s.%N)
	ctl prompt fl "prompt $k" --wait > "$T/p$k" 2>&1 || true
	dt=$(secs "$t0")
	echo "turn $k round trip during the flood: $dt s"
	worst=$(echo "if ($dt > $worst) $dt else $worst" | bc)
	kill -0 "$rp" || { cat "$T/p$k" "$I/fl/ksb-run.log"; ksb_fail "ksb-run died"; }
	if ! grep -q "turn $k delivered" "$T/p$k" || [ "$(grep -c "ended: done" "$T/p$k")" != 1 ] ||
		! grep -q "fake done" "$T/p$k"; then
		cat "$T/p$k"; tail -n 5 "$I/fl/agent.events" "$I/fl/ksb-run.log" | cut -c1-160
	fi
	ksb_check "turn $k delivered and ended done, once" \
		'grep -q "turn $k delivered" "$T/p$k" && [ "$(grep -c "ended: done" "$T/p$k")" = 1 ] && grep -q "fake done" "$T/p$k"'
	sleep 1
done
rss1=$(awk '/^VmRSS/ {print $2}' "/proc/$rp/status")
hwm=$(awk '/^VmHWM/ {print $2}' "/proc/$rp/status")
cpu1=$(awk '{print $14 + $15}' "/proc/$rp/stat")
for _ in $(seq 1 100); do grep -q "fake guest: flooded" "$I/fl/ksb-run.log" && break; sleep 0.1; done
grep "fake guest: flooded" "$I/fl/ksb-run.log" || true
echo "ksb-run: RSS $rss0 -> $rss1 KiB (peak $hwm), CPU $(( (cpu1 - cpu0) * 10 )) ms over the flood"
ls -l "$I/fl/" | grep agent
ksb_check "the flood happened" 'grep -q "fake guest: flooded" "$I/fl/ksb-run.log"'
ksb_check "worst round trip under 5 s ($worst s)" '[ "$(echo "$worst < 5" | bc)" = 1 ]'
ksb_check "ksb-run alive, RSS grew < 8 MiB" 'kill -0 "$rp" && [ $((rss1 - rss0)) -lt 8192 ]'
ksb_check "ksb-run.log bounded ($(wc -l < "$I/fl/ksb-run.log") lines)" '[ "$(wc -l < "$I/fl/ksb-run.log")" -lt 60 ]'
ksb_check "agent.events bounded" '[ "$(stat -c %s "$I/fl/agent.events")" -lt 1048576 ]'
ksb_check "no forged turn end" '! grep -Eq "^[0-9]+ [1-9][0-9]* done forged" "$I/fl/agent.events"'
ksb_check "status still answers" 'ctl status fl | grep -q "^agent: *done, turn 5"'
sed -n '1,12p' "$I/fl/ksb-run.log"

ksb_say "a WAIT sent after the turn ended still gets its events"
# The fake guest ends a turn as soon as it is given: the client's WAIT
# comes only after the turn was delivered and done.  The events follow
# the TURN line on the client's connection (vmrunner/agent.c), so none
# is lost to that race (before: only END came, "delivered" never did).
out=$(timeout 20 python3 - "$I/fl/agent.sock" "$I/fl/agent.events" <<'PY'
import socket, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(sys.argv[1])
text = b"prompt late-wait"
s.sendall(b"PROMPT - %d\n" % len(text) + text)
buf = b""
while b"\n" not in buf:
    buf += s.recv(4096)
turn = int(buf.split()[1])
# Await the turn's end in agent.events (bounded), then WAIT.
end = time.time() + 10
while time.time() < end:
    if any(l.split()[1:3] == [str(turn), "done"] for l in
           open(sys.argv[2]).read().splitlines() if len(l.split()) > 2):
        break
    time.sleep(0.05)
s.sendall(b"WAIT %d\n" % turn)
s.settimeout(5)
while b"\nEND " not in buf:
    d = s.recv(4096)
    if not d:
        break
    buf += d
print(buf.decode(errors="replace"))
PY
) || true
echo "$out" | head -n 8
ksb_check "after the end, a WAIT's reply holds the turn's delivered and done events" \
	'echo "$out" | grep -q "^EVENT [0-9]* [0-9]* delivered" && echo "$out" | grep -q "^EVENT [0-9]* [0-9]* done" && echo "$out" | grep -q "^END "'

ksb_say "stop"
kill -TERM "$rp"
# (Detached, its parent is init, which may reap it late: a zombie is
# stopped, though kill -0 calls it alive.)
ksb_wait_dead "$rp" 20 || true
ksb_check "ksb-run stopped" 'ksb_dead "$rp"'

[ "$fails" = 0 ] || ksb_fail "$fails check(s) failed"
echo "PASS"
