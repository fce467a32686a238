#!/bin/bash
# e2e smoke test: ksb-run boots a real guest behind a real ksb-gatewayd (in
# its own network namespace and temp dir), runs a command as the agent user
# and passes its exit status back.  Needs root, QEMU and a guest kernel
# ($KSB_KERNEL/$KSB_MODULES, else /var/cache/ksb/kernel via
# contrib/fetch-kernel.sh); exits 77 naming what is missing.
set -eu
. "$(dirname "$0")/../lib.sh"

ksb_need_root
ksb_need qemu-system-x86_64 pgrep
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

[ "$fails" = 0 ] || ksb_fail "$fails check(s) failed"
echo "PASS"
