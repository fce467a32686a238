#!/bin/bash
# e2e smoke test: ksb-run boots a real guest behind a real ksb-gatewayd (in
# its own network namespace and temp dir), runs a command as the agent user
# and passes its exit status back.  Needs root, QEMU and a guest kernel
# ($KSB_KERNEL/$KSB_MODULES, else /var/cache/ksb/kernel via
# contrib/fetch-kernel.sh); exits 77 naming what is missing.
set -eu
. "$(dirname "$0")/../lib.sh"

ksb_need_root
ksb_need qemu-system-x86_64 pgrep nft python3	# nft, python3: the hole
ksb_need_built ksb-run ksb-guest-init ksb-gatewayd
ksb_kernel
ksb_env
ksb_gateway

fails=0

ksb_say "ephemeral instance: id -u; exit 7"
set +e
timeout 180 ip netns exec "$GW" "$KSB_BUILDDIR/ksb-run" -f "$T/ksb.conf" \
	-- /bin/sh -c 'id -u; exit 7' </dev/null >"$T/out1" 2>"$T/err1"
rc=$?
set -e
cat "$T/out1"; cat "$T/err1" >&2
ksb_check "exit status 7 passed through" '[ "$rc" = 7 ]'
ksb_check "command ran as uid 1000" 'grep -qx 1000 "$T/out1"'
ksb_check "stdout holds only the command output" '[ "$(wc -l < "$T/out1")" = 1 ]'
ksb_check "stderr names the instance and the accel" \
	'grep -Eq "instance e-[0-9a-f]{8}: 10\.77\.0\.[0-9]+/24 .*accel (kvm|tcg)" "$T/err1"'
ksb_check "the guest passed the enforcement self-test" \
	'grep -Eq "enforcement self-test passed: 7 probes failed as they must" "$T/err1"'
ksb_check "ephemeral instance dir removed" '[ -z "$(ls -A "$T/state/instances" 2>/dev/null)" ]'

ksb_say "named instance: a command that is not there"
set +e
timeout 180 ip netns exec "$GW" "$KSB_BUILDDIR/ksb-run" -f "$T/ksb.conf" \
	--name boot-test -- /nonexistent/cmd </dev/null >"$T/out2" 2>"$T/err2"
rc=$?
set -e
cat "$T/out2"; cat "$T/err2" >&2
ksb_check "command not found: status 127" '[ "$rc" = 127 ]'
ksb_check "named instance dir kept" '[ -d "$T/state/instances/boot-test" ]'

ksb_say "SIGTERM to ksb-run stops the guest and unregisters"
ip netns exec "$GW" "$KSB_BUILDDIR/ksb-run" -f "$T/ksb.conf" --name boot-term \
	-- /bin/sleep 600 </dev/null >"$T/out3" 2>"$T/err3" &
pid=$!
# The guest runs the command (a boot under TCG on a loaded machine: a
# generous bound); ksb-run gone early ends the wait too.
started() { grep -q "instance boot-term: command started" "$T/err3" || ! kill -0 "$pid" 2>/dev/null; }
ksb_until 240 started || true
kill -TERM "$pid"
set +e
timeout 30 tail --pid="$pid" -f /dev/null
wait "$pid"
rc=$?
set -e
cat "$T/err3" >&2
ksb_check "SIGTERM: status 143" '[ "$rc" = 143 ]'
ksb_check "no QEMU left behind" '! pgrep -f "ksb.id=boot-term " >/dev/null'

# The self-test fails closed: a hole opened on purpose in the gateway's
# own ruleset (the gateway's port 22, which tcp-gateway probes, accepted
# both ways, and something listening there) stops the command before it
# runs.  Last: the hole stays until the namespace goes.
ksb_say "a hole in the gateway: the self-test refuses the command"
ip netns exec "$GW" python3 -c '
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("10.77.0.1", 22))
s.listen(8)
open(sys.argv[1], "w").close()
s.settimeout(240)
try:
    while True:
        c, a = s.accept()
        open(sys.argv[1], "a").write("connect from %s\n" % a[0])
        c.close()
except socket.timeout:
    pass
' "$T/hole.log" &
KSB_PIDS="$KSB_PIDS $!"
ksb_until 10 test -e "$T/hole.log"
ip netns exec "$GW" nft insert rule inet ksb input iifname ksb0 tcp dport 22 accept
ip netns exec "$GW" nft insert rule inet ksb output oifname ksb0 tcp sport 22 accept
set +e
timeout 180 ip netns exec "$GW" "$KSB_BUILDDIR/ksb-run" -f "$T/ksb.conf" \
	-- /bin/sh -c 'echo COMMAND-RAN' </dev/null >"$T/out4" 2>"$T/err4"
rc=$?
set -e
cat "$T/out4"; cat "$T/err4" >&2
ksb_check "hole: the probe really got through (the listener saw it)" \
	'grep -q "connect from 10.77.0." "$T/hole.log"'
ksb_check "hole: ksb-run exits 125" '[ "$rc" = 125 ]'
ksb_check "hole: the command did not run" '! grep -q COMMAND-RAN "$T/out4"'
ksb_check "hole: the failed probe is named" \
	'grep -q "enforcement self-test FAILED: probe tcp-gateway got through" "$T/err4"'
ksb_check "hole: the refusal is said last" \
	'tail -n 3 "$T/err4" | grep -q "refused to start the command: the enforcement self-test failed, probe tcp-gateway"'
ksb_check "hole: no 'command started'" '! grep -q "command started" "$T/err4"'

[ "$fails" = 0 ] || ksb_fail "$fails check(s) failed"
echo "PASS"
