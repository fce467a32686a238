#!/bin/bash
# e2e test of working with a live guest (real QEMU guest behind a real
# ksb-gatewayd, own namespaces and temp dir), one boot: port forwards
# (--forward and ksbctl forward: python3 -m http.server in the guest, 50
# concurrent requests, a 100 MB download checked by SHA-256, half-close,
# --list, --remove, status, forward.log; the guest cannot reach the host
# through them), the display (ksb-run --display: Xvfb, an X client,
# ksbctl screenshot and a known pixel region), pause and resume (status,
# a prompt refused while paused); the audit's forward records (one open
# and one close per request, the 100 MB download's bytes as curl counted
# them, add and remove, ksbctl audit forwards and verify).  Needs root, QEMU, a guest kernel, and
# Xvfb and x11-apps on the host (exit 77 naming what is missing).
set -eu
. "$(dirname "$0")/../lib.sh"

ksb_need_root
ksb_need qemu-system-x86_64
[ -x /usr/bin/python3 ] || ksb_skip "needs /usr/bin/python3 (the guest's web server)"
[ -x /usr/bin/Xvfb ] || ksb_skip "needs /usr/bin/Xvfb (Debian package xvfb)"
[ -x /usr/bin/xlogo ] || ksb_skip "needs /usr/bin/xlogo (Debian package x11-apps)"
ksb_need_built ksb-run ksb-guest-init ksb-gatewayd ksbctl/ksbctl
ksb_kernel
KSB_TEST_TEMPLATE=default # the default start: from a template under TCG
ksb_env
ksb_gateway

fails=0
ctl() { timeout 120 "$KSB_BUILDDIR/ksbctl/ksbctl" -f "$T/ksb.conf" "$@"; }
hcurl() { ip netns exec "$GW" curl -sS --max-time 120 "$@"; }
I=$T/state/instances/live
say() { ksb_say "$* (at ${SECONDS} s)"; }

# The guest: a 100 MB file (the host's, over 9p), the web server on loopback, an
# X client with known colours at a known place, a half-close echo peer.
cat > "$T/share/guest.sh" <<'GUEST'
set -e
mkdir -p /tmp/www
ln -s /ksb-test/big /tmp/www/big # 100 MB of the host's, over 9p
echo "hello from the guest" > /tmp/www/index.txt
touch /tmp/www/big.sha
cd /tmp/www
python3 -m http.server 8000 --bind 127.0.0.1 >/tmp/http.log 2>&1 &
xlogo -bg '#ff0000' -fg '#0000ff' -geometry 100x100+20+20 &
# Half-close: read to EOF, then answer with the byte count.
python3 -c '
import socket
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 8100)); s.listen(4)
while True:
    c, _ = s.accept(); n = 0
    while True:
        b = c.recv(65536)
        if not b: break
        n += len(b)
    c.sendall(b"got %d\n" % n); c.close()
' &
# The guest trying the host side of the forwards (their ports arrive in
# /ksb-test/ports): its 127.0.0.1 is its own, the gateway's address takes
# only the proxy port.
(
i=0
while [ ! -f /ksb-test/ports ] && [ $i -lt 600 ]; do sleep 0.5; i=$((i + 1)); done
for p in $(cat /ksb-test/ports 2>/dev/null); do
	for a in 127.0.0.1 "$1"; do
		python3 -c "import socket; socket.create_connection(('$a', $p), 3)" \
			2>/dev/null && echo "reached $a:$p"
	done
done > /tmp/www/reach.txt
touch /tmp/www/reach.done
) &
ls -l /dev/vport* > /tmp/www/vports.txt 2>&1 || true
for d in /dev/vport*; do
	sh -c 'exec 3<>"$1"' sh "$d" 2>/dev/null && echo "opened $d"
done >> /tmp/www/vports.txt
echo guest-ready
# The agent: one turn per line, run, then reported done.
while IFS= read -r task; do
	sh -c "$task" || true
	ksb-report done "ran: $task"
done
GUEST
chmod 644 "$T/share/guest.sh"
head -c 104857600 /dev/urandom > "$T/share/big"
chmod 644 "$T/share/big"
want=$(sha256sum < "$T/share/big" | cut -d" " -f1)

