#!/bin/bash
# rulecheck.sh: the gateway checks its own nftables rules (issue 29).
# Rules deleted, flushed or added behind its back (nft from the test) are
# read back over netlink and restored within nft-check-interval (2 s
# here; awaited by polling nft list, bounded), at a reload at once and
# at a REGISTER; a registered guest stays in the sets; each restore is
# one log line and one selftests record (instance "(gateway)", failed
# nft-drift:rules, action none).  A healthy ruleset is never "restored".  Drift
# it cannot restore (the table held by another netlink socket) sets the
# bridge down: the guest no longer reaches the proxy, a new REGISTER is
# refused, a record with action stopped.
set -eu
. "$(dirname "$0")/../lib.sh"

ksb_need_root
ksb_need nft sqlite3
HOLD=$KSB_BUILDDIR/tests/integration/ctlhold
[ -x "$HOLD" ] || ksb_fail "$HOLD not built (make check builds it)"
KSB_TEST_CONF="nft-check-interval = 2"
ksb_env
ksb_gateway

fails=0
gwns() { ip netns exec "$GW" "$@"; }
# rules TABLE CHAIN: the chain's rules (handles and counters aside).
rules() { gwns nft list chain "$1" ksb "$2" | grep -vE '^\s*(table|chain|type|\}|$)' | sed 's/counter packets [0-9]* bytes [0-9]*/counter/'; }
snapshot() { for c in "inet prerouting" "inet input" "inet forward" "inet output" "bridge prerouting" "bridge forward"; do rules $c; done; }
whole() { [ "$(snapshot)" = "$WANT" ]; }
drifts_ge() { [ "$(drifts)" -ge "$DRIFTS" ]; }
drifts() { ksb_sql "SELECT count(*) FROM selftests WHERE instance = '(gateway)' AND trigger = 'rules' AND failed = 'nft-drift:rules' AND action = 'none'"; }
# restored N WHAT: within 3 intervals the rules are whole again and N
# drift records exist.
restored() {
	ksb_until 6 whole || true
	ksb_check "$2: the rules are whole again" whole
	DRIFTS=$1
	ksb_until 5 drifts_ge || true
	ksb_check "$2: a drift record ($(drifts))" drifts_ge
}

WANT=$(snapshot)
ksb_check "the rules as installed ($(echo "$WANT" | wc -l) lines)" '[ "$(echo "$WANT" | wc -l)" -gt 20 ]'

ksb_say "a healthy ruleset is left alone over three intervals"
t0=$SECONDS
h0=$(gwns nft -a list chain inet ksb prerouting | grep -o 'handle [0-9]*' | tail -n 1)
# Three intervals: the only wait here that is a duration by design.
sleep 6
ksb_check "no drift found" '! grep -q "nftables check" "$T/gatewayd.log"'
ksb_check "the rules were not replaced (same handles)" \
	'[ "$(gwns nft -a list chain inet ksb prerouting | grep -o "handle [0-9]*" | tail -n 1)" = "$h0" ]'

ksb_say "nft flush chain: restored within the interval"
gwns nft flush chain inet ksb prerouting
t0=$SECONDS
restored 1 "flushed chain"
ksb_check "restored within 2 intervals ($((SECONDS - t0)) s)" '[ $((SECONDS - t0)) -le 5 ]'
ksb_check "the log says what and that it was restored" \
	'grep -q "nftables check (periodic): rules drift: chain inet prerouting: a rule is missing: restored" "$T/gatewayd.log"'

ksb_say "nft delete rule: restored"
h=$(gwns nft -a list chain bridge ksb forward | grep -v 'chain ' | sed -n 's/.*# handle \([0-9]*\)$/\1/p' | head -n 1)
gwns nft delete rule bridge ksb forward handle "$h"
restored 2 "deleted rule"

ksb_say "a rule added (a hole): removed"
gwns nft insert rule inet ksb prerouting tcp dport 22 accept
restored 3 "added rule"
ksb_check "the hole is gone" '! gwns nft list chain inet ksb prerouting | grep -q "tcp dport 22 accept"'

