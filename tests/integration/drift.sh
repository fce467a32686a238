#!/bin/bash
# drift.sh: what the gateway's own check (gateway/parent/rulecheck.c)
# must notice beyond its rules' text (the outside audit of issue 29).
# A guest (namespace on a veth in ksb0, lease held by ctlhold, default
# route via the gateway) with forwarding on in the gateway's namespace
# (as on a host running docker or libvirt) and an origin listening on
# TCP 8080 in its own namespace; the guest's direct connect must be
# refused by ksb's reset before and after each tampering:
#   - the bridge renamed (`ip link set ksb0 name ...'): the rules match
#     it by index, so nothing opens; renamed back within the interval;
#   - a registered guest's tap renamed: renamed back; moved to another
#     bridge or off it: put back on ksb0 (isolated);
#   - a hole opened and a guest reaching the self-test canary: drift of
#     kind canary, restored at once;
#   - a base chain's policy set to drop, a base chain made again at
#     another priority with the same rules, a table made dormant (kind
#     chain), the guests' set
#     flushed, a spoofed element added (kind set): restored;
#   - another program's netdev table hooked on a port of the bridge,
#     forwarding the guest's frames to the uplink (`fwd to'): the check
#     reads every table's base chains and fails closed (bridge and ports
#     down), as ksb deletes no table but its own; one on the uplink that
#     forwards to another link is not drift;
#   - another program's rule anywhere (the uplink's ingress or egress)
#     that moves packets onto ksb's links (`fwd to'/`dup to' a port or a
#     tap-prefix name, or a device it does not name): fails closed;
#   - another program's rule of any family that moves packets from
#     ksb's links (the outside audit's finding 3): an ip `iifname ksb0
#     dup' to the uplink (the hole shown real first: the guest's
#     datagrams counted beyond it), an inet `iif ksb0 meta mark set', an
#     ip6 `iifname ksb0 redirect', an ip `dup' confined to no link:
#     fails closed; rules that only count, log, accept or drop ksb's
#     traffic, a nat not picking ksb's links out: not drift;
#   - tc and XDP on ksb's links (the outside audit's finding 4): an
#     ingress qdisc on a guest's port whose filter redirects its frames
#     to the uplink (the hole shown real first), a clsact qdisc on the
#     bridge, an XDP program on a port: deleted, detached (kind hook);
#     a tc filter on the uplink redirecting onto a port (the hole shown
#     real first): fails closed; one between other links is not drift;
#   - a guest reaching the canary a third time within a minute (a hole
#     restoring does not close): fails closed;
# each one log line and one selftests record nft-drift:KIND.
set -eu
. "$(dirname "$0")/../lib.sh"

ksb_need_root
ksb_need nft sqlite3 python3 sysctl
HOLD=$KSB_BUILDDIR/tests/integration/ctlhold
[ -x "$HOLD" ] || ksb_fail "$HOLD not built (make check builds it)"
KSB_TEST_CONF="nft-check-interval = 2"
ksb_env
ksb_gateway
fails=0
gwns() { ip netns exec "$GW" "$@"; }
gwns sysctl -q net.ipv4.ip_forward=1
ip -n "$OR" route add 10.77.0.0/24 via 10.78.0.1
ip netns exec "$OR" python3 -c '
import socket
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", 8080)); s.listen(64)
while True:
    c, _ = s.accept(); c.sendall(b"origin\n"); c.close()
' &
KSB_PIDS="$KSB_PIDS $!"
ksb_wait_port "$OR" "$ORIGIN_IP" 8080
ksb_fake_guest 1 g1
G=ksbt-$$-g1
ip -n "$G" route add default via 10.77.0.1
TAP=$(sed -n 's/.*tap=\([^ ]*\).*/\1/p' "$T/lease1")
GIP=$(sed -n 's/^ip=\([^/]*\).*/\1/p' "$T/lease1")
# out: the guest reaches the origin directly (a hole).
out() { ip netns exec "$G" timeout 3 bash -c "exec 3<>/dev/tcp/$ORIGIN_IP/8080 && head -c 6 <&3" 2>/dev/null | grep -q origin; }
refused() { ip netns exec "$G" timeout 3 bash -c "exec 3<>/dev/tcp/$ORIGIN_IP/8080" 2>&1 | grep -q "refused"; }
recs() { ksb_sql "SELECT count(*) FROM selftests WHERE instance = '(gateway)' AND trigger = 'rules' AND failed = 'nft-drift:$1' AND action = '$2'"; }
recs_ge() { [ "$(recs "$1" "$2")" -ge "$3" ]; }
# logged RE: the gateway's log has a line matching RE, awaited (5 s at
# most): the restore comes before its log line, so a check right after
# the restored state can race it.  never_logged RE: none, now.
logged() { ksb_until 5 grep -q "$1" "$T/gatewayd.log"; }
never_logged() { ! grep -q "$1" "$T/gatewayd.log"; }

