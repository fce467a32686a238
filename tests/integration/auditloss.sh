#!/bin/bash
# auditloss.sh: no silent audit loss (issue 29).  The gateway records the
# audit chain's head in its state database (table audit_head) at start,
# every 2 s while it moves and at shutdown.  A start that finds audit.db
# missing, or 0 bytes, where a head was recorded refuses with one line
# naming --new-audit; --new-audit starts a new chain anchored at the
# recorded head (chain_anchor reason lost), logged.  `ksbctl audit
# verify' compares the chain with the recorded head: a chain whose head
# rows were removed fails, naming the truncation.  A start also refuses a
# database that does not reach the recorded head (an older copy rolled
# back; one whose record at the head's seq has another hash) and records
# nothing; one ahead of it (a crash after a commit, before the head was
# recorded) starts; --new-audit moves one behind it aside (kept) and
# anchors a new chain at the head.  Each start and stop
# is a real ksb-gatewayd in the test's own namespace; the records are its
# own (a policy_versions row at every start).
set -eu
. "$(dirname "$0")/../lib.sh"

ksb_need_root
KSBCTL=$KSB_BUILDDIR/ksbctl/ksbctl
ksb_env

fails=0
pass=0
ctl() { ip netns exec "$GW" "$KSBCTL" -f "$T/ksb.conf" "$@"; }
state() { sqlite3 -bail -cmd '.timeout 10000' "$T/state/state.db" "$1"; }
stop_gw() {
	kill -TERM "$KSB_GATEWAY_PID"
	timeout 30 tail --pid="$KSB_GATEWAY_PID" -f /dev/null || true
}
# try_start [ARGS]: a gateway that must refuse; its exit status in $rc.
try_start() {
	set +e
	timeout 60 ip netns exec "$GW" "$KSB_BUILDDIR/ksb-gatewayd" -d \
		-f "$T/ksb.conf" "$@" > "$T/refused.log" 2>&1
	rc=$?
	set -e
	sed 's/^/# /' "$T/refused.log"
}
max_seq() {
	ksb_sql "SELECT max(s) FROM (SELECT max(seq) s FROM policy_versions
		UNION ALL SELECT max(seq) FROM registrations
		UNION ALL SELECT max(seq) FROM connections)"
}

ksb_say "the head is recorded in the state database"
ksb_gateway
stop_gw
ksb_gateway
stop_gw
head=$(max_seq)
ksb_check "two starts: the audit has records (seq $head)" '[ "$head" -ge 2 ]'
ksb_check "the state database recorded the head at shutdown" \
	'[ "$(state "SELECT seq FROM audit_head")" = "$head" ]'
ksb_check "... with the record's hash" \
	'[ "$(state "SELECT hex(hash) FROM audit_head")" = "$(ksb_sql "SELECT hex(hash) FROM policy_versions WHERE seq = $head")" ]'
ksb_check "ksbctl audit verify passes against it" 'ctl audit verify'

ksb_say "a missing audit.db refuses the start"
cp "$T/state/audit.db" "$T/audit.keep"
rm -f "$T/state/audit.db" "$T/state/audit.db-wal" "$T/state/audit.db-shm"
try_start
ksb_check "missing: exit 1" '[ "$rc" = 1 ]'
ksb_check "missing: one line naming --new-audit and the recorded seq" \
	'[ "$(wc -l < "$T/refused.log")" = 1 ] && grep -q "audit.db is missing or empty, but the state database recorded its chain up to seq $head: .*--new-audit" "$T/refused.log"'
ksb_check "missing: no database was created" '[ ! -e "$T/state/audit.db" ]'

ksb_say "an empty (0 bytes) audit.db refuses the start"
: > "$T/state/audit.db"
try_start
ksb_check "empty: exit 1 naming --new-audit" \
	'[ "$rc" = 1 ] && grep -q -- "--new-audit" "$T/refused.log"'
ksb_check "empty: still 0 bytes" '[ ! -s "$T/state/audit.db" ]'

ksb_say "--new-audit starts a new chain after the loss"
hhash=$(state "SELECT hex(hash) FROM audit_head")
: > "$T/gatewayd.log"
ip netns exec "$GW" "$KSB_BUILDDIR/ksb-gatewayd" -d --new-audit \
	-f "$T/ksb.conf" >>"$T/gatewayd.log" 2>&1 &
KSB_GATEWAY_PID=$!
KSB_PIDS="$KSB_PIDS $KSB_GATEWAY_PID"
ready() { grep -q '^ksb-gatewayd: ready: ' "$T/gatewayd.log"; }
ksb_check "--new-audit: it starts" 'ksb_until 60 ready'
ksb_check "--new-audit: logged, naming the recorded seq" \
	'grep -q -- "--new-audit: audit-db .* was missing or empty; the state database recorded its chain up to seq $head" "$T/gatewayd.log"'
ksb_check "--new-audit: a chain_anchor row, reason lost, at the recorded head" \
	'[ "$(ksb_sql "SELECT seq, reason, hex(hash) FROM chain_anchor")" = "$head|lost|$hhash" ]'
ksb_check "--new-audit: its first record follows the recorded head" \
	'[ "$(ksb_sql "SELECT min(seq) FROM policy_versions")" = $((head + 1)) ]'
stop_gw
ksb_check "--new-audit: verify passes (anchored)" \
	'ctl audit verify | grep -q "anchored"'
ksb_check "--new-audit: the state records the new chain's head" \
	'[ "$(state "SELECT seq FROM audit_head")" = "$(max_seq)" ]'

