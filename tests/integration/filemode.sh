#!/bin/bash
# filemode.sh: the audit and state databases, their -wal and -shm files
# and the lock files are 0640, owner root, group control-group (issue 17):
# created so, and fixed at start when an older gateway left them looser.
# control-group is `adm' here; `nobody' (not in it) cannot read them, a
# member can.  The gateway runs with the capabilities of the systemd unit
# (contrib/ksb-gatewayd.service's CapabilityBoundingSet, read from the
# unit; setpriv, no_new_privs): no CAP_CHOWN, no CAP_DAC_OVERRIDE; a
# tunnel through it works.
set -eu
. "$(dirname "$0")/../lib.sh"

ksb_need_root
HOLD=$KSB_BUILDDIR/tests/integration/ctlhold
[ -x "$HOLD" ] || ksb_fail "$HOLD not built (make check builds it)"
ksb_need setpriv
getent group adm >/dev/null || ksb_skip "needs the group adm"
caps=$(sed -n 's/^CapabilityBoundingSet=//p' "$KSB_SRCDIR/contrib/ksb-gatewayd.service" |
	tr 'A-Z' 'a-z' | sed -e 's/cap_/+/g' -e 's/ /,/g')
[ -n "$caps" ] || ksb_fail "no CapabilityBoundingSet= in the unit"
export KSB_GATEWAY_WRAP="setpriv --bounding-set=-all,$caps --inh-caps=-all --no-new-privs"
ksb_env
ksb_origin
echo "control-group = adm" >> "$T/ksb.conf"
S=$T/state
# What an older gateway left: world-readable (and one world-writable).
touch "$S/audit.db" "$S/gatewayd.lock" "$S/audit.db.lock"
chmod 0644 "$S/audit.db" "$S/gatewayd.lock"
chmod 0666 "$S/audit.db.lock"
ksb_gateway

fails=0
pass=0
ADM=$(getent group adm | cut -d: -f3)
modes() {
	local f
	for f in audit.db audit.db-wal audit.db-shm audit.db.lock state.db \
		state.db-wal state.db-shm gatewayd.lock; do
		echo "$f $(stat -c '%a %U %G' "$S/$f" 2>&1)"
	done
}
want=$(for f in audit.db audit.db-wal audit.db-shm audit.db.lock state.db \
	state.db-wal state.db-shm gatewayd.lock; do echo "$f 640 root adm"; done)
ksb_check "every database, companion and lock file 640 root adm" \
	'[ "$(modes)" = "$want" ] || { modes; false; }'
ksb_check "the fix was logged" \
	'grep -q "audit.db: mode 0640 group $ADM, was 0644 group 0" "$T/gatewayd.log"'
ksb_check "nobody cannot read the audit database" \
	'! setpriv --reuid nobody --regid nogroup --clear-groups cat "$S/audit.db" >/dev/null 2>&1'
ksb_check "a member of control-group can (sqlite3, read-only)" \
	'[ "$(setpriv --reuid nobody --regid nogroup --groups "$ADM" sqlite3 "file:$S/audit.db?mode=ro" "SELECT count(*) FROM policy_versions" 2>&1)" = 1 ]'
# The fix must not disturb SQLite's locks (closing a descriptor of a
# database drops the process's POSIX locks on it): rows written after it
# are seen by a reader.
ksb_fake_guest 1 fm1
ksb_check "a registration after the fix is read back" \
	'ksb_sql_is 1 "SELECT count(*) FROM registrations WHERE instance = '"'fm1'"'"'
ksb_check "the gateway's bounding set is the unit's: $caps" \
	'[ "$(grep ^CapBnd /proc/$KSB_GATEWAY_PID/status | cut -f2)" != 000001ffffffffff ] &&
	 ! grep -q "^CapEff:.*000001ffffffffff" /proc/$KSB_GATEWAY_PID/status'
got=$(ip netns exec "ksbt-$$-g1" timeout 30 curl -sS --max-time 20 \
	--proxy http://10.77.0.1:3128 --cacert "$T/pki/ca.pem" \
	https://allowed.test/index.txt 2>&1) || true
ksb_check "a tunnel through it: '$got'" '[ "$got" = "$ORIGIN_BODY" ]'
ksb_unguest 1

ksb_say "restart: still 0640, nothing fixed"
kill "$KSB_GATEWAY_PID"
ksb_wait_dead "$KSB_GATEWAY_PID" || true
rm -f "$T/gateway.sock"
ksb_gateway
ksb_check "after a restart" '[ "$(modes)" = "$want" ] || { modes; false; }'
ksb_check "nothing to fix on the second start" \
	'! grep -q ": mode 0640 group" "$T/gatewayd.log"'

echo "# $pass passed, $fails failed"
[ "$fails" = 0 ]
