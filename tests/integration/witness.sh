#!/bin/bash
# witness.sh: the audit chain's head witnessed outside the database
# (issue 17).  A gateway, a guest, a few tunnels, SIGTERM: the gateway
# logs "audit head SEQ:HASH" at start and after its last flush.  Then the
# end of the chain is cut consistently (the last records and what mirrors
# them removed): `ksbctl audit verify' fails against the logged head, given as
# --head-from LOG or --head SEQ:HASH; verify alone finds it too, by the
# head the gateway recorded in its state database (issue 29).  A rewritten record at the head is
# found too.  Then the keyed chain (audit-key: HMAC-SHA256 with a root-only
# key): refused on an unkeyed database and with a readable key file,
# verified with the key, broken with another one.
set -eu
. "$(dirname "$0")/../lib.sh"

ksb_need_root
HOLD=$KSB_BUILDDIR/tests/integration/ctlhold
KSBCTL=$KSB_BUILDDIR/ksbctl/ksbctl
[ -x "$HOLD" ] || ksb_fail "$HOLD not built (make check builds it)"
ksb_env
ksb_origin
ksb_gateway
fails=0
pass=0
ctl() { "$KSBCTL" -f "$T/ksb.conf" "$@"; }
fetch() {
	ip netns exec "ksbt-$$-g1" timeout 30 curl -sS --max-time 10 \
		--proxy http://10.77.0.1:3128 --cacert "$T/pki/ca.pem" \
		-o /dev/null -w '%{http_code}\n' "https://$1/index.txt" 2>&1 || true
}

ksb_fake_guest 1 w1
for h in allowed.test denied.test allowed.test; do fetch "$h" > /dev/null; done
# Every tunnel's close record before the unregistration, so that the
# records cut below (those after the last close) are never none: on a
# loaded machine the last close could follow it.
all_closed() {
	[ "$(ksb_sql "SELECT count(*) FROM connections WHERE decision = 'allow' AND id NOT IN
	    (SELECT conn_id FROM closes)")" = 0 ]
}
ksb_until 20 all_closed || ksb_fail "a tunnel's close record is missing"
ksb_unguest 1
kill "$KSB_GATEWAY_PID"
ksb_wait_dead "$KSB_GATEWAY_PID" || true
head=$(sed -n 's/^ksb-gatewayd: audit head //p' "$T/gatewayd.log" | tail -n 1)
seq=${head%%:*}
dbhead=$(ctl audit verify --json | python3 -c 'import json,sys; o=json.load(sys.stdin); print("%d:%s" % (o["head_seq"], o["head"]))')
ksb_check "the head logged at shutdown is the database's: $head" '[ "$head" = "$dbhead" ]'
ksb_check "verify --head-from the log: intact" \
	'ctl audit verify --head-from "$T/gatewayd.log" > /dev/null'
ksb_check "verify --head SEQ:HASH: intact" 'ctl audit verify --head "$head" > /dev/null'

# Cut the end: every record after the last connection or close record
# (the unregistration and what follows), and the mirror of each.
# (A new database's first head, the policy record, is committed after
# the start; a restarted gateway logs the head it finds at start.)
S=$T/state/audit.db
cp "$S" "$T/before.db"
cut=$(ksb_sql "SELECT max(seq) FROM (SELECT seq FROM connections UNION ALL SELECT seq FROM closes)")
ksb_sql "DELETE FROM unregistrations WHERE seq > $cut;
	UPDATE registrations SET unregistered_ms = NULL
	    WHERE id NOT IN (SELECT reg_id FROM unregistrations);
	DELETE FROM policy_versions WHERE seq > $cut;
	DELETE FROM registrations WHERE seq > $cut;"
ksb_check "records cut: $((seq - cut)) (seq $((cut + 1))..$seq)" '[ "$cut" -lt "$seq" ]'
# Verify alone finds it too since the gateway records the head in its
# state database (issue 29; a witness still sees what that record, every
# 2 s, and a copy of the database without it cannot).
out=$(ctl audit verify 2>&1) && rc=0 || rc=$?
ksb_check "verify alone finds the cut by the state database's head: $out" \
	'[ "$rc" = 1 ] && echo "$out" | grep -q "the state database.s recorded head is seq $seq: records cut from its end"'
