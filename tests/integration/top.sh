#!/bin/bash
# top.sh: `ksbctl top' driven in tmux (send-keys, capture-pane), issue 15.
# The set-up of approvals.sh: a real ksb-gatewayd, fake guests on the
# bridge (ctlhold: tp1 in a profile with `limit hold', ts2 in one
# without; tp1 also has an instance dir with an agent-mode state file and
# its lock held), a TLS origin, tests/integration/proxy_raw.py as the guest:
#  - the screen lists both instances, tp1 with its state, agent state and
#    turn; an open tunnel is counted while it is open;
#  - a tunnel's bytes show as a rate while it is open and moving bytes (a
#    slow download: the gateway's live counts, LIST's up=/down=, not the
#    audit's, which has a tunnel's bytes only once it closed), and the
#    totals on the screen are the audit's (totals_instance, read with
#    sqlite3); after the close the gateway's counts equal the audit's;
#    an unprivileged LIST has the instances without their traffic;
#  - a refusal shows under the recent refusals;
#  - a held CONNECT shows, selected; `a' lets it through (the client gets
#    200); with two held, Down selects the second, `a' lets it through and
#    `d' refuses the other (operator_denied);
#  - control bytes in a host (a row written into the audit database: the
#    parsers let none through) are shown escaped; `q' quits.
# Two real guests are not booted here: the fake guests' traffic goes
# through the same gateway, audit and control socket.
set -eu
. "$(dirname "$0")/../lib.sh"

ksb_need_root
ksb_need tmux setpriv python3
HOLD=$KSB_BUILDDIR/tests/integration/ctlhold
RAW=$KSB_SRCDIR/tests/integration/proxy_raw.py
KSBCTL=$KSB_BUILDDIR/ksbctl/ksbctl
[ -x "$HOLD" ] || ksb_fail "$HOLD not built (make check builds it)"
ksb_env
ksb_origin
printf '%s held.test\n%s other.test\n' "$ORIGIN_IP" "$ORIGIN_IP" >> "$T/hosts"
cat > "$T/policy.d/test.policy" <<'POL'
profile default {
    allow allowed.test
    allow-address 10.78.0.0/24
    limit hold 20
}
profile strict {
    allow allowed.test
    allow-address 10.78.0.0/24
}
POL
ksb_gateway
ksb_fake_guest 1 tp1
ksb_fake_guest 2 ts2 strict

fails=0
pass=0
TM="tmux -L ksbt-$$"
raw() { ip netns exec "ksbt-$$-g$1" timeout 30 python3 "$RAW" 10.77.0.1 3128 "${@:2}"; }
tls() { raw "$1" tls "$2" "$2" -; }
con() { raw "$1" connect "$2"; }
body() { raw "$1" body "$2" 443; }
screen() { $TM capture-pane -p -t top 2>/dev/null; }
shows() { screen | grep -q -- "$1"; }
# The instance's row: ID STATE AGENT TURN TUNNELS CONNS DENIED UP/s DOWN/s
# UP DOWN.
row() { screen | awk -v id="$1" '$1 == id { print; exit }'; }
# CONNS DENIED UP DOWN of the row, and of the audit's totals.
row_figures() { row "$1" | awk '{ print $6, $7, $(NF - 1), $NF }'; }
sql_figures() {
	ksb_sql "SELECT connections, denied, bytes_up, bytes_down FROM
	    totals_instance WHERE instance = '$1'" | tr '|' ' '
}
figures_match() {
	local s r
	s=$(sql_figures "$1") r=$(row_figures "$1")
	[ -n "$s" ] && [ "$s" = "$r" ]
}
tunnels_are() { [ "$(row "$1" | awk '{ print $5 }')" = "$2" ]; }
both_listed() { [ -n "$(row tp1)" ] && [ -n "$(row ts2)" ]; }
# UP/s and DOWN/s are columns 66-87 of the row.
rate_shown() {
	local r
	r=$(row "$1" | cut -c66-87)
	[ -n "$r" ] && ! echo "$r" | grep -q '^ *0 B *0 B *$'
}
refusal_shown() {
	screen | sed -n '/RECENT REFUSALS/,$p' |
	    grep -q "ts2  *other.test:443 not_in_allowlist"
}
agent_row() { row tp1 | grep -q "^tp1  *running  *working  *3 "; }
gone() { ! $TM has-session -t top 2>/dev/null; }

# tp1's instance dir, as ksb-run keeps it (proto/instance.h): a state file
# in agent mode and its lock held (flock(2), as the supervising ksb-run).
mkdir -p -m 0700 "$T/state/instances/tp1"
printf '%s\n' id=tp1 phase=running profile=default agent=1 \
	agent_state=working agent_turn=3 agent_turns=3 > "$T/state/instances/tp1/state"
: > "$T/state/instances/tp1/lock"
python3 -c 'import fcntl, sys, time
f = open(sys.argv[1], "w"); fcntl.flock(f, fcntl.LOCK_EX); time.sleep(300)' \
	"$T/state/instances/tp1/lock" &
