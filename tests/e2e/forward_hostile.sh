#!/bin/bash
# e2e forwards, the host side under a hostile guest root: ksb-run runs
# tests/e2e/forward_hostile_guest.py in place of QEMU (KSB_QEMU), which
# speaks the forward channel (proto/fwd.h) on the real socketpair.  Its
# own OPEN to a host port and its SHOT are dropped (nothing connects to
# the host port), more DATA than the window closes that stream (reason
# protocol) and its client, a broken header ends the channel; ksb-run stays
# up, logs each, and refuses new connections on the forward.  The audit's
# forward records: a forward added while the gateway restarts reaches it
# once the lease is resumed; the protocol close and the refusal (guest
# gone) are there; at stop, both forwards' removes, before the lease goes.
# Needs root, python3 and a guest kernel file (exit 77); no QEMU.
set -eu
. "$(dirname "$0")/../lib.sh"

ksb_need_root
ksb_need python3
ksb_need_built ksb-run ksb-guest-init ksb-gatewayd ksbctl/ksbctl
ksb_kernel
ksb_env
ksb_gateway

fails=0
ctl() { timeout 30 "$KSB_BUILDDIR/ksbctl/ksbctl" -f "$T/ksb.conf" "$@"; }
I=$T/state/instances/fh
export KSB_TEST_OUT=$T/guest.out
: > "$KSB_TEST_OUT"
chmod 0666 "$KSB_TEST_OUT"	# the stand-in runs as QEMU's user (qemu-user)

# A host port the guest tries to open: it must never see a connection.
export KSB_TEST_HOST_PORT=$((20000 + $$ % 20000))
ip netns exec "$GW" python3 -c "
import socket
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('127.0.0.1', $KSB_TEST_HOST_PORT)); s.listen(4)
c, a = s.accept(); open('$T/reached', 'w').write(str(a))
" &
KSB_PIDS="$KSB_PIDS $!"
ksb_wait_port "$GW" 127.0.0.1 "$KSB_TEST_HOST_PORT"

ksb_say "ksb-run with a hostile fake guest on the forward port"
id=$(KSB_QEMU="$KSB_SRCDIR/tests/e2e/forward_hostile_guest.py" \
	timeout 60 ip netns exec "$GW" "$KSB_BUILDDIR/ksb-run" -f "$T/ksb.conf" \
	--detach --name fh --accel tcg --forward 127.0.0.1:0:80 -- unused 2>"$T/err")
cat "$T/err" >&2
ksb_check "--detach returned the ID" '[ "$id" = fh ]'
rp=$(sed -n 's/^pid=//p' "$I/state")
KSB_PIDS="$KSB_PIDS $rp"
port=$(ctl forward fh --list | awk '$2 == 80 { sub(/.*:/, "", $1); print $1 }')
ksb_check "the forward listens" '[ -n "$port" ]'
logged() { grep -q "$1" "$I/forward.log" 2>/dev/null; }
ksb_check "the guest's OPEN was dropped and logged" \
	'ksb_until 20 logged "guest-error stream=1 the guest may not open a stream"'
ksb_check "the guest's SHOT was dropped and logged" \
	'logged "guest-error stream=2 the guest may not open a stream"'

ksb_say "the gateway restarts: forward records wait in ksb-run"
fsql() { ksb_sql "SELECT count(*) FROM forwards WHERE instance = 'fh' AND $1"; }
ksb_check "audit: the --forward's add" 'ksb_sql_is 1 "SELECT count(*) FROM forwards WHERE instance = '"'fh'"' AND event = '"'add'"' AND listen_port = $port AND guest_port = 80"'
kill -9 "$KSB_GATEWAY_PID"
ksb_wait_dead "$KSB_GATEWAY_PID" 30 || true
rm -f "$T/gateway.sock"
lost() { grep -q "lost the connection to ksb-gatewayd" "$I/ksb-run.log"; }
ksb_check "ksb-run saw the gateway go" 'ksb_until 20 lost'
ctl forward fh 0:81 > "$T/add81"; cat "$T/add81"
p81=$(sed -n 's/^127\.0\.0\.1:\([0-9]*\) -> fh port 81$/\1/p' "$T/add81")
ksb_check "a forward added while the gateway is away works" '[ -n "$p81" ] && ksb_listening "$GW" "$p81"'
ksb_gateway
resumed() { grep -q "lease resumed with ksb-gatewayd" "$I/ksb-run.log"; }
ksb_check "ksb-run resumed its lease" 'ksb_until 30 resumed'
ksb_check "audit: the add made while the gateway was away arrived" \
	'ksb_sql_is 1 "SELECT count(*) FROM forwards WHERE instance = '"'fh'"' AND event = '"'add'"' AND listen_port = $p81 AND guest_port = 81"'

