#!/bin/bash
# proxy.sh: the CONNECT proxy's costs (issue 3), in namespaces this script
# creates and removes: bulk throughput of one tunnel, new tunnels per second
# and set-up latency p50/p99 through ksb-gatewayd vs tinyproxy and squid vs
# a direct connection, and the gateway's RSS per idle tunnel.  Root; not
# part of `make check'.  Prints the medians of REPS runs and the ratios.
#
#   tests/bench/proxy.sh [BYTES] [IDLE_TUNNELS]   (1 GiB, 10000)
#
# Layout (tests/lib.sh plus):
#   ns G  (ksbt-$$-g1): the load generator; eth0 on bridge ksb0 with a
#         REGISTERed lease (tests/integration/ctlhold); kd0 10.79.0.1/24
#         straight to the origin (direct)
#   ns GW: ksb-gatewayd on 10.77.0.1:3128 (SNI check and audit on), and
#         tinyproxy and squid on 10.77.0.1:3129/3130 (two rules inserted
#         in the gateway's inet ksb table let the guest reach them), so
#         the three proxies see the same path: guest veth, bridge, nft,
#         proxy, veth ko0, origin
#   ns OR: tests/bench/loadgen serve: 5001 answers a ClientHello with 100
#         bytes, 5002 streams; on 10.78.0.2 (via GW) and 10.79.0.2 (direct)
# Each tunnel: connect, CONNECT bench.test:500x, 200, a ClientHello with
# SNI bench.test, the origin's answer; direct: connect, ClientHello,
# answer, on one veth.
#
# ksbdns: the same through ksb, but for dns.test, which only a DNS server
# in GW knows (127.0.0.1:53, the resolver of ksb.conf), answering after
# DNS_DELAY_MS (0): what resolving before the 200 costs in set-up latency
# (the gateway resolves, screens and connects before it answers the
# CONNECT, issue 15; before, the lookup ran while the guest sent its
# ClientHello).  KSB_GATEWAYD=path runs another ksb-gatewayd build (the
# one before, for the comparison); LATENCY_ONLY=1 runs only the
# one-at-a-time latency of SYSTEMS (no idle, bulk or rate runs);
# RATE_ONLY=1 skips the idle and bulk runs.
# tinyproxy and squid are installed and started only if SYSTEMS names
# them.
set -eu
. "$(dirname "$0")/../lib.sh"

BYTES=${1:-1073741824}
IDLE=${2:-10000}
REPS=${REPS:-3}
RATE_S=${RATE_S:-3}		# seconds per tunnels/s run
RATE_CONC=${RATE_CONC:-32}	# tunnels being set up at once
RATE_HI=${RATE_HI:-256}		# ... and with more at once
LAT_S=${LAT_S:-2}		# seconds per latency run (one at a time)

ksb_need_root
LG=$KSB_BUILDDIR/tests/bench/loadgen
HOLD=$KSB_BUILDDIR/tests/integration/ctlhold
[ -x "$LG" ] || ksb_fail "$LG not built (make tests/bench/loadgen)"
[ -x "$HOLD" ] || ksb_fail "$HOLD not built (make tests/integration/ctlhold)"
SYSTEMS="${SYSTEMS:-direct ksb tinyproxy squid}"
DNS_DELAY_MS=${DNS_DELAY_MS:-0}
case " $SYSTEMS " in *" tinyproxy "* | *" squid "*) OTHERS=1 ;; *) OTHERS= ;; esac
if [ -n "$OTHERS" ] && { ! command -v tinyproxy >/dev/null || ! command -v squid >/dev/null; }; then
	DEBIAN_FRONTEND=noninteractive apt-get install -y tinyproxy squid \
		>/dev/null || ksb_skip "cannot install tinyproxy and squid"
fi
# Two descriptors per idle tunnel in the gateway: raise RLIMIT_NOFILE to
# 65536 where allowed (CAP_SYS_RESOURCE), else use the hard limit and open
# as many tunnels as it allows.
[ "$(ulimit -Hn)" = unlimited ] || [ "$(ulimit -Hn)" -ge 65536 ] ||
	ulimit -Hn 65536 2>/dev/null || true
[ "$(ulimit -Hn)" = unlimited ] && ulimit -Hn 65536
ulimit -n "$(ulimit -Hn)"
if [ "$IDLE" -gt $(( ($(ulimit -n) - 200) / 2 )) ]; then
	echo "RLIMIT_NOFILE is $(ulimit -n): $(( ($(ulimit -n) - 200) / 2 )) idle tunnels, not $IDLE"
	IDLE=$(( ($(ulimit -n) - 200) / 2 ))
