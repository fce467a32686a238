#!/bin/bash
# privsep.sh: privilege separation (issue 6), and signals (issue 29): a
# SIGHUP storm during reloads costs no tunnel and no proxy restart, and
# SIGHUPs during the shutdown do not cut its wait for the close records.
# The proxy process of ksb-gatewayd runs as the unprivileged proxy user
# with no capabilities (bounding set included), no_new_privs, a seccomp
# filter and an empty root; it cannot open a netlink socket or create a
# tap (ksb-gatewayd -T: the proxy process tries and logs the outcome); it
# holds no descriptor of
# the parent's (databases, taps, control socket).  A malformed message
# from it (injected on its socketpair end, taken with pidfd_getfd) and a
# kill -9 make the parent restart it; the guest's registration survives
# and new connections work.  A proxy process that cannot start (its hosts
# file gone) has its own error logged by the parent, with its exit status,
# and is retried with backoff until it can.  Across these replacements
# the gateway's live traffic counts (LIST) stay the audit's totals: a
# tunnel closed just before is in both, one open when its proxy dies in
# neither (its row is closed with 0 bytes).
set -eu
. "$(dirname "$0")/../lib.sh"

ksb_need_root
ksb_need python3 pgrep	# pidfd_getfd; the processes
HOLD=$KSB_BUILDDIR/tests/integration/ctlhold
[ -x "$HOLD" ] || ksb_fail "$HOLD not built (make check builds it)"
ksb_env
ksb_origin

ip netns exec "$GW" "$KSB_BUILDDIR/ksb-gatewayd" -d -T -f "$T/ksb.conf" \
	>"$T/gatewayd.log" 2>&1 &
GWPID=$!
KSB_PIDS="$KSB_PIDS $GWPID"
gw_ready() {
	kill -0 "$GWPID" 2>/dev/null || { cat "$T/gatewayd.log"; ksb_fail "ksb-gatewayd died"; }
	[ -S "$T/gateway.sock" ] && grep -q '^ksb-gatewayd: ready: ' "$T/gatewayd.log"
}
ksb_until 60 gw_ready || ksb_fail "ksb-gatewayd did not become ready"

fails=0
pass=0
check() {
	if eval "$2"; then echo "ok - $1"; pass=$((pass + 1))
	else echo "not ok - $1"; fails=$((fails + 1)); fi
}
# child: the proxy process's pid (polls up to 30 s for a live one != $1;
# a zombie the parent has not reaped yet does not count).
child() {
	local p end=$((SECONDS + 30))
	while [ "$SECONDS" -lt "$end" ]; do
		for p in $(pgrep -P "$GWPID" -x ksb-proxy || true); do
			[ "$p" != "${1:-}" ] && ! ksb_dead "$p" && { echo "$p"; return 0; }
		done
		sleep 0.1
	done
	return 1
}
# sql_wait WANT QUERY: poll the audit database (<= 20 s).
sql_wait() { ksb_sql_is "$@"; }
# logged PATTERN [N]: until the gateway's log has N (1) lines matching
# PATTERN (<= 20 s).
nlogged() { grep -c -- "$1" "$T/gatewayd.log" || true; }
logged_now() { [ "$(nlogged "$1")" -ge "${2:-1}" ]; }
logged() { ksb_until 20 logged_now "$@"; }
# sandboxed N: the Nth proxy process started has set up its sandbox.  It
# is named ksb-proxy (what child finds) before it drops anything; with -T
# it logs its selftest right after child_drop (chroot, ids, capabilities,
# seccomp).  Processes that fail earlier (no hosts file) log none.
sandboxed() { ksb_until 30 logged_now "selftest: setuid 0:" "$1"; }
# field PID KEY: a line of /proc/PID/status without its key (tabs kept).
field() { sed -n "s/^$2:[[:space:]]*//p" "/proc/$1/status"; }

C1=$(child) || ksb_fail "no proxy process: $(cat "$T/gatewayd.log")"
sandboxed 1 || true
WANT_UID=$(id -u _ksbproxy 2>/dev/null || id -u nobody)

