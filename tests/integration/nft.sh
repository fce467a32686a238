#!/bin/bash
# nft.sh: gateway/net/nft.c and gateway/net/netdev.c against the running kernel,
# driven by tests/integration/nftdrv, inside private network namespaces.
#
#   host ns  H : bridge kbr0 10.99.0.1/24 (nftdrv), tables inet/bridge ksb,
#                listeners on :3128 and :8080 (TCP) and :53 (UDP),
#                veths ksbt9/ksbt8 in kbr0 (they stand in for taps),
#                up0 10.98.0.1/24 towards O, ip_forward on
#   guest G1   : eth0 02:00:00:00:00:09 10.99.0.9/24, default via 10.99.0.1
#   guest G2   : eth0 02:00:00:00:00:08 10.99.0.8/24, listener :3128
#   outside O  : eth0 10.98.0.2/24 and 203.0.113.10/32 (a public-looking
#                test address, routed by H), listeners :3128 (TCP), :53 (UDP)
#
# The traffic checks run with br_netfilter's bridge-nf-call-iptables off
# and on (where the knob exists).  Nothing leaves these namespaces; the
# root namespace's ruleset is never touched.  Root only.
set -eu

skip() { echo "SKIP: $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "needs root (network namespaces, nftables)"
. "$(dirname "$0")/../lib.sh"	# ksb_need: the Debian package of a missing tool
# /etc/protocols: without it nft prints `meta l4proto 1' for icmp.
ksb_need nft ip python3 timeout sysctl /etc/protocols
[ -c /dev/net/tun ] || skip "/dev/net/tun missing"

here=$(cd "$(dirname "$0")" && pwd)
builddir=${KSB_BUILDDIR:-$(cd "$here/../.." && pwd)}
drv=$builddir/tests/integration/nftdrv
[ -x "$drv" ] || { echo "FAIL: $drv not built (make check builds it)"; exit 99; }

H=ksbt-nft-$$
G1=$H-g1
G2=$H-g2
O=$H-o
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ksbt-nft.XXXXXX")
pids=
nsdone=

cleanup() {
	set +e
	exec 9>&- 2>/dev/null
	for p in $pids; do kill "$p" 2>/dev/null; done
	for p in $pids; do wait "$p" 2>/dev/null; done
	for ns in $nsdone; do ip netns del "$ns" 2>/dev/null; done
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

h()  { ip netns exec "$H" "$@"; }
g1() { ip netns exec "$G1" "$@"; }
g2() { ip netns exec "$G2" "$@"; }
o()  { ip netns exec "$O" "$@"; }

npass=0
pass() { npass=$((npass + 1)); echo "ok $npass - $*"; }
fail() { echo "FAIL: $*"; exit 1; }
must() { local d=$1; shift; if "$@"; then pass "$d"; else fail "$d"; fi; }
mustnot() { local d=$1; shift; if "$@"; then fail "$d (should fail)"; else pass "$d"; fi; }

# drv NS ARGS...: run nftdrv in namespace NS, bounded.
drv() { local ns=$1; shift; ip netns exec "$ns" timeout 10 "$drv" "$@"; }

# until_ok SECS CMD...: until CMD succeeds, polled, at most about SECS s
# (bounds for a loaded machine).
until_ok() {
	local end=$((SECONDS + $1))
	shift
	until "$@"; do
		[ "$SECONDS" -lt "$end" ] || return 1
		sleep 0.1
	done
}
# wait_for FILE PATTERN: up to 30 s.
wait_for() { until_ok 30 grep -q -- "$2" "$1" 2>/dev/null; }

for ns in "$H" "$G1" "$G2" "$O"; do
	ip netns add "$ns" || skip "cannot create network namespace $ns"
	nsdone="$nsdone $ns"
	ip -n "$ns" link set lo up
done

# ---- peer.py: listeners and clients ---------------------------------------
cat > "$tmp/peer.py" <<'EOF'
import socket, sys, threading, time

def serve(log, specs):
    out = open(log, "a", buffering=1)
    def tcp(port):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("", port)); s.listen(16)
        while True:
            c, peer = s.accept()
            out.write("tcp %s:%d %s\n" % (c.getsockname()[0], port, peer[0]))
            try: c.sendall(b"ok\n")
            except OSError: pass
            c.close()
    def udp(port):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.bind(("", port))
        while True:
            data, peer = s.recvfrom(2048)
            out.write("udp %d %s\n" % (port, peer[0]))
    for spec in specs:
        proto, port = spec.split(":")
        threading.Thread(target=tcp if proto == "tcp" else udp,
                         args=(int(port),), daemon=True).start()
    time.sleep(0.2)
    out.write("ready\n")
    time.sleep(600)

mode = sys.argv[1]
if mode == "serve":
    serve(sys.argv[2], sys.argv[3:])
elif mode == "tcp":		# tcp SRC DST PORT TIMEOUT
    src, dst, port, t = sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5])
    try:
        s = socket.create_connection((dst, port), timeout=t, source_address=(src, 0))
        sys.exit(0 if s.recv(16) == b"ok\n" else 1)
    except OSError:
        sys.exit(1)
elif mode == "refused":	# refused SRC DST PORT tcp|udp: 0 refused within
    # 1 s (a reset, ICMP), 1 silence for 3 s, 2 anything else (connected,
    # answered, another error); prints what and how long it took
    import errno
    src, dst, port, proto = sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
    t0 = time.monotonic()
    s = socket.socket(socket.AF_INET,
                      socket.SOCK_STREAM if proto == "tcp" else socket.SOCK_DGRAM)
    s.settimeout(3)
    s.bind((src, 0))
    try:
        s.connect((dst, port))
        if proto == "udp":
            s.send(b"query")
            s.recv(512)
        what = "got through"
    except socket.timeout:
        what = "silence"
    except OSError as e:
        what = errno.errorcode.get(e.errno, str(e))
    ms = (time.monotonic() - t0) * 1000
    print("%s:%d/%s: %s in %.0f ms" % (dst, port, proto, what, ms))
    ok = {"tcp": ("ECONNREFUSED",), "udp": ("EHOSTUNREACH", "ECONNREFUSED")}
    sys.exit(0 if what in ok[proto] and ms < 1000 else 1 if what == "silence" else 2)
