#!/bin/bash
# tests/bench/forward.sh [MB] [N]: port forward throughput and added
# latency (ksb-run --forward, the forward channel over virtio-serial)
# against direct loopback connections.  A guest serves a MB-megabyte file
# (default 100) and a small one with python3 -m http.server on 127.0.0.1;
# the same server runs on the host's loopback for comparison.  Measured
# with curl: the download's rate (3 runs, median) through the forward,
# on the host's loopback and on the guest's own loopback (curl in the
# guest: what TCG costs the server itself), and the time of N (default 50)
# sequential small requests (median, time_total).  Needs root, QEMU,
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
cat > "$T/share/guest.sh" <<GUEST
mkdir -p /tmp/www && cp /ksb-test/www/* /tmp/www/ && cd /tmp/www
python3 -m http.server 8000 --bind 127.0.0.1 >/dev/null 2>&1 &
sleep 2
{
for r in 1 2 3; do
	curl -s -o /dev/null -w '%{speed_download}\n' http://127.0.0.1:8000/big
done > /tmp/www/guest-rate
for r in \$(seq 1 $N); do
	curl -s -o /dev/null -w '%{time_total}\n' http://127.0.0.1:8000/small
done > /tmp/www/guest-lat
touch /tmp/www/guest-done
} &
exec sleep 3600
GUEST
ip netns exec "$GW" python3 -m http.server 8001 --bind 127.0.0.1 \
	--directory "$T/share/www" >/dev/null 2>&1 &
KSB_PIDS="$KSB_PIDS $!"
timeout 240 ip netns exec "$GW" "$KSB_BUILDDIR/ksb-run" -f "$T/ksb.conf" \
	--detach --name fwdbench --memory 1024 --forward 127.0.0.1:0:8000 \
	--share-ro "$T/share:/ksb-test" -- /bin/sh /ksb-test/guest.sh >/dev/null
KSB_PIDS="$KSB_PIDS $(sed -n 's/^pid=//p' "$I/state")"
port=$(ctl forward fwdbench --list | awk '$2 == 8000 { sub(/.*:/, "", $1); print $1 }')
done_now() { hcurl -o /dev/null "http://127.0.0.1:$port/guest-done" 2>/dev/null; }
ksb_until 900 done_now || ksb_fail "the guest's own measurements did not finish"

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
f_rate=$(rate "http://127.0.0.1:$port/big")
h_rate=$(rate "http://127.0.0.1:8001/big")
g_rate=$(hcurl "http://127.0.0.1:$port/guest-rate" | median | awk '{ printf "%.1f", $1 / 1048576 }')
f_lat=$(lat "http://127.0.0.1:$port/small")
h_lat=$(lat "http://127.0.0.1:8001/small")
g_lat=$(hcurl "http://127.0.0.1:$port/guest-lat" | median | awk '{ printf "%.2f", $1 * 1000 }')
ctl stop fwdbench >/dev/null || true

printf '\n%-36s %12s %14s\n' "path ($MB MB file, $N small requests)" "MB/s" "request ms"
printf '%-36s %12s %14s\n' "host -> forward -> guest server" "$f_rate" "$f_lat"
printf '%-36s %12s %14s\n' "guest loopback (curl in the guest)" "$g_rate" "$g_lat"
printf '%-36s %12s %14s\n' "host loopback (same server on host)" "$h_rate" "$h_lat"
awk -v f="$f_lat" -v g="$g_lat" 'BEGIN { printf "added latency of the forward over the guest'"'"'s loopback: %.2f ms\n", f - g }'