ksb_check "before: the guest's direct connect is refused by ksb" refused
ksb_check "before: nothing gets out" '! out'

ksb_say "the bridge renamed behind the gateway's back"
gwns ip link set ksb0 down
gwns ip link set ksb0 name ksbX
gwns ip link set ksbX up
ksb_check "renamed: still nothing gets out (the rules hold)" '! out'
ksb_check "renamed: the direct connect is still refused by ksb" refused
named_back() { gwns ip link show ksb0 >/dev/null 2>&1; }
ksb_until 8 named_back || true
ksb_check "renamed back to ksb0 within the interval" named_back
ksb_check "the bridge is up again" 'gwns ip link show ksb0 | grep -q "[<,]UP[,>]"'
ksb_check "one log line says so" \
	'logged "nftables check (periodic): device drift: bridge ksb0 renamed to ksbX: restored"'
ksb_until 5 recs_ge device none 1 || true
ksb_check "a record nft-drift:device, action none ($(recs device none))" 'recs_ge device none 1'
ksb_check "the guest reaches the proxy again" \
	'ip netns exec "$G" timeout 3 bash -c "exec 3<>/dev/tcp/10.77.0.1/3128"'

ksb_say "a registered guest's tap ($TAP) renamed"
gwns ip link set "$TAP" down
gwns ip link set "$TAP" name evil0
gwns ip link set evil0 up
tap_back() { gwns ip link show "$TAP" >/dev/null 2>&1; }
ksb_until 8 tap_back || true
ksb_check "the tap is renamed back" tap_back
ksb_check "one log line says so" \
	'logged "device drift: tap $TAP renamed to evil0: restored"'
ksb_until 5 recs_ge device none 2 || true
ksb_check "a second nft-drift:device record ($(recs device none))" 'recs_ge device none 2'

ksb_say "a registered guest's tap ($TAP) moved to another bridge, then off"
gwns ip link add kbr9 type bridge
gwns ip link set "$TAP" master kbr9
on_ksb0() { gwns ip -d link show "$TAP" | grep -q "master ksb0 "; }
ksb_until 8 on_ksb0 || true
ksb_check "the tap is on ksb0 again" on_ksb0
ksb_check "isolated again" 'gwns ip -d link show "$TAP" | grep -q "isolated on"'
ksb_check "one log line says where it went" \
	'logged "device drift: tap $TAP moved to bridge kbr9: restored"'
gwns ip link set "$TAP" nomaster
ksb_until 8 on_ksb0 || true
ksb_check "off the bridge: on ksb0 again" on_ksb0
ksb_check "one log line says so" \
	'logged "device drift: tap $TAP moved off the bridge: restored"'
ksb_check "never logged as renamed to itself" 'never_logged "tap $TAP renamed to $TAP"'
gwns ip link del kbr9

ksb_say "a guest reaching the self-test canary is drift"
canary() { ip netns exec "$G" timeout 3 bash -c 'exec 3<>/dev/tcp/10.77.0.1/22' 2>/dev/null; }
hit=0
for i in 1 2 3 4 5; do
	gwns nft insert rule inet ksb prerouting tcp dport 22 accept
	gwns nft insert rule inet ksb input tcp dport 22 accept
	gwns nft insert rule inet ksb output tcp sport 22 accept
	if canary; then hit=1; break; fi
	ksb_until 6 logged "rules drift" || true
done
ksb_check "the guest reached the canary through the hole" '[ "$hit" = 1 ]'
ksb_until 5 recs_ge canary none 1 || true
ksb_check "a record nft-drift:canary ($(recs canary none))" 'recs_ge canary none 1'
ksb_check "the log says what and that it was restored" \
	'logged "nftables check (canary): canary drift: TCP from 10.77.0.[0-9]* reached the self-test canary: restored"'