ksb_say "a REGISTER restores, and the guest stays in the sets after a restore"
gwns nft flush table inet ksb
ksb_fake_guest 1 g1
restored 4 "register"
ksb_check "the guest is in the inet set" 'gwns nft list set inet ksb guests | grep -q "10.77.0."'
gwns nft flush chain bridge ksb prerouting
restored 5 "after the guest"
ksb_check "the guest is still in the inet set" 'gwns nft list set inet ksb guests | grep -q "10.77.0."'
ksb_check "and in the bridge set" 'gwns nft list set bridge ksb guests | grep -q "10.77.0."'

ksb_say "a reload restores before it answers"
gwns nft flush table bridge ksb
"$KSB_BUILDDIR/ksbctl/ksbctl" -f "$T/ksb.conf" reload >/dev/null
ksb_check "whole as soon as the reload answered" whole
DRIFTS=6
ksb_until 5 drifts_ge || true
ksb_check "six drift records ($(drifts))" drifts_ge
ksb_check "audit verify: the chain with the records is intact" \
	'"$KSB_BUILDDIR/ksbctl/ksbctl" -f "$T/ksb.conf" audit verify >/dev/null'
ksb_check "the egress was never stopped" '! grep -q "set down" "$T/gatewayd.log"'
ksb_check "at most 5 restored lines a minute ($(grep -c "rules drift: .*: restored" "$T/gatewayd.log"))" \
	'[ "$(grep -c "rules drift: .*: restored" "$T/gatewayd.log")" -le 5 ]'
ksb_check "then one line saying the rest are not logged" \
	'[ "$(grep -c "further rules drift not logged" "$T/gatewayd.log")" = 1 ]'

ksb_say "drift that cannot be restored: the bridge goes down, egress stops"
# The guest reaches the proxy before.
reach() { ip netns exec "ksbt-$$-g1" timeout 3 bash -c 'exec 3<>/dev/tcp/10.77.0.1/3128' 2>/dev/null; }
ksb_check "the guest reaches the proxy" reach
# The table taken by another netlink socket (nft -i, kept open: flags
# owner, kernel >= 5.12): the gateway may neither replace nor delete it.
gwns nft delete table inet ksb
mkfifo "$T/nfti"
gwns nft -i < "$T/nfti" > "$T/nfti.log" 2>&1 &
KSB_PIDS="$KSB_PIDS $!"
exec {NFTI}>"$T/nfti"
echo 'add table inet ksb { flags owner; }' >&$NFTI
bridge_down() { ! gwns ip link show ksb0 | grep -q "[<,]UP[,>]"; }
ksb_until 8 bridge_down || true
ksb_check "the bridge is down" bridge_down
ksb_check "the log says why, in one line" \
	'grep -q "could not be restored (.*): bridge ksb0 set down, every guest.s egress stops until ksb-gatewayd restarts" "$T/gatewayd.log"'
ksb_check "a record says egress stopped" \
	'ksb_sql_is 1 "SELECT count(*) FROM selftests WHERE instance = '"'(gateway)'"' AND failed LIKE '"'nft-drift:%'"' AND action = '"'stopped'"'"'
ksb_check "the guest no longer reaches the proxy" '! reach'
mkfifo "$T/hold9"
gwns "$HOLD" "$T/gateway.sock" g9 default < "$T/hold9" > "$T/lease9" 2>&1 &
KSB_PIDS="$KSB_PIDS $!"
exec {H9}>"$T/hold9"
ksb_until 10 test -s "$T/lease9" || true
ksb_check "a new REGISTER is refused, saying why ($(head -c 200 "$T/lease9"))" \
	'grep -q "nftables rules are not ksb.s and could not be restored" "$T/lease9"'
exec {H9}>&- {NFTI}>&-

[ "$fails" = 0 ] || { tail -n 30 "$T/gatewayd.log"; ksb_fail "$fails check(s) failed"; }
echo "PASS"
