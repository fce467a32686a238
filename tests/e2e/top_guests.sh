#!/bin/bash
# top_guests.sh: `ksbctl top' driven in tmux (send-keys, capture-pane)
# while two real guests work (issue 15, "A live view").  Two QEMU guests
# behind a real ksb-gatewayd, booted at the same time in agent mode, each
# running curl against the TLS origin in the test's namespace
# (tests/e2e/slow_origin.py, which can send a body slowly):
#  - g1 downloads 4 MiB sent at 320 KiB/s: while its tunnel is open and
#    moving bytes, top shows it (TUNNELS 1) with a DOWN/s rate other than
#    0 B: the gateway's live counts, as the audit has a tunnel's bytes
#    only once it closed;
#  - g2's curl to a held name (denied.test, `limit hold') shows in top's
#    list of requests waiting for a decision; the `a' key lets it through (its
#    curl gets 200, while g1's download runs);
#  - once the tunnels closed, each instance's CONNS DENIED UP DOWN on the
#    screen are the audit's (totals_instance, read with sqlite3), and the
#    gateway's counts (LIST) equal the bytes of the audit's rows;
#  - a CONNECT from inside g2 with control bytes in its host leaves the
#    screen whole: nothing of it reaches the terminal unescaped.
# Needs root, QEMU, tmux, python3 and a guest kernel (exit 77).
set -eu
. "$(dirname "$0")/../lib.sh"

ksb_need_root
ksb_need qemu-system-x86_64 tmux /usr/bin/python3
ksb_need_built ksb-run ksb-guest-init ksb-gatewayd ksbctl/ksbctl
ksb_kernel
ksb_env
SIZE=4194304
ip netns exec "$OR" python3 "$KSB_SRCDIR/tests/e2e/slow_origin.py" \
	"$ORIGIN_IP" 443 "$T/pki/origin.pem" "$T/pki/origin.key" "$T/www" \
	"$SIZE" 327680 "$T/origin.ready" 2> "$T/origin.log" &
KSB_PIDS="$KSB_PIDS $!"
ksb_until 30 test -s "$T/origin.ready" ||
	ksb_fail "slow_origin.py did not start: $(cat "$T/origin.log")"
cat > "$T/policy.d/test.policy" <<'POL'
profile default {
    allow allowed.test
    allow-address 10.78.0.0/24
    limit hold 60
}
POL
ksb_gateway

fails=0
pass=0
KSBCTL=$KSB_BUILDDIR/ksbctl/ksbctl
ctl() { timeout 120 "$KSBCTL" -f "$T/ksb.conf" "$@"; }
I=$T/state/instances
say() { ksb_say "$* (at ${SECONDS} s)"; }

# The agent: one turn per line.  "get HOST PATH [RATE]": curl through the
# gateway (the guest's https_proxy), reported as "<code> <bytes>";
# "evil": a raw CONNECT with ESC and BEL in its host.
cat > "$T/share/agent.sh" <<'AGENT'
while IFS= read -r line; do
	set -- $line
	case $1 in
	get)
		r=$(curl -sS --cacert /data/ca.pem --max-time 100 \
			${4:+--limit-rate "$4"} -o /tmp/got \
			-w '%{http_code} %{size_download}' "https://$2$3" 2>&1 |
			tr -cd 'a-zA-Z0-9 ().:/_-' | head -c 120) ;;
	evil)
		r=$(python3 -c '
import os, socket, urllib.parse
p = urllib.parse.urlsplit(os.environ["https_proxy"])
s = socket.create_connection((p.hostname, p.port), 20)
s.sendall(b"CONNECT e\x1b[2Jv\x07il.test:443 HTTP/1.1\r\n\r\n")
print(s.recv(200).split(b"\r\n")[0].decode(errors="replace"))' 2>&1 |
			tr -cd 'a-zA-Z0-9 ().:/_-' | head -c 120) ;;
	*) r=ok ;;
	esac
	ksb-report done "got $r"
done
AGENT
chmod 644 "$T/share/agent.sh"

say "boot g1 and g2 at the same time"
boot() {
	cd "$T" && timeout 240 ip netns exec "$GW" "$KSB_BUILDDIR/ksb-run" \
		-f "$T/ksb.conf" --detach --name "$1" --share-ro "$T/share:/data" \
		--agent 'bash /data/agent.sh' > "$T/id-$1" 2> "$T/err-$1"
}
boot g1 & B1=$!
boot g2 & B2=$!
r1=0 r2=0
wait "$B1" || r1=$?
wait "$B2" || r2=$?
for g in g1 g2; do
	p=$(sed -n 's/^pid=//p' "$I/$g/state" 2>/dev/null || true)
	KSB_PIDS="$KSB_PIDS $p" # the supervisors, stopped by ksb_cleanup
done
[ "$r1$r2" = 00 ] || {
	cat "$T/err-g1" "$T/err-g2"
	ksb_fail "ksb-run --detach failed ($r1 $r2)"
}
ksb_check "both detached with their IDs" \
	'[ "$(cat "$T/id-g1" "$T/id-g2" | tr "\n" " ")" = "g1 g2 " ]'