fi

ksb_env
# Rules are added to the gateway's tables on purpose below; its own check
# (gateway/parent/rulecheck.c) would take them out again: off.
echo "nft-check-interval = 0" >> "$T/ksb.conf"
G=ksbt-$$-g1
KSB_NETNS=$G
ip netns add "$G"
ip -n "$G" link set lo up
ip link add kd0 netns "$G" type veth peer name kd1 netns "$OR"
ip -n "$G" addr add 10.79.0.1/24 dev kd0
ip -n "$OR" addr add 10.79.0.2/24 dev kd1
ip -n "$G" link set kd0 up
ip -n "$OR" link set kd1 up
for ns in "$G" "$GW" "$OR"; do
	ip netns exec "$ns" sysctl -qw net.ipv4.ip_local_port_range="1024 65000" \
		net.ipv4.tcp_tw_reuse=1
done

echo "10.78.0.2 bench.test" > "$T/hosts"
cat > "$T/policy.d/test.policy" <<'POL'
profile default {
    allow bench.test:5001
    allow bench.test:5002
    allow dns.test:5001
    allow-address 10.78.0.0/24:5001,5002
}
POL
cat >> "$T/ksb.conf" <<CONF
max-connections = $((IDLE + 1000))
max-connections-per-instance = $((IDLE + 1000))
connection-rate = 1000000
connection-rate-per-instance = 1000000
audit-budget-records = 1000000
audit-budget-bytes = 2147483647
CONF
# dns.test for ksbdns: A 10.78.0.2 after DNS_DELAY_MS, NXDOMAIN (at once)
# for anything else.
ip netns exec "$GW" python3 -c '
import socket, struct, sys, time
delay = float(sys.argv[1]) / 1000
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
u.bind(("127.0.0.1", 53))
while True:
    d, a = u.recvfrom(2048)
    i, labels = 12, []
    while i < len(d) and d[i]:
        labels.append(d[i + 1:i + 1 + d[i]].decode("latin-1").lower())
        i += 1 + d[i]
    q, qtype = d[12:i + 5], struct.unpack(">H", d[i + 1:i + 3])[0]
    ans = b""
    if ".".join(labels) == "dns.test":
        time.sleep(delay)
        if qtype == 1:
            ans = (b"\xc0\x0c" + struct.pack(">HHIH", 1, 1, 1, 4) +
                   socket.inet_aton("10.78.0.2"))
        flags = b"\x81\x80"
    else:
        flags = b"\x81\x83"
    u.sendto(d[:2] + flags + struct.pack(">HHHH", 1, 1 if ans else 0, 0, 0)
             + q + ans, a)
' "$DNS_DELAY_MS" > "$T/dns.log" 2>&1 &
KSB_PIDS="$KSB_PIDS $!"
KSB_BUILDDIR_SAVED=$KSB_BUILDDIR
if [ -n "${KSB_GATEWAYD:-}" ]; then	# another build's gateway
	mkdir -p "$T/gwbuild"
	cp "$KSB_GATEWAYD" "$T/gwbuild/ksb-gatewayd"
	KSB_BUILDDIR=$T/gwbuild
fi
ksb_gateway
KSB_BUILDDIR=$KSB_BUILDDIR_SAVED
GWPID=$KSB_GATEWAY_PID

ip netns exec "$OR" "$LG" serve 5001 &
KSB_PIDS="$KSB_PIDS $!"
ksb_wait_port "$OR" 10.78.0.2 5002

# The guest: a lease held by ctlhold, eth0 on the bridge.
mkfifo "$T/hold"
ip netns exec "$GW" "$HOLD" "$T/gateway.sock" bench default \
	< "$T/hold" > "$T/lease" 2>&1 &
KSB_PIDS="$KSB_PIDS $!"
exec {HOLDFD}>"$T/hold"
for _ in $(seq 1 100); do
	[ -s "$T/lease" ] && break
	sleep 0.05
done
lease=$(sed -n 's/^ip=\([^ ]*\).*/\1/p' "$T/lease")
[ -n "$lease" ] || ksb_fail "REGISTER: $(cat "$T/lease")"
ip link add kvg1 netns "$GW" type veth peer name eth0 netns "$G"
ip -n "$GW" link set kvg1 master ksb0 up
ip -n "$G" addr add "$lease" dev eth0
ip -n "$G" link set eth0 up