out=$(ctl audit verify --head-from "$T/gatewayd.log" 2>&1) && rc=0 || rc=$?
ksb_check "verify --head-from the log finds the cut: $out" \
	'[ "$rc" = 1 ] && echo "$out" | grep -q "the chain ends at seq $cut, the witnessed head is seq $seq: records cut from its end"'
out=$(ctl audit verify --head "$head" --json 2>&1) && rc=0 || rc=$?
ksb_check "verify --head finds it too (JSON)" \
	'[ "$rc" = 1 ] && echo "$out" | grep -q "\"ok\": *false"'

# The head record rewritten (its hash too): the witness disagrees.
cp "$T/before.db" "$S"
rm -f "$S-wal" "$S-shm"
ksb_sql "UPDATE unregistrations SET hash = zeroblob(32) WHERE seq = $seq"
out=$(ctl audit verify --head "$head" 2>&1) && rc=0 || rc=$?
ksb_check "a rewritten head record: $out" \
	'[ "$rc" = 1 ] && echo "$out" | grep -q "BROKEN at unregistrations seq $seq"'
ksb_say "a restart logs the head it finds"
cp "$T/before.db" "$S"
rm -f "$S-wal" "$S-shm" "$T/gateway.sock"
ksb_gateway
ksb_check "the head at start: $head" \
	'grep -qx "ksb-gatewayd: audit head $head" "$T/gatewayd.log"'
out=$(ctl audit verify --head "12:zz" 2>&1) && rc=0 || rc=$?
ksb_check "a malformed --head is refused (2): $out" '[ "$rc" = 2 ]'

ksb_say "the keyed chain (audit-key)"
kill "$KSB_GATEWAY_PID"
ksb_wait_dead "$KSB_GATEWAY_PID" || true
head -c 32 /dev/urandom > "$T/audit.key"
head -c 32 /dev/urandom > "$T/wrong.key"
chmod 0600 "$T/audit.key" "$T/wrong.key"
echo "audit-key = $T/audit.key" >> "$T/ksb.conf"
rm -f "$T/gateway.sock"
out=$(timeout 20 ip netns exec "$GW" "$KSB_BUILDDIR/ksb-gatewayd" -d -f "$T/ksb.conf" 2>&1) && rc=0 || rc=$?
ksb_check "an unkeyed chain with audit-key set: refused ($rc)" \
	'[ "$rc" != 0 ] && echo "$out" | grep -q "its chain is not keyed"'
chmod 0644 "$T/audit.key"
out=$(timeout 20 ip netns exec "$GW" "$KSB_BUILDDIR/ksb-gatewayd" -d -f "$T/ksb.conf" 2>&1) && rc=0 || rc=$?
ksb_check "a key file others can read: refused: $out" \
	'[ "$rc" = 1 ] && echo "$out" | grep -q "must be root.s and mode 0600 or 0400"'
chmod 0600 "$T/audit.key"
mv "$S" "$T/unkeyed.db"
rm -f "$S-wal" "$S-shm" "$T/gateway.sock"
# A new keyed chain from seq 1 on purpose: the state database's record of
# the unkeyed chain's head goes too (else the start refuses, --new-audit).
sqlite3 "$T/state/state.db" "DELETE FROM audit_head"
ksb_gateway
ksb_fake_guest 2 w2
fetch denied.test > /dev/null
ksb_unguest 2
kill "$KSB_GATEWAY_PID"
ksb_wait_dead "$KSB_GATEWAY_PID" || true
ksb_check "keyed: verify with audit-key passes, against the head too" \
	'ctl audit verify --head-from "$T/gatewayd.log" > /dev/null'
ksb_check "the database is marked keyed" \
	'[ "$(ksb_sql "PRAGMA application_id")" = "$((0x6b73624b))" ]'
out=$(ctl audit verify --key "$T/wrong.key" 2>&1) && rc=0 || rc=$?
ksb_check "another key breaks it at the first record: $out" \
	'[ "$rc" = 1 ] && echo "$out" | grep -q "BROKEN at .* seq 1 "'
ksb_sql "PRAGMA application_id = 0" > /dev/null
out=$(ctl audit verify 2>&1) && rc=0 || rc=$?
ksb_check "its mark removed: reported: $out" \
	'[ "$rc" = 1 ] && echo "$out" | grep -q "chain is not keyed"'

echo "# $pass passed, $fails failed"
[ "$fails" = 0 ]