say "ksb-run --forward --display, detached"
# From $T: no project repository, so no mirror and no clone to wait for.
id=$(cd "$T" && timeout 240 ip netns exec "$GW" "$KSB_BUILDDIR/ksb-run" -f "$T/ksb.conf" \
	--detach --name live --memory 1024 --display=320x240 \
	--forward 127.0.0.1:0:8000 --share-ro "$T/share:/ksb-test" \
	--agent 'sh /ksb-test/guest.sh 10.77.0.1' 2>"$T/err-run") ||
	{ cat "$T/err-run"; ksb_fail "ksb-run --detach failed"; }
cat "$T/err-run" >&2
# The detached supervisor, stopped by ksb_cleanup if the test ends early.
KSB_PIDS="$KSB_PIDS $(sed -n 's/^pid=//p' "$I/state")"
ksb_check "detach printed the ID" '[ "$id" = live ]'
ctl forward live --list > "$T/list1"; cat "$T/list1"
port=$(awk '$2 == 8000 { sub(/.*:/, "", $1); print $1 }' "$T/list1")
ksb_check "--forward is listed with its port" '[ -n "$port" ]'
up() { hcurl -f -o /dev/null "http://127.0.0.1:$port/big.sha" 2>/dev/null; }
ksb_until 300 up || { ctl status live; ksb_fail "the guest's web server never answered through the forward"; }

# The forward records so far in the audit (the polls above): as many
# opens as forward.log has; the highest stream id.
n0=$(grep -c " open stream=[0-9]* listen=127.0.0.1:$port " "$I/forward.log")
ksb_check "audit: every open of forward.log so far ($n0)" \
	'ksb_sql_is "$n0" "SELECT count(*) FROM forwards WHERE instance = '"'live'"' AND event = '"'open'"' AND listen_port = $port"'
ksb_check "audit: the --forward's add record" \
	'[ "$(ksb_sql "SELECT count(*) FROM forwards WHERE instance = '"'live'"' AND event = '"'add'"' AND listen_addr = '"'127.0.0.1'"' AND listen_port = $port AND guest_port = 8000")" = 1 ]'
s0=$(ksb_sql "SELECT coalesce(max(stream), 0) FROM forwards WHERE instance = 'live'")

say "50 concurrent requests through the forward"
cpids=
for i in $(seq 1 50); do
	hcurl -o "$T/c$i" "http://127.0.0.1:$port/index.txt" &
	cpids="$cpids $!"
done
# shellcheck disable=SC2086 # the curls only, not the gateway
wait $cpids || true
ok=0
for i in $(seq 1 50); do grep -qx "hello from the guest" "$T/c$i" && ok=$((ok + 1)); done
ksb_check "50 of 50 answered right ($ok)" '[ "$ok" = 50 ]'
ksb_check "audit: 50 more opens, from 127.0.0.1" \
	'ksb_sql_is $((n0 + 50)) "SELECT count(*) FROM forwards WHERE instance = '"'live'"' AND event = '"'open'"' AND listen_port = $port" &&
	 [ "$(ksb_sql "SELECT count(*) FROM forwards WHERE event = '"'open'"' AND stream > $s0 AND peer = '"'127.0.0.1'"'")" = 50 ]'
ksb_check "audit: 50 closes, done, bytes each way" \
	'ksb_sql_is 50 "SELECT count(*) FROM forwards WHERE instance = '"'live'"' AND event = '"'close'"' AND stream > $s0 AND reason = '"'done'"' AND bytes_to_guest > 0 AND bytes_from_guest > 21 AND duration_ms >= 0"'
s1=$(ksb_sql "SELECT max(stream) FROM forwards WHERE instance = 'live'")

say "a 100 MB download"
t0=$(date +%s.%N)
hcurl -o "$T/big" -w '%{size_request} %{size_header} %{size_download}\n' \
	"http://127.0.0.1:$port/big" > "$T/curlw"
