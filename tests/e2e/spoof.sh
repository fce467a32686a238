#!/bin/bash
# spoof.sh: a real QEMU guest, as ROOT, tries to get around the nftables
# below it (issue 6).  ksb-run always runs its command as the agent user,
# so the test boots QEMU itself: tests/integration/ctlhold REGISTERs with
# the real ksb-gatewayd and execs QEMU with the leased tap as fd 3 and the
# leased MAC, and the guest runs the test's own tiny initramfs (busybox-
# static, virtio_net and its dependencies from $KSB_MODULES/modules.dep, an
# /init script).  As root, with its leased address, the guest
#   a) talks to the proxy normally (sanity: 403 for denied.test, audited);
#   b) adds a second address and connects from it (spoofed source IP);
#   c) changes its MAC and connects (spoofed MAC);
#   d) sends gratuitous ARP claiming the gateway's and a peer's address;
#   e) sends DNS (UDP 53) and TCP 853 to the gateway and to an address in
#      another namespace (the host forwards IPv4 here: ip_forward = 1);
#   f) pings IPv6 link-local all-nodes;
# reports each outcome on the serial console and powers off.  The host
# side checks the nft rule counters and witnesses: UDP/TCP listeners on
# those ports (which did get a control packet from the host), the audit
# database, the host's and the peer's neighbour tables, the peer's ICMPv6
# counters.  The peer is a namespace on a veth in the bridge with a lease
# of its own.
set -eu
. "$(dirname "$0")/../lib.sh"

ksb_need_root
QEMU=${KSB_QEMU:-qemu-system-x86_64}
ksb_need "$QEMU" python3 cpio sysctl	# python3: witness listeners
BUSYBOX=${KSB_BUSYBOX:-/bin/busybox}
[ -x "$BUSYBOX" ] && ! ldd "$BUSYBOX" >/dev/null 2>&1 ||
	ksb_skip "needs a static busybox at $BUSYBOX: install the Debian package busybox-static"
HOLD=$KSB_BUILDDIR/tests/integration/ctlhold
[ -x "$HOLD" ] || ksb_fail "$HOLD not built (make check builds it)"
ksb_kernel
ksb_env
t_start=$(date +%s)

fails=0
pass=0
gwns() { ip netns exec "$GW" "$@"; }

# ---- the guest's initramfs ---------------------------------------------------
R=$T/root
mkdir -p "$R/bin" "$R/sbin" "$R/usr/bin" "$R/usr/sbin" "$R/proc" "$R/sys" \
	"$R/dev" "$R/tmp" "$R/lib/modules"
cp "$BUSYBOX" "$R/bin/busybox"
# virtio_pci and virtio_net with their dependencies, in load order.
mods=
for m in virtio_pci virtio_net; do
	line=$(grep -E "(^|/)$m\.ko(\.[a-z]+)?:" "$KSB_MODULES/modules.dep") ||
		ksb_skip "no $m in $KSB_MODULES/modules.dep"
	deps=${line#*:}
	for d in $(echo $deps | tr ' ' '\n' | tac) "${line%%:*}"; do
		case " $mods " in *" $d "*) ;; *) mods="$mods $d" ;; esac
	done
done
: > "$R/modules.order"
for d in $mods; do
	case "$d" in *.ko) ;; *) ksb_skip "compressed module $d (busybox insmod needs .ko)" ;; esac
	cp "$KSB_MODULES/$d" "$R/lib/modules/"
	echo "${d##*/}" >> "$R/modules.order"
done
cat > "$R/init" <<'INIT'
#!/bin/busybox sh
/bin/busybox --install -s
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
exec >/dev/ttyS0 2>&1
say() { echo "KSBT $*"; }
for m in $(cat /modules.order); do insmod "/lib/modules/$m" || say "insmod $m failed"; done
for a in $(cat /proc/cmdline); do
	case "$a" in ksbt.*=*) k=${a%%=*}; eval "${k#ksbt.}=${a#*=}" ;; esac