ksb_check "the hole is gone" '! gwns nft list chain inet ksb prerouting | grep -q "tcp dport 22 accept"'
ksb_check "the egress was never stopped" 'never_logged "set down, every"'

ksb_say "a base chain's policy changed (accept -> drop)"
policy_back() { gwns nft list chain inet ksb output | grep -q "policy accept;"; }
gwns nft chain inet ksb output '{ policy drop; }'
ksb_until 8 policy_back || true
ksb_check "the policy is accept again" policy_back
ksb_check "one log line says so" \
	'logged "chain drift: chain inet output: type filter hook 3 priority 0 policy drop, ksb.s is type filter hook 3 priority 0 policy accept: restored"'
ksb_until 5 recs_ge chain none 1 || true
ksb_check "a record nft-drift:chain ($(recs chain none))" 'recs_ge chain none 1'

ksb_say "a base chain made again at another priority, its rules the same"
gwns nft list chain bridge ksb forward | sed 's/priority filter;/priority -100;/' > "$T/fwd.nft"
grep -q "priority -100;" "$T/fwd.nft" || ksb_fail "no priority in $(cat "$T/fwd.nft")"
gwns nft delete chain bridge ksb forward
gwns nft -f "$T/fwd.nft"
prio_back() { gwns nft list chain bridge ksb forward | grep -Eq "priority (filter|-200);"; }
ksb_until 8 prio_back || true
ksb_check "the chain is at priority -200 again" prio_back
ksb_check "one log line says so" \
	'logged "chain drift: chain bridge forward: type filter hook 2 priority -100 policy accept, ksb.s is type filter hook 2 priority -200 policy accept: restored"'
ksb_until 5 recs_ge chain none 2 || true
ksb_check "a second record nft-drift:chain ($(recs chain none))" 'recs_ge chain none 2'

ksb_say "ksb's inet table made dormant (its chains hooked nowhere)"
kill -STOP "$KSB_GATEWAY_PID"
gwns nft add table inet ksb '{ flags dormant; }'
ksb_check "the hole is real: the guest gets out" out
kill -CONT "$KSB_GATEWAY_PID"
awake() { ! gwns nft list table inet ksb | grep -q dormant; }
ksb_until 8 awake || true
ksb_check "the table is active again" awake
ksb_check "nothing gets out again" '! out'
ksb_check "one log line says so" \
	'logged "chain drift: table inet ksb has flags dormant: restored"'
ksb_until 5 recs_ge chain none 3 || true
ksb_check "a third record nft-drift:chain ($(recs chain none))" 'recs_ge chain none 3'

ksb_say "the guests' set flushed"
in_set() { gwns nft list set inet ksb guests | grep -q "$GIP"; }
gwns nft flush set inet ksb guests
ksb_until 8 in_set || true
ksb_check "the guest is in the inet set again" in_set
ksb_check "one log line says so" \
	'logged "set drift: set inet guests: a registered guest.s element is missing: restored"'
ksb_until 5 recs_ge set none 1 || true
ksb_check "a record nft-drift:set ($(recs set none))" 'recs_ge set none 1'
ksb_check "the guest reaches the proxy" \
	'ip netns exec "$G" timeout 3 bash -c "exec 3<>/dev/tcp/10.77.0.1/3128"'

ksb_say "a spoofed element added to the bridge set"
gwns nft add element bridge ksb guests "{ \"$TAP\" . 52:54:00:4e:00:77 . 10.77.0.77 }"
spoof_gone() { ! gwns nft list set bridge ksb guests | grep -q "10.77.0.77"; }
ksb_until 8 spoof_gone || true
ksb_check "the spoofed element is gone" spoof_gone
ksb_check "one log line says so" \
	'logged "set drift: set bridge guests: an element no guest registered (key [0-9a-f]*): restored"'
ksb_until 5 recs_ge set none 2 || true
ksb_check "a second record nft-drift:set ($(recs set none))" 'recs_ge set none 2'
ksb_check "the registered guest is still in the bridge set" \
	'gwns nft list set bridge ksb guests | grep -q "$GIP"'
ksb_check "the egress was still never stopped" 'never_logged "set down, every"'

