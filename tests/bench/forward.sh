#!/bin/bash
# tests/bench/forward.sh [MB] [N]: port forward throughput and added
# latency (ksb-run --forward, the forward channel over virtio-serial)
# against direct loopback connections.  A guest serves a MB-megabyte file
# (default 100) and a small one with python3 -m http.server on 127.0.0.1;
# the same server runs on the host's loopback for comparison.  Measured
# with curl: the download's rate (3 runs, median) through the forward,
# on the host's loopback and on the guest's own loopback (curl in the
# guest: what TCG costs the server itself), and the time of N (default 50)
# sequential small requests (median, time_total; in the guest that
# includes starting curl under TCG), the median round trip of one byte on
# one connection (4N of them, python echo peers: the latency the forward
# adds), and the CPU time QEMU
# and ksb-run spend per download (wall-clock figures are upper bounds on
# a shared machine; CPU time is not).  Needs root, QEMU,
# /usr/bin/python3 and a guest kernel (exit 77).  Prints a table.
set -eu
. "$(dirname "$0")/../lib.sh"

ksb_need_root
command -v qemu-system-x86_64 >/dev/null || ksb_skip "needs qemu-system-x86_64"
[ -x /usr/bin/python3 ] || ksb_skip "needs /usr/bin/python3"
ksb_kernel
ksb_env
ksb_gateway
MB=${1:-100}
N=${2:-50}
I=$T/state/instances/fwdbench
ctl() { timeout 120 "$KSB_BUILDDIR/ksbctl/ksbctl" -f "$T/ksb.conf" "$@"; }
hcurl() { ip netns exec "$GW" curl -sS --max-time 600 "$@"; }
median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

mkdir -p "$T/share/www"
head -c $((MB * 1048576)) /dev/urandom > "$T/share/www/big"
echo small > "$T/share/www/small"
chmod -R a+rX "$T/share"
# Round trips of one byte on one connection (no connection set-up, no
# process start in the figure): echo.py serve PORT | echo.py rtt HOST PORT N.
cat > "$T/share/echo.py" <<'ECHO'
import socket, sys, time
if sys.argv[1] == "serve":
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", int(sys.argv[2]))); s.listen(8)
    while True:
        c, _ = s.accept()
        c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        while True:
            b = c.recv(1)
            if not b: break
            c.sendall(b)
        c.close()
c = socket.create_connection((sys.argv[2], int(sys.argv[3])))
c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
t = []
for _ in range(int(sys.argv[4])):
    t0 = time.monotonic(); c.sendall(b"x"); c.recv(1); t.append(time.monotonic() - t0)
