#!/bin/bash
# seccomp.sh: the proxy process's seccomp allow-list (gateway/proxy/child.c,
# common/sandbox.c).  ksb-gatewayd -T makes the proxy process try what it
# must not do and log each outcome; every one must be "Operation not
# permitted", the filter's answer (the empty root alone would say "No such
# file or directory" or "Read-only file system"; a missing filter
# "ALLOWED").  It holds exactly one filter.  Then the paths a too narrow
# allow-list would break, all served by that same proxy process (never
# restarted, still filtered): a tunnel; a name the resolver never answers
# (evdns timeouts and retries); a policy reload (the memfd from the
# parent: fstat, pread); running out of descriptors (no relay pipe: the
# copy through a buffer; accept paused by its timer, then resumed).  The
# fetch's pack builder has its own allow-list: tests/unit/test_sandbox.
set -eu
. "$(dirname "$0")/../lib.sh"

ksb_need_root
HOLD=$KSB_BUILDDIR/tests/integration/ctlhold
[ -x "$HOLD" ] || ksb_fail "$HOLD not built (make check builds it)"
ksb_need python3 pgrep	# idle connections; the proxy process
ksb_env
ksb_origin

# slow.test is in no hosts file and the resolver is an address nobody
# answers from: evdns sends, times out (1 s) and retries.
cat > "$T/policy.d/test.policy" <<'POL'
profile default {
    allow allowed.test
    allow slow.test
    allow-address 10.78.0.0/24
}
POL
sed -i 's/^resolver = .*/resolver = 10.78.0.9:53/' "$T/ksb.conf"
# Idle connections hold descriptors for the whole test.
printf 'resolve-timeout = 1\nheader-timeout = 120\nconnection-rate-per-instance = 1000\n' \
	>> "$T/ksb.conf"

# FDMAX descriptors (soft and hard: the proxy process cannot raise it), so
# that some idle connections exhaust them.  Below 100: the proxy process
# once placed its descriptors at 100 and up, and could not start at all.
FDMAX=90
( ulimit -n $FDMAX; exec ip netns exec "$GW" "$KSB_BUILDDIR/ksb-gatewayd" -d -T \
	-f "$T/ksb.conf" ) >"$T/gatewayd.log" 2>&1 &
GWPID=$!
KSB_PIDS="$KSB_PIDS $GWPID"
for _ in $(seq 1 100); do
	[ -S "$T/gateway.sock" ] && grep -q ready "$T/gatewayd.log" && break
	kill -0 "$GWPID" 2>/dev/null || { cat "$T/gatewayd.log"; ksb_fail "ksb-gatewayd died"; }
	sleep 0.1
done
pass=0
fails=0
C=
for _ in $(seq 1 100); do
	C=$(pgrep -P "$GWPID" -x ksb-proxy || true)
	[ -n "$C" ] && break
	sleep 0.1
done
[ -n "$C" ] || ksb_fail "no proxy process: $(cat "$T/gatewayd.log")"
field() { sed -n "s/^$2:[[:space:]]*//p" "/proc/$1/status"; }
# The process is named ksb-proxy before it drops privileges; its selftest
# runs right after the drop: wait for the selftest's last line first.
ksb_until 30 grep -q "selftest: kill:" "$T/gatewayd.log" ||
	ksb_fail "no selftest from the proxy: $(cat "$T/gatewayd.log")"

ksb_say "the proxy process's filter"
ksb_check "Seccomp 2 (filter)" '[ "$(field "$C" Seccomp)" = 2 ]'
ksb_check "exactly one filter (no deny-list stacked)" \
	'[ "$(field "$C" Seccomp_filters)" = 1 ]'
ksb_check "NoNewPrivs 1" '[ "$(field "$C" NoNewPrivs)" = 1 ]'

ksb_say "what the allow-list refuses (-T)"
EPERM="Operation not permitted"
for what in "netlink socket" "open /dev/net/tun" "ioctl TUNSETIFF" \
	"setuid 0" "unix socket" "packet socket" "raw IPv4 socket" \
	"socketpair" "bind a new socket" "listen on a new socket" \
	"setsockopt SO_KEEPALIVE" "ioctl SIOCGIFCONF" "open / read-only" \
	"open a file for writing" "execve" "fork" "ptrace" \
	"executable mapping" "mprotect to executable" "io_uring_setup" \
	"memfd_create" "kill"; do
	ksb_check "$what: $EPERM" \
		'grep -q "proxy selftest: $what: $EPERM\$" "$T/gatewayd.log"'
done
ksb_check "nothing ALLOWED" '! grep "proxy selftest:" "$T/gatewayd.log" | grep -q "ALLOWED\|NOT REFUSED"'