ksb_say "another program's netdev table on a port of the bridge (fails closed)"
reload() { "$KSB_BUILDDIR/ksbctl/ksbctl" -f "$T/ksb.conf" reload >/dev/null; }
OMAC=$(ip -n "$OR" link show ko1 | awk '/ether/{print $2}')
GMAC=$(ip -n "$G" link show eth0 | awk '/ether/{print $2}')
# A chain on the uplink that forwards to another link (not ksb's) is
# not drift.
gwns ip link add kxd0 type veth peer name kxd1
gwns nft -f - <<NFT
table netdev other2 {
  chain in { type filter hook ingress device "ko0" priority -500; policy accept;
    ip daddr 10.78.0.99 fwd to "kxd0"
  }
}
NFT
reload
ksb_check "a netdev chain forwarding between other links: no drift" 'never_logged "foreign drift"'
# The gateway stopped meanwhile (SIGSTOP): the hole is shown open first,
# with its return path (on the uplink, itself drift: below).
kill -STOP "$KSB_GATEWAY_PID"
gwns nft -f - <<NFT
table netdev other3 {
  chain in { type filter hook ingress device "ko0" priority -500; policy accept;
    ip daddr $GIP ether daddr set $GMAC fwd to "kvg1"
  }
}
NFT
gwns nft -f - <<NFT
table netdev other {
  chain in { type filter hook ingress device "kvg1" priority -500; policy accept;
    ip daddr $ORIGIN_IP ether daddr set $OMAC fwd to "ko0"
  }
}
NFT
ksb_check "the hole is real: the guest gets out past ksb's rules" out
kill -CONT "$KSB_GATEWAY_PID"
down() { ! gwns ip link show ksb0 | grep -q "[<,]UP[,>]"; }
ksb_until 8 down || true
ksb_check "the bridge is down" down
ksb_check "its ports are down" '! gwns ip link show kvg1 | grep -q "[<,]UP[,>]"'
ksb_check "nothing gets out any more" '! out'
ksb_check "one log line says which chain and what to do" \
	'logged "foreign drift: table netdev other chain in is hooked on kvg1 (ingress): another program.s, ahead of ksb.s rules: could not be restored (not ksb.s table: delete it, then restart ksb-gatewayd): bridge ksb0 set down"'
ksb_until 5 recs_ge foreign stopped 1 || true
ksb_check "a record nft-drift:foreign, action stopped" 'recs_ge foreign stopped 1'

ksb_say "a guest that reaches the canary again and again: fails closed"
# A fresh gateway (the last one stopped egress) and guest.
gwns nft delete table netdev other
gwns nft delete table netdev other2
gwns nft delete table netdev other3
kill "$KSB_GATEWAY_PID"
ksb_wait_dead "$KSB_GATEWAY_PID" || ksb_fail "the gateway did not exit"
ksb_gateway
ksb_fake_guest 2 g2
G2=ksbt-$$-g2
canary2() { ip netns exec "$G2" timeout 3 bash -c 'exec 3<>/dev/tcp/10.77.0.1/22' 2>/dev/null; }
hole() {
	gwns nft insert rule inet ksb prerouting tcp dport 22 accept
	gwns nft insert rule inet ksb input tcp dport 22 accept
	gwns nft insert rule inet ksb output tcp sport 22 accept
}
hits=0
for i in 1 2 3 4 5 6 7 8 9; do
	hole
	canary2 && hits=$((hits + 1))
	[ "$hits" -ge 3 ] && break
	ksb_until 6 logged "rules drift" || true
	# Hits within a second of the last are not counted (the bound):
	# the only wait here that is a duration by design.
	sleep 1.2
done
ksb_check "the guest reached the canary three times ($hits)" '[ "$hits" -ge 3 ]'
ksb_until 8 down || true
ksb_check "the third time the bridge is down" down
ksb_check "one line says why" \
	'logged "canary drift: TCP from 10.77.0.[0-9]* reached the self-test canary: could not be restored (reached again after restoring the rules: the hole is not in them): bridge ksb0 set down"'
ksb_until 5 recs_ge canary stopped 1 || true
ksb_check "a record nft-drift:canary, action stopped" 'recs_ge canary stopped 1'