ksb_say "a chain with its head rows removed fails verify"
ksb_gateway
stop_gw
h2=$(max_seq)
cp "$T/state/audit.db" "$T/audit.good"
ksb_sql "DELETE FROM policy_versions WHERE seq = $h2"
set +e
ctl audit verify > "$T/verify.out" 2>&1
vrc=$?
set -e
sed 's/^/# /' "$T/verify.out"
ksb_check "truncated: verify exits 1" '[ "$vrc" = 1 ]'
ksb_check "truncated: it names the cut and the recorded head" \
	'grep -q "the chain ends at seq $((h2 - 1)), the state database.s recorded head is seq $h2: records cut from its end (truncated)" "$T/verify.out"'
ksb_say "a database from an older backup fails verify too"
cp "$T/audit.keep" "$T/state/audit.db"
rm -f "$T/state/audit.db-wal" "$T/state/audit.db-shm"
ksb_check "old backup: verify exits 1, truncated" \
	'! ctl audit verify > "$T/verify.out" 2>&1 && grep -q "truncated" "$T/verify.out"'


ksb_say "a database rolled back to an older copy refuses the start"
h2hash=$(state "SELECT lower(hex(hash)) FROM audit_head")
try_start
ksb_check "rolled back: exit 1" '[ "$rc" = 1 ]'
ksb_check "rolled back: one line, the recorded head, what was found, --new-audit" \
	'[ "$(wc -l < "$T/refused.log")" = 1 ] && grep -q "audit.db does not reach the head the state database recorded (seq $h2, hash $h2hash): its chain ends at seq $head; .*--new-audit" "$T/refused.log"'
ksb_check "rolled back: the recorded head is kept" \
	'[ "$(state "SELECT seq, lower(hex(hash)) FROM audit_head")" = "$h2|$h2hash" ]'
ksb_check "rolled back: no record was added" '[ "$(max_seq)" = "$head" ]'
try_start
ksb_check "rolled back: a second start refuses too" '[ "$rc" = 1 ]'
ksb_check "rolled back: verify still fails" '! ctl audit verify > /dev/null 2>&1'

ksb_say "a database whose record at the head's seq has another hash refuses"
cp "$T/audit.good" "$T/state/audit.db"
hrow=$(ksb_sql "SELECT 'policy_versions' FROM policy_versions WHERE seq = $h2
	UNION ALL SELECT 'registrations' FROM registrations WHERE seq = $h2
	UNION ALL SELECT 'connections' FROM connections WHERE seq = $h2")
ksb_sql "UPDATE $hrow SET hash = randomblob(32) WHERE seq = $h2"
try_start
ksb_check "another hash: exit 1, one line naming it and --new-audit" \
	'[ "$rc" = 1 ] && [ "$(wc -l < "$T/refused.log")" = 1 ] && grep -q "(seq $h2, hash $h2hash): its record at seq $h2 has hash [0-9a-f]\{64\} (another chain); .*--new-audit" "$T/refused.log"'
ksb_check "another hash: the recorded head is kept" \
	'[ "$(state "SELECT seq, lower(hex(hash)) FROM audit_head")" = "$h2|$h2hash" ]'

ksb_say "a database ahead of the recorded head starts (crash before the head's record)"
cp "$T/audit.good" "$T/state/audit.db"
prev=$((h2 - 1))
phash=$(ksb_sql "SELECT hex(hash) FROM policy_versions WHERE seq = $prev
	UNION ALL SELECT hex(hash) FROM registrations WHERE seq = $prev
	UNION ALL SELECT hex(hash) FROM connections WHERE seq = $prev")
state "UPDATE audit_head SET seq = $prev, hash = x'$phash'"
ksb_gateway
stop_gw
ksb_check "ahead: it started, and continued the chain" '[ "$(max_seq)" -gt "$h2" ]'
ksb_check "ahead: the state records the new head" \
	'[ "$(state "SELECT seq FROM audit_head")" = "$(max_seq)" ]'
ksb_check "ahead: verify passes" 'ctl audit verify > /dev/null'

ksb_say "--new-audit moves a database behind the head aside and anchors anew"
h3=$(max_seq)
h3hash=$(state "SELECT hex(hash) FROM audit_head")
cp "$T/audit.keep" "$T/state/audit.db"
: > "$T/gatewayd.log"
ip netns exec "$GW" "$KSB_BUILDDIR/ksb-gatewayd" -d --new-audit \
	-f "$T/ksb.conf" >>"$T/gatewayd.log" 2>&1 &
KSB_GATEWAY_PID=$!
KSB_PIDS="$KSB_PIDS $KSB_GATEWAY_PID"
ksb_check "behind, --new-audit: it starts" 'ksb_until 60 ready'
ksb_check "behind, --new-audit: logged, naming where the old database went" \
	'grep -q -- "--new-audit: audit-db .* was behind it, moved to .*/audit.db.behind-$h3; the state database recorded its chain up to seq $h3" "$T/gatewayd.log"'
ksb_check "behind, --new-audit: the old database kept as it was" \
	'[ "$(sqlite3 "$T/state/audit.db.behind-$h3" "SELECT max(seq) FROM policy_versions")" = "$(sqlite3 "$T/audit.keep" "SELECT max(seq) FROM policy_versions")" ]'
ksb_check "behind, --new-audit: anchored at the recorded head, reason lost" \
	'[ "$(ksb_sql "SELECT seq, reason, hex(hash) FROM chain_anchor")" = "$h3|lost|$h3hash" ]'
stop_gw
ksb_check "behind, --new-audit: verify passes (anchored)" \
	'ctl audit verify | grep -q "anchored"'

echo "# $pass passed, $fails failed"
[ "$fails" = 0 ]