ksb_say "more DATA than the window"
got=$(ip netns exec "$GW" timeout 30 python3 -c "
import socket
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
s.connect(('127.0.0.1', $port)); n = 0
import time; time.sleep(3)
while True:
    b = s.recv(65536)
    if not b: break
    n += len(b)
print(n)" 2>&1) || true
echo "# the client got $got bytes, then the end"
ksb_check "the client's connection ended before the flood did" '[ "$got" -lt 8388608 ] 2>/dev/null'
ksb_check "the stream was closed as protocol" 'grep -q "host CLOSE 1 reason 3" "$KSB_TEST_OUT"'
ksb_check "logged: DATA beyond the window" 'logged "DATA beyond the window"'
ksb_check "close reason=protocol in forward.log" 'logged "close stream=1 reason=protocol"'
ksb_check "audit: the close, reason protocol" 'ksb_sql_is 1 "SELECT count(*) FROM forwards WHERE instance = '"'fh'"' AND event = '"'close'"' AND stream = 1 AND reason = '"'protocol'"'"'

ksb_say "a broken header"
ip netns exec "$GW" timeout 30 python3 -c "
import socket
s = socket.create_connection(('127.0.0.1', $port)); s.recv(10)" 2>/dev/null || true
ksb_check "the channel ended" 'ksb_until 20 logged "channel closed: bad frame from the guest"'
ksb_check "ksb-run is still up" 'kill -0 "$rp"'
ksb_check "a new connection is refused (channel gone)" \
	'! ip netns exec "$GW" curl -sS --max-time 5 "http://127.0.0.1:$port/" 2>/dev/null && ksb_until 10 logged "refused .* (guest gone)"'
ksb_check "nothing reached the host port the guest named" '[ ! -e "$T/reached" ]'
refused_rec() { [ "$(fsql "event = 'refused' AND reason = 'gone' AND peer = '127.0.0.1' AND listen_port = $port")" -ge 1 ]; }
ksb_check "audit: the refusal, reason gone, with the peer" 'ksb_until 20 refused_rec'
kill -TERM "$rp"
ksb_check "SIGTERM to ksb-run ends it (STOP, the fake's EXIT)" 'ksb_wait_dead "$rp" 30'
ksb_check "the forward's listener is gone" '! ksb_listening "$GW" "$port"'
# After UNREGISTER the gateway would refuse them (no such instance).
ksb_check "audit: both forwards removed (stopped), sent before the lease went" \
	'ksb_sql_is 2 "SELECT count(*) FROM forwards WHERE instance = '"'fh'"' AND event = '"'remove'"' AND reason = '"'stopped'"'"'
ksb_check "audit verify" 'ctl audit verify'
ksb_check "kept.conf: the --forward given (not the one ksbctl added)" \
	'[ "$(grep -v "^#" "$I/kept.conf")" = "forward=127.0.0.1:0:80" ]'
echo "display=huge" >> "$I/kept.conf"
ksb_check "a bad kept.conf stops the next start, naming file:line and the way out" \
	'! KSB_QEMU=/bin/false timeout 60 ip netns exec "$GW" "$KSB_BUILDDIR/ksb-run" -f "$T/ksb.conf" --name fh -- unused 2>"$T/err2" &&
	 grep -q "kept.conf:3: not WxH.*give --forward and --display, or none, to replace it" "$T/err2"'
cat "$KSB_TEST_OUT"
[ "$fails" = 0 ] || cat "$I/forward.log"

[ "$fails" = 0 ] || ksb_fail "$fails check(s) failed"
echo "PASS"