t1=$(date +%s.%N)
read -r creq chdr cbody < "$T/curlw"
echo "# curl: request $creq, header $chdr, body $cbody bytes"
echo "# 100 MB in $(echo "$t1 - $t0" | bc) s"
ksb_check "100 MB arrived whole (SHA-256)" '[ "$(sha256sum < "$T/big" | cut -d" " -f1)" = "$want" ] && [ "$(stat -c %s "$T/big")" = 104857600 ]'
rm -f "$T/big"
ksb_check "audit: the download's close has curl's bytes ($creq to, $((chdr + cbody)) from the guest)" \
	'ksb_sql_is "1|$creq|$((chdr + cbody))|done" "SELECT count(*), bytes_to_guest, bytes_from_guest, reason FROM forwards WHERE instance = '"'live'"' AND event = '"'close'"' AND stream > $s1"'

say "ksbctl forward: add (any port), half-close, list, remove"
ctl forward live 0:8100 > "$T/add"; cat "$T/add"
hp=$(sed -n 's/^127\.0\.0\.1:\([0-9]*\) -> live port 8100$/\1/p' "$T/add")
ksb_check "ksbctl forward names the host port" '[ -n "$hp" ]'
ans=$(head -c 300000 /dev/zero | ip netns exec "$GW" timeout 60 python3 -c "
import socket, sys
s = socket.create_connection(('127.0.0.1', $hp))
s.sendall(sys.stdin.buffer.read()); s.shutdown(socket.SHUT_WR)
print(s.makefile().read().strip())")
ksb_check "half-close: the guest saw EOF, then answered ($ans)" '[ "$ans" = "got 300000" ]'
ctl forward live --list > "$T/list2"; cat "$T/list2"
ksb_check "both forwards listed" '[ "$(grep -c "^127.0.0.1:" "$T/list2")" = 2 ]'
ksb_check "the list counts the connections" 'awk -v p="127.0.0.1:$port" "\$1 == p && \$4 >= 53" "$T/list2" | grep -q .'
ctl status live > "$T/status"; cat "$T/status"
ksb_check "status shows the forwards" 'grep -Eq "^forward: +127.0.0.1:$hp -> 8100 " "$T/status"'
ksb_check "a forward to a taken port is refused" '! ctl forward live "$port:9" 2>"$T/e" && grep -q "already" "$T/e"'
ksb_check "forward.log has opens and closes with bytes" \
	'grep -q " open stream=" "$I/forward.log" && grep -Eq " close stream=[0-9]+ reason=done up=[0-9]+ down=10485[0-9]{4}" "$I/forward.log"'

say "the guest cannot reach the host through a forward"
echo "$port $hp" > "$T/share/ports"
chmod 644 "$T/share/ports"
reached() { hcurl -f -o /dev/null "http://127.0.0.1:$port/reach.done" 2>/dev/null; }
ksb_until 120 reached || echo "# the guest's reach test did not finish"
reach=$(hcurl -f "http://127.0.0.1:$port/reach.txt" || echo "no reach.txt")
echo "# reach.txt: $reach"
vports=$(hcurl "http://127.0.0.1:$port/vports.txt")
echo "$vports"
ksb_check "the agent reached no host port" '[ -z "$reach" ]'
ksb_check "the agent cannot open the virtio-serial ports" '! echo "$vports" | grep -q "^opened"'
ksb_check "forward --remove" 'ctl forward live --remove "$hp"'
ksb_check "removed: nothing listens there" '! ksb_listening "$GW" "$hp"'
ksb_check "audit: ksbctl forward's add and remove (removed)" \
	'ksb_sql_is "add remove|removed" "SELECT group_concat(event || coalesce('"'|'"' || reason, '"''"'), '"' '"') FROM (SELECT * FROM forwards WHERE instance = '"'live'"' AND listen_port = $hp AND guest_port = 8100 AND event IN ('"'add'"', '"'remove'"') ORDER BY seq)"'
ksb_check "audit: the half-close connection's bytes (300000 to the guest, 11 back)" \
	'[ "$(ksb_sql "SELECT bytes_to_guest || '"'/'"' || bytes_from_guest FROM forwards WHERE event = '"'close'"' AND listen_port = $hp")" = "300000/11" ]'

say "screenshot of the display"
ksb_check "ksbctl screenshot writes a PNG" 'ctl screenshot live "$T/shot.png"'
# Regions measured on the host's own Xvfb and xlogo (Debian 12): the root
# window above and left of the client, a band of xlogo's background between
# the logo's strokes, a piece of the logo's upper-left stroke.
"$KSB_SRCDIR/tests/e2e/pngpix.py" "$T/shot.png" 0 0 14 14 62 21 78 25 \
	30 21 40 24 > "$T/pix" || true
cat "$T/pix"
ksb_check "320x240" '[ "$(sed -n 1p "$T/pix")" = "320 240" ]'
ksb_check "root black, xlogo's background red, its logo blue (whole regions)" \
	'[ "$(sed -n 2,4p "$T/pix" | tr "\n" " ")" = "000000 ff0000 0000ff " ]'

say "pause and resume, with an agent turn in flight"
ksb_check "a turn that runs 8 s is given" 'ctl prompt live --key slow "sleep 8; echo slow-turn-done"'
ksb_check "ksbctl pause" 'ctl pause live'
tp=$SECONDS
ksb_check "status says paused" 'ctl status live | grep -Eq "^ *vm: +paused"'
ksb_check "the forward waits while paused" '! hcurl --max-time 3 -o /dev/null "http://127.0.0.1:$port/index.txt" 2>/dev/null'
ksb_check "a prompt to a paused instance is refused, naming resume" \
	'! ctl prompt live "echo no" 2>"$T/e" && grep -q "paused.*ksbctl resume live" "$T/e"'
# Paused longer than the turn takes and than the heartbeats' loss time
# (GUESTCTL_PEER_LOST_MS, 15 s).
sleep 16
ksb_check "the turn has not ended while paused" '! grep -q " 1 done " "$I/agent.events"'
ksb_check "ksbctl resume" 'ctl resume live'
ksb_check "status says running" 'ctl status live | grep -Eq "^ *vm: +running"'
ksb_check "the forward answers again" 'hcurl -o /dev/null "http://127.0.0.1:$port/index.txt"'
ctl prompt live --key slow --wait "sleep 8; echo slow-turn-done" > "$T/turn" 2>&1 || true
cat "$T/turn"
ksb_check "the turn in flight ends done after resume" 'grep -q "done" "$T/turn" && grep -Eq " 1 done " "$I/agent.events"'
ksb_check "the turn's end came after the resume" '[ $((SECONDS - tp)) -ge 16 ]'
ksb_check "the guest lives on (no lease or heartbeat loss)" 'ctl status live | grep -q "^state: *running"'
ksb_check "the supervisor saw the silence and the guest come back" \
	'grep -q "nothing from the guest for 15 s" "$I/ksb-run.log" && grep -q "control channel is back" "$I/ksb-run.log"'

say "stop (of a paused instance): the forwards end with the instance"
ctl pause live >/dev/null
ksb_check "ksbctl stop of a paused instance powers it down" 'ctl stop live | grep -q powerdown'
ksb_check "nothing listens on the forward's port" '! ksb_listening "$GW" "$port"'
ksb_check "forward.sock gone" '[ ! -S "$I/forward.sock" ]'
nopen=$(grep -c " open stream=" "$I/forward.log")
ksb_check "audit: as many opens as forward.log ($nopen), each closed" \
	'ksb_sql_is "$nopen|$nopen" "SELECT sum(event = '"'open'"'), sum(event = '"'close'"') FROM forwards WHERE instance = '"'live'"'"'
ksb_check "audit: the --forward removed when the instance stopped" \
	'ksb_sql_is 1 "SELECT count(*) FROM forwards WHERE instance = '"'live'"' AND event = '"'remove'"' AND listen_port = $port AND reason = '"'stopped'"'"'
ctl audit forwards --instance live --limit 5 > "$T/af"; cat "$T/af"
ksb_check "ksbctl audit forwards lists them" 'grep -Eq "^[0-9T:.-]+Z +live +remove +127.0.0.1:$port->8000 " "$T/af"'
ksb_check "ksbctl audit verify: the forward records are chained" 'ctl audit verify'
ksb_check "audit export has every forward record" \
	'[ "$(ctl audit export --jsonl | grep -c "\"kind\":\"forward\"")" = "$(ksb_sql "SELECT count(*) FROM forwards")" ]'

ksb_check_template
[ "$fails" = 0 ] || ksb_fail "$fails check(s) failed"
echo "PASS"