# tinyproxy and squid in GW on the bridge address, reachable by the guest.
TPPID= SQPID=
if [ -n "$OTHERS" ]; then
# (prerouting too: past the refusal a guest gets for any other port)
ip netns exec "$GW" nft insert rule inet ksb prerouting iifname ksb0 \
	tcp dport '{ 3129, 3130 }' accept
ip netns exec "$GW" nft insert rule inet ksb input iifname ksb0 \
	tcp dport '{ 3129, 3130 }' accept
ip netns exec "$GW" nft insert rule inet ksb output oifname ksb0 \
	tcp sport '{ 3129, 3130 }' accept
touch "$T/tinyproxy.log"
chown nobody "$T/tinyproxy.log"
cat > "$T/tinyproxy.conf" <<CONF
User nobody
Group nogroup
Port 3129
Listen 10.77.0.1
Timeout 600
MaxClients 4096
LogLevel Critical
LogFile "$T/tinyproxy.log"
CONF
ip netns exec "$GW" tinyproxy -d -c "$T/tinyproxy.conf" >/dev/null 2>&1 &
TPPID=$!
KSB_PIDS="$KSB_PIDS $!"
mkdir -p "$T/squid"
chown proxy "$T/squid"
cat > "$T/squid.conf" <<CONF
http_port 10.77.0.1:3130
http_access allow all
cache deny all
cache_mem 8 MB
access_log none
cache_log $T/squid/cache.log
pid_filename $T/squid/squid.pid
coredump_dir $T/squid
cache_effective_user proxy
visible_hostname bench
max_filedescriptors 65536
shutdown_lifetime 1 seconds
CONF
ip netns exec "$GW" squid -N -f "$T/squid.conf" >/dev/null 2>&1 &
SQPID=$!
KSB_PIDS="$KSB_PIDS $!"
ksb_wait_port "$GW" 10.77.0.1 3129
ksb_wait_port "$GW" 10.77.0.1 3130
fi

# Where each system is reached: ADDR:PORT [CONNECT target] (+1 = bulk).
declare -A TO VIA
TO[direct]=10.79.0.2:5001;	VIA[direct]=
TO[ksb]=10.77.0.1:3128;		VIA[ksb]=bench.test:5001
TO[tinyproxy]=10.77.0.1:3129;	VIA[tinyproxy]=10.78.0.2:5001
TO[squid]=10.77.0.1:3130;	VIA[squid]=10.78.0.2:5001
TO[ksbdns]=10.77.0.1:3128;	VIA[ksbdns]=dns.test:5001

lg() { ip netns exec "$G" timeout 120 "$LG" "$@"; }
# addr SYS [bulk] / via SYS [bulk]: where loadgen connects, what it CONNECTs to.
addr() {
	local t=${TO[$1]}
	[ "${2:-}" = bulk ] && [ -z "${VIA[$1]}" ] && t=${t%:*}:5002
	echo "$t"
}
via() {
	local v=${VIA[$1]}
	[ "${2:-}" = bulk ] && [ -n "$v" ] && v=${v%:*}:5002
	echo "$v"
}
med() { sort -g | sed -n "$(( (REPS + 1) / 2 ))p"; }
# The gateway's processes (it may run the proxy in a child): CPU seconds
# and RSS (KiB) summed over GWPID and its descendants.
gw_pids() {
	local p=$1 k
	echo "$p"
	for k in $(pgrep -P "$p"); do gw_pids "$k"; done
}
# cpu_s [PID [sys [self]]]: CPU seconds, user + system (or system only),
# of PID (the gateway) and its descendants (self: PID alone), from
# /proc/<pid>/stat fields 14 and 15 (clock ticks).
cpu_s() {
	# shellcheck disable=SC2046
	cat $(if [ "${3:-}" = self ]; then echo "$1"; else gw_pids "${1:-$GWPID}"
		fi | sed 's|.*|/proc/&/stat|') 2>/dev/null |
		awk -v hz="$(getconf CLK_TCK)" -v sys="${2:-}" \
		'{ sub(/^.*\) /, ""); t += $13; if (sys == "") t += $12 }
		END { printf "%.2f", t / hz }'
}
# The process tree that serves each proxy (none for direct).
declare -A PIDOF=([ksb]=$GWPID [ksbdns]=$GWPID [tinyproxy]=$TPPID [squid]=$SQPID)
rss() {
	# shellcheck disable=SC2046
	cat $(gw_pids "$GWPID" | sed 's|.*|/proc/&/status|') 2>/dev/null |
		awk '/^VmRSS/ { t += $2 } END { print t }'
}