t.sort(); print("%.3f" % (t[len(t) // 2] * 1000))
ECHO
cat > "$T/share/guest.sh" <<GUEST
mkdir -p /tmp/www && cp /ksb-test/www/* /tmp/www/ && cd /tmp/www
python3 -m http.server 8000 --bind 127.0.0.1 >/dev/null 2>&1 &
python3 /ksb-test/echo.py serve 8002 &
{
# The guest's own measurements, when the host says go (so it can count
# QEMU's CPU time around them).
i=0
while [ ! -f /ksb-test/go ] && [ \$i -lt 1200 ]; do sleep 0.5; i=\$((i + 1)); done
for r in 1 2 3; do
	curl -s -o /dev/null -w '%{speed_download}\n' http://127.0.0.1:8000/big
done > /tmp/www/guest-rate
for r in \$(seq 1 $N); do
	curl -s -o /dev/null -w '%{time_total}\n' http://127.0.0.1:8000/small
done > /tmp/www/guest-lat
python3 /ksb-test/echo.py rtt 127.0.0.1 8002 $((N * 4)) > /tmp/www/guest-rtt
touch /tmp/www/guest-done
} &
exec sleep 3600
GUEST
ip netns exec "$GW" python3 -m http.server 8001 --bind 127.0.0.1 \
	--directory "$T/share/www" >/dev/null 2>&1 &
KSB_PIDS="$KSB_PIDS $!"
ip netns exec "$GW" python3 "$T/share/echo.py" serve 8003 &
KSB_PIDS="$KSB_PIDS $!"
(cd "$T" && timeout 240 ip netns exec "$GW" "$KSB_BUILDDIR/ksb-run" -f "$T/ksb.conf" \
	--detach --name fwdbench --memory 1024 --forward 127.0.0.1:0:8000 \
	--share-ro "$T/share:/ksb-test" -- /bin/sh /ksb-test/guest.sh >/dev/null)
rp=$(sed -n 's/^pid=//p' "$I/state")
qp=$(sed -n 's/^qemu_pid=//p' "$I/state")
KSB_PIDS="$KSB_PIDS $rp"
hz=$(getconf CLK_TCK)
ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
port=$(ctl forward fwdbench --list | awk '$2 == 8000 { sub(/.*:/, "", $1); print $1 }')
up() { hcurl -f -o /dev/null "http://127.0.0.1:$port/small" 2>/dev/null; }
ksb_until 300 up || ksb_fail "the guest's server never answered"

rate() { # URL: median download rate in MB/s over 3 runs
	for r in 1 2 3; do
		hcurl -o /dev/null -w '%{speed_download}\n' "$1"
	done | median | awk '{ printf "%.1f", $1 / 1048576 }'
}
lat() { # URL: median request time in ms over N runs
	for r in $(seq 1 "$N"); do
		hcurl -o /dev/null -w '%{time_total}\n' "$1"
	done | median | awk '{ printf "%.2f", $1 * 1000 }'
}
cpu() { # ticks before, after, runs: CPU seconds per run
	awk -v a="$1" -v b="$2" -v n="$3" -v hz="$hz" 'BEGIN { printf "%.2f", (b - a) / hz / n }'
}
q0=$(ticks "$qp"); r0=$(ticks "$rp")
f_rate=$(rate "http://127.0.0.1:$port/big")
q1=$(ticks "$qp"); r1=$(ticks "$rp")
f_lat=$(lat "http://127.0.0.1:$port/small")
eport=$(ctl forward fwdbench 0:8002 | sed -n 's/^127\.0\.0\.1:\([0-9]*\) .*/\1/p')
f_rtt=$(ip netns exec "$GW" python3 "$T/share/echo.py" rtt 127.0.0.1 "$eport" $((N * 4)))
h_rtt=$(ip netns exec "$GW" python3 "$T/share/echo.py" rtt 127.0.0.1 8003 $((N * 4)))
touch "$T/share/go"; chmod 644 "$T/share/go"
q2=$(ticks "$qp")
done_now() { hcurl -f -o /dev/null "http://127.0.0.1:$port/guest-done" 2>/dev/null; }
ksb_until 900 done_now || ksb_fail "the guest's own measurements did not finish"
q3=$(ticks "$qp")
g_rate=$(hcurl "http://127.0.0.1:$port/guest-rate" | median | awk '{ printf "%.1f", $1 / 1048576 }')
g_lat=$(hcurl "http://127.0.0.1:$port/guest-lat" | median | awk '{ printf "%.2f", $1 * 1000 }')
g_rtt=$(hcurl "http://127.0.0.1:$port/guest-rtt")
h_rate=$(rate "http://127.0.0.1:8001/big")
h_lat=$(lat "http://127.0.0.1:8001/small")
f_qcpu=$(cpu "$q0" "$q1" 3); f_rcpu=$(cpu "$r0" "$r1" 3)
# The guest's phase also ran N small requests: an upper bound.
g_qcpu=$(cpu "$q2" "$q3" 3)
ctl stop fwdbench >/dev/null || true

printf '\n%-36s %7s %10s %8s %13s %13s\n' "path ($MB MB file, $N requests)" "MB/s" \
	"request ms" "RTT ms" "QEMU CPU s/file" "ksb-run CPU s"
printf '%-36s %7s %10s %8s %13s %13s\n' "host -> forward -> guest server" "$f_rate" "$f_lat" "$f_rtt" "$f_qcpu" "$f_rcpu"
printf '%-36s %7s %10s %8s %13s %13s\n' "guest loopback (client in guest)" "$g_rate" "$g_lat" "$g_rtt" "<= $g_qcpu" "-"
printf '%-36s %7s %10s %8s %13s %13s\n' "host loopback (server on the host)" "$h_rate" "$h_lat" "$h_rtt" "-" "-"
awk -v f="$f_rtt" -v g="$g_rtt" 'BEGIN { printf "round trip added by the forward over the guest'"'"'s loopback: %.3f ms\n", f - g }'