ksb_say "an uplink ingress chain forwarding to a port of the bridge (F3)"
fresh() {
	kill "$KSB_GATEWAY_PID"
	ksb_wait_dead "$KSB_GATEWAY_PID" || ksb_fail "the gateway did not exit"
	ksb_gateway
	gwns ip link set kvg1 up
	gwns ip link set kvg2 up
}
fresh
G2MAC=$(ip -n "$G2" link show eth0 | awk '/ether/{print $2}')
G2IP=$(sed -n 's/^ip=\([^/]*\).*/\1/p' "$T/lease2")
listening() { ip netns exec "$G2" ss -Hlun "sport = :5555" | grep -q .; }
# got: UDP from the origin to the guest's port 5555 reaches the guest.
got() {
	ip netns exec "$G2" timeout 4 python3 -c '
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("0.0.0.0", 5555))
s.settimeout(3); sys.stdout.write(s.recv(64).decode())' > "$T/udp" 2>/dev/null &
	local l=$!
	ksb_until 5 listening || true
	ip netns exec "$OR" python3 -c '
import socket, sys
socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"injected", (sys.argv[1], 5555))' "$G2IP"
	wait "$l" || true
	grep -q injected "$T/udp"
}
ksb_check "before: the origin's UDP does not reach the guest" '! got'
kill -STOP "$KSB_GATEWAY_PID"
gwns nft -f - <<NFT
table netdev o1 {
  chain c { type filter hook ingress device "ko0" priority -500; policy accept;
    ip daddr $G2IP ether daddr set $G2MAC fwd to "kvg2"
  }
}
NFT
ksb_check "the hole is real: the origin injects UDP into the guest" got
kill -CONT "$KSB_GATEWAY_PID"
ksb_until 8 down || true
ksb_check "the bridge is down" down
ksb_check "nothing is injected any more" '! got'
ksb_check "one log line says which chain, where to and what to do" \
	'logged "foreign drift: table netdev o1 chain c: a rule of another program.s moves packets onto ksb.s links (fwd to kvg2): could not be restored (not ksb.s table: delete it, then restart ksb-gatewayd): bridge ksb0 set down"'
ksb_until 5 recs_ge foreign stopped 2 || true
ksb_check "a record nft-drift:foreign, action stopped ($(recs foreign stopped))" 'recs_ge foreign stopped 2'
gwns nft delete table netdev o1

ksb_say "an uplink egress chain duplicating to a tap-prefix link (F3)"
D=${TAP:0:14}d
gwns ip link add "$D" type veth peer name kxd2
fresh
gwns nft -f - <<NFT
table netdev o2 {
  chain c { type filter hook egress device "ko0" priority -500; policy accept;
    dup to "$D"
  }
}
NFT
ksb_until 8 down || true
ksb_check "the bridge is down" down
ksb_check "one log line says so" \
	'logged "foreign drift: table netdev o2 chain c: a rule of another program.s moves packets onto ksb.s links (dup to $D)"'
gwns nft delete table netdev o2

ksb_say "a fwd whose device comes from a map (not resolved): fails closed"
fresh
gwns nft -f - <<NFT
table netdev o3 {
  chain c { type filter hook ingress device "ko0" priority -500; policy accept;
    fwd to ip daddr map { 10.78.0.98 : "kxd0" }
  }
}
NFT
ksb_until 8 down || true
ksb_check "the bridge is down" down
ksb_check "one log line says it is treated as ksb's" \
	'logged "foreign drift: table netdev o3 chain c: a rule of another program.s moves packets onto ksb.s links (fwd to a device it does not name: treated as ksb.s)"'
gwns nft delete table netdev o3

ksb_say "rules of other programs that move packets from ksb's links (finding 3)"
fresh
# The origin's side counts the guest's datagrams that reach it (a
# witness in its own namespace, out of the gateway's sight).
ip netns exec "$OR" nft -f - <<NFT
table netdev wit {
  chain c { type filter hook ingress device "ko1" priority 0; policy accept;
    ip saddr $G2IP udp dport 7777 counter
  }
}
NFT
seen() { ip netns exec "$OR" nft list chain netdev wit c | sed -n 's/.*counter packets \([0-9]*\).*/\1/p'; }
send5() {
	ip netns exec "$G2" python3 -c '
import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for i in range(5):
    try: s.sendto(b"exfil", ("10.77.0.1", 7777))
    except OSError: pass'
}
# Not drift: rules that match ksb's links but only count, log, accept or
# drop, and a nat that does not pick ksb's links out.
gwns nft -f - <<NFT
table ip watch {
  chain pre { type filter hook prerouting priority -400; policy accept;
    iifname "ksb0" counter
    iif "ksb0" log prefix "watch " accept
    iifname "ksb0" udp dport 9 drop
  }
  chain cdnat { type nat hook prerouting priority -100; policy accept;
    iifname != "dock0" tcp dport 8081 dnat to 10.78.0.9:80
  }
  chain csnat { type nat hook postrouting priority 100; policy accept;
    oifname "ko0" masquerade
  }
}
NFT
reload
send5
ksb_check "counting, logging, accepting, dropping ksb's traffic: no drift" \
	'never_logged "foreign drift" && gwns ip link show ksb0 | grep -q "[<,]UP[,>]"'