TM="tmux -L ksbt-$$"
$TM new-session -d -s top -x 150 -y 45 \
	"exec timeout 300 $KSBCTL -f $T/ksb.conf top -d 1 2> $T/top.err"
trap 'rc=$?; set +e; $TM kill-server 2>/dev/null; (exit $rc); ksb_cleanup' EXIT
screen() { $TM capture-pane -p -t top 2>/dev/null; }
shows() { screen | grep -q -- "$1"; }
# A row: ID STATE AGENT TURN TUNNELS CONNS DENIED UP/s DOWN/s UP DOWN.
row() { screen | awk -v id="$1" '$1 == id { print; exit }'; }
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
# DOWN/s (the 10th field: "0 B", "1.2 KiB") other than 0.
down_rate() { row "$1" | awk '$10 + 0 > 0 { ok = 1 } END { exit !ok }'; }
running() { row "$1" | grep -q "^$1  *running "; }
both_running() { running g1 && running g2; }
alive() { ! ksb_dead "$1"; }

ksb_check "top lists g1 and g2, running" 'ksb_until 30 both_running'
screen | head -6

say "g1 downloads 4 MiB sent at 320 KiB/s; g2 asks for a held name"
turn() { ctl prompt "$1" --wait --no-summary "$2" > "$T/turn-$1" 2>&1; }
turn g1 "get allowed.test /slow" &
P1=$!
turn g2 "get denied.test /index.txt" &
P2=$!
live() { tunnels_are g1 1 && down_rate g1; }
ksb_check "while g1's download runs: TUNNELS 1 and a DOWN/s rate shown" \
	'ksb_until 60 live && alive "$P1"'
row g1
# The origin sends at most 320 KiB/s (a loaded TCG guest may take less);
# the gateway counts every 0.5 s and says when (LIST's at=), top divides
# by the time between two counts: not above the origin's rate by more
# than timing jitter (x1.5), nor below KiB/s.
near() { row g1 | awk '$11 == "KiB" && $10 >= 20 && $10 <= 480 { ok = 1 }
	END { exit !ok }'; }
ksb_check "... and a DOWN/s at most the origin's 320 KiB/s (x1.5)" \
	'ksb_until 30 near && alive "$P1"'
row g1
ksb_check "... the gateway counts its bytes before the audit has them" \
	'[ "$(ksb_traffic g1 | cut -d" " -f3)" -gt \
	    "$(sql_figures g1 | cut -d" " -f4)" ]'
ksb_check "g2's CONNECT to denied.test waits, selected in top" \
	'ksb_until 60 shows "^> g2  *denied.test:443"'
screen | sed -n '/^HELD FOR/,/^RECENT/p'
$TM send-keys -t top a
ksb_check "a: the gateway's answer on the screen" \
	'ksb_until 10 shows "operator uid 0: allow g2 denied.test:443 once"'
wait "$P2" || true
cat "$T/turn-g2"
ksb_check "g2's curl got 200 and the origin's page" \
	'grep -q "got 200 $(stat -c %s "$T/www/index.txt")" "$T/turn-g2"'
ksb_check "g1's download was still running meanwhile" 'alive "$P1"'
wait "$P1" || true
cat "$T/turn-g1"
ksb_check "g1's curl got 200 and all 4 MiB" \
	'grep -q "got 200 $SIZE" "$T/turn-g1"'

say "once closed: the screen's figures are the audit's"
ksb_check "TUNNELS 0 for both" \
	'ksb_until 20 tunnels_are g1 0 && ksb_until 20 tunnels_are g2 0'
for g in g1 g2; do
	ksb_check "$g: CONNS DENIED UP DOWN match totals_instance" \
		"ksb_until 20 figures_match $g"
	echo "# $g screen: $(row_figures $g); audit: $(sql_figures $g)"
	ksb_check "$g: the gateway's counts (LIST) equal the audit rows' bytes" \
		"ksb_until 10 ksb_traffic_is_audit $g"
	echo "# $g gateway: $(ksb_traffic $g); audit rows: $(ksb_audit_bytes $g)"
done
ksb_check "g1's DOWN counts the download" \
	'[ "$(row_figures g1 | cut -d" " -f4)" -gt "$SIZE" ]'

say "control bytes in a guest's CONNECT do not reach the terminal"
ctl prompt g2 --wait --no-summary "evil" > "$T/turn-evil" 2>&1 || true
cat "$T/turn-evil"
ksb_check "the gateway refused it with a status" \
	'grep -q "got HTTP/1.1 4[0-9][0-9]" "$T/turn-evil"'
evil_shown() {
	ksb_until 10 shows "^ *[0-9:]* g2  .* bad_" &&
	    shows "^INSTANCE  *STATE" && shows "^ksbctl top "
}
ksb_check "its refusal listed, the screen whole (not cleared)" 'evil_shown'
screen | sed -n '/^RECENT/,$p'
ksb_check "no ESC or BEL in the pane" \
	'! screen | grep -q "$(printf "[\033\007]")"'

$TM send-keys -t top q
gone() { ! $TM has-session -t top 2>/dev/null; }
ksb_check "q quits; nothing on stderr" \
	'ksb_until 10 gone && [ ! -s "$T/top.err" ]'
echo "# $pass passed, $fails failed (${SECONDS} s)"
[ "$fails" = 0 ]