KSB_PIDS="$KSB_PIDS $!"

ksb_say "ksbctl top in tmux"
$TM new-session -d -s top -x 150 -y 45 \
	"exec timeout 300 $KSBCTL -f $T/ksb.conf top -d 1 2> $T/top.err"
trap 'rc=$?; set +e; $TM kill-server 2>/dev/null; (exit $rc); ksb_cleanup' EXIT
ksb_check "the screen lists tp1 and ts2" \
	'ksb_until 10 both_listed'
ksb_check "tp1 from its state file: running, agent working on turn 3" \
	'ksb_until 10 agent_row'
ksb_check "ts2 (no instance dir): registered" \
	'row ts2 | grep -q "^ts2  *registered  *-  *- "'
screen | head -8

ksb_say "an open tunnel is counted while it is open"
ip netns exec "ksbt-$$-g1" timeout 30 python3 -c '
import os, socket, ssl, sys, time
s = socket.create_connection(("10.77.0.1", 3128), timeout=20)
s.sendall(b"CONNECT allowed.test:443 HTTP/1.1\r\n"
          b"Host: allowed.test:443\r\n\r\n")
print(s.recv(4096).split(b"\r\n")[0].decode(), flush=True)
c = ssl.create_default_context()
c.check_hostname = False
c.verify_mode = ssl.CERT_NONE
t = c.wrap_socket(s, server_hostname="allowed.test")	# the tunnel is up
print("tls up", flush=True)
end = time.monotonic() + 25
while not os.path.exists(sys.argv[1]) and time.monotonic() < end:
    time.sleep(0.1)
' "$T/release" > "$T/open" &
O=$!
ksb_check "TUNNELS 1 while open" 'ksb_until 10 tunnels_are tp1 1'
ksb_check "... as the audit says" \
	'[ "$(ksb_sql "SELECT count(*) FROM active_tunnels
	    WHERE instance = '"'tp1'"'")" = 1 ]'
touch "$T/release"
wait "$O" || true
ksb_check "the tunnel had its 200 and TLS: '$(tr '\n' ' ' < "$T/open")'" \
	'grep -q " 200 " "$T/open" && grep -q "^tls up" "$T/open"'
ksb_check "TUNNELS 0 once closed" 'ksb_until 10 tunnels_are tp1 0'

ksb_say "bytes: a rate while they come, the totals of the audit"
got=$(tls 1 allowed.test) || true
ksb_check "a TLS exchange through the tunnel: '$got'" \
	'[ "$got" = "tls $ORIGIN_BODY" ]'
# A download read slowly (a small receive buffer, 16 KiB every 50 ms:
# ~0.3 MB/s, ~3 s for 1 MiB) keeps the tunnel open and moving bytes.
head -c 1048576 /dev/urandom > "$T/www/big"
ip netns exec "ksbt-$$-g1" timeout 60 python3 -c '
import socket, ssl, sys, time
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 32768)
s.settimeout(20)
s.connect(("10.77.0.1", 3128))
s.sendall(b"CONNECT allowed.test:443 HTTP/1.1\r\n"
          b"Host: allowed.test:443\r\n\r\n")
head = s.recv(4096)
c = ssl.create_default_context()
c.check_hostname = False
c.verify_mode = ssl.CERT_NONE
t = c.wrap_socket(s, server_hostname="allowed.test")
t.sendall(b"GET /big HTTP/1.0\r\n\r\n")
n = 0
end = time.monotonic() + 50
while time.monotonic() < end:
    b = t.recv(16384)
    if not b:
        break
    n += len(b)
    time.sleep(0.05)
print(head.split(b"\r\n")[0].decode(), n)
' > "$T/slow" 2>&1 &
S=$!
# TUNNELS 1 and a DOWN/s other than 0 B on one screen: the live rate.
live_rate() { tunnels_are tp1 1 && rate_shown tp1; }
ksb_check "while the download runs: TUNNELS 1 and a DOWN/s rate shown" \
	'ksb_until 20 live_rate'
row tp1
ksb_check "... the gateway counts its bytes before the audit has them" \
	'[ "$(ksb_traffic tp1 | cut -d" " -f3)" -gt \
	    "$(sql_figures tp1 | cut -d" " -f4)" ]'
wait "$S" || true
ksb_check "the download got 200 and all of the file: '$(cat "$T/slow")'" \
	'[ "$(awk "{ print \$2 }" "$T/slow")" = 200 ] &&
	    [ "$(awk "{ print \$NF }" "$T/slow")" -gt 1048576 ]'
ksb_check "TUNNELS 0 once it closed" 'ksb_until 10 tunnels_are tp1 0'
ksb_check "CONNS DENIED UP DOWN match totals_instance" \
	'ksb_until 10 figures_match tp1 &&
	    [ "$(row_figures tp1 | cut -d" " -f4)" -gt 1048576 ]'
echo "# screen: $(row_figures tp1); audit: $(sql_figures tp1)"
ksb_check "the gateway's counts (LIST) equal the audit's bytes" \
	'ksb_until 10 ksb_traffic_is_audit tp1'
