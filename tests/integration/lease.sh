#!/bin/bash
# lease.sh: registrations as leases, restart reconciliation and control
# socket credentials, against the real ksb-gatewayd in its own namespaces
# (tests/lib.sh).  tests/integration/fakerun.py stands in for ksb-run: it
# REGISTERs, keeps the tap fd (as QEMU would) and RESUMEs after a restart.
#   - the lease: kill -9 of the holder removes the guest from the sets
#     and its tap within a second (measured);
#   - kill -9 of the gateway: tables and elements stay (fail closed);
#   - restart: the resuming instance is re-adopted with its tap, one whose
#     holder died is forgotten, a stray tap on the bridge is deleted, one
#     that never resumes is dropped after the grace period; the sets hold
#     exactly the expected guests;
#   - SO_PEERCRED: nobody may LIST but not REGISTER; control-group may.
set -eu
. "$(dirname "$0")/../lib.sh"

ksb_need_root
ksb_need python3 setpriv
python3 -c 'import socket; socket.recv_fds' 2>/dev/null || ksb_skip "needs Python >= 3.9"
getent group users >/dev/null || ksb_skip "needs the group \`users'"
# setpriv users need an interpreter they can run (not a per-user shim).
SYSPY=/usr/bin/python3
ksb_need "$SYSPY"
ksb_env
echo "control-group = users" >> "$T/ksb.conf"
cp "$KSB_SRCDIR/tests/integration/fakerun.py" "$T/fakerun.py"
chmod 644 "$T/fakerun.py"
ksb_gateway

npass=0
pass() { npass=$((npass + 1)); echo "ok $npass - $*"; }
must() { local d=$1; shift; if "$@"; then pass "$d"; else ksb_fail "$d"; fi; }
mustnot() { local d=$1; shift; if "$@"; then ksb_fail "$d (should fail)"; else pass "$d"; fi; }
gwns() { ip netns exec "$GW" "$@"; }

# fake ID MODE: start a fake ksb-run, wait for its REGISTER reply.
fake() {
	ip netns exec "$GW" python3 "$T/fakerun.py" "$T/gateway.sock" "$1" default "$2" \
		> "$T/$1.log" 2>&1 &
	eval "pid_$(echo "$1" | tr - _)=$!"
	KSB_PIDS="$KSB_PIDS $!"
	wait_line "$T/$1.log" '^OK tap=' || ksb_fail "REGISTER $1: $(cat "$T/$1.log")"
}
# wait_line FILE PATTERN [N]: until FILE has N (1) lines matching, <= 60 s.
has_lines() { [ "$(grep -c -- "$2" "$1" 2>/dev/null)" -ge "${3:-1}" ]; }
wait_line() { ksb_until 60 has_lines "$@"; }
# until CMD...: until CMD succeeds, <= 20 s (what the gateway does after a
# client went away, or after it logged a line, happens asynchronously).
until_ok() { ksb_until 20 "$@"; }
tap_of() { sed -n 's/^OK tap=\([^ ]*\) .*/\1/p' "$T/$1.log" | head -n 1; }
ip_of() { sed -n 's/^OK .* ip=\([0-9.]*\)\/.*/\1/p' "$T/$1.log" | head -n 1; }
inet_set() { gwns nft list set inet ksb guests | tr -d '\n\t' | sed -n 's/.*elements = { \([^}]*\) }.*/\1/p'; }
# as_user LINE SETPRIV-OPTIONS...: send LINE as that user, print the reply.
as_user() { local l=$1; shift; gwns setpriv "$@" "$SYSPY" "$T/fakerun.py" "$T/gateway.sock" - - send "$l"; }

# ---- control socket credentials ---------------------------------------------
as_user "REGISTER nob default" --reuid=65534 --regid=65534 --clear-groups > "$T/nobody" 2>&1 || true
must "nobody may not REGISTER: clear refusal" grep -q "^ERR permission denied: REGISTER needs root or group \`users'" "$T/nobody"
as_user "LIST" --reuid=65534 --regid=65534 --clear-groups > "$T/nobody" 2>&1 || true
must "nobody may LIST" grep -q "^END" "$T/nobody"
must "ksbctl list works as nobody" gwns setpriv --reuid=65534 --regid=65534 --clear-groups \
	"$KSB_BUILDDIR/ksbctl/ksbctl" -f "$T/ksb.conf" list
as_user "RELOAD" --reuid=65534 --regid=65534 --clear-groups > "$T/nobody" 2>&1 || true
must "nobody may not RELOAD" grep -q "^ERR permission denied" "$T/nobody"
gid=$(getent group users | cut -d: -f3)
as_user "REGISTER grp1 default" --reuid=65534 --regid=65534 --groups="$gid" > "$T/grp" 2>&1 || true
must "a supplementary member of control-group may REGISTER" grep -q "^OK tap=.* fds=1" "$T/grp"
as_user "REGISTER grp2 default" --reuid=65534 --regid="$gid" --clear-groups > "$T/grp" 2>&1 || true
must "a primary member of control-group may REGISTER" grep -q "^OK tap=.* fds=1" "$T/grp"
no_guests() { [ -z "$(inet_set)" ]; }
must "their leases ended with their connections" until_ok no_guests

