#!/bin/bash
# ctlflood.sh: the control socket against a flooding local user (issue
# 17).  `nobody' opens as many connections as it is given (8 of the 64
# unprivileged slots: the 9th is refused) and sends 20000 requests it may
# not make on one of them; meanwhile another unprivileged user (`daemon')
# still lists the instances and root still registers one.  The refusals
# are all counted, but logged at most twice a second.
set -eu
. "$(dirname "$0")/../lib.sh"

ksb_need_root
ksb_need python3
ksb_need setpriv
getent passwd daemon >/dev/null || ksb_skip "needs the user daemon"
HOLD=$KSB_BUILDDIR/tests/integration/ctlhold
[ -x "$HOLD" ] || ksb_fail "$HOLD not built (make check builds it)"
ksb_env
ksb_gateway
fails=0
pass=0
mkdir -m 1777 "$T/x"
cat > "$T/x/flood.py" <<'PY'
import socket, sys, time
path, n = sys.argv[1], int(sys.argv[2])
def conn():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(20)
    s.connect(path)
    return s
def line(s):
    b = b""
    while not b.endswith(b"\n"):
        d = s.recv(1)
        if not d:
            break
        b += d
    return b.decode().strip()
held = [conn() for _ in range(8)]
extra = conn()
print("ninth: " + (line(extra) or "closed"), flush=True)
t0 = time.monotonic()
s = held[0]
f = s.makefile("rb")
got = 0
for k in range(0, n, 50):  # in batches: each read before the next
    m = min(50, n - k)
    s.sendall(b"REGISTER x default\n" * m)
    for _ in range(m):
        l = f.readline()
        if l.startswith(b"ERR permission denied"):
            got += 1
print("denied %d of %d in %.2f s" % (got, n, time.monotonic() - t0),
      flush=True)
sys.stdin.readline()  # held until the test says so (or EOF)
PY
N=20000
start=$SECONDS
mkfifo -m 666 "$T/x/go"
setpriv --reuid nobody --regid nogroup --clear-groups \
	timeout 120 python3 "$T/x/flood.py" "$T/gateway.sock" "$N" \
	< "$T/x/go" > "$T/flood.out" 2>&1 &
FP=$!
KSB_PIDS="$KSB_PIDS $FP"
exec {GO}>"$T/x/go"
ksb_until 90 grep -q '^denied ' "$T/flood.out" || true
flood_s=$((SECONDS - start))
ksb_check "nobody's 9th connection refused: $(head -n 1 "$T/flood.out")" \
	'grep -qx "ninth: ERR too many connections from your uid; try again" "$T/flood.out"'
ksb_check "every request answered: $(sed -n 2p "$T/flood.out")" \
	'grep -q "^denied $N of $N in" "$T/flood.out"'
list() {
	setpriv --reuid daemon --regid daemon --clear-groups timeout 20 \
		python3 -c 'import socket,sys
s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.sendall(b"LIST\n")
print(s.makefile().readline().strip())' "$T/gateway.sock"
}
got=$(list 2>&1) || true
ksb_check "daemon lists while nobody holds its 8: '$got'" '[ "$got" = END ]'
ksb_fake_guest 1 c1
ksb_check "root registers meanwhile" 'grep -q "^ip=" "$T/lease1"'
# One more refusal in a later second logs the count of them all.
more() {
	setpriv --reuid daemon --regid daemon --clear-groups timeout 5 python3 -c 'import socket,sys
s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.sendall(b"RELOAD\n"); s.recv(100)' "$T/gateway.sock"
	grep -Eq "refused since start" "$T/gatewayd.log" &&
		[ "$(grep -o '([0-9]* refused since start)' "$T/gatewayd.log" | tail -n 1 | tr -dc 0-9)" -gt "$N" ]
}
ksb_until 20 more || true
lines=$(grep -c 'control: .*refus' "$T/gatewayd.log" || true)
bound=$(( (SECONDS - start + 2) * 2 ))
ksb_check "all $N refusals counted: $(grep -o '([0-9]* refused since start)' "$T/gatewayd.log" | tail -n 1)" \
	'[ "$(grep -o "([0-9]* refused since start)" "$T/gatewayd.log" | tail -n 1 | tr -dc 0-9)" -gt "$N" ]'
ksb_check "logged at a bounded rate: $lines lines in $((SECONDS - start)) s (flood $flood_s s), at most $bound" \
	'[ "$lines" -le "$bound" ]'
# The line limit (proto/ctl.h: CTL_LINE_MAX bytes, its '\n' included):
# 4096 bytes with the '\n' are a request, one more byte is not, and
# neither is 4096 bytes still waiting for theirs.
edge() {
	timeout 20 python3 -c 'import socket,sys
s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
n=int(sys.argv[2]); s.sendall(b"X"*n + (b"\n" if sys.argv[3]=="nl" else b""))
print(s.makefile().readline().strip())' "$T/gateway.sock" "$1" "$2"
}
got=$(edge 4095 nl 2>&1) || true
ksb_check "a line of CTL_LINE_MAX bytes is read: '$got'" \
	'[ -n "$got" ] && [ "${got#ERR request too long}" = "$got" ]'
got=$(edge 4096 nl 2>&1) || true
ksb_check "one byte more is refused: '$got'" \
	'[ "${got#ERR request too long}" != "$got" ]'
got=$(edge 4096 no 2>&1) || true
ksb_check "CTL_LINE_MAX bytes with no end refused: '$got'" \
	'[ "$got" = "ERR request too long" ]'
echo go >&"$GO"
exec {GO}>&-
ksb_check "gateway alive" 'kill -0 "$KSB_GATEWAY_PID"'
echo "# $pass passed, $fails failed"
[ "$fails" = 0 ]