done
i=0
while [ ! -e /sys/class/net/eth0 ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
ip link set lo up
ip addr add "$ip" dev eth0
ip link set eth0 up
ip route add default via "$gw"
sysctl -qw net.ipv4.ip_nonlocal_bind=1
sysctl -qw net.ipv6.conf.eth0.accept_dad=0
say "up $ip mac $(cat /sys/class/net/eth0/address)"
REQ='CONNECT denied.test:443 HTTP/1.1\r\nHost: denied.test:443\r\n\r\n'
# proxy: one CONNECT to the proxy, the answer's status line (or "none").
proxy() {
	r=$(printf "$REQ" | timeout 6 nc -w 4 "$gw" "$port" 2>/dev/null | head -n 1 | tr -d '\r')
	echo "${r:-none}"
}
# a) sanity
say "a $(proxy)"
gwmac=$(ip neigh show "$gw" dev eth0 | sed -n 's/.*lladdr \([0-9a-f:]*\).*/\1/p')
say "gwmac ${gwmac:-none}"
# b) a second address, used as the source
ip addr add "$spoof/24" dev eth0
ip route replace "$gw/32" dev eth0 src "$spoof"
say "b $(proxy)"
ip route del "$gw/32" dev eth0
ip addr del "$spoof/24" dev eth0
# c) another MAC (the gateway's MAC pinned: IPv4 frames do leave)
mymac=$(cat /sys/class/net/eth0/address)
ip link set eth0 down
ip link set eth0 address 52:54:00:66:66:66
ip link set eth0 up
ip route replace default via "$gw"
[ -n "$gwmac" ] && ip neigh replace "$gw" lladdr "$gwmac" dev eth0 nud permanent
say "c $(proxy)"
ip link set eth0 down
ip link set eth0 address "$mymac"
ip link set eth0 up
ip route replace default via "$gw"
ip neigh del "$gw" dev eth0 2>/dev/null
# d) gratuitous ARP for the gateway's and the peer's address
arping -U -c 2 -w 2 -I eth0 -s "$gw" "$gw" >/dev/null 2>&1; say "d-gw rc=$?"
arping -U -c 2 -w 2 -I eth0 -s "$peer" "$peer" >/dev/null 2>&1; say "d-peer rc=$?"
arping -A -c 2 -w 2 -I eth0 -s "$peer" "$gw" >/dev/null 2>&1; say "d-reply rc=$?"
# e) DNS and DNS over TLS, to the gateway and beyond it (in parallel)
for dst in "$gw" "$far"; do
	( if nslookup -timeout=2 -retry=1 x.test "$dst" >/dev/null 2>&1; then say "e-udp53 $dst answered"; else say "e-udp53 $dst failed"; fi ) &
	( if timeout 5 nc -w 3 "$dst" 853 </dev/null >/dev/null 2>&1; then say "e-tcp853 $dst connected"; else say "e-tcp853 $dst failed"; fi ) &
done
# f) IPv6 link-local, all nodes (the peer would answer)
# (the guest answers its own multicast ping: count the others' replies)
mine=$(ip -6 addr show dev eth0 | sed -n 's/.*inet6 \([0-9a-f:]*\).*/\1/p' | tr '\n' '|')
( n=$(ping6 -c 2 -w 3 -I eth0 ff02::1 2>/dev/null | grep "bytes from" | grep -Evc "from (${mine}::1):"); say "f replies=$n" ) &
wait
say "a2 $(proxy)"
say "done"
sync
poweroff -f
INIT
chmod 755 "$R/init"
( cd "$R" && find . | cpio -o -H newc --quiet ) > "$T/spoof.cpio"

# ---- the host side ---------------------------------------------------------------
ksb_origin
ksb_gateway
gwns sysctl -qw net.ipv4.ip_forward=1
ip -n "$OR" route add 10.77.0.0/24 via 10.78.0.1

# Witnesses: UDP 53 and TCP 853 on the gateway address and in ns OR; every
# datagram or connection is one line in $T/witness.  On the gateway address
# UDP 53 is the gateway's own self-test canary (gateway/parent/canary.c):
# its "self-test canary: UDP" log lines are that witness.
cat > "$T/witness.py" <<'PY'
import select, socket, sys, time
out, addr, end = sys.argv[1], sys.argv[2], time.time() + float(sys.argv[3])
tcp_only = len(sys.argv) > 4 and sys.argv[4] == "tcp-only"
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
if not tcp_only:
    u.bind((addr, 53))
t = socket.socket()
t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
t.bind((addr, 853))
t.listen(8)
print("ready", flush=True)
while time.time() < end:
    r, _, _ = select.select([t] if tcp_only else [u, t], [], [], 0.5)
    for s in r:
        if s is u:
            d, peer = u.recvfrom(2048)
            line = "udp %s:53 from %s" % (addr, peer[0])
        else:
            c, peer = t.accept()
            c.close()
            line = "tcp %s:853 from %s" % (addr, peer[0])
        with open(out, "a") as f:
            f.write(line + "\n")
PY
: > "$T/witness"
ip netns exec "$GW" python3 "$T/witness.py" "$T/witness" 10.77.0.1 150 tcp-only > "$T/w1.out" 2>&1 &
KSB_PIDS="$KSB_PIDS $!"
ip netns exec "$OR" python3 "$T/witness.py" "$T/witness" "$ORIGIN_IP" 150 > "$T/w2.out" 2>&1 &
KSB_PIDS="$KSB_PIDS $!"
witnesses_ready() { [ "$(cat "$T/w1.out" "$T/w2.out" | grep -cx ready)" = 2 ]; }
ksb_until 60 witnesses_ready || ksb_fail "witnesses did not start: $(cat "$T/w1.out" "$T/w2.out")"
# Control: the witnesses hear the host (so silence later means something).
ctl() {
	gwns python3 - "$1" <<'PY'
import socket, sys
a = sys.argv[1]
socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"x", (a, 53))
socket.create_connection((a, 853), timeout=3).close()
PY
}
ctl 10.77.0.1
ctl "$ORIGIN_IP"
canary() { grep -c 'self-test canary: UDP' "$T/gatewayd.log" || true; }
four_heard() { [ "$(wc -l < "$T/witness")" -ge 3 ] && [ "$(canary)" -ge 1 ]; }
ksb_until 20 four_heard || true
ksb_check "witnesses hear the host (control): $(wc -l < "$T/witness") lines, $(canary) canary" \
	'[ "$(wc -l < "$T/witness")" = 3 ] && [ "$(canary)" = 1 ]'