ksb_say "the proxy process's credentials"
check "parent still root" '[ "$(field "$GWPID" Uid)" = "0	0	0	0" ]'
check "uid $WANT_UID (real, effective, saved, fs)" \
	'[ "$(field "$C1" Uid)" = "$WANT_UID	$WANT_UID	$WANT_UID	$WANT_UID" ]'
check "gid not 0" '! field "$C1" Gid | grep -qw 0'
check "no supplementary groups" '[ -z "$(field "$C1" Groups)" ]'
for cap in CapInh CapPrm CapEff CapBnd CapAmb; do
	check "$cap = 0" '[ "$(field "$C1" $cap)" = 0000000000000000 ]'
done
check "NoNewPrivs 1" '[ "$(field "$C1" NoNewPrivs)" = 1 ]'
check "Seccomp 2 (filter)" '[ "$(field "$C1" Seccomp)" = 2 ]'
check "empty root" '[ -z "$(ls -A "/proc/$C1/root/")" ]'
check "no database, tap or control socket descriptor" \
	'! ls -l "/proc/$C1/fd/" | grep -Eq "\.db|/dev/net/tun|gateway\.sock"'

ksb_say "what the sandbox forbids (-T)"
check "netlink socket refused" \
	'grep -q "selftest: netlink socket: Operation not permitted" "$T/gatewayd.log"'
check "/dev/net/tun cannot be opened" \
	'grep "selftest: open /dev/net/tun:" "$T/gatewayd.log" | grep -qv ALLOWED'
check "TUNSETIFF refused" \
	'grep -q "selftest: ioctl TUNSETIFF: Operation not permitted" "$T/gatewayd.log"'
check "setuid(0) refused" \
	'grep -q "selftest: setuid 0: Operation not permitted" "$T/gatewayd.log"'

# One guest, as in proxy.sh.
ns=ksbt-$$-g1
ip netns add "$ns"
KSB_NETNS="$ns"
mkfifo "$T/hold1"
ip netns exec "$GW" "$HOLD" "$T/gateway.sock" g1 default < "$T/hold1" > "$T/lease1" 2>&1 &
KSB_PIDS="$KSB_PIDS $!"
exec {HOLDFD}>"$T/hold1"
for _ in $(seq 1 100); do [ -s "$T/lease1" ] && break; sleep 0.05; done
lease=$(sed -n 's/^ip=\([^ ]*\).*/\1/p' "$T/lease1")
[ -n "$lease" ] || ksb_fail "REGISTER g1: $(cat "$T/lease1")"
ip link add kvg1 netns "$GW" type veth peer name eth0 netns "$ns"
ip -n "$GW" link set kvg1 master ksb0 up
ip -n "$ns" addr add "$lease" dev eth0
ip -n "$ns" link set eth0 up
fetch() {
	ip netns exec "$ns" timeout 30 curl -sS --max-time 20 \
		--proxy http://10.77.0.1:3128 --cacert "$T/pki/ca.pem" \
		https://allowed.test/index.txt 2>&1 || true
}

# closed N: N allowed rows are closed (polls the audit, <= 20 s).  The
# gateway counts a closed tunnel's bytes in LIST from its close record
# before that record is written: from then on, with no tunnel open, the
# live counts are the audit's at once, not after the proxy process's next
# report (every 0.5 s) and whether or not that process is replaced before
# it: the checks of the counts below do not wait.
closed() {
	sql_wait "$1" "SELECT count(*) FROM connections WHERE decision = 'allow' AND close_reason IS NOT NULL"
}

ksb_say "a tunnel through the proxy process"
check "allowed.test served" '[ "$(fetch)" = "$ORIGIN_BODY" ]'
check "its row is allowed and closed" 'closed 1'
check "its bytes are in the traffic counts at once" 'ksb_traffic_is_audit g1'