# ---- a local user cannot exhaust the control socket -------------------------
cat > "$T/flood.py" <<'FLOOD'
import select, socket, sys, time
path, n = sys.argv[1], int(sys.argv[2])
socks, busy = [], 0
for i in range(n):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    socks.append(s)
held, answered = [], {}
for s in socks:                          # each answers LIST, or was refused
    try:
        s.sendall(b"LIST\n")
    except OSError:
        pass
    s.settimeout(5)
    reply = b""
    try:
        while not (b"END\n" in reply or b"ERR" in reply):
            d = s.recv(4096)
            if not d:
                break
            reply += d
    except OSError:
        pass
    if reply.startswith(b"ERR too many"):
        busy += 1
    else:
        held.append(s)
        answered[s] = time.monotonic()   # idle from here on
print("held=%d busy=%d" % (len(held), busy), flush=True)
sys.stdin.readline()                     # the test checks LIST meanwhile
# The gateway drops idle peers: each one's idle time, from its answer to
# its drop (not from the test's "go", which comes when the test is done).
t0, idle = time.monotonic(), []
while held and time.monotonic() - t0 < 30:
    r, _, _ = select.select(held, [], [], 1)
    for s in r:
        try:
            gone = s.recv(200) == b""
        except OSError:
            gone = True
        if gone:
            idle.append(time.monotonic() - answered[s])
            held.remove(s)
print("dropped=%d idle %.1f to %.1f s" % (len(idle), min(idle or [0]),
      max(idle or [0])), flush=True)
FLOOD
coproc FLOOD { gwns setpriv --reuid=65534 --regid=65534 --clear-groups "$SYSPY" "$T/flood.py" "$T/gateway.sock" 100; }
flood_pid=$FLOOD_PID		# bash unsets FLOOD_PID and FLOOD once it exits
exec {flood_in}<&"${FLOOD[0]}" {flood_out}>&"${FLOOD[1]}"
read -r -t 30 flood_line <&"$flood_in" || flood_line=
must "an unprivileged user gets at most 8 control connections, its uid's share of 64 ($flood_line)" \
	test "$flood_line" = "held=8 busy=92"
as_user "LIST" --reuid=0 --regid=0 --keep-groups > "$T/root-list" 2>&1 || true
must "root's LIST still answered during the flood" grep -q "^END" "$T/root-list"
echo go >&"$flood_out"
read -r -t 60 flood_line <&"$flood_in" || flood_line=
must "idle unprivileged clients dropped after ~10 s idle ($flood_line)" \
	sh -c "echo '$flood_line' | grep -qE '^dropped=8 idle ([89]|1[0-5])\.[0-9] to ([89]|1[0-5])\.[0-9] s$'"
wait "$flood_pid" 2>/dev/null || true
exec {flood_in}<&- {flood_out}>&-

# ---- the lease ----------------------------------------------------------------
fake lease-a resume
fake lease-b hold
fake lease-c resume
fake lease-d hold
ipd=$(ip_of lease-d)
must "four guests in the inet set" test "$(inet_set | tr ',' '\n' | grep -c .)" = 4
must "four rows in the state database" test "$(sqlite3 -cmd '.timeout 5000' "$T/state/state.db" 'SELECT count(*) FROM instances')" = 4
# What is measured is the gateway's latency only: a listener on the
# nftables netlink events of ns GW, subscribed before it sends the kill -9,
# timestamps the set element deletion as the kernel announces it (polling
# `nft list' from this script would add its own fork/exec time under load).
cat > "$T/leasewatch.py" <<'WATCH'
import os, signal, socket, struct, sys, time
s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 12)  # NETLINK_NETFILTER
s.bind((0, 0))
s.setsockopt(270, 1, 7)          # SOL_NETLINK, ADD_MEMBERSHIP, NFNLGRP_NFTABLES
s.settimeout(30)
t0 = time.monotonic()
os.kill(int(sys.argv[1]), signal.SIGKILL)
try:
    while True:
        d = s.recv(65536)
        off = 0
        while off + 16 <= len(d):
            ln, ty = struct.unpack_from("=IH", d, off)
            if ty == (10 << 8) | 14:     # NFNL_SUBSYS_NFTABLES, NFT_MSG_DELSETELEM
                print("%d" % ((time.monotonic() - t0) * 1000))
                sys.exit(0)
            if ln < 16:
                break
            off += (ln + 3) & ~3