elif mode == "forge":	# forge SRC NEIGH HOST FAR: hand-made IPv4 (raw
    # socket, own headers) a guest may send: IP options that ask for a
    # reply along a source route through FAR, odd TCP flags, ICMP errors
    # quoting a forged FAR -> NEIGH header, fragments, TTL 1, broadcast,
    # multicast and loopback destinations, and TCP/UDP to NEIGH (whose
    # MAC the caller has made known).  Each is sent once.
    import struct
    src, nb, host, far = sys.argv[2:6]
    a = socket.inet_aton
    def csum(b):
        b += b"\0" * (len(b) % 2)
        c = sum(struct.unpack("!%dH" % (len(b) // 2), b))
        while c >> 16: c = (c & 0xffff) + (c >> 16)
        return ~c & 0xffff
    def ip(s, d, proto, body, opts=b"", frag=0, ttl=64):
        h = struct.pack("!BBHHHBBH4s4s", 0x45 + len(opts) // 4, 0,
                        20 + len(opts) + len(body), 4242, frag, ttl,
                        proto, 0, a(s), a(d)) + opts
        return h[:10] + struct.pack("!H", csum(h)) + h[12:] + body
    def l4(s, d, proto, seg, off):	# RFC 768/9293 pseudo-header sum
        c = csum(a(s) + a(d) + struct.pack("!BBH", 0, proto, len(seg)) + seg)
        return seg[:off] + struct.pack("!H", c) + seg[off + 2:]
    def udp(s, d, dport, data=b"x" * 8):
        return l4(s, d, 17, struct.pack("!HHHH", 4444, dport,
                                        8 + len(data), 0) + data, 6)
    def tcp(s, d, dport, flags, data=b""):
        return l4(s, d, 6, struct.pack("!HHIIBBHHH", 4444, dport, 1, 0,
                                       0x50, flags, 1024, 0, 0) + data, 16)
    def route(kind, hops, ptr):	# RFC 791 LSRR 0x83, SSRR 0x89, RR 7
        o = bytes([kind, 3 + 4 * len(hops), ptr]) + b"".join(map(a, hops))
        return o + b"\x01" * (-len(o) % 4)
    pk = []
    for kind in (0x83, 0x89, 7):
        o = route(kind, [far, host], 8)
        pk.append((host, ip(src, host, 17, udp(src, host, 9), o)))
        pk.append((host, ip(src, host, 6, tcp(src, host, 9, 2), o)))
    for d in ("10.99.0.255", "10.98.0.255", "224.0.0.1", "255.255.255.255",
              "127.0.0.1", "0.0.0.0", far):
        pk.append((host, ip(src, d, 17, udp(src, d, 53))))
        pk.append((host, ip(src, d, 6, tcp(src, d, 3128, 2))))
    for f in (0x10, 0x11, 0x01, 0x12, 0x14, 0x29, 0x00, 0x03):
        pk.append((host, ip(src, far, 6, tcp(src, far, 3128, f))))
    inner = ip(far, nb, 6, tcp(far, nb, 4444, 2))[:28]
    for t, c in ((3, 3), (3, 4), (11, 0), (5, 1), (12, 0)):
        m = struct.pack("!BBHI", t, c, 0, 1400) + inner
        pk.append((host, ip(src, host, 1,
                            m[:2] + struct.pack("!H", csum(m)) + m[4:])))
    for proto, seg in ((17, udp(src, far, 53, b"y" * 64)),
                       (6, tcp(src, far, 3128, 2, b"z" * 64))):
        pk.append((host, ip(src, far, proto, seg[:24], frag=0x2000)))
        pk.append((host, ip(src, far, proto, seg[24:], frag=3)))
    for d in (far, nb):
        pk.append((host, ip(src, d, 17, udp(src, d, 53), ttl=1)))
        pk.append((host, ip(src, d, 6, tcp(src, d, 3128, 2), ttl=1)))
    pk.append((nb, ip(src, nb, 17, udp(src, nb, 53))))
    pk.append((nb, ip(src, nb, 6, tcp(src, nb, 3128, 2))))
    s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
    for d, p in pk:
        s.sendto(p, (d, 0))
    print("forged %d packets" % len(pk))
elif mode == "frags":	# frags SRC DST N: N UDP fragments that never
    # complete (offset 80, more to come, each its own datagram id)
    import struct
    src, dst, n = sys.argv[2], sys.argv[3], int(sys.argv[4])
    s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
    for i in range(n):
        h = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 1420, i & 0xffff,
                        0x2000 | 10, 64, 17, 0, socket.inet_aton(src),
                        socket.inet_aton(dst))
        s.sendto(h + b"f" * 1400, (dst, 0))
elif mode == "syns":	# syns SRC DST PORT N: N SYNs, 1 ms apart (a raw
    # socket: no retries, no connection state)
    import struct
    src, dst, port, n = sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
    s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_TCP)
    for i in range(n):
        seg = struct.pack("!HHIIBBHHH", 1024 + i, port, i, 0, 0x50, 2,
                          1024, 0, 0)
        b = socket.inet_aton(src) + socket.inet_aton(dst) + \
            struct.pack("!BBH", 0, 6, len(seg)) + seg
        c = sum(struct.unpack("!%dH" % (len(b) // 2), b))
        while c >> 16: c = (c & 0xffff) + (c >> 16)
        s.sendto(seg[:16] + struct.pack("!H", ~c & 0xffff) + seg[18:],
                 (dst, 0))
        time.sleep(0.001)
elif mode == "flood":	# flood SRC DST PORT N: N connects at once, 2 s
    # for their answers (SYNs are retried after 1 s); prints "refused R of
    # N in MS ms" (MS: from the first SYN to the end)
    import errno, select
    src, dst, port, n = sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
    socks = []
    t0 = time.monotonic()
    for _ in range(n):
        s = socket.socket(); s.setblocking(False); s.bind((src, 0))
        try: s.connect((dst, port))
        except BlockingIOError: pass
        socks.append(s)
    sent = time.monotonic() - t0
    end = time.monotonic() + 2
    refused = 0
    while socks and time.monotonic() < end:
        _, w, _ = select.select([], socks, [], max(0, end - time.monotonic()))
        for s in w:
            if s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == errno.ECONNREFUSED:
                refused += 1
            socks.remove(s); s.close()
    print("refused %d of %d in %.0f ms (sent in %.0f ms)" %
          (refused, n, (time.monotonic() - t0) * 1000, sent * 1000))
elif mode == "udp":		# udp SRC DST PORT
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((sys.argv[2], 0))
    s.sendto(b"query", (sys.argv[3], int(sys.argv[4])))
elif mode == "icmp":	# icmp SRC DST TIMEOUT: 0 reply, 1 none, 2 error
    import os, select, struct
    src, dst, t = sys.argv[2], sys.argv[3], float(sys.argv[4])
    try:
        s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
        s.bind((src, 0))
        ident = os.getpid() & 0xffff
        msg = struct.pack("!BBHHH", 8, 0, 0, ident, 1) + b"ksb-nft!"
        c = sum(struct.unpack("!%dH" % (len(msg) // 2), msg))
        c = (c >> 16) + (c & 0xffff)
        c = ~(c + (c >> 16)) & 0xffff	# RFC 792 checksum
        s.sendto(msg[:2] + struct.pack("!H", c) + msg[4:], (dst, 0))
        end = time.monotonic() + t
        while select.select([s], [], [], max(0, end - time.monotonic()))[0]:
            d, peer = s.recvfrom(2048)
            h = (d[0] & 15) * 4
            if peer[0] == dst and d[h] == 0 and d[h + 4:h + 6] == msg[4:6]:
                sys.exit(0)
        sys.exit(1)
    except OSError as e:
        print("icmp: %s" % e, file=sys.stderr)
        sys.exit(2)
EOF

# counter FAMILY CHAIN PATTERN: the packet count of the first rule of
# table FAMILY ksb, chain CHAIN, whose text matches PATTERN (grep -E).
counter() {
	ip netns exec "$H" nft list chain "$1" ksb "$2" | grep -E -- "$3" |
	    head -n 1 | sed -n 's/.*counter packets \([0-9]*\).*/\1/p' | grep . || echo 0
}

# counted FAMILY CHAIN PATTERN [ABOVE]: until that counter exceeds ABOVE
# (0); packets are counted as the kernel processes them, maybe a moment
# after the sender returned.
counter_gt() { [ "$(counter "$1" "$2" "$3")" -gt "${4:-0}" ]; }
counted() { until_ok 10 counter_gt "$@"; }

# tcp NS SRC DST PORT: a connection that gets the listener's "ok".
# Allowed ones get 10 s (20 s with python's start: bounds for a loaded
# machine), refused ones are dropped silently: 1 s is plenty between
# namespaces (and a refusal that came late would only pass unnoticed).
tcp_ok()   { ip netns exec "$1" timeout 20 python3 "$tmp/peer.py" tcp "$2" "$3" "$4" 10; }
tcp_try()  { ip netns exec "$1" timeout 5 python3 "$tmp/peer.py" tcp "$2" "$3" "$4" 1; }
udp_send() { ip netns exec "$1" timeout 20 python3 "$tmp/peer.py" udp "$2" "$3" "$4"; }
# icmp_ok NS SRC DST: an ICMP echo gets its reply (5 s); icmp_none: it gets
# none in 1 s (a raw socket, no ping(8) needed; a failing witness fails).
icmp() { ip netns exec "$1" timeout 10 python3 "$tmp/peer.py" icmp "$2" "$3" "$4"; }
icmp_ok() { icmp "$1" "$2" "$3" 5; }
icmp_none() { local rc=0; icmp "$1" "$2" "$3" 1 || rc=$?; [ "$rc" = 1 ]; }
# refused NS SRC DST PORT PROTO: refused at once (a reset for TCP, ICMP
# for UDP, within 1 s); silent: no answer at all for 3 s.
refused() { ip netns exec "$1" timeout 20 python3 "$tmp/peer.py" refused "$2" "$3" "$4" "$5"; }
silent() { local rc=0; refused "$@" || rc=$?; [ "$rc" = 1 ]; }
# ip_in NS: IPv4 datagrams NS has received (/proc/net/snmp Ip InReceives):
# the witness that the host sent a third party nothing.
ip_in() {
	ip netns exec "$1" awk '$1 == "Ip:" && $2 ~ /^[0-9]+$/ { print $4 }' /proc/net/snmp
}

# =========================================================================
# netdev: bridge and tap
# =========================================================================
must "bridge created" drv "$H" bridge kbr0 10.99.0.1/24
must "bridge again is idempotent" drv "$H" bridge kbr0 10.99.0.1/24
h ip -d link show kbr0 > "$tmp/br"
must "bridge is a bridge, STP off" grep -q "bridge .*stp_state 0" "$tmp/br"
must "bridge is up" grep -q "<.*UP.*>" "$tmp/br"
must "bridge MAC is fixed, locally administered" grep -q "link/ether 02:6b:73:63:00:01" "$tmp/br"
must "bridge has 10.99.0.1/24 once" test "$(h ip -4 -o addr show dev kbr0 | grep -c 'inet 10.99.0.1/24')" = 1
if [ -e /proc/sys/net/ipv6 ]; then
	must "bridge addrgenmode none" grep -q "addrgenmode none" "$tmp/br"
	must "bridge disable_ipv6 = 1" test "$(h cat /proc/sys/net/ipv6/conf/kbr0/disable_ipv6)" = 1
	must "bridge has no IPv6 address" test -z "$(h ip -6 -o addr show dev kbr0)"
fi
h ip link add kdummy type veth peer name kdummy1
mustnot "bridge refuses a non-bridge link" drv "$H" bridge kdummy 10.97.0.1/24
mustnot "bridge refuses a 16-byte name" drv "$H" bridge kbr0123456789abc 10.97.0.1/24

mkfifo "$tmp/fifo"
ip netns exec "$H" timeout 30 "$drv" tap ksbt5 kbr0 < "$tmp/fifo" > "$tmp/tap.out" 2>&1 &
tappid=$!
pids="$pids $tappid"
exec 9> "$tmp/fifo"
must "tap created" wait_for "$tmp/tap.out" '^ready$'
h ip -d link show ksbt5 > "$tmp/tap"
must "tap is a tap, no PI, vnet_hdr" grep -q "tun type tap pi off vnet_hdr on persist off" "$tmp/tap"
must "tap enslaved to kbr0 and up" grep -q "<.*UP.*> .* master kbr0" "$tmp/tap"
must "tap port isolated" grep -q "isolated on" "$tmp/tap"
if [ -e /proc/sys/net/ipv6 ]; then
	must "tap disable_ipv6 = 1" test "$(h cat /proc/sys/net/ipv6/conf/ksbt5/disable_ipv6)" = 1
fi
mustnot "tap refuses an existing name" drv "$H" tap ksbt5 kbr0 < /dev/null
mustnot "tap refuses a 16-byte name" drv "$H" tap ksbt0123456789ab kbr0 < /dev/null
mustnot "tap refuses a %d name" drv "$H" tap 'ksbt%d' kbr0 < /dev/null
mustnot "tap refuses a missing bridge" drv "$H" tap ksbt6 nosuch < /dev/null
mustnot "tap refuses a non-bridge master" drv "$H" tap ksbt6 kdummy < /dev/null
exec 9>&-
wait "$tappid" || fail "nftdrv tap exited with $?"
must "tap gone with its last fd" test -z "$(h ip -o link show ksbt5 2>/dev/null)"
must "linkdel deletes" drv "$H" linkdel kdummy
must "linkdel of a missing link is 0" drv "$H" linkdel kdummy

# =========================================================================
# nft: tables, sets, idempotence, other tables untouched
# =========================================================================
h nft -f - <<'EOF'
table inet keepme {
	chain c {
		type filter hook input priority 10; policy accept;
	}
}
table bridge keepme {
	set s {
		type ether_addr
		elements = { 02:00:00:00:00:01 }
	}
}
EOF
h nft list table inet keepme > "$tmp/keep.inet"
h nft list table bridge keepme > "$tmp/keep.bridge"

mustnot "add before setup fails" drv "$H" add ksbt9 02:00:00:00:00:09 10.99.0.9
must "setup" drv "$H" setup kbr0 10.99.0.1 3128
must "table inet ksb exists" h nft -t list table inet ksb
must "table bridge ksb exists" h nft -t list table bridge ksb

cat > "$tmp/expected" <<'EOF'
table inet ksb {
set guests {
type ipv4_addr
}
set refusals {
type ipv4_addr
size 4096
flags dynamic,timeout
timeout 1m
}
chain prerouting {
type filter hook prerouting priority filter; policy accept;
iif "kbr0" ip daddr 10.99.0.1 tcp dport 3128 accept
iif "kbr0" ip saddr @guests meta l4proto tcp update @refusals { ip saddr limit rate 50/second burst 50 packets } counter reject with tcp reset
iif "kbr0" ip saddr @guests meta l4proto udp update @refusals { ip saddr limit rate 50/second burst 50 packets } counter reject with icmpx admin-prohibited
}
chain input {
type filter hook input priority filter; policy accept;
iif "kbr0" ip saddr @guests ip daddr 10.99.0.1 tcp dport 3128 counter accept
iif "kbr0" udp dport 53 counter drop
iif "kbr0" tcp dport 53 counter drop
iif "kbr0" udp dport 853 counter drop
iif "kbr0" tcp dport 853 counter drop
iif "kbr0" meta nfproto ipv6 counter drop
iif "kbr0" meta l4proto icmp counter drop
iif "kbr0" counter drop
}
chain forward {
type filter hook forward priority filter; policy accept;
iif "kbr0" counter drop
oif "kbr0" counter drop
}
chain output {
type filter hook output priority filter; policy accept;
oif "kbr0" ip daddr @guests ip saddr 10.99.0.1 tcp sport 3128 accept
oif "kbr0" ip daddr @guests tcp flags & rst == rst counter accept
oif "kbr0" ip daddr @guests icmp type destination-unreachable icmp code admin-prohibited counter accept
oif "kbr0" counter drop
}
}
table bridge ksb {
set guests {
type ifname . ether_addr . ipv4_addr
}
chain prerouting {
type filter hook prerouting priority filter; policy accept;
iifname "ksbt*" ip frag-off & 16383 != 0 counter drop
iifname "ksbt*" ether daddr != 02:6b:73:63:00:01 ether daddr & 01:00:00:00:00:00 == 00:00:00:00:00:00 iifname . ether saddr . ip saddr @guests counter ether daddr set 02:6b:73:63:00:01 meta pkttype set host
iifname "ksbt*" iifname . ether saddr . ip saddr @guests accept
iifname "ksbt*" arp htype 1 arp ptype ip arp hlen 6 arp plen 4 iifname . ether saddr . arp saddr ip @guests iifname . arp saddr ether . arp saddr ip @guests accept
iifname "ksbt*" ether type ip counter drop
iifname "ksbt*" ether type arp counter drop
iifname "ksbt*" ether type ip6 counter drop
iifname "ksbt*" counter drop
}
chain forward {
type filter hook forward priority filter; policy accept;
iifname "ksbt*" counter drop
oifname "ksbt*" counter drop
}
}
EOF
ksb_tables() {
	{ h nft -s list table inet ksb; h nft -s list table bridge ksb; } |
	    sed 's/^[[:space:]]*//; /^$/d'
}
ksb_tables > "$tmp/got"
must "ruleset is the expected one" diff -u "$tmp/expected" "$tmp/got"
# The IPv4 rule's ether type check is implied in nft's listing: look at it.
must "bridge IPv4 rule checks ether type 0x0800" sh -c \
    "ip netns exec $H nft --debug=netlink list chain bridge ksb prerouting |
     grep -q 'payload load 2b @ link header + 12 => reg 1'"

must "setup again" drv "$H" setup kbr0 10.99.0.1 3128
ksb_tables > "$tmp/got2"
must "setup twice gives the same ruleset" diff -u "$tmp/got" "$tmp/got2"
must "no duplicate rules" test "$(h nft list ruleset | grep -c 'tcp dport 3128 counter')" = 1

must "add guest" drv "$H" add ksbt9 02:00:00:00:00:09 10.99.0.9
must "add guest again is idempotent" drv "$H" add ksbt9 02:00:00:00:00:09 10.99.0.9
must "bridge set has the element" sh -c "ip netns exec $H nft list set bridge ksb guests |
    grep -qF '\"ksbt9\" . 02:00:00:00:00:09 . 10.99.0.9'"
must "inet set has the element" sh -c "ip netns exec $H nft list set inet ksb guests |
    grep -q 'elements = { 10.99.0.9 }'"
must "del guest" drv "$H" del ksbt9 02:00:00:00:00:09 10.99.0.9
must "bridge set empty after del" sh -c "! ip netns exec $H nft list set bridge ksb guests | grep -q elements"
must "inet set empty after del" sh -c "! ip netns exec $H nft list set inet ksb guests | grep -q elements"
must "del of a missing guest is 0" drv "$H" del ksbt9 02:00:00:00:00:09 10.99.0.9
mustnot "add refuses a 16-byte tap name" drv "$H" add ksbt0123456789ab 02:00:00:00:00:09 10.99.0.9
must "add guest (before re-setup)" drv "$H" add ksbt9 02:00:00:00:00:09 10.99.0.9
must "setup replaces the sets with empty ones" drv "$H" setup kbr0 10.99.0.1 3128
must "sets empty after setup" sh -c "! ip netns exec $H nft list ruleset | grep -q 10.99.0.9"
must "setup with two guests in the same batch" drv "$H" setup kbr0 10.99.0.1 3128 ksbt \
    ksbt9 02:00:00:00:00:09 10.99.0.9 ksbt8 02:00:00:00:00:08 10.99.0.8
must "setup: both guests in the bridge set" sh -c "ip netns exec $H nft list set bridge ksb guests |
    tr -d '\n\t' | grep -F '\"ksbt8\" . 02:00:00:00:00:08 . 10.99.0.8' | grep -qF '\"ksbt9\" . 02:00:00:00:00:09 . 10.99.0.9'"
must "setup: both guests in the inet set" sh -c "ip netns exec $H nft list set inet ksb guests |
    tr -d '\n\t' | grep -qE 'elements = \{ 10.99.0.(8, 10.99.0.9|9, 10.99.0.8) \}'"
must "setup again without guests empties the sets" drv "$H" setup kbr0 10.99.0.1 3128
must "sets empty again" sh -c "! ip netns exec $H nft list ruleset | grep -q 10.99.0.9"

# The gateway's read-back (nftcheck_run, every nft-check-interval): the
# same after a setup, drift for a flushed set; its cost with 100 guests.
must "check: a fresh setup reads back the same" sh -c "ip netns exec $H timeout 30 $drv check kbr0 10.99.0.1 3128 | grep -q '^same'"
g100=
for i in $(seq 1 100); do
	g100="$g100 ksbt$i 02:00:00:00:$(printf '%02x:%02x' $((i / 256)) $((i % 256))) 10.99.$((1 + i / 250)).$((i % 250 + 1))"
done
must "setup with 100 guests" drv "$H" setup kbr0 10.99.0.1 3128 ksbt $g100
h "$drv" check kbr0 10.99.0.1 3128 ksbt $g100 > "$tmp/check100" 2>&1 || true
echo "# nftcheck_run with 100 guests: $(tr "\n" " " < "$tmp/check100")"
must "check with 100 guests: the same" grep -q '^same' "$tmp/check100"
must "check with 100 guests: under 100 ms a run" \
    awk '/^mean/ { exit !($2 < 100) }' "$tmp/check100"
h nft delete element inet ksb guests '{ 10.99.1.8 }'
must "check: a guest's element gone is set drift" sh -c \
    "ip netns exec $H timeout 30 $drv check kbr0 10.99.0.1 3128 ksbt $g100 | grep -q '^drift set: set inet guests: a registered guest.s element is missing'"
must "setup again without guests" drv "$H" setup kbr0 10.99.0.1 3128
# Other tables' base chains that see ksb's links are drift (foreign);
# one on another link is not.
chk() { ip netns exec "$H" timeout 30 "$drv" check kbr0 10.99.0.1 3128 | grep -q -- "$1"; }
h nft add table netdev other
h nft add chain netdev other lo_in '{ type filter hook ingress device "lo" priority 0; }'
must "check: a netdev chain on lo only is not drift" chk '^same'
h nft add chain netdev other br_in '{ type filter hook ingress device "kbr0" priority -500; }'
must "check: a netdev ingress chain on the bridge is foreign" chk '^drift foreign: table netdev other chain br_in is hooked on kbr0 (ingress)'
h nft delete table netdev other
if h nft add table inet other 2>/dev/null &&
    h nft add chain inet other in '{ type filter hook ingress device "kbr0" priority 0; }' 2>/dev/null; then
	must "check: an inet ingress chain on the bridge is foreign" chk '^drift foreign: table inet other chain in is hooked on kbr0 (ingress)'
fi
h nft delete table inet other 2>/dev/null || true
h nft add table bridge other
h nft add chain bridge other pre '{ type filter hook prerouting priority -300; }'
h nft add rule bridge other pre iifname "vnet*" ether saddr set 02:00:00:00:00:01
h nft add rule bridge other pre oifname "docker0" counter
must "check: a bridge-family base chain confined to other links is not drift" chk '^same'
h nft add rule bridge other pre iifname "ksb*" counter
must "check: a rule of it that may see ksb's taps is foreign" \
    chk '^drift foreign: table bridge other chain pre: a base chain of another program.s with a rule not confined'
h nft flush chain bridge other pre
h nft add rule bridge other pre ether type ip meta pkttype set host
must "check: a rule of it for every link is foreign" \
    chk '^drift foreign: table bridge other chain pre: a base chain of another program.s with a rule not confined'
h nft delete table bridge other
must "check: the same again" chk '^same'

must "teardown" drv "$H" teardown
must "teardown removed inet ksb" sh -c "! ip netns exec $H nft list table inet ksb 2>/dev/null"
must "teardown removed bridge ksb" sh -c "! ip netns exec $H nft list table bridge ksb 2>/dev/null"
must "teardown again is 0" drv "$H" teardown
must "other inet table untouched" sh -c "ip netns exec $H nft list table inet keepme | diff -u $tmp/keep.inet -"
must "other bridge table untouched" sh -c "ip netns exec $H nft list table bridge keepme | diff -u $tmp/keep.bridge -"
h nft delete table inet keepme
h nft delete table bridge keepme

# =========================================================================
# traffic
# =========================================================================
h ip link add ksbt9 type veth peer name eth0 netns "$G1"
h ip link add ksbt8 type veth peer name eth0 netns "$G2"
h ip link add up0 type veth peer name eth0 netns "$O"
for p in ksbt9 ksbt8; do
	h ip link set "$p" master kbr0
	h ip link set "$p" up
done
h ip addr add 10.98.0.1/24 dev up0
h ip link set up0 up
h sysctl -qw net.ipv4.ip_forward=1
g1 ip link set eth0 address 02:00:00:00:00:09
g1 ip addr add 10.99.0.9/24 dev eth0
g1 ip link set eth0 up
g1 ip route add default via 10.99.0.1
g2 ip link set eth0 address 02:00:00:00:00:08
g2 ip addr add 10.99.0.8/24 dev eth0
g2 ip link set eth0 up
g2 ip route add default via 10.99.0.1
o ip addr add 10.98.0.2/24 dev eth0
o ip link set eth0 up
o ip route add default via 10.98.0.1
o ip addr add 203.0.113.10/32 dev eth0
h ip route add 203.0.113.10/32 via 10.98.0.2

# (Bounded; the cleanup stops them: the traffic checks below take ~40 s
# on an idle machine.)
ip netns exec "$H" timeout 600 python3 "$tmp/peer.py" serve "$tmp/h.log" tcp:3128 tcp:8080 udp:53 tcp:853 udp:853 tcp:53 &
pids="$pids $!"
ip netns exec "$G2" timeout 600 python3 "$tmp/peer.py" serve "$tmp/g2.log" tcp:3128 &
pids="$pids $!"
ip netns exec "$O" timeout 600 python3 "$tmp/peer.py" serve "$tmp/o.log" tcp:3128 udp:53 &
pids="$pids $!"
for f in h g2 o; do
	wait_for "$tmp/$f.log" '^ready$' || fail "listener in $f did not start"
done

flush_neigh() {
	h ip neigh flush dev kbr0 2>/dev/null || true
	g1 ip neigh flush dev eth0 2>/dev/null || true
	g2 ip neigh flush dev eth0 2>/dev/null || true
}

# Control: without our tables every path below works, so each "dropped"
# check that follows is the rules' doing, not the test's topology.
must "control: G1 -> host:8080 without tables" tcp_ok "$G1" 10.99.0.9 10.99.0.1 8080
must "control: G1 -> G2 without tables" tcp_ok "$G1" 10.99.0.9 10.99.0.8 3128
# (the way the self-test's neighbour probe goes: straight to its MAC)
g1 ip neigh replace 10.99.0.8 lladdr 02:00:00:00:00:08 dev eth0 nud permanent
must "control: G1 -> G2 by its MAC (static neighbour) without tables" \
    tcp_ok "$G1" 10.99.0.9 10.99.0.8 3128
g1 ip neigh del 10.99.0.8 dev eth0
must "control: G1 -> routed O without tables" tcp_ok "$G1" 10.99.0.9 10.98.0.2 3128
must "control: G1 -> public-looking 203.0.113.10 without tables" tcp_ok "$G1" 10.99.0.9 203.0.113.10 3128
must "control: G1 -> host:853 (DoT) without tables" tcp_ok "$G1" 10.99.0.9 10.99.0.1 853
: > "$tmp/o.log"
must "control: G1 -> host 10.98.0.1 without tables" tcp_ok "$G1" 10.99.0.9 10.98.0.1 3128
udp_send "$G1" 10.99.0.9 10.99.0.1 53
must "control: UDP 53 arrives without tables" wait_for "$tmp/h.log" '^udp 53 10.99.0.9$'

# forged M: G1 sends peer.py's hand-made packets (forge: source routes
# through O, broadcast, multicast, loopback, odd TCP flags, forged ICMP
# errors, fragments, TTL 1, straight to G2's MAC); the host may answer
# G1, but sends G2 and O nothing.  (20 are unfragmented TCP: the reset
# rule's counter shows they were judged.)
forged() {
	local g2in oin cr
	g2in=$(ip_in "$G2"); oin=$(ip_in "$O")
	cr=$(counter inet prerouting 'reject with tcp reset')
	g1 ip neigh replace 10.99.0.8 lladdr 02:00:00:00:00:08 dev eth0 nud permanent
	must "$1 forged packets sent" ip netns exec "$G1" timeout 10 \
	    python3 "$tmp/peer.py" forge 10.99.0.9 10.99.0.8 10.99.0.1 10.98.0.2
	must "$1 forged packets judged" \
	    counted inet prerouting 'reject with tcp reset' $((cr + 19))
	g1 ip neigh del 10.99.0.8 dev eth0
	must "$1 forged: G2 received nothing" test "$(ip_in "$G2")" = "$g2in"
	must "$1 forged: O received nothing" test "$(ip_in "$O")" = "$oin"
}

# Control for forged's witnesses: without the tables G2 and O do receive
# some of those packets.
g2in=$(ip_in "$G2"); oin=$(ip_in "$O")
forge_ctl() {
	[ "$(ip_in "$G2")" -gt "$g2in" ] && [ "$(ip_in "$O")" -gt "$oin" ]
}
g1 ip neigh replace 10.99.0.8 lladdr 02:00:00:00:00:08 dev eth0 nud permanent
ip netns exec "$G1" timeout 10 python3 "$tmp/peer.py" forge \
    10.99.0.9 10.99.0.8 10.99.0.1 10.98.0.2 > /dev/null
must "control: forged packets reach G2 and O without tables" \
    until_ok 10 forge_ctl
g1 ip neigh del 10.99.0.8 dev eth0

knob=/proc/sys/net/bridge/bridge-nf-call-iptables
if h test -e "$knob"; then modes="0 1"; else modes=absent; fi

for bnf in $modes; do
	if [ "$bnf" != absent ]; then
		h sh -c "echo $bnf > $knob"
	fi
	m="[br_netfilter $bnf]"
	flush_neigh
	: > "$tmp/h.log"; : > "$tmp/g2.log"; : > "$tmp/o.log"

	must "$m setup" drv "$H" setup kbr0 10.99.0.1 3128
	mustnot "$m unregistered guest cannot reach the proxy" tcp_try "$G1" 10.99.0.9 10.99.0.1 3128
	must "$m register G1" drv "$H" add ksbt9 02:00:00:00:00:09 10.99.0.9
	must "$m register G2" drv "$H" add ksbt8 02:00:00:00:00:08 10.99.0.8

	must "$m G1 -> proxy 10.99.0.1:3128" tcp_ok "$G1" 10.99.0.9 10.99.0.1 3128
	must "$m proxy saw 10.99.0.9" grep -q '^tcp 10.99.0.1:3128 10.99.0.9$' "$tmp/h.log"
	must "$m G2 -> proxy" tcp_ok "$G2" 10.99.0.8 10.99.0.1 3128
	# Everything else a registered guest sends over TCP or UDP is refused
	# at once (a reset, ICMP prohibited) and still reaches nothing: the
	# listeners hear nothing (below), nor do G2 and O receive a datagram.
	g2in=$(ip_in "$G2"); oin=$(ip_in "$O")
	mustnot "$m G1 -> host:8080 dropped" tcp_try "$G1" 10.99.0.9 10.99.0.1 8080
	must "$m G1 -> host:8080 refused at once" refused "$G1" 10.99.0.9 10.99.0.1 8080 tcp
	mustnot "$m G1 -> host's other address 10.98.0.1:3128 dropped" \
	    tcp_try "$G1" 10.99.0.9 10.98.0.1 3128
	must "$m G1 -> host's other address refused at once" \
	    refused "$G1" 10.99.0.9 10.98.0.1 3128 tcp
	mustnot "$m G1 -> routed 10.98.0.2 dropped" tcp_try "$G1" 10.99.0.9 10.98.0.2 3128
	must "$m G1 -> routed 10.98.0.2 refused at once" refused "$G1" 10.99.0.9 10.98.0.2 3128 tcp
	mustnot "$m G1 -> public-looking 203.0.113.10:3128 dropped" \
	    tcp_try "$G1" 10.99.0.9 203.0.113.10 3128
	must "$m G1 -> public-looking 203.0.113.10:3128 refused at once" \
	    refused "$G1" 10.99.0.9 203.0.113.10 3128 tcp
	# (ICMP: the kernel's icmp_ratelimit also allows a guest 6 at once,
	# then one a second; these checks need fewer.)
	must "$m UDP G1 -> 203.0.113.10:53 refused at once (ICMP)" \
	    refused "$G1" 10.99.0.9 203.0.113.10 53 udp
	mustnot "$m DoT: G1 -> host:853/tcp dropped" tcp_try "$G1" 10.99.0.9 10.99.0.1 853
	mustnot "$m DNS: G1 -> host:53/tcp dropped" tcp_try "$G1" 10.99.0.9 10.99.0.1 53
	must "$m DNS: G1 -> host:53/udp refused at once (ICMP)" \
	    refused "$G1" 10.99.0.9 10.99.0.1 53 udp
	udp_send "$G1" 10.99.0.9 10.99.0.1 853
	must "$m resets counted" counted inet prerouting 'reject with tcp reset' 7
	must "$m ICMP refusals counted" counted inet prerouting 'reject with icmpx' 2
	# (With br_netfilter the kernel sends a reset straight out of the
	# tap the packet came in on, not through output.)
	if [ "$bnf" != 1 ]; then
		must "$m resets went out to the guest" counted inet output 'tcp flags'
	fi
	must "$m ICMP went out to the guest" counted inet output 'admin-prohibited'
	must "$m G2 received nothing meanwhile" test "$(ip_in "$G2")" = "$g2in"
	must "$m O received nothing meanwhile" test "$(ip_in "$O")" = "$oin"
	# IPv6 from the guest: a UDP datagram to the host's would-be address.
	g1 ip -6 addr add fd00::9/64 dev eth0 nodad 2>/dev/null || true
	g1 timeout 5 python3 -c 'import socket; s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM); s.sendto(b"x", ("fd00::1", 53))' 2>/dev/null || true
	must "$m IPv6 from a tap counted and dropped" counted bridge prerouting 'ether type ip6'
	g1 ip -6 addr del fd00::9/64 dev eth0 2>/dev/null || true
	must "$m O saw nothing" test ! -s "$tmp/o.log"
	# Once its refusal is counted the datagram cannot arrive any more.
	c53=$(counter inet prerouting 'reject with icmpx')
	udp_send "$G1" 10.99.0.9 10.99.0.1 53
	must "$m UDP 53 to the host refused and counted" \
	    counted inet prerouting 'reject with icmpx' "$c53"
	must "$m UDP 53 did not arrive" sh -c "! grep -q '^udp' $tmp/h.log"
	must "$m the ICMP witness gets a reply on lo" \
	    icmp_ok "$G1" 127.0.0.1 127.0.0.1
	must "$m ICMP echo to host dropped" icmp_none "$G1" 10.99.0.9 10.99.0.1

	# Guest to guest: by ARP (silence: nobody answers), then with a
	# static neighbour: the frame for G2's MAC goes up to the host,
	# which refuses it at once; G2 never sees it.
	g2in=$(ip_in "$G2")
	mustnot "$m G1 -> G2 dropped (ARP)" tcp_try "$G1" 10.99.0.9 10.99.0.8 3128
	g1 ip neigh replace 10.99.0.8 lladdr 02:00:00:00:00:08 dev eth0 nud permanent
	mustnot "$m G1 -> G2 dropped (static neighbour)" tcp_try "$G1" 10.99.0.9 10.99.0.8 3128
	must "$m G1 -> G2 refused at once (static neighbour)" \
	    refused "$G1" 10.99.0.9 10.99.0.8 3128 tcp
	must "$m G1 -> G2 over UDP refused at once (static neighbour)" \
	    refused "$G1" 10.99.0.9 10.99.0.8 53 udp
	must "$m frames for G2's MAC went to the host" \
	    counted bridge prerouting 'meta pkttype set host' 2
	g1 ip neigh del 10.99.0.8 dev eth0
	must "$m G2 saw nothing" sh -c "! grep -q '^tcp' $tmp/g2.log"
	must "$m G2 received no datagram" test "$(ip_in "$G2")" = "$g2in"
	must "$m tap to tap counted in bridge forward" counted bridge forward 'iifname "ksbt\*"'

	# (before the flood: the forged UDP spend the kernel's ICMP tokens for
	# G1, which the spoofing checks' silences after it give back)
	forged "$m"

	# Fragments: a guest's never reach the host's reassembly, whose
	# memory (ipfrag_high_thresh, 4 MB a namespace) they would fill for
	# ipfrag_time (30 s): the outside's fragmented datagrams to the host
	# (a large DNS answer) would be dropped meanwhile.
	ip netns exec "$G1" timeout 20 python3 "$tmp/peer.py" frags 10.99.0.9 10.99.0.1 3000
	must "$m no fragment of a guest's waits for reassembly" \
	    sh -c "ip netns exec $H grep -q '^FRAG: inuse 0 ' /proc/net/sockstat"
	o timeout 5 python3 -c 'import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"B" * 3000, ("10.98.0.1", 53))'
	must "$m the outside's fragmented datagram still reassembled" \
	    wait_for "$tmp/h.log" '^udp 53 10.98.0.2$'
	must "$m fragments from a tap counted" counted bridge prerouting 'frag-off' 2999

	# The rate: at most NFT_REFUSE_BURST (50) at once and 50 a second
	# per guest (the retried SYNs after 1 s get the refilled tokens);
	# past it, silence.  Another guest is refused at once meanwhile (a
	# bucket each).
	h nft list set inet ksb refusals > /dev/null
	ip netns exec "$G1" timeout 20 python3 "$tmp/peer.py" flood 10.99.0.9 10.99.0.1 8081 300 > "$tmp/flood"
	read -r _ nref _ nall _ fms _ < "$tmp/flood"
	echo "# $m flood: $(cat "$tmp/flood")"
	must "$m flood: some refused ($nref of $nall)" test "$nref" -ge 1
	must "$m flood: at most the burst and the rate ($nref <= 50 + 50/s * $fms ms + 5)" \
	    test "$nref" -le $((50 + 50 * fms / 1000 + 5))
	must "$m another guest refused at once meanwhile" \
	    refused "$G2" 10.99.0.8 10.99.0.1 8081 tcp
	must "$m the meter holds G1" sh -c "ip netns exec $H nft list set inet ksb refusals | grep -q 10.99.0.9"

	# Spoofed source IP: first as IPv4 (G1 knows the host's MAC), then
	# as ARP (neighbours flushed, G1 asks with the spoofed address).
	g1 ip addr add 10.99.0.50/24 dev eth0
	mustnot "$m spoofed source IP dropped" tcp_try "$G1" 10.99.0.50 10.99.0.1 3128
	must "$m spoofed source IP gets no refusal either (silence)" \
	    silent "$G1" 10.99.0.50 10.99.0.1 8080 tcp
	g1 ip neigh flush dev eth0
	mustnot "$m spoofed source IP dropped (ARP)" tcp_try "$G1" 10.99.0.50 10.99.0.1 3128
	must "$m host learned nothing from spoofed ARP" \
	    test -z "$(h ip neigh show 10.99.0.50 dev kbr0 | grep -v FAILED)"
	must "$m proxy never saw 10.99.0.50" sh -c "! grep -q 10.99.0.50 $tmp/h.log"
	must "$m spoofed IPv4 counted" counted bridge prerouting 'ether type ip counter'
	must "$m spoofed ARP counted" counted bridge prerouting 'ether type arp'
	g1 ip addr del 10.99.0.50/24 dev eth0

	# Spoofed MAC.
	g1 ip link set eth0 address 02:00:00:00:00:77
	flush_neigh
	mustnot "$m spoofed MAC dropped" tcp_try "$G1" 10.99.0.9 10.99.0.1 3128
	g1 ip link set eth0 address 02:00:00:00:00:09
	flush_neigh
	must "$m G1 works again with its own MAC" tcp_ok "$G1" 10.99.0.9 10.99.0.1 3128

	# Another guest's identity: G2's MAC and address are valid from
	# ksbt8 only.
	g1 ip link set eth0 address 02:00:00:00:00:08
	g1 ip addr add 10.99.0.8/32 dev eth0
	g1 ip neigh replace 10.99.0.1 lladdr 02:6b:73:63:00:01 dev eth0 nud permanent
	g2in=$(ip_in "$G2")
	mustnot "$m G2's MAC+IP from G1's tap dropped" tcp_try "$G1" 10.99.0.8 10.99.0.1 3128
	must "$m G2's MAC+IP from G1's tap: no refusal (silence)" \
	    silent "$G1" 10.99.0.8 10.99.0.1 8080 tcp
	must "$m G2's MAC+IP from G1's tap: nothing sent to G2" \
	    test "$(ip_in "$G2")" = "$g2in"
	g1 ip neigh del 10.99.0.1 dev eth0
	g1 ip addr del 10.99.0.8/32 dev eth0
	g1 ip link set eth0 address 02:00:00:00:00:09
	flush_neigh

	# A setup (the gateway's restart) replaces both tables in one batch:
	# 10 of them while G1 sends SYNs at O and at G2's MAC (1,500 each, 1
	# ms apart: the whole time), and neither receives a datagram (TCP
	# only: ICMP tokens are kept for the next round's checks).
	g2in=$(ip_in "$G2"); oin=$(ip_in "$O")
	g1 ip neigh replace 10.99.0.8 lladdr 02:00:00:00:00:08 dev eth0 nud permanent
	ip netns exec "$G1" timeout 20 python3 "$tmp/peer.py" syns 10.99.0.9 10.98.0.2 3128 1500 &
	fl1=$!
	ip netns exec "$G1" timeout 20 python3 "$tmp/peer.py" syns 10.99.0.9 10.99.0.8 3128 1500 &
	fl2=$!
	nset=0
	for i in 1 2 3 4 5 6 7 8 9 10; do
		drv "$H" setup kbr0 10.99.0.1 3128 ksbt ksbt9 02:00:00:00:00:09 \
		    10.99.0.9 ksbt8 02:00:00:00:00:08 10.99.0.8 && nset=$((nset + 1))
	done
	wait "$fl1" "$fl2" || true
	g1 ip neigh del 10.99.0.8 dev eth0
	must "$m 10 setups during the SYNs" test "$nset" = 10
	must "$m during the setups G2 received nothing" test "$(ip_in "$G2")" = "$g2in"
	must "$m during the setups O received nothing" test "$(ip_in "$O")" = "$oin"

	must "$m unregister G1" drv "$H" del ksbt9 02:00:00:00:00:09 10.99.0.9
	must "$m the meter forgot G1 with it" sh -c "! ip netns exec $H nft list set inet ksb refusals | grep -q 10.99.0.9"
	mustnot "$m G1 cut off after del" tcp_try "$G1" 10.99.0.9 10.99.0.1 3128
	must "$m G2 still works" tcp_ok "$G2" 10.99.0.8 10.99.0.1 3128
done

# ip_forward off: the refusals come before routing, the same; and what
# the host does not route it answers no other way either.
h sysctl -qw net.ipv4.ip_forward=0
for bnf in $modes; do
	[ "$bnf" = absent ] || h sh -c "echo $bnf > $knob"
	m="[ip_forward 0, br_netfilter $bnf]"
	flush_neigh
	must "$m setup with both guests" drv "$H" setup kbr0 10.99.0.1 3128 \
	    ksbt ksbt9 02:00:00:00:00:09 10.99.0.9 ksbt8 02:00:00:00:00:08 10.99.0.8
	must "$m G1 -> proxy" tcp_ok "$G1" 10.99.0.9 10.99.0.1 3128
	must "$m G1 -> host:8080 refused at once" \
	    refused "$G1" 10.99.0.9 10.99.0.1 8080 tcp
	must "$m G1 -> routed 10.98.0.2 refused at once" \
	    refused "$G1" 10.99.0.9 10.98.0.2 3128 tcp
	must "$m UDP G1 -> 203.0.113.10:53 refused at once (ICMP)" \
	    refused "$G1" 10.99.0.9 203.0.113.10 53 udp
done
# (forged's UDP spend the kernel's ICMP tokens for G1 for seconds: last;
# a setup each, for a full bucket in the meter)
for bnf in $modes; do
	[ "$bnf" = absent ] || h sh -c "echo $bnf > $knob"
	m="[ip_forward 0, br_netfilter $bnf]"
	flush_neigh
	must "$m setup again" drv "$H" setup kbr0 10.99.0.1 3128 \
	    ksbt ksbt9 02:00:00:00:00:09 10.99.0.9 ksbt8 02:00:00:00:00:08 10.99.0.8
	forged "$m"
done
h sysctl -qw net.ipv4.ip_forward=1

must "final teardown" drv "$H" teardown
echo "PASS: $npass checks"
