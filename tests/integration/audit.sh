#!/bin/bash
# audit.sh: the audit database of a real ksb-gatewayd (issue 5).
#
# Phase 1, crash: a steady stream of tunnels from a "guest" (a namespace on
# a veth in ksb0 with an address leased by tests/integration/ctlhold),
# then kill -9.  After a restart, every tunnel that forwarded a byte has
# its allowed row (checked by client port for every completed request, and
# by count against the origin's own tally of connections that carried
# data), `ksbctl audit verify' passes and the totals count every row once.
# Phase 2, faults: the state directory is a small tmpfs of the test's own.
# A read-only database file (chattr +i), a full filesystem and a removed
# file each get connections refused with audit_unavailable (503), one log
# line per episode, and recovery without a restart.
# Phase 3, SIGTERM: every denied request answered before SIGTERM has its
# row after the gateway exits.
set -eu
. "$(dirname "$0")/../lib.sh"

ksb_need_root
ksb_need chattr
HOLD=$KSB_BUILDDIR/tests/integration/ctlhold
KSBCTL=$KSB_BUILDDIR/ksbctl/ksbctl
[ -x "$HOLD" ] || ksb_fail "$HOLD not built (make check builds it)"
ksb_env

# The state directory on a small tmpfs (the full-filesystem fault), mounted
# before the gateway starts so that its mount namespace has it too.
mount -t tmpfs -o size=16m,mode=0700 ksbt-audit "$T/state"
audit_cleanup() {
	local rc=$?
	set +e
	[ -n "${KSB_GATEWAY_PID:-}" ] && kill "$KSB_GATEWAY_PID" 2>/dev/null
	chattr -i "$T/state/audit.db" 2>/dev/null
	umount -l "$T/state" 2>/dev/null
	(exit "$rc")
	ksb_cleanup
}
trap audit_cleanup EXIT
ksb_origin

fails=0
pass=0
# fetch N [HOST]: one request through the proxy from guest N; prints
# "<client port> <CONNECT status> <HTTP status>".
fetch() {
	ip netns exec "ksbt-$$-g$1" timeout 30 curl -sS --max-time 10 \
		--proxy http://10.77.0.1:3128 --cacert "$T/pki/ca.pem" \
		-o /dev/null -w '%{local_port} %{http_connect} %{http_code}\n' \
		"https://${2:-allowed.test}/index.txt" 2>/dev/null || true
}
ctl() { ip netns exec "$GW" "$KSBCTL" -f "$T/ksb.conf" "$@"; }
episodes() { grep -c 'refusing new connections' "$T/gatewayd.log" || true; }
# until_fetch N WANT TRIES: fetch until the CONNECT status is WANT.
until_fetch() {
	local i out
	for i in $(seq 1 "$3"); do
		out=$(fetch "$1")
		case "$out" in *" $2 "*) return 0 ;; esac
		sleep 0.2
	done
	return 1
}

# ---- phase 1: kill -9 under a steady stream of tunnels ---------------------
ksb_say "phase 1: kill -9 under load"
# The origin's tally: connections on which data arrived (first data
# packet of each flow: a SYN or a bare ACK is shorter than 65 bytes).
ip netns exec "$OR" nft -f - <<'NFT'
table inet ksbaudit {
	chain in {
		type filter hook input priority 0;
		tcp dport 443 ip length > 64 ct mark 0 counter ct mark set 1
	}
}
NFT
ksb_gateway
ksb_fake_guest 1 crash-1
stream() {
	local i
	for i in $(seq 1 400); do
		[ -e "$T/stop" ] && break
		fetch 1 >> "$T/stream$1"
	done
}
spids=
for k in 1 2 3; do : > "$T/stream$k"; stream "$k" & spids="$spids $!"; done
# (Bounded for a loaded machine: the kill waits for 30 completed requests.)
thirty_done() { [ "$(cat "$T"/stream? | grep -c ' 200 200$')" -ge 30 ]; }
ksb_until 120 thirty_done || true
kill -9 "$KSB_GATEWAY_PID"
wait "$KSB_GATEWAY_PID" 2>/dev/null || true
touch "$T/stop"
for p in $spids; do timeout 60 tail --pid="$p" -f /dev/null || true; done
ksb_unguest 1
ok_ports=$(cat "$T"/stream? | awk '$3 == 200 { print $1 }' | sort -u)
n_ok=$(echo "$ok_ports" | grep -c . || true)
tally=$(ip netns exec "$OR" nft list table inet ksbaudit |
	sed -n 's/.*counter packets \([0-9]*\).*/\1/p')
echo "completed requests: $n_ok, origin connections with data: $tally"
ksb_gateway
values=$(echo "$ok_ports" | sed 's/.*/(&)/' | paste -sd, -)
ksb_check "requests completed before the kill" '[ "$n_ok" -ge 30 ]'
ksb_check "every completed request has its allowed row" \
	'[ "$(ksb_sql "SELECT count(*) FROM (VALUES $values) v WHERE NOT EXISTS (SELECT 1 FROM connections c WHERE c.instance = '"'crash-1'"' AND c.decision = '"'allow'"' AND c.client_port = v.column1)")" = 0 ]'
allowed=$(ksb_sql "SELECT count(*) FROM connections WHERE instance = 'crash-1' AND decision = 'allow'")
echo "allowed rows: $allowed"
ksb_check "allowed rows >= connections that carried data to the origin" \
	'[ -n "$tally" ] && [ "$allowed" -ge "$tally" ]'
ksb_check "tunnels open at the kill closed as gateway_restart" \
	'[ "$(ksb_sql "SELECT count(*) FROM active_tunnels")" = 0 ]'