except socket.timeout:
    print("none in 30 s")
WATCH
ms=$(gwns python3 "$T/leasewatch.py" "$pid_lease_d" 2>&1) || true
wait "$pid_lease_d" 2>/dev/null || true
echo "# lease: guest removed from the sets ${ms} ms after kill -9 of its holder"
must "lease loss within a second (${ms} ms)" test "$ms" -lt 1000
lease_d_gone() { ! inet_set | grep -qw "$ipd"; }
must "lease-d is out of the inet set" until_ok lease_d_gone
must "its tap is gone" until_ok sh -c "! ip netns exec $GW ip link show $(tap_of lease-d) 2>/dev/null"
no_row() { test "$(sqlite3 -cmd '.timeout 5000' "$T/state/state.db" "SELECT count(*) FROM instances WHERE id = '$1'")" = 0; }
must "its state row is gone" until_ok no_row lease-d

# ---- kill -9 of the gateway: fail closed ---------------------------------------
kill -9 "$KSB_GATEWAY_PID"
wait "$KSB_GATEWAY_PID" 2>/dev/null || true
must "tables stay after kill -9" gwns nft list table inet ksb
must "elements stay (nothing listens on the proxy port)" test "$(inet_set | tr ',' '\n' | grep -c .)" = 3
# (The proxy process dies of the parent's death signal: it may still be
# exiting, its listener open, when kill -9 of the parent has returned.)
proxy_port_closed() { ! ksb_listening "$GW" 3128; }
must "nothing listens on 10.77.0.1:3128" until_ok proxy_port_closed
must "the holders noticed" wait_line "$T/lease-a.log" '^lost the gateway'
kill -9 "$pid_lease_c"		# dies while the gateway is down
wait "$pid_lease_c" 2>/dev/null || true	# ... before it is back
gwns ip tuntap add ksbt99 mode tap
gwns ip link set ksbt99 master ksb0
: > "$T/gatewayd.log.1"; cp "$T/gatewayd.log" "$T/gatewayd.log.1"
rm -f "$T/gateway.sock"

# ---- restart ------------------------------------------------------------------
ksb_gateway
# The sets as the restart left them, before lease-b's 10 s grace period
# (counted from the reconciliation) can run out; checked below.
sets_at_restart=$(inet_set)
as_user "RESUME lease-b $(tap_of lease-b)" --reuid=0 --regid=0 --keep-groups > "$T/steal" 2>&1 || true
must "RESUME by another process refused" grep -q "^ERR instance lease-b was registered by another process" "$T/steal"
must "lease-a resumed" wait_line "$T/lease-a.log" '^OK tap=.* fds=0'
must "lease-a keeps its tap" gwns ip link show "$(tap_of lease-a)"
must "gateway logged the re-adoption" grep -q "re-adopted instance lease-a" "$T/gatewayd.log"
must "lease-c forgotten (its ksb-run is gone)" grep -q "forgetting instance lease-c.*ksb-run is gone" "$T/gatewayd.log"
must "stray tap ksbt99 deleted" sh -c "! ip netns exec $GW ip link show ksbt99 2>/dev/null"
must "sets hold lease-a and lease-b (awaiting resume), nothing else" sh -c \
	"test \"\$(echo '$sets_at_restart' | tr -d ' ' | tr ',' '\n' | sort | paste -sd,)\" = \"\$(printf '%s\n' $(ip_of lease-a) $(ip_of lease-b) | sort | paste -sd,)\""
must "lease-b dropped after the grace period" wait_line "$T/gatewayd.log" "lease-b was not resumed"
# The gateway logs that before it unregisters lease-b (sets, tap, state).
only_lease_a() { [ "$(inet_set)" = "$(ip_of lease-a)" ]; }
must "sets now hold exactly lease-a" until_ok only_lease_a
gwns nft list set bridge ksb guests | tr -d '\n\t' > "$T/bset"
must "bridge set holds exactly lease-a's tap . MAC . IP" grep -qE "elements = \\{ \"$(tap_of lease-a)\" \\. [0-9a-f:]{17} \\. $(ip_of lease-a) \\}" "$T/bset"
must "lease-b's tap deleted" until_ok sh -c "! ip netns exec $GW ip link show $(tap_of lease-b) 2>/dev/null"
state_only_a() { [ "$(sqlite3 -cmd '.timeout 5000' "$T/state/state.db" 'SELECT group_concat(id) FROM instances')" = lease-a ]; }
must "state database: lease-a only" until_ok state_only_a
must "ksbctl list shows lease-a" sh -c "ip netns exec $GW $KSB_BUILDDIR/ksbctl/ksbctl -f $T/ksb.conf list | grep -q lease-a"
kill "$pid_lease_a"
must "resumed lease ends with its new connection" until_ok no_guests
echo "PASS: $npass checks"