gwns nft delete table ip watch
ksb_check "before: none of the guest's datagrams gets beyond the uplink" '[ "$(seen)" = 0 ]'
kill -STOP "$KSB_GATEWAY_PID"
gwns nft -f - <<NFT
table ip fdup {
  chain pre { type filter hook prerouting priority -400; policy accept;
    iifname "ksb0" dup to $ORIGIN_IP device "ko0"
  }
}
NFT
send5
ksb_check "the hole is real: the guest's datagrams are copied beyond the uplink ($(seen))" \
	'[ "$(seen)" -gt 0 ]'
kill -CONT "$KSB_GATEWAY_PID"
ksb_until 8 down || true
ksb_check "the bridge is down" down
was=$(seen)
send5
ksb_check "none gets beyond the uplink any more ($(seen) - $was)" '[ "$(seen)" = "$was" ]'
ksb_check "one log line says which rule and what it does" \
	'logged "foreign drift: table ip fdup chain pre: a rule of another program.s moves packets from ksb.s links (it matches a name ksb0, then dup): could not be restored (not ksb.s table: delete it, then restart ksb-gatewayd): bridge ksb0 set down"'
ksb_until 5 recs_ge foreign stopped 1 || true
ksb_check "a record nft-drift:foreign, action stopped ($(recs foreign stopped))" 'recs_ge foreign stopped 1'
gwns nft delete table ip fdup
# from_drift TABLE RE: TABLE (nft -f text on stdin) fails closed, logged RE.
from_drift() {
	fresh
	gwns nft -f -
	ksb_until 8 down || true
	ksb_check "$1: the bridge is down" down
	ksb_check "$1: one log line says so" "logged \"foreign drift: $2\""
	gwns nft delete table "$1"
}
from_drift "inet fmark" "table inet fmark chain pre: a rule of another program.s moves packets from ksb.s links (it matches ifindex [0-9]* (ksb0), then meta mark set)" <<NFT
table inet fmark {
  chain pre { type filter hook prerouting priority -300; policy accept;
    iif "ksb0" meta mark set 0x7
  }
}
NFT
from_drift "ip6 fredir" "table ip6 fredir chain pre: a rule of another program.s moves packets from ksb.s links (it matches a name ksb0, then redir)" <<NFT
table ip6 fredir {
  chain pre { type nat hook prerouting priority -150; policy accept;
    iifname "ksb0" meta l4proto tcp redirect to :8080
  }
}
NFT
# (a queue is judged as a dup; this kernel may lack nft_queue)
from_drift "ip fcopy" "table ip fcopy chain pre: a rule of another program.s copies or hands out packets not confined to other links, ksb.s included (dup)" <<NFT
table ip fcopy {
  chain pre { type filter hook prerouting priority -300; policy accept;
    udp dport 7777 dup to $ORIGIN_IP device "ko0"
  }
}
NFT

ksb_say "tc and XDP on ksb's links (finding 4)"
fresh
qdisc() { gwns tc qdisc show dev "$1" | grep -Eq "qdisc (ingress|clsact)"; }
kill -STOP "$KSB_GATEWAY_PID"
gwns tc qdisc add dev kvg2 ingress
gwns tc filter add dev kvg2 parent ffff: protocol ip u32 match u32 0 0 \
	action mirred egress redirect dev ko0
was=$(seen)
send5
ksb_check "the hole is real: a tc redirect takes the guest's datagrams to the uplink ($(seen) - $was)" \
	'[ "$(seen)" -gt "$was" ]'
