#!/bin/bash
# e2e: a real QEMU guest started by ksb-run behind a real ksb-gatewayd, a
# real TLS origin, real nftables, a real SQLite audit file.  See
# tests/e2e/guest.sh for what runs inside the guest.
set -eu
. "$(dirname "$0")/../lib.sh"

ksb_need_root
ksb_need qemu-system-x86_64 python3	# python3: UDP witness
ksb_kernel
ksb_env
ksb_origin
ksb_gateway
cp "$KSB_SRCDIR/tests/e2e/guest.sh" "$T/share/guest.sh"
chmod 755 "$T/share/guest.sh"

# Witness: a UDP listener on the gateway's port 53 that must hear nothing.
ip netns exec "$GW" python3 -c '
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("10.77.0.1", 53))
s.settimeout(300)
try:
    d, a = s.recvfrom(512)
    open(sys.argv[1], "w").write("got %r from %s\n" % (d, a))
except socket.timeout:
    pass
' "$T/udp53.log" &
KSB_PIDS="$KSB_PIDS $!"

ksb_say "ksb-run: booting the guest"
start=$(date +%s.%N)
set +e
timeout -k 10 300 ip netns exec "$GW" "$KSB_BUILDDIR/ksb-run" -f "$T/ksb.conf" --name e2e-test \
	--state-dir "$T/state" --share-ro "$T/share:/ksb-test" \
	-- /bin/sh /ksb-test/guest.sh > "$T/guest.out" 2> "$T/run.err"
rc=$?
set -e
end=$(date +%s.%N)
cat "$T/guest.out"
cat "$T/run.err" >&2
echo "ksb-run exit status $rc after $(echo "$end - $start" | bc 2>/dev/null || echo "?") s"

fails=0
ksb_check "ksb-run exited 0 (every guest check passed)" '[ "$rc" = 0 ]'
for r in agent_uid proxy_env no_resolver allowed denied_403 direct_blocked \
	gateway_port_blocked dns_lookup sni_mismatch allowed_again; do
	ksb_check "guest: $r" "grep -qx 'RESULT $r ok' '$T/guest.out'"
done
ksb_check "no UDP datagram reached the gateway's port 53" '[ ! -s "$T/udp53.log" ]'

ksb_say "audit rows"
# The audit writer commits in its own thread: the rows are polled for (the
# registration's end, in particular, is queued as ksb-run unregisters).
ksb_check "allow row for allowed.test with the instance ID and bytes" \
	'ksb_rows_ge 2 "instance = '"'"'e2e-test'"'"' AND host = '"'"'allowed.test'"'"' AND decision = '"'"'allow'"'"' AND sni = '"'"'allowed.test'"'"' AND bytes_down > 0 AND close_reason IS NOT NULL"'
ksb_check "deny row for denied.test (not_in_allowlist)" \
	'ksb_row_is 1 "instance = '"'"'e2e-test'"'"' AND host = '"'"'denied.test'"'"' AND decision = '"'"'deny'"'"' AND reason = '"'"'not_in_allowlist'"'"'"'
ksb_check "deny row for the SNI mismatch" \
	'ksb_row_is 1 "instance = '"'"'e2e-test'"'"' AND host = '"'"'allowed.test'"'"' AND sni = '"'"'denied.test'"'"' AND decision = '"'"'deny'"'"' AND reason = '"'"'sni_mismatch'"'"'"'
ksb_check "registration row closed" \
	'ksb_sql_is 1 "SELECT count(*) FROM registrations WHERE instance = '"'"'e2e-test'"'"' AND unregistered_ms IS NOT NULL"'
ksb_sql "SELECT id, instance, host, port, sni, decision, reason, bytes_up, bytes_down, close_reason FROM connections ORDER BY id" | tee "$T/rows"

ksb_say "nftables after ksb-run exited"
ip netns exec "$GW" nft list ruleset > "$T/ruleset"
grep -A3 'set guests' "$T/ruleset"
ksb_check "tables present" 'grep -q "table inet ksb" "$T/ruleset" && grep -q "table bridge ksb" "$T/ruleset"'
ksb_check "guest gone from the sets" '! grep -q "10.77.0.2" "$T/ruleset"'
ksb_check "ksbctl list shows the named instance stopped, no lease" \
	'ip netns exec "$GW" "$KSB_BUILDDIR/ksbctl/ksbctl" -f "$T/ksb.conf" list --json | grep -q "\"id\":\"e2e-test\",\"state\":\"stopped\""'
ksb_check "ksbctl audit shows the rows" 'ip netns exec "$GW" "$KSB_BUILDDIR/ksbctl/ksbctl" -f "$T/ksb.conf" audit | grep -q "denied.test.*not_in_allowlist"'

echo "# $((14 + 4 + 4 - fails)) passed, $fails failed"
[ "$fails" = 0 ]