ksb_check "ksbctl audit verify passes after the crash" 'ctl audit verify'
# The totals are summed per group commit in memory (audit/audit.c): a
# kill between two commits loses none and counts none twice.
ksb_check "totals after the crash: every row counted once" \
	'[ "$(ksb_sql "SELECT connections FROM totals_instance WHERE instance = '"'crash-1'"'")" = "$(ksb_sql "SELECT count(*) FROM connections WHERE instance = '"'crash-1'"'")" ]'

# ---- phase 2: faults -------------------------------------------------------
ksb_say "phase 2: faults"
ksb_fake_guest 2 fault-2
ksb_check "allowed before any fault" 'until_fetch 2 200 5'

# Read-only database file.
e0=$(episodes)
chattr +i "$T/state/audit.db"
ksb_check "read-only file: refused with 503" 'until_fetch 2 503 25'
ksb_check "read-only file: X-Ksb-Deny audit_unavailable" \
	'ip netns exec "ksbt-$$-g2" curl -sS --max-time 10 --proxy http://10.77.0.1:3128 -o /dev/null -D - https://allowed.test/ 2>/dev/null | grep -q "X-Ksb-Deny: audit_unavailable"'
fetch 2 >/dev/null
ksb_check "read-only file: logged once" '[ "$(episodes)" = $((e0 + 1)) ]'
chattr -i "$T/state/audit.db"
ksb_check "read-only file: recovered" 'until_fetch 2 200 50'
# (Denials are queued while the file cannot be written, and written after.)
ksb_check "read-only file: refusals recorded after recovery" \
	'ksb_rows_ge 2 "reason = '"'audit_unavailable'"'"'

# Full filesystem.
e0=$(episodes)
dd if=/dev/zero of="$T/state/filler" bs=64k 2>/dev/null || true
ksb_check "full filesystem: refused with 503" 'until_fetch 2 503 100'
ksb_check "full filesystem: logged once" '[ "$(episodes)" = $((e0 + 1)) ]'
rm -f "$T/state/filler"
ksb_check "full filesystem: recovered" 'until_fetch 2 200 50'

# Removed database file.
e0=$(episodes)
before=$(ksb_sql "SELECT count(*) FROM connections")
rm -f "$T/state/audit.db"
ksb_check "removed file: refused" 'until_fetch 2 503 25'
ksb_check "removed file: recovered" 'until_fetch 2 200 50'
ksb_check "removed file: a new database anchored on the old chain" \
	'[ "$(ksb_sql "SELECT reason FROM chain_anchor")" = replaced ]'
ksb_check "removed file: logged once" '[ "$(episodes)" = $((e0 + 1)) ]'
ksb_check "removed file: verify passes on the new database" 'ctl audit verify'
grep -E 'audit' "$T/gatewayd.log" | sed 's/^/# /'

# ---- a second gateway on the same state and audit database -----------------
ksb_say "a second ksb-gatewayd refuses before touching anything"
# (policy_versions: written only at start and reload, so a stable count.)
pv0=$(ksb_sql "SELECT count(*) FROM policy_versions")
set +e
ip netns exec "$GW" "$KSB_BUILDDIR/ksb-gatewayd" -d -f "$T/ksb.conf" > "$T/second.log" 2>&1
second=$?
set -e
cat "$T/second.log"
ksb_check "it exits 1" '[ "$second" = 1 ]'
ksb_check "naming the running one and the lock" \
	'grep -q "another ksb-gatewayd (pid $KSB_GATEWAY_PID) uses this state directory (.*/gatewayd.lock is locked)" "$T/second.log"'
ksb_check "it recorded no policy version and re-adopted nothing" \
	'[ "$(ksb_sql "SELECT count(*) FROM policy_versions")" = "$pv0" ] && ! grep -q "re-adopted\|forgetting" "$T/second.log"'
ksb_check "the chain still verifies" 'ctl audit verify'
ksb_check "the running gateway still serves" '[ "$(fetch 2 allowed.test | cut -d" " -f3)" = 200 ]'

# ---- phase 3: SIGTERM flushes the queue -------------------------------------
ksb_say "phase 3: SIGTERM flush"
: > "$T/denied"
dpids=
for k in $(seq 1 20); do fetch 2 denied.test >> "$T/denied" & dpids="$dpids $!"; done
# (Twenty curl processes start at once: bounded for a loaded machine.)
ten_denied() { [ "$(grep -c ' 403 ' "$T/denied")" -ge 10 ]; }
ksb_until 60 ten_denied || true
kill -TERM "$KSB_GATEWAY_PID"
timeout 30 tail --pid="$KSB_GATEWAY_PID" -f /dev/null || true
for p in $dpids; do timeout 30 tail --pid="$p" -f /dev/null || true; done
n403=$(grep -c ' 403 ' "$T/denied" || true)
values=$(awk '$2 == 403 { print "(" $1 ")" }' "$T/denied" | paste -sd, -)
ksb_check "denied requests answered before SIGTERM: $n403" '[ "$n403" -ge 10 ]'
ksb_check "every answered denial has its row after exit" \
	'[ "$(ksb_sql "SELECT count(*) FROM (VALUES $values) v WHERE NOT EXISTS (SELECT 1 FROM connections c WHERE c.reason = '"'not_in_allowlist'"' AND c.client_port = v.column1)")" = 0 ]'
ksb_check "verify passes after SIGTERM" 'ctl audit verify'
ksb_unguest 2

echo "# $pass passed, $fails failed"
[ "$fails" = 0 ]