# PERF=DIR: during the first 32-at-once run of ksb and of tinyproxy, a
# call-graph profile of the proxy's processes (perf record -e cpu-clock
# -g) into DIR/SYS.data, the top entries into DIR/SYS.top, and their
# system calls per tunnel (perf stat on the syscalls tracepoints) into
# DIR/SYS.syscalls (PERF_CG=dwarf: call graphs through code built
# without frame pointers, such as SQLite).  The profile costs CPU: that run's figures are not
# comparable (the other runs are).
PERF=${PERF:-}
PERF_PIDS=
perf_start() {
	[ -n "$PERF" ] && [ "$2" = 1 ] && [ -n "${PIDOF[$1]:-}" ] || return 0
	mkdir -p "$PERF"
	PERF_PIDS=$(gw_pids "${PIDOF[$1]}" | paste -sd,)
	perf record -q -e cpu-clock --call-graph "${PERF_CG:-fp}" \
		-p "$PERF_PIDS" -o "$PERF/$1.data" \
		2>"$PERF/$1.record.log" &
	PERF_REC=$!
	perf stat -x, -e 'syscalls:sys_enter_*' -p "$PERF_PIDS" \
		-o "$PERF/$1.stat" &
	PERF_STAT=$!
	sleep 0.5	# perf attaches
}
perf_stop() {	# SYS TUNNELS_PER_S
	[ -n "$PERF_PIDS" ] || return 0
	kill -INT "$PERF_REC" "$PERF_STAT"
	wait "$PERF_REC" "$PERF_STAT" || true
	perf report -i "$PERF/$1.data" --no-children --sort comm,dso,sym \
		--stdio -g none --percent-limit 0.7 2>/dev/null |
		grep -v '^#' | grep -v '^$' > "$PERF/$1.top" || true
	# A few tunnels one at a time under strace: the calls of each.
	if command -v strace >/dev/null; then
		strace -f -tt -p "$PERF_PIDS" -o "$PERF/$1.strace" 2>/dev/null &
		PERF_REC=$!
		sleep 0.5
		# shellcheck disable=SC2046
		lg rate "$(addr "$1")" 0.2 1 $(via "$1") >/dev/null || true
		kill -INT "$PERF_REC"
		wait "$PERF_REC" || true
	fi
	# Tunnels during the profile: the rate times RATE_S (perf attached
	# before the run and stopped right after it).
	awk -F, -v n="$(( $2 * RATE_S ))" '
		$1 ~ /^[0-9]+$/ && $1 > 0 { t += $1; sub(/.*sys_enter_/, "", $3)
			c[$3] = $1 }
		END { printf "%.1f system calls per tunnel\n", t / n
			for (k in c) if (c[k] / n >= 0.05)
				printf "%6.2f %s\n", c[k] / n, k }' \
		"$PERF/$1.stat" | sort -k1,1gr > "$PERF/$1.syscalls"
	PERF_PIDS=
}

ksb_say "load: $(uptime)"
for s in $SYSTEMS; do	# warm-up, and a check that each path works
	# shellcheck disable=SC2046
	out=$(lg rate "$(addr "$s")" 0.5 1 $(via "$s")) ||
		ksb_fail "$s: no tunnel: $out"
done

if [ -z "${LATENCY_ONLY:-}" ] && [ -z "${RATE_ONLY:-}" ]; then
ksb_say "idle: $IDLE tunnels through ksb"
# First, on a gateway that has carried only the warm-up tunnels, and all
# runs against the RSS before the first one: later runs reuse what the
# first one's tunnels left in malloc's free lists.
: > "$T/idle"
rss0=$(rss)
for r in $(seq 1 "$REPS"); do
	mkfifo "$T/idlein"
	lg idle "$(addr ksb)" "$IDLE" "$(via ksb)" \
		< "$T/idlein" > "$T/idleout" 2>&1 &
	IP=$!
	exec {IDLEFD}>"$T/idlein"
	rm -f "$T/idlein"
	for _ in $(seq 1 1200); do
		grep -q ready "$T/idleout" && break
		kill -0 "$IP" 2>/dev/null || break
		sleep 0.1
	done
	sleep 1
	rss1=$(rss)
	open=$(ip netns exec "$GW" ss -Htn state established '( sport = :3128 )' | wc -l)
	exec {IDLEFD}>&-
	wait "$IP" || true
	per=$(( (rss1 - rss0) * 1024 / IDLE ))
	echo "run $r: $(cat "$T/idleout"); $open tunnels at the gateway;" \
		"RSS $rss0 -> $rss1 KiB: $per B/tunnel"
	echo "$per" >> "$T/idle"
	for _ in $(seq 1 100); do	# wait until the gateway closed them all
		[ "$(ip netns exec "$GW" ss -Htn state established '( sport = :3128 )' | wc -l)" = 0 ] && break
		sleep 0.1
	done
