#!/bin/bash
# loglimit.sh: a guest cannot grow the gateway's log without bound
# (issue 29).  A real ksb-gatewayd, one fake guest (tests/lib.sh) sending
# 400 CONNECTs as fast as it can to an allowed name that resolves to the
# gateway's loopback (refused address_screened, two log lines each): each
# refusal has its audit row, but the log gets at most PROXY_LOG_LINES
# (100) lines about the instance's connections a 10 s window, then one
# line counting the rest once the next window's first line goes.  No
# origin is needed: nothing gets out.
set -eu
. "$(dirname "$0")/../lib.sh"

ksb_need_root
ksb_need python3
HOLD=$KSB_BUILDDIR/tests/integration/ctlhold
[ -x "$HOLD" ] || ksb_fail "$HOLD not built (make check builds it)"
ksb_env
pass=0 fails=0
cat > "$T/policy.d/test.policy" <<POL
profile default {
    allow screened.test
    limit rate 100
}
POL
echo "127.0.0.1 screened.test" >> "$T/hosts"
ksb_gateway
ksb_fake_guest 1 g1
G1=ksbt-$$-g1

ksb_say "400 refused CONNECTs"
ip netns exec "$G1" timeout 120 python3 - <<'PY'
import socket
for i in range(400):
    s = socket.create_connection(("10.77.0.1", 3128), timeout=10)
    s.sendall(b"CONNECT screened.test:443 HTTP/1.1\r\nHost: screened.test:443\r\n\r\n")
    s.recv(4096)
    s.close()
PY
rows() { ksb_sql "SELECT count(*) FROM connections WHERE decision = 'deny' AND reason = 'address_screened'"; }
r=$(rows)
n=$(grep -c "screened.test\|screened screened" "$T/gatewayd.log" || true)
echo "# $r refusals audited, $n lines about them in the log"
ksb_check "the refusals are audited (more than 100 rows: $r)" '[ "$r" -gt 100 ]'
ksb_check "the log has at most 100 lines about them ($n)" '[ "$n" -ge 1 ] && [ "$n" -le 100 ]'
# The next window's first line says how many were not logged.
late() { # one more refusal, then: was the summary line logged?
	ip netns exec "$G1" timeout 10 python3 -c 'import socket; s = socket.create_connection(("10.77.0.1", 3128), timeout=5); s.sendall(b"CONNECT screened.test:443 HTTP/1.1\r\n\r\n"); s.recv(99)' >/dev/null 2>&1 || true
	grep -q "g1: [0-9]* lines about its connections not logged (more than 100 in 10 s" "$T/gatewayd.log"
}
ksb_check "the next window's first line counts the rest" 'ksb_until 30 late'
ksb_unguest 1

echo "# $pass passed, $fails failed"
[ "$fails" = 0 ]