kill -CONT "$KSB_GATEWAY_PID"
ksb_until 8 eval '! qdisc kvg2' || true
ksb_check "the ingress qdisc on the port is deleted" '! qdisc kvg2'
ksb_check "one log line says so" \
	'logged "hook drift: tc qdisc ingress on kvg2 (its filters see the frames before ksb.s rules): deleted: restored"'
ksb_check "the bridge stays up" 'gwns ip link show ksb0 | grep -q "[<,]UP[,>]"'
was=$(seen)
send5
ksb_check "none of the guest's datagrams gets beyond the uplink any more ($(seen) - $was)" \
	'[ "$(seen)" = "$was" ]'
ksb_until 5 recs_ge hook none 1 || true
ksb_check "a record nft-drift:hook, action none ($(recs hook none))" 'recs_ge hook none 1'
gwns tc qdisc add dev ksb0 clsact
gwns tc filter add dev ksb0 ingress protocol ip u32 match u32 0 0 \
	action mirred egress redirect dev ko0
ksb_until 8 eval '! qdisc ksb0' || true
ksb_check "a clsact qdisc on the bridge is deleted" '! qdisc ksb0'
ksb_check "one log line says so" \
	'logged "hook drift: tc qdisc clsact on ksb0 (its filters see the frames before ksb.s rules): deleted: restored"'
if command -v clang >/dev/null 2>&1; then
	printf '%s\n' '__attribute__((section("xdp"), used)) int p(void *c) { return 2; }' \
		'char _license[] __attribute__((section("license"), used)) = "GPL";' > "$T/xdp.c"
	clang -O2 -target bpf -c "$T/xdp.c" -o "$T/xdp.o"
	xdp() { gwns ip link show "$1" | grep -q "prog/xdp"; }
	gwns ip link set dev kvg2 xdpgeneric obj "$T/xdp.o" sec xdp
	ksb_until 8 eval '! xdp kvg2' || true
	ksb_check "an XDP program on a port is detached" '! xdp kvg2'
	ksb_check "one log line says so" \
		'logged "hook drift: an XDP program on kvg2 (it sees its frames before ksb.s rules): detached: restored"'
	ksb_check "the records count each ($(recs hook none))" 'recs_ge hook none 3'
else
	ksb_check "clang for the XDP program (contrib/bootstrap.sh)" false
fi
ksb_check "the egress was never stopped for a hook" 'never_logged "hook drift.*set down"'

ksb_say "a tc filter on the uplink redirecting onto a port (fails closed)"
# Not drift: one that redirects between other links.
gwns tc qdisc add dev ko0 ingress
gwns tc filter add dev ko0 parent ffff: protocol ip u32 match ip dst 10.78.0.99/32 \
	action mirred egress redirect dev kxd0
reload
ksb_check "a tc redirect between other links: no drift" 'never_logged "foreign drift"'
kill -STOP "$KSB_GATEWAY_PID"
gwns tc filter add dev ko0 parent ffff: protocol ip u32 match ip dst "$G2IP"/32 \
	action mirred egress redirect dev kvg2
# The origin's frames to the gateway carry the guest's MAC: redirected
# as they are, the guest takes them.
ip -n "$OR" neigh replace 10.78.0.1 lladdr "$G2MAC" dev ko1
ksb_check "the hole is real: the origin injects UDP into the guest" got
kill -CONT "$KSB_GATEWAY_PID"
ksb_until 8 down || true
ksb_check "the bridge is down" down
ksb_check "nothing is injected any more" '! got'
ksb_check "one log line says which link, where to and what to do" \
	'logged "foreign drift: a tc filter on ko0 redirects or mirrors onto ksb.s links (mirred to kvg2): could not be restored (not ksb.s link: delete its qdisc, then restart ksb-gatewayd): bridge ksb0 set down"'
gwns tc qdisc del dev ko0 ingress
ip -n "$OR" neigh del 10.78.0.1 dev ko1
ip netns exec "$OR" nft delete table netdev wit

[ "$fails" = 0 ] || { grep -E "nftables check|canary" "$T/gatewayd.log" | head; tail -n 30 "$T/gatewayd.log"; ksb_fail "$fails check(s) failed"; }
grep -E "nftables check|canary" "$T/gatewayd.log" | head -n 20
echo "PASS"
