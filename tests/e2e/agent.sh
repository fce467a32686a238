#!/bin/bash
# e2e agent mode (real QEMU guest behind a real ksb-gatewayd, own
# namespaces and temp dir): a scripted shell agent in tmux driven through
# three turns with ksbctl prompt --wait; a resend with the same key is
# not typed twice; ksbctl logs; the gateway restarted mid-run and the
# lease resumed (the guest's next curl works).  Needs root, QEMU, tmux and
# a guest kernel (exit 77).
set -eu
. "$(dirname "$0")/../lib.sh"

ksb_need_root
command -v qemu-system-x86_64 >/dev/null || ksb_skip "needs qemu-system-x86_64"
[ -x /usr/bin/tmux ] || ksb_skip "needs /usr/bin/tmux (shared into the guest)"
for b in ksb-run ksb-guest-init ksb-gatewayd ksbctl; do
	[ -x "$KSB_BUILDDIR/$b" ] || ksb_skip "$b not built"
done
ksb_kernel
ksb_env
ksb_origin
ksb_gateway

fails=0
check() { if eval "$2"; then echo "ok - $1"; else echo "not ok - $1"; fails=$((fails + 1)); fi; }
ctl() { timeout 120 "$KSB_BUILDDIR/ksbctl" -f "$T/ksb.conf" "$@"; }
I=$T/state/instances

# The scripted agent: one line per turn, a file per turn, a report.
cat > "$T/share/agent.sh" <<'AGENT'
n=0
while IFS= read -r line; do
	n=$((n + 1))
	printf '%s\n' "$line" > ~/turn$n
	case $line in
	curl*) r=$(curl -sS --cacert /data/ca.pem https://allowed.test/index.txt 2>&1 | head -c 80) ;;
	*) r=ok ;;
	esac
	ksb-report done "turn $n: $r"
done
AGENT
chmod 644 "$T/share/agent.sh"

ksb_say "boot an agent instance with a first prompt"
t0=$(date +%s.%N)
id=$(timeout 180 ip netns exec "$GW" "$KSB_BUILDDIR/ksb-run" -f "$T/ksb.conf" --detach \
	--name ag1 --disk-size 1G --share-ro "$T/share:/data" --idle 20 \
	--agent 'bash /data/agent.sh' --prompt 'first task' 2>"$T/err")
echo "detach returned after $(echo "$(date +%s.%N) - $t0" | bc) s: $id"
cat "$T/err" >&2
check "--detach printed the ID" '[ "$id" = ag1 ]'
KSB_PIDS="$KSB_PIDS $(sed -n 's/^pid=//p' "$I/ag1/state")"	# stopped on exit
check "agent.sock exists" '[ -S "$I/ag1/agent.sock" ]'

ksb_say "three turns with prompt --wait"
for k in 2 3; do
	t0=$(date +%s.%N)
	ctl prompt ag1 "task number $k" --wait > "$T/w$k"
	echo "turn round trip $(echo "$(date +%s.%N) - $t0" | bc) s"
	cat "$T/w$k"
done
check "turn 2 ended done" 'grep -q "turn 2 ended: done" "$T/w2"'
check "turn 3 ended done" 'grep -q "turn 3 ended: done" "$T/w3"'
check "turn 3 report text" 'grep -q "turn 3: ok" "$T/w3"'
ctl prompt ag1 "task four" --key k4 > "$T/k1"
ctl prompt ag1 "task four" --key k4 --wait --json > "$T/k2"
cat "$T/k1" "$T/k2"
check "a resend with the same key gets the same turn" 'grep -q "turn 4" "$T/k1" && grep -q "\"turn\":4,\"dup\":true" "$T/k2"'
check "the resend ended once, done" '[ "$(grep -c "\"event\":\"end\"" "$T/k2")" = 1 ] && grep -q "\"state\":\"done\"" "$T/k2"'
check "state file shows the agent" 'grep -q "^agent_state=done" "$I/ag1/state"'
grep '^agent' "$I/ag1/state"
grep "delivered" "$I/ag1/ksb-run.log" | tail -n 4 || true

ksb_say "gateway restart: the lease is resumed"
kill -TERM "$KSB_GATEWAY_PID"
timeout 20 tail --pid="$KSB_GATEWAY_PID" -f /dev/null || true
ksb_gateway
for _ in $(seq 1 300); do grep -q "lease resumed" "$I/ag1/ksb-run.log" && break; sleep 0.1; done
check "ksb-run resumed its lease" 'grep -q "lease resumed" "$I/ag1/ksb-run.log"'
ctl prompt ag1 "curl please" --wait > "$T/w5"
cat "$T/w5"
check "the guest's curl after the restart works" 'grep -q "$ORIGIN_BODY" "$T/w5"'

ksb_say "logs"
ctl logs ag1 > "$T/logs"
tail -n 12 "$T/logs"
check "logs show the pane" 'grep -q "task number 3" "$T/logs"'
check "logs show the reports" 'grep -q "done turn 3: ok" "$T/logs"'
check "every prompt typed exactly once" '[ "$(grep -c "^task four" "$T/logs")" -le 2 ]'

ksb_say "stop"
ctl stop ag1 >/dev/null
check "stopped" 'ctl list | grep -Eq "^ag1 +stopped"'

[ "$fails" = 0 ] || ksb_fail "$fails check(s) failed"
echo "PASS"
