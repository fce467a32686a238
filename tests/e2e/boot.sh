#!/bin/bash
# e2e smoke test: ksb-run boots a real guest behind a real ksb-gatewayd (in
# its own network namespace and temp dir), runs a command as the agent user
# and passes its exit status back.  The enforcement self-test: passed at
# boot and after a reload (audit records), failing closed at boot and after
# a reload when a hole is opened on purpose.  Needs root, QEMU and a guest kernel
# ($KSB_KERNEL/$KSB_MODULES, else /var/cache/ksb/kernel via
# contrib/fetch-kernel.sh); exits 77 naming what is missing.
set -eu
. "$(dirname "$0")/../lib.sh"

ksb_need_root
ksb_need qemu-system-x86_64 pgrep nft python3 sqlite3	# nft, python3: the hole
ksb_need_built ksb-run ksb-guest-init ksb-gatewayd ksbctl/ksbctl
ksb_kernel
ksb_env
# Rules are added to the gateway's tables on purpose below; its own check
# (gateway/parent/rulecheck.c) would take them out again: off.
echo "nft-check-interval = 0" >> "$T/ksb.conf"
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
ksb_check "the boot self-test is an audit record" \
	'ksb_sql_is 1 "SELECT count(*) FROM selftests WHERE instance LIKE '"'e-%'"' AND trigger = '"'boot'"' AND result = '"'ok'"' AND probes = 7 AND failed IS NULL AND action = '"'none'"' AND duration_ms >= 0 AND length(policy_digest) = 64"'
# The gateway refuses the direct probes at once (gateway/net/nft.c): none
# waits out SELFTEST_PROBE_MS (300 ms) of silence (checked after the
# reload below, where the test runs alone; at boot it shares the one
# vCPU with init's mounts, so its time is only shown).  Its refusals are
# counted: resets (tcp-gateway, tcp-neighbour, tcp-outside: the guest's
# default route is the gateway), ICMP (dns-gateway, dns-outside), and
# the neighbour probe's frame, sent to the neighbour's MAC, taken up to
# the host instead.
st_ms=$(ksb_sql "SELECT duration_ms FROM selftests WHERE instance LIKE 'e-%' AND trigger = 'boot'")
echo "# boot self-test: $st_ms ms"
nftc() {
	ip netns exec "$GW" nft list chain "$1" ksb "$2" | grep -F -- "$3" |
		sed -n 's/.*counter packets \([0-9]*\).*/\1/p' | head -n 1
}
ksb_check "the gateway reset the TCP probes ($(nftc inet prerouting 'tcp reset'))" \
	'[ "$(nftc inet prerouting "tcp reset")" -ge 3 ]'
ksb_check "the gateway answered the DNS probe with ICMP ($(nftc inet prerouting 'icmpx'))" \
	'[ "$(nftc inet prerouting icmpx)" -ge 2 ]'
ksb_check "the neighbour probe's frame went to the host ($(nftc bridge prerouting 'pkttype set host'))" \
	'[ "$(nftc bridge prerouting "pkttype set host")" -ge 1 ]'

ksb_say "named instance: a command that is not there"
set +e
timeout 180 ip netns exec "$GW" "$KSB_BUILDDIR/ksb-run" -f "$T/ksb.conf" \
	--name boot-test -- /nonexistent/cmd </dev/null >"$T/out2" 2>"$T/err2"
rc=$?
set -e
cat "$T/out2"; cat "$T/err2" >&2
ksb_check "command not found: status 127" '[ "$rc" = 127 ]'
ksb_check "named instance dir kept" '[ -d "$T/state/instances/boot-test" ]'

ksb_say "SIGTERM to ksb-run's process group stops the guest and unregisters"
# Its own process group (setsid: as a scheduler's job), SIGTERM to all of
# it, QEMU included, as Slurm, systemd or a ^C would: QEMU ignores it, the
# guest stops through ksb-run.
setsid ip netns exec "$GW" "$KSB_BUILDDIR/ksb-run" -f "$T/ksb.conf" --name boot-term \
	-- /bin/sleep 600 </dev/null >"$T/out3" 2>"$T/err3" &
pid=$!
# The guest runs the command (a boot under TCG on a loaded machine: a
# generous bound); ksb-run gone early ends the wait too.
started() { grep -q "instance boot-term: command started" "$T/err3" || ! kill -0 "$pid" 2>/dev/null; }
ksb_until 240 started || true
# A reload through the control path: the guest tests again while the
# command runs; the result is a record with trigger reload.
"$KSB_BUILDDIR/ksbctl/ksbctl" -f "$T/ksb.conf" reload
ksb_check "reload: the running guest passed the self-test again" \
	'ksb_sql_is 1 "SELECT count(*) FROM selftests WHERE instance = '"'boot-term'"' AND trigger = '"'reload'"' AND result = '"'ok'"' AND probes = 7 AND action = '"'none'"'"'