ksb_fake_guest 1 g1
ns=ksbt-$$-g1
get() {	# get HOST: the origin's body through the proxy, or curl's error
	ip netns exec "$ns" timeout 30 curl -sS --max-time 20 \
		--proxy http://10.77.0.1:3128 --cacert "$T/pki/ca.pem" \
		"https://$1/index.txt" 2>&1 || true
}
# nfd: the proxy process's open descriptors.  hold N: N more idle
# connections from the guest, held until the holder is killed; waits until
# the proxy has accepted them.
nfd() { ls "/proc/$C/fd" | wc -l; }
HOLDERS=
hold() {
	local want=$(($(nfd) + $1))
	ip netns exec "$ns" python3 -c '
import socket, sys, time
s = [socket.create_connection(("10.77.0.1", 3128)) for _ in range(int(sys.argv[1]))]
time.sleep(600)' "$1" &
	HOLDERS="$HOLDERS $!"
	KSB_PIDS="$KSB_PIDS $!"
	for _ in $(seq 1 100); do [ "$(nfd)" -ge "$want" ] && return 0; sleep 0.05; done
	return 1
}

ksb_say "out of descriptors (before any tunnel: no pooled pipe)"
ksb_check "the proxy's limit is $FDMAX" \
	'grep -q "^Max open files *$FDMAX *$FDMAX" "/proc/$C/limits"'
# Two left: the guest's socket and the upstream one, no pipe.
ksb_check "idle connections hold all descriptors but two" 'hold $((FDMAX - $(nfd) - 2))'
out=$(get allowed.test)
ksb_check "a tunnel without relay pipes: '${out:0:60}'" '[ "$out" = "$ORIGIN_BODY" ]'
# Once the tunnel's two descriptors are closed, two idle connections more.
for _ in $(seq 1 100); do [ "$(nfd)" -le $((FDMAX - 2)) ] && break; sleep 0.05; done
ksb_check "two more idle connections: none left" 'hold 2 && [ "$(nfd)" = "$FDMAX" ]'
ip netns exec "$ns" timeout 30 curl -sS --max-time 20 --proxy http://10.77.0.1:3128 \
	--cacert "$T/pki/ca.pem" https://allowed.test/index.txt > "$T/paused" 2>&1 &
CURL=$!
ksb_check "accept refused (EMFILE) and paused" \
	'for _ in $(seq 1 50); do grep -q "accept: Too many open files" "$T/gatewayd.log" && break; sleep 0.1; done; grep -q "accept: Too many open files" "$T/gatewayd.log"'
kill $HOLDERS
wait $CURL || true
ksb_check "resumed once descriptors are free: '$(head -c 60 "$T/paused")'" \
	'[ "$(cat "$T/paused")" = "$ORIGIN_BODY" ]'

ksb_say "a resolver that never answers"
ksb_check "slow.test fails, the proxy answers" '[ "$(get slow.test)" != "$ORIGIN_BODY" ]'
ksb_check "slow.test fails again (retry)" '[ "$(get slow.test)" != "$ORIGIN_BODY" ]'
SLOW="host = 'slow.test' AND decision = 'deny'"
ksb_check "their deny rows" 'ksb_rows_ge 2 "$SLOW"'
ksb_check "names in the hosts file still served" '[ "$(get allowed.test)" = "$ORIGIN_BODY" ]'

ksb_say "a policy reload (the memfd from the parent)"
ksb_check "denied.test denied before" 'get denied.test | grep -q 403'
sed -i 's/^    allow slow.test$/    allow slow.test\n    allow denied.test/' "$T/policy.d/test.policy"
kill -HUP "$GWPID"
ksb_check "reloaded" \
	'for _ in $(seq 1 50); do grep -q "policy reloaded" "$T/gatewayd.log" && break; sleep 0.1; done; grep -q "policy reloaded" "$T/gatewayd.log"'
ksb_check "denied.test served after it" '[ "$(get denied.test)" = "$ORIGIN_BODY" ]'

ksb_say "the same proxy process throughout"
ksb_check "never restarted" '[ "$(pgrep -P "$GWPID" -x ksb-proxy)" = "$C" ] && ! grep -q "restarting" "$T/gatewayd.log"'
ksb_check "still filtered" '[ "$(field "$C" Seccomp)" = 2 ]'
ksb_check "no refusal logged outside the selftest" \
	'! grep -v "proxy selftest:" "$T/gatewayd.log" | grep -q "$EPERM\|seccomp"'

ksb_say "too few descriptors: a clear refusal at start"
( ulimit -n 32; exec ip netns exec "$GW" "$KSB_BUILDDIR/ksb-gatewayd" -d \
	-f "$T/ksb.conf" ) > "$T/lowfd.log" 2>&1 && lowrc=0 || lowrc=$?
ksb_check "ksb-gatewayd exits 1 with RLIMIT_NOFILE 32" '[ "$lowrc" = 1 ]'
ksb_check "and says why" 'grep -q "RLIMIT_NOFILE is 32: at least 64 descriptors are needed" "$T/lowfd.log"'
ksb_check "the running gateway is untouched" '[ "$(get allowed.test)" = "$ORIGIN_BODY" ]'

echo "# $pass passed, $fails failed"
[ "$fails" = 0 ]