: > "$T/witness"

# The peer: a namespace on the bridge with a lease of its own.
P=ksbt-$$-peer
ip netns add "$P"
KSB_NETNS="$P"
mkfifo "$T/holdp"
ip netns exec "$GW" "$HOLD" "$T/gateway.sock" peer default < "$T/holdp" > "$T/leasep" 2>&1 &
KSB_PIDS="$KSB_PIDS $!"
exec {HOLDP}>"$T/holdp"
ksb_until 30 test -s "$T/leasep" || true
peer_cidr=$(sed -n 's/^ip=\([^ ]*\).*/\1/p' "$T/leasep")
[ -n "$peer_cidr" ] || ksb_fail "REGISTER peer: $(cat "$T/leasep")"
PEER_IP=${peer_cidr%/*}
ip link add kvp0 netns "$GW" type veth peer name eth0 netns "$P"
ip -n "$GW" link set kvp0 master ksb0 up
ip -n "$P" addr add "$peer_cidr" dev eth0
ip -n "$P" link set lo up
ip -n "$P" link set eth0 up
PEER_MAC=$(ip -n "$P" -br link show eth0 | awk '{print $3}')
# Host and peer learn each other (ARP, by way of a CONNECT from the peer).
host_neigh() { gwns ip neigh show "$1" dev ksb0 | sed -n 's/.*lladdr \([0-9a-f:]*\).*/\1/p'; }
for _ in $(seq 1 30); do
	printf 'CONNECT denied.test:443 HTTP/1.1\r\n\r\n' |
		ip netns exec "$P" timeout 3 "$BUSYBOX" nc -w 2 10.77.0.1 3128 >/dev/null 2>&1 || true
	[ -n "$(host_neigh "$PEER_IP")" ] && break
	sleep 0.1
done
ksb_check "host learnt the peer's MAC ($(host_neigh "$PEER_IP"))" '[ "$(host_neigh "$PEER_IP")" = "$PEER_MAC" ]'
BR_MAC=$(ip -n "$GW" -br link show ksb0 | awk '{print $3}')
peer_gw_mac() { ip -n "$P" neigh show 10.77.0.1 dev eth0 | sed -n 's/.*lladdr \([0-9a-f:]*\).*/\1/p'; }
ksb_check "peer learnt the bridge's MAC" '[ "$(peer_gw_mac)" = "$BR_MAC" ]'
icmp6_in() { ip netns exec "$P" awk '$1 == "Icmp6InEchos" {print $2}' /proc/net/snmp6; }
echo6=$(icmp6_in)

# Counters before the guest.  ctr FAMILY CHAIN REGEX: packets of that rule.
ctr() {
	gwns nft list chain "$1" ksb "$2" |
		grep -E "$3" | sed -n 's/.*counter packets \([0-9]*\) .*/\1/p' | head -n 1
}
snap() {
	echo "spoofip=$(ctr bridge prerouting 'ether type ip counter')"
	echo "spoofarp=$(ctr bridge prerouting 'ether type arp counter')"
	echo "ipv6=$(ctr bridge prerouting 'ether type ip6 counter')"
	echo "udp53=$(ctr inet prerouting 'reject with icmpx')"
	echo "tcp853=$(ctr inet prerouting 'reject with tcp reset')"
	echo "fwd=$(ctr inet forward 'iif "ksb0" counter')"
}
snap > "$T/ctr0"

# ---- boot the guest ------------------------------------------------------------
KDIR=$(dirname "$KSB_KERNEL")
KIMG=$KSB_KERNEL
v=$KDIR/vmlinux-${KSB_KERNEL##*/vmlinuz-}
[ -r "$v" ] && KIMG=$v		# PVH entry: boots ~2x faster under TCG
# TCG unless told: a /dev/kvm may exist and still not run a guest (see
# qemu_kvm_probe in vmrunner/qemu.c).
ACCEL=${KSB_ACCEL:-tcg}
[ "$ACCEL" = auto ] && ACCEL=tcg
SPOOF_IP=10.77.0.250
cat > "$T/qemu.sh" <<QEMU
#!/bin/sh
# Run by ctlhold: the tap is fd 3, the lease in KSB_LEASE_*.
exec "$QEMU" -nodefaults -no-user-config -display none -machine q35 \\
	-accel $ACCEL -m 256 -smp 1 -kernel "$KIMG" -initrd "$T/spoof.cpio" \\
	-append "console=ttyS0 panic=-1 loglevel=1 quiet rdinit=/init cryptomgr.notests ksbt.ip=\$KSB_LEASE_IP/\$KSB_LEASE_PREFIX ksbt.gw=\$KSB_LEASE_GW ksbt.port=\$KSB_LEASE_PORT ksbt.spoof=$SPOOF_IP ksbt.peer=$PEER_IP ksbt.far=$ORIGIN_IP" \\
	-netdev tap,id=n0,fd=3,vhost=off \\
	-device virtio-net-pci,netdev=n0,mac=\$KSB_LEASE_MAC,romfile= \\
	-serial file:"$T/console.log" -no-reboot
QEMU
chmod 755 "$T/qemu.sh"
: > "$T/console.log"
t0=$(date +%s.%N)
ip netns exec "$GW" timeout 120 "$HOLD" "$T/gateway.sock" rootvm default -- "$T/qemu.sh" > "$T/leasevm" 2>&1 &
VMPID=$!
KSB_PIDS="$KSB_PIDS $VMPID"
ksb_until 30 test -s "$T/leasevm" || true
VM_IP=$(sed -n 's/^ip=\([^/]*\).*/\1/p' "$T/leasevm")
VM_MAC=$(sed -n 's/.* mac=\([^ ]*\).*/\1/p' "$T/leasevm")
[ -n "$VM_IP" ] || ksb_fail "REGISTER rootvm: $(cat "$T/leasevm")"
# The guest reports "done" and powers off; QEMU and ctlhold then exit.
rc=0
timeout 110 tail --pid="$VMPID" -f /dev/null || true
wait "$VMPID" || rc=$?
t1=$(date +%s.%N)
echo "# guest ran $(echo "$t1 - $t0" | bc) s (ctlhold/QEMU exit $rc)"
sed -n 's/\r$//; /^KSBT /p' "$T/console.log" | sed 's/^/# console: /'
res() { sed -n "s/\r\$//; s/^KSBT $1 //p" "$T/console.log" | head -n 1; }
ksb_check "the guest ran all steps" 'grep -q "^KSBT done" "$T/console.log"'
ksb_check "guest came up with the lease ($VM_IP, $VM_MAC)" '[ "$(res up)" = "$VM_IP/24 mac $VM_MAC" ]'
snap > "$T/ctr1"
d() { echo $(( $(sed -n "s/^$1=//p" "$T/ctr1") - $(sed -n "s/^$1=//p" "$T/ctr0") )); }
echo "# counter deltas: spoofed IPv4 $(d spoofip), spoofed ARP $(d spoofarp), IPv6 $(d ipv6), UDP refused $(d udp53), TCP refused $(d tcp853), forward from bridge $(d fwd)"

ksb_say "a) the proxy, normally"
ksb_check "403 for denied.test: '$(res a)'" '[ "$(res a)" = "HTTP/1.1 403 Forbidden" ]'
ksb_check "audited from the leased address" \
	'ksb_rows_ge 1 "instance = '"'rootvm'"' AND client_addr = '"'$VM_IP'"' AND reason = '"'not_in_allowlist'"'"'
ksb_check "still works after the attempts: '$(res a2)'" '[ "$(res a2)" = "HTTP/1.1 403 Forbidden" ]'
ksb_say "b) spoofed source address"
ksb_check "no answer from the proxy: '$(res b)'" '[ "$(res b)" = none ]'
ksb_say "c) spoofed MAC"
ksb_check "no answer from the proxy: '$(res c)'" '[ "$(res c)" = none ]'
ksb_check "spoofed IPv4 frames dropped and counted ($(d spoofip))" '[ "$(d spoofip)" -ge 2 ]'
# (a2's denial is written by the audit thread, maybe after QEMU is gone.)
ksb_check "exactly two rows from the guest (a and a2; nothing from b or c)" \
	'ksb_row_is 2 "instance = '"'rootvm'"'"'
ksb_check "no row from the spoofed address" \
	'[ "$(ksb_sql "SELECT count(*) FROM connections WHERE client_addr = '"'$SPOOF_IP'"'")" = 0 ]'
ksb_say "d) ARP spoofing"
ksb_check "spoofed ARP dropped and counted ($(d spoofarp))" '[ "$(d spoofarp)" -ge 4 ]'
ksb_check "host still maps the peer's address to the peer ($(host_neigh "$PEER_IP"))" \
	'[ "$(host_neigh "$PEER_IP")" = "$PEER_MAC" ]'
ksb_check "host maps the guest's address to the leased MAC ($(host_neigh "$VM_IP"))" \
	'[ "$(host_neigh "$VM_IP")" = "$VM_MAC" ]'
ksb_check "host learnt nothing about the spoofed address" '[ -z "$(host_neigh "$SPOOF_IP")" ]'
ksb_check "peer still maps the gateway to the bridge ($(peer_gw_mac))" '[ "$(peer_gw_mac)" = "$BR_MAC" ]'
ksb_say "e) DNS and DNS over TLS"
ksb_check "UDP 53 to the gateway: no answer ($(res "e-udp53 10.77.0.1"))" '[ "$(res "e-udp53 10.77.0.1")" = failed ]'
ksb_check "UDP 53 beyond the gateway: no answer ($(res "e-udp53 $ORIGIN_IP"))" '[ "$(res "e-udp53 $ORIGIN_IP")" = failed ]'
ksb_check "TCP 853 to the gateway failed" '[ "$(res "e-tcp853 10.77.0.1")" = failed ]'
ksb_check "TCP 853 beyond the gateway failed" '[ "$(res "e-tcp853 $ORIGIN_IP")" = failed ]'
ksb_check "witnesses heard nothing: '$(tr '\n' ';' < "$T/witness")', canary $(canary)" \
	'[ ! -s "$T/witness" ] && [ "$(canary)" = 1 ]'
# A registered guest's own UDP and TCP are refused before routing (ICMP
# prohibited, a reset): to the gateway and beyond, nothing forwarded.
ksb_check "UDP 53 (gateway and beyond) refused and counted ($(d udp53))" '[ "$(d udp53)" -ge 2 ]'
ksb_check "TCP 853 (gateway and beyond) refused and counted ($(d tcp853))" '[ "$(d tcp853)" -ge 2 ]'
ksb_check "nothing from the guest reached forward ($(d fwd))" '[ "$(d fwd)" = 0 ]'
ksb_say "f) IPv6"
ksb_check "no reply to ff02::1 ($(res f))" '[ "$(res f)" = replies=0 ]'
ksb_check "IPv6 frames dropped and counted ($(d ipv6))" '[ "$(d ipv6)" -ge 2 ]'
ksb_check "the peer saw no echo request" '[ "$(icmp6_in)" = "$echo6" ]'
ksb_say "the lease"
ksb_check "tables and sets intact" 'gwns nft list set bridge ksb guests >/dev/null && gwns nft list set inet ksb guests >/dev/null'
vm_gone() { ! gwns nft list set inet ksb guests | grep -qw "$VM_IP"; }
ksb_until 20 vm_gone || true
ksb_check "the guest's lease ended with ctlhold" '! gwns nft list set inet ksb guests | grep -qw "$VM_IP"'
exec {HOLDP}>&-

echo "# $pass passed, $fails failed, $(( $(date +%s) - t_start )) s"
[ "$fails" = 0 ]