ksb_say "a malformed message from the proxy process"
# Replaced right after the tunnel closed (within its 0.5 s report).
check "a second tunnel, closed" '[ "$(fetch)" = "$ORIGIN_BODY" ] && closed 2'
python3 - "$C1" <<'PY'
import ctypes, os, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
pidfd = os.pidfd_open(int(sys.argv[1]))
fd = libc.syscall(438, pidfd, 4, 0)	# pidfd_getfd: its socketpair end
if fd < 0:
    sys.exit("pidfd_getfd: %s" % os.strerror(ctypes.get_errno()))
# MSG_AUDIT_DECISION with a 3-byte payload: the size is not the type's.
os.write(fd, struct.pack("=HHI", 64, 3, 1) + b"abc")
PY
# Awaited as the event it is, whatever the reap found: the parent closes
# its end first, so a proxy process that saw EOF and exited before the
# reap is logged "malformed message (exit status 1); restarting it".
check "the parent drops it" 'logged "malformed message.*; restarting it"'
C2=$(child "$C1") || C2=
sandboxed 2 || true
check "a new proxy process" '[ -n "$C2" ] && [ "$C2" != "$C1" ] && ksb_dead "$C1"'
check "still sandboxed" '[ "$(field "$C2" Seccomp)" = 2 ] && [ "$(field "$C2" CapEff)" = 0000000000000000 ]'
check "the counts of both tunnels are the audit's (the first proxy's last report not awaited)" \
	'ksb_traffic_is_audit g1'
check "the guest is still served" '[ "$(fetch)" = "$ORIGIN_BODY" ] && closed 3'

ksb_say "kill -9 of the proxy process, a tunnel open"
# The traffic counts (LIST) survive it.  The open tunnel dies with the
# proxy; its row is closed with 0 bytes, and its bytes, counted live
# while it was open, leave the counts too: they stay the audit's.
check "the gateway's traffic counts are the audit's" 'ksb_traffic_is_audit g1'
before=$(ksb_traffic g1)
ip netns exec "$ns" timeout 60 python3 -c '
import socket, ssl, time
s = socket.create_connection(("10.77.0.1", 3128), timeout=20)
s.sendall(b"CONNECT allowed.test:443 HTTP/1.1\r\nHost: allowed.test:443\r\n\r\n")
print(s.recv(4096).split(b"\r\n")[0].decode(), flush=True)
c = ssl.create_default_context()
c.check_hostname = False
c.verify_mode = ssl.CERT_NONE
t = c.wrap_socket(s, server_hostname="allowed.test")
print("tls up", flush=True)
t.settimeout(50)
try:
    t.recv(1)
except OSError:
    pass
print("closed", flush=True)
' > "$T/open" 2>&1 &
OPEN=$!
KSB_PIDS="$KSB_PIDS $OPEN"
# open_counted: LIST has the tunnel open and its handshake's bytes.
open_counted() {
	set -- $(ksb_traffic g1)
	[ "${1:-}" = 1 ] && [ "${2:-0}" -gt "$(echo "$before" | cut -d" " -f2)" ]
}
check "a tunnel open, counted live" 'ksb_until 10 open_counted'
kill -9 "$C2"
C3=$(child "$C2") || C3=
check "restarted" '[ -n "$C3" ] && [ "$C3" != "$C2" ]'
check "the open tunnel's row closed with 0 bytes" \
	'sql_wait 1 "SELECT count(*) FROM connections WHERE close_reason = '"'proxy_restarted'"' AND bytes_up = 0 AND bytes_down = 0"'
check "the counts are kept across the restart, the audit's ($before)" \
	'[ "$(ksb_traffic g1)" = "$before" ] && ksb_traffic_is_audit g1'
ksb_wait_dead "$OPEN" 30 || true
check "the tunnel had its 200 and TLS, then closed: $(tr '\n' ' ' < "$T/open")" \
	'grep -q " 200 " "$T/open" && grep -q "^tls up" "$T/open" && grep -q "^closed" "$T/open"'
check "the guest is still served" '[ "$(fetch)" = "$ORIGIN_BODY" ] && closed 5'
check "... and counted on top of them: still the audit's" \
	'ksb_traffic_is_audit g1 &&
	    [ "$(ksb_traffic g1 | cut -d" " -f3)" -gt "${before##* }" ]'
