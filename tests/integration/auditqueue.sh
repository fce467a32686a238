#!/bin/bash
# auditqueue.sh: a row still queued for its commit when the proxy process
# dies is closed (proxy_restarted) at the proxy's restart, not at the next
# gateway restart (issue 29).  A real ksb-gatewayd -v; the audit database
# is held locked by a second SQLite writer (BEGIN IMMEDIATE, released by
# the test) so that a guest's allowed row waits in the writer's queue; the
# parent's "audit row N queued" line (-v) says it has it; the real proxy
# process is killed (SIGKILL) and the parent restarts it; the lock goes.
# The row is then written and closed with reason proxy_restarted, while
# the same gateway runs.
set -eu
. "$(dirname "$0")/../lib.sh"

ksb_need_root
ksb_need python3 pgrep
HOLD=$KSB_BUILDDIR/tests/integration/ctlhold
[ -x "$HOLD" ] || ksb_fail "$HOLD not built (make check builds it)"
ksb_env
ksb_origin

fails=0
pass=0
: > "$T/gatewayd.log"
ip netns exec "$GW" "$KSB_BUILDDIR/ksb-gatewayd" -d -v -f "$T/ksb.conf" \
	>>"$T/gatewayd.log" 2>&1 &
KSB_GATEWAY_PID=$!
KSB_PIDS="$KSB_PIDS $KSB_GATEWAY_PID"
ready() { [ -S "$T/gateway.sock" ] && grep -q '^ksb-gatewayd: ready: ' "$T/gatewayd.log"; }
ksb_until 60 ready || ksb_fail "ksb-gatewayd did not become ready"
ksb_fake_guest 1 queue-1
logged_now() { grep -q -- "$1" "$T/gatewayd.log"; }
proxy_pid() { pgrep -P "$KSB_GATEWAY_PID" -x ksb-proxy | head -n 1; }
P1=$(proxy_pid)
ksb_check "a proxy process runs" '[ -n "$P1" ]'

# The second writer: holds the write lock until $T/release exists (<= 30 s).
python3 - "$T/state/audit.db" "$T" <<'PY' &
import os, sqlite3, sys, time
db = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=30)
db.execute("BEGIN IMMEDIATE")
open(sys.argv[2] + "/locked", "w").close()
end = time.time() + 30
while not os.path.exists(sys.argv[2] + "/release") and time.time() < end:
    time.sleep(0.05)
db.execute("COMMIT")
PY
LOCKER=$!
KSB_PIDS="$KSB_PIDS $LOCKER"
locked() { [ -e "$T/locked" ]; }
ksb_until 30 locked || ksb_fail "the audit database could not be locked"

ip netns exec "ksbt-$$-g1" timeout 30 curl -sS --max-time 20 \
	--proxy http://10.77.0.1:3128 --cacert "$T/pki/ca.pem" -o /dev/null \
	-w '%{local_port} %{http_connect}\n' https://allowed.test/index.txt \
	> "$T/curl.out" 2>/dev/null &
CURL=$!
ksb_check "the parent has the allowed row queued (audit row N queued)" \
	'ksb_until 20 logged_now "audit row [0-9]* queued"'
row=$(sed -n 's/.*audit row \([0-9]*\) queued.*/\1/p' "$T/gatewayd.log" | tail -n 1)
kill -KILL "$P1"
ksb_check "the parent restarts the killed proxy" \
	'ksb_until 20 logged_now "proxy process $P1: .*restarting it"'
touch "$T/release"
wait "$LOCKER" || true
wait "$CURL" || true
sed 's/^/# curl: /' "$T/curl.out"
closed() {
	[ "$(ksb_sql "SELECT close_reason FROM connections WHERE id = $row")" = proxy_restarted ]
}
ksb_check "row $row written and closed proxy_restarted, the gateway still running" \
	'ksb_until 20 closed && kill -0 "$KSB_GATEWAY_PID"'
ksb_check "no tunnel row left open" \
	'[ "$(ksb_sql "SELECT count(*) FROM connections WHERE decision = '"'allow'"' AND closed_ms IS NULL")" = 0 ]'
ksb_check "the chain verifies" \
	'ip netns exec "$GW" "$KSB_BUILDDIR/ksbctl/ksbctl" -f "$T/ksb.conf" audit verify'
ksb_unguest 1

echo "# $pass passed, $fails failed"
[ "$fails" = 0 ]