done

ksb_say "bulk: one tunnel, $BYTES bytes, $REPS runs"
for s in $SYSTEMS; do
	: > "$T/bulk.$s"
	for r in $(seq 1 "$REPS"); do
		c0=$(cpu_s)
		# shellcheck disable=SC2046
		set -- $(lg bulk "$(addr "$s" bulk)" "$BYTES" $(via "$s" bulk))
		c1=$(cpu_s)
		echo "$s run $r: $3 s, $4 MiB/s$( [ "$s" = ksb ] &&
			echo ", gateway $(awk "BEGIN { print $c1 - $c0 }") CPU-s")"
		echo "$4" >> "$T/bulk.$s"
	done
done
fi

ksb_say "tunnels/s: $RATE_CONC and $RATE_HI at a time for $RATE_S s; latency: one at a time for $LAT_S s"
for s in $SYSTEMS; do
	: > "$T/rate.$s"; : > "$T/cpu.$s"; : > "$T/kcpu.$s"; : > "$T/ratehi.$s"; : > "$T/p50.$s"; : > "$T/p99.$s"
done
# The systems take turns within each repetition (ksb, tinyproxy, ksb,
# ...): on a shared machine the load drifts over minutes, and the ratios
# compare runs seconds apart rather than a system's runs with another's.
for r in $(seq 1 "$REPS"); do
	for s in $SYSTEMS; do
		p=${PIDOF[$s]:-}
		if [ -z "${LATENCY_ONLY:-}" ]; then
		c0=$( [ -n "$p" ] && cpu_s "$p" || echo 0)
		k0=$( [ -n "$p" ] && cpu_s "$p" sys || echo 0)
		s0=$( [ -n "$p" ] && cpu_s "$p" "" self || echo 0)
		perf_start "$s" "$r"
		# shellcheck disable=SC2046
		set -- $(lg rate "$(addr "$s")" "$RATE_S" "$RATE_CONC" $(via "$s"))
		perf_stop "$s" "$2"
		c1=$( [ -n "$p" ] && cpu_s "$p" || echo 0)
		k1=$( [ -n "$p" ] && cpu_s "$p" sys || echo 0)
		s1=$( [ -n "$p" ] && cpu_s "$p" "" self || echo 0)
		# CPU microseconds the proxy spent per tunnel, all and in the
		# kernel (the TCP work every proxy does for two connections).
		us=$(awk "BEGIN { printf \"%.0f\", ($c1 - $c0) * 1e6 / ($2 * $RATE_S) }")
		ks=$(awk "BEGIN { printf \"%.0f\", ($k1 - $k0) * 1e6 / ($2 * $RATE_S) }")
		# ... and of that, the main process's (ksb: the parent, with
		# its audit writer; the rest is the proxy process)
		ss=$(awk "BEGIN { printf \"%.0f\", ($s1 - $s0) * 1e6 / ($2 * $RATE_S) }")
		echo "$s run $r: $RATE_CONC at a time: $2 tunnels/s (p50 $3 ms, p99 $4 ms, errors $5)$( [ -n "$p" ] && echo ", proxy CPU $us us/tunnel, $ks in the kernel$( [ "$s" = ksb ] && echo ", $ss in the parent")")"
		echo "$2" >> "$T/rate.$s"
		echo "$us" >> "$T/cpu.$s"
		echo "$ks" >> "$T/kcpu.$s"
		echo "$ss" >> "$T/parent.$s"
		# shellcheck disable=SC2046
		set -- $(lg rate "$(addr "$s")" "$RATE_S" "$RATE_HI" $(via "$s"))
		echo "$s run $r: $RATE_HI at a time: $2 tunnels/s (p50 $3 ms, p99 $4 ms, errors $5)"
		echo "$2" >> "$T/ratehi.$s"
		fi
		# shellcheck disable=SC2046
		set -- $(lg rate "$(addr "$s")" "$LAT_S" 1 $(via "$s"))
		echo "$s run $r: one at a time p50 $3 ms, p99 $4 ms (errors $5)"
		echo "$3" >> "$T/p50.$s"; echo "$4" >> "$T/p99.$s"
		sleep 1	# let TIME_WAIT and the audit writer settle
	done