check "denied names still denied" \
	'ip netns exec "$ns" timeout 30 curl -sS --max-time 20 --proxy http://10.77.0.1:3128 --cacert "$T/pki/ca.pem" https://denied.test/ 2>&1 | grep -q 403'
check "gateway alive" 'kill -0 "$GWPID"'
check "nftables tables still in force" \
	'ip netns exec "$GW" nft list tables | grep -q "inet ksb"'

ksb_say "a SIGHUP storm during reloads, tunnels open: none dropped"
# A TLS tunnel is up and idle while 50 SIGHUPs arrive (paced a few ms
# apart, so that some land while a reload waits for the proxy's answer);
# then it sends a request: it still works.  (One: openssl s_server serves
# one connection at a time.)  The proxy
# process is the same, and the reloads coalesced (never more than the
# signals).
rm -f "$T/storm.go"
# A large policy (a profile of 20000 names): each reload's wait for the
# proxy's answer (it parses the policy too) lasts long enough for SIGHUPs
# to land in it, and reloads take longer than the signals' pacing.  Under
# contrib/sanitize.sh (KSB_SANITIZED) every parse is several times slower:
# 5000 names last as long, and ksbctl's reload still gets its answer
# within its 10 s (CTL_TIMEOUT_MS) on a loaded machine.
names=20000
[ -z "${KSB_SANITIZED:-}" ] || names=5000
{
	echo "profile storm {"
	seq 1 "$names" | sed 's/.*/    allow h&.storm.test/'
	echo "}"
} > "$T/policy.d/storm.policy"
for k in 1; do
	ip netns exec "$ns" timeout 90 python3 -c '
import os, socket, ssl, sys, time
s = socket.create_connection(("10.77.0.1", 3128), timeout=20)
s.sendall(b"CONNECT allowed.test:443 HTTP/1.1\r\nHost: allowed.test:443\r\n\r\n")
print(s.recv(4096).split(b"\r\n")[0].decode(), flush=True)
c = ssl.create_default_context()
c.check_hostname = False
c.verify_mode = ssl.CERT_NONE
t = c.wrap_socket(s, server_hostname="allowed.test")
print("tls up", flush=True)
end = time.monotonic() + 60
while not os.path.exists(sys.argv[1]) and time.monotonic() < end:
    time.sleep(0.05)
t.settimeout(20)
t.sendall(b"GET /index.txt HTTP/1.0\r\n\r\n")
got = b""
while True:
    b = t.recv(4096)
    if not b:
        break
    got += b
print("reply", got.split(b"\r\n")[0].decode(), flush=True)
' "$T/storm.go" >"$T/storm$k" 2>&1 &
	KSB_PIDS="$KSB_PIDS $!"
	eval "SP$k=\$!"
done
up() { grep -q "^tls up" "$T/storm1"; }
ksb_until 30 up || true
check "a tunnel up" up
P=$(child) || P=
r0=$(nlogged "policy reloaded in")
for _ in $(seq 1 50); do
	kill -HUP "$GWPID"
	sleep 0.005
done
# A reload by ksbctl answers after the ones queued before it ran.
"$KSB_BUILDDIR/ksbctl/ksbctl" -f "$T/ksb.conf" reload >/dev/null
touch "$T/storm.go"
ksb_until 30 eval '! kill -0 "$SP1" 2>/dev/null' || true
r1=$(nlogged "policy reloaded in")
cat "$T/storm1"
check "the tunnel still served a request after the storm" \
	'grep -q "^reply HTTP/1.0 200" "$T/storm1"'
check "the same proxy process ($P)" '[ -n "$P" ] && [ "$(child)" = "$P" ] && ! ksb_dead "$P"'
check "no reload took the proxy for silent" '! grep -q "no answer to the new policy" "$T/gatewayd.log"'
check "the reloads coalesced: $((r1 - r0)) for 51 asked" \
	'[ $((r1 - r0)) -ge 2 ] && [ $((r1 - r0)) -le 25 ]'