ksb_check "reload: the command kept running" 'kill -0 "$pid" && ! grep -q "stopping the instance" "$T/err3"'
rl_ms=$(ksb_sql "SELECT duration_ms FROM selftests WHERE instance = 'boot-term' AND trigger = 'reload'")
echo "# reload self-test: $rl_ms ms"
ksb_check "reload: the self-test waited for no silence either ($rl_ms ms < 300)" \
	'[ -n "$rl_ms" ] && [ "$rl_ms" -lt 300 ]'
ksb_check "ksb-run leads its process group" '[ "$(ps -o pgid= -p "$pid" | tr -d " ")" = "$pid" ]'
kill -TERM -- "-$pid"
set +e
timeout 30 tail --pid="$pid" -f /dev/null
wait "$pid"
rc=$?
set -e
cat "$T/err3" >&2
ksb_check "SIGTERM: status 143" '[ "$rc" = 143 ]'
ksb_check "SIGTERM: the guest stopped cleanly (its status, its poweroff)" \
	'grep -q "instance boot-term: stopped cleanly" "$T/err3"'
ksb_check "SIGTERM: QEMU did not die of the group's SIGTERM" '! grep -q "terminating on signal" "$T/err3"'
ksb_check "no QEMU left behind" '! pgrep -f "ksb.id=boot-term " >/dev/null'

# The self-test fails closed: a hole opened on purpose in the gateway's
# own ruleset (the gateway's port 22, which tcp-gateway probes, accepted
# both ways, and something listening there).  Opened while an instance
# runs, the next reload's self-test finds it and the instance is stopped;
# then a new instance's command is never started.  Last: the hole stays
# until the namespace goes.
ksb_say "a hole opened while an instance runs: the reload's self-test stops it"
ip netns exec "$GW" "$KSB_BUILDDIR/ksb-run" -f "$T/ksb.conf" --name boot-hole \
	-- /bin/sleep 600 </dev/null >"$T/out5" 2>"$T/err5" &
pid=$!
started() { grep -q "instance boot-hole: command started" "$T/err5" || ! kill -0 "$pid" 2>/dev/null; }
ksb_until 240 started || true
ksb_open_hole "$T/hole.log"
kill -HUP "$KSB_GATEWAY_PID"	# the other reload path: SIGHUP
set +e
timeout 60 tail --pid="$pid" -f /dev/null
wait "$pid"
rc=$?
set -e
cat "$T/err5" >&2
ksb_check "reload hole: ksb-run stopped the instance, exit 125" '[ "$rc" = 125 ]'
ksb_check "reload hole: the failed probe is named" \
	'grep -q "enforcement self-test after the reload FAILED: tcp-gateway; stopping the instance" "$T/err5"'
ksb_check "reload hole: a fail record says the instance was stopped" \
	'ksb_sql_is 1 "SELECT count(*) FROM selftests WHERE instance = '"'boot-hole'"' AND trigger = '"'reload'"' AND result = '"'fail'"' AND failed = '"'tcp-gateway'"' AND action = '"'stopped'"'"'
ksb_check "reload hole: no QEMU left behind" '! pgrep -f "ksb.id=boot-hole " >/dev/null'
ksb_check "reload hole: unregistered" \
	'ksb_sql_is 1 "SELECT count(*) FROM registrations WHERE instance = '"'boot-hole'"' AND unregistered_ms IS NOT NULL"'

ksb_say "a hole in the gateway: the self-test refuses the command"
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
ksb_check "hole: a boot fail record says the command was refused" \
	'ksb_sql_is 1 "SELECT count(*) FROM selftests WHERE trigger = '"'boot'"' AND result = '"'fail'"' AND failed = '"'tcp-gateway'"' AND action = '"'refused'"' AND instance LIKE '"'e-%'"'"'

ksb_say "ksbctl audit selftests lists them; audit verify covers them"
"$KSB_BUILDDIR/ksbctl/ksbctl" -f "$T/ksb.conf" audit selftests --json >"$T/st.json"
cat "$T/st.json"
ksb_check "audit selftests: boot, reload and both failures listed" \
	'python3 -c "import json,sys; r=json.load(open(sys.argv[1])); k=sorted((x[\"trigger\"],x[\"result\"],x[\"action\"]) for x in r); sys.exit(k != sorted([(\"boot\",\"ok\",\"none\")]*4 + [(\"reload\",\"ok\",\"none\"),(\"reload\",\"fail\",\"stopped\"),(\"boot\",\"fail\",\"refused\")]))" "$T/st.json"'
ksb_check "audit selftests --failed: the two failures" \
	'[ "$("$KSB_BUILDDIR/ksbctl/ksbctl" -f "$T/ksb.conf" audit selftests --failed --csv | wc -l)" = 3 ]'
ksb_check "audit verify: the chain with the self-test records is intact" \
	'"$KSB_BUILDDIR/ksbctl/ksbctl" -f "$T/ksb.conf" audit verify'

[ "$fails" = 0 ] || ksb_fail "$fails check(s) failed"
echo "PASS"