done

ksb_say "load: $(uptime)"
ksb_say "results (medians of $REPS)"
# A run of some systems only (SYSTEMS=...) still prints its table; the
# ratios need direct, ksb, tinyproxy and squid.
[ -e "$T/idle" ] || echo 0 > "$T/idle"	# RATE_ONLY: no idle run
for s in direct ksb ksbdns tinyproxy squid; do
	for f in bulk rate ratehi p50 p99 cpu kcpu parent; do
		[ -e "$T/$f.$s" ] || echo 0 > "$T/$f.$s"
	done
done
bd=$(med < "$T/bulk.direct"); bk=$(med < "$T/bulk.ksb")
rt=$(med < "$T/rate.tinyproxy"); rk=$(med < "$T/rate.ksb")
rth=$(med < "$T/ratehi.tinyproxy"); rkh=$(med < "$T/ratehi.ksb")
ratio() {	# a system left out (SYSTEMS=...) has no median: "-"
	awk -v a="${1:-0}" -v b="${2:-0}" \
		'BEGIN { if (b == 0) print "-"; else printf "%.2f", a / b }'
}
printf '%-10s %10s %12s %12s %8s %8s %14s\n' system "MiB/s" \
	"tun/s@$RATE_CONC" "tun/s@$RATE_HI" "p50 ms" "p99 ms" "CPU us/tun(k)"
for s in $SYSTEMS; do
	printf '%-10s %10s %12s %12s %8s %8s %14s\n' "$s" "$(med < "$T/bulk.$s")" \
		"$(med < "$T/rate.$s")" "$(med < "$T/ratehi.$s")" \
		"$(med < "$T/p50.$s")" "$(med < "$T/p99.$s")" \
		"$( [ -n "${PIDOF[$s]:-}" ] && echo "$(med < "$T/cpu.$s") ($(med < "$T/kcpu.$s"))" || echo -)"
done
pi=$(med < "$T/idle")
echo
printf 'throughput ksb/direct     %5s  (target >= 0.9)\n' "$(ratio "$bk" "$bd")"
printf 'tunnels/s ksb/tinyproxy   %5s @%s, %s @%s  (target >= 2)\n' \
	"$(ratio "$rk" "$rt")" "$RATE_CONC" "$(ratio "$rkh" "$rth")" "$RATE_HI"
printf 'proxy CPU/tunnel ksb/tinyproxy %s @%s (ksb includes its audit writer)\n' \
	"$(ratio "$(med < "$T/cpu.ksb")" "$(med < "$T/cpu.tinyproxy")")" "$RATE_CONC"
# ... and per repetition (the two runs seconds apart), with their median
paste -d' ' "$T/cpu.ksb" "$T/cpu.tinyproxy" |
	awk '$2 > 0 { printf "%.2f\n", $1 / $2 }' > "$T/pair"
[ -s "$T/pair" ] && printf 'proxy CPU/tunnel ksb/tinyproxy by repetition: %s (median %s)\n' \
	"$(paste -sd' ' "$T/pair")" "$(med < "$T/pair")"
# ... and without ksb's parent (its audit writer and loop): the proxy
# process alone against all of tinyproxy, the floor of the ratio
paste -d' ' "$T/cpu.ksb" "$T/parent.ksb" "$T/cpu.tinyproxy" 2>/dev/null |
	awk 'NF == 3 && $3 > 0 { printf "%.2f\n", ($1 - $2) / $3 }' \
	> "$T/pairproxy"
[ -s "$T/pairproxy" ] && printf 'proxy CPU/tunnel ksb proxy process alone/tinyproxy by repetition: %s (median %s)\n' \
	"$(paste -sd' ' "$T/pairproxy")" "$(med < "$T/pairproxy")"
printf 'tunnels/s ksb/squid       %5s @%s, %s @%s\n' \
	"$(ratio "$rk" "$(med < "$T/rate.squid")")" "$RATE_CONC" \
	"$(ratio "$rkh" "$(med < "$T/ratehi.squid")")" "$RATE_HI"
printf 'tunnels/s ksb/direct      %5s @%s, %s @%s\n' \
	"$(ratio "$rk" "$(med < "$T/rate.direct")")" "$RATE_CONC" \
	"$(ratio "$rkh" "$(med < "$T/ratehi.direct")")" "$RATE_HI"
printf 'RSS per idle tunnel       %5s B  (target <= 16384)\n' "$pi"