check "no row closed as proxy_restarted but the kill -9's" \
	'ksb_sql_is 1 "SELECT count(*) FROM connections WHERE close_reason = '"'proxy_restarted'"'"'

rm -f "$T/policy.d/storm.policy"
"$KSB_BUILDDIR/ksbctl/ksbctl" -f "$T/ksb.conf" reload >/dev/null

ksb_say "a proxy process that cannot start"
mv "$T/hosts" "$T/hosts.away"
kill -9 "$C3"
cause="proxy process [0-9]*: failed: proxy: hosts-file: cannot read .*(exit status 1); restarting it"
check "the parent logs its cause and exit status" 'logged "$cause"'
check "not called a malformed message" \
	'[ "$(grep -c "malformed message" "$T/gatewayd.log")" = 2 ]'
# The backoff has doubled with each restart so far (100 ms to 5 s): the
# next failure may take seconds.
check "retried with backoff" 'logged "$cause" 2'
mv "$T/hosts.away" "$T/hosts"
# The first one that stays (one started before the mv may still fail).
C4=
for _ in $(seq 1 30); do
	p=$(child "$C3") || break
	sleep 0.5
	ksb_dead "$p" || { C4=$p; break; }
done
sandboxed 4 || true
check "started once it can" '[ -n "$C4" ] && [ "$(field "$C4" Seccomp)" = 2 ]'
check "the guest is served again" '[ "$(fetch)" = "$ORIGIN_BODY" ]'

ksb_say "SIGHUPs during the shutdown: the close records are still awaited"
# A TLS tunnel is open when SIGTERM comes.  The proxy process is stopped
# (SIGSTOP) first, so that the parent's wait for its close records lasts:
# up to 200 SIGHUPs arrive during it (for at most 1.5 s, inside the
# wait's 5 s), then
# the proxy goes on (SIGCONT), closes the tunnel and sends its record.  A
# wait that took a signal for its end would have given up at the first
# one and closed the row proxy_restarted with 0 bytes.
ip netns exec "$ns" timeout 60 python3 -c '
import socket, ssl, time
s = socket.create_connection(("10.77.0.1", 3128), timeout=20)
s.sendall(b"CONNECT allowed.test:443 HTTP/1.1\r\nHost: allowed.test:443\r\n\r\n")
print(s.recv(4096).split(b"\r\n")[0].decode(), flush=True)
c = ssl.create_default_context()
c.check_hostname = False
c.verify_mode = ssl.CERT_NONE
t = c.wrap_socket(s, server_hostname="allowed.test")
print("tls up", flush=True)
t.settimeout(50)
try:
    t.recv(1)
except Exception:
    pass
print("closed", flush=True)
' >"$T/down" 2>&1 &
KSB_PIDS="$KSB_PIDS $!"
tls_up() { grep -q "^tls up" "$T/down"; }
ksb_until 30 tls_up || true
check "a tunnel up before the shutdown" tls_up
P=$(child) || P=
kill -STOP "$P"
kill -TERM "$GWPID"
now_ms() { echo $(( ${EPOCHREALTIME/./} / 1000 )); }
t_end=$(( $(now_ms) + 1500 ))	# well inside the parent's 5 s
for _ in $(seq 1 200); do
	[ "$(now_ms)" -lt "$t_end" ] || break
	kill -HUP "$GWPID" 2>/dev/null || break
	sleep 0.005
done
check "the parent still waits for the proxy's records" 'kill -0 "$GWPID"'
kill -CONT "$P"
ksb_wait_dead "$GWPID" || true
check "the gateway exited" 'ksb_dead "$GWPID"'
check "the tunnel's row is closed gateway_shutdown, with its bytes" \
	'ksb_sql_is 1 "SELECT count(*) FROM connections WHERE id = (SELECT max(id) FROM connections) AND close_reason = '"'gateway_shutdown'"' AND bytes_down > 0"'

echo "# $pass passed, $fails failed"
[ "$fails" = 0 ]