echo "# gateway: $(ksb_traffic tp1); audit: $(ksb_audit_bytes tp1)"
# What the guests do is for the operators: an unprivileged LIST has the
# instances without their traffic.
nob_list() {
	setpriv --reuid=65534 --regid=65534 --clear-groups /usr/bin/python3 -c '
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(10)
s.connect(sys.argv[1])
s.sendall(b"LIST\n")
b = b""
while not b.endswith(b"END\n"):
    d = s.recv(65536)
    if not d:
        break
    b += d
print(b.decode(), end="")' "$T/gateway.sock"
}
nob_list > "$T/nob-list" 2>&1 || true
ksb_check "nobody's LIST: tp1 listed, without tunnels= up= down=" \
	'grep -q "^INSTANCE id=tp1 " "$T/nob-list" &&
	    ! grep -Eq "tunnels=|up=|down=" "$T/nob-list"'
sed "s/^/# /" "$T/nob-list"

ksb_say "a refusal shows"
got=$(body 2 other.test) || true
ksb_check "ts2 refused: '${got%% body*}'" 'case "$got" in "status 403 deny not_in_allowlist"*) true ;; *) false ;; esac'
ksb_check "under RECENT REFUSALS" \
	'ksb_until 10 refusal_shown'
ksb_check "ts2's DENIED matches the audit" 'ksb_until 10 figures_match ts2'

ksb_say "a held CONNECT: selected, a allows it"
con 1 held.test > "$T/g1" 2>&1 &
P=$!
ksb_check "shown as held and selected" 'ksb_until 10 shows "^> tp1  *held.test:443"'
screen | sed -n '/HELD FOR/,/RECENT/p'
$TM send-keys -t top a
t0=$(date +%s%3N)
wait "$P" || true
ksb_check "a: its client gets 200 ($(( $(date +%s%3N) - t0 )) ms): '$(cat "$T/g1")'" \
	'[ "$(cat "$T/g1")" = "status 200 deny -" ]'
ksb_check "the gateway's answer on the screen" \
	'ksb_until 5 shows "operator uid 0: allow tp1 held.test:443 once"'
ksb_check "the grant is in the audit chain" \
	'ksb_sql_is 1 "SELECT count(*) FROM policy_versions WHERE files = '"'operator uid 0: allow tp1 held.test:443 once'"'"'
ksb_check "no longer held" 'ksb_until 10 shows "^  (none)"'

ksb_say "two held: Down selects the second, a allows it, d denies the other"
con 1 held.test > "$T/held.test" 2>&1 &
P1=$!
con 1 other.test > "$T/other.test" 2>&1 &
P2=$!
held_lines() { screen | sed -n '/^HELD FOR/,/^RECENT/p' | grep '^[> ] tp1 '; }
two_held() { [ "$(held_lines | wc -l)" = 2 ]; }
one_held_selected() {
	[ "$(held_lines | wc -l)" = 1 ] && shows "^> tp1  *$first:443"
}
ksb_check "both held" 'ksb_until 10 two_held'
second=$(held_lines | sed -n 2p | awk '{ print $2 }')
second=${second%%:*}
first=held.test
[ "$second" = held.test ] && first=other.test
$TM send-keys -t top Down
ksb_check "Down selects the second ($second)" \
	'ksb_until 5 shows "^> tp1  *$second:443"'
$TM send-keys -t top a
ksb_check "a: the second's client gets 200" \
	'ksb_until 10 grep -q . "$T/$second" &&
	    [ "$(cat "$T/$second")" = "status 200 deny -" ]'
ksb_check "the first is still held, now selected" \
	'ksb_until 10 one_held_selected'
$TM send-keys -t top d
wait "$P1" "$P2" || true
ksb_check "d: the first refused at once: '$(cat "$T/$first")'" \
	'[ "$(cat "$T/$first")" = "status 403 deny operator_denied" ]'

ksb_say "text from the database is shown escaped"
# The gateway's parsers admit no control bytes into a host (bad_request,
# bad_host), so the row a parser fault would leave is written here, as
# the newest refusal, straight into the audit database.
ksb_sql "INSERT INTO connections (ts_ms, instance, client_addr, client_port,
    host, port, decision, reason) SELECT max(ts_ms) + 1000, 'ts2',
    '10.77.0.3', 1, 'e' || char(27) || '[2Jv' || char(7) || 'il.test', 443,
    'deny', 'bad_host' FROM connections"
ksb_check "ESC and BEL shown as \\x1b and \\x07" \
	'ksb_until 10 shows "ts2  *e\\\\x1b\[2Jv\\\\x07il.test:443 bad_host"'
screen | grep "il.test"

ksb_say "q quits"
$TM send-keys -t top q
ksb_check "the session ends" 'ksb_until 10 gone'
ksb_check "nothing on stderr" '[ ! -s "$T/top.err" ]'
cat "$T/top.err"
echo "# $pass passed, $fails failed"
[ "$fails" = 0 ]
