#!/bin/bash
# credswap.sh: the credential swap against real shapes of secrets and
# requests (issue 28).  A real ksb-gatewayd in its own namespace, a fake
# guest holding a lease (tests/integration/ctlhold), a TLS origin of its
# own (cred_reflect.py) that records every request and compares the exact
# field it received.  Checks:
#  - the swap matrix: header, bearer and basic forms x real formats of
#    keys and tokens and the lengths 1..8192 (cred_values.py) x
#    placeholders of 46, 49 and 78 bytes: the origin received exactly the
#    field the declared form says, byte for byte.
set -eu
. "$(dirname "$0")/../lib.sh"

ksb_need_root
ksb_need python3
HOLD=$KSB_BUILDDIR/tests/integration/ctlhold
ORIGIN=$KSB_SRCDIR/tests/integration/cred_reflect.py
[ -x "$HOLD" ] || ksb_fail "$HOLD not built (make check builds it)"
ksb_env
pass=0 fails=0

openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
	-keyout "$T/pki/swap.key" -out "$T/pki/swap.csr" -subj "/CN=swap.test" \
	>/dev/null 2>&1
printf 'subjectAltName=DNS:*.swap.test\n' > "$T/pki/swap.ext"
openssl x509 -req -in "$T/pki/swap.csr" -CA "$T/pki/ca.pem" \
	-CAkey "$T/pki/ca.key" -CAcreateserial -days 2 \
	-extfile "$T/pki/swap.ext" -out "$T/pki/swap.pem" >/dev/null 2>&1
SEED=${KSB_TEST_SEED:-$RANDOM}
echo "# values from seed $SEED (KSB_TEST_SEED=$SEED to repeat)"
umask 077
python3 "$KSB_SRCDIR/tests/integration/cred_values.py" "$T/c" "$SEED" \
	> "$T/policy.d/creds.policy"
umask 022
chmod 755 "$T/c" "$T/c/expect"
chmod 644 "$T/c/expect"/*
NAMES=$(ls "$T/c/v")
ip -n "$OR" addr add 10.78.0.6/24 dev ko1
ip netns exec "$OR" python3 "$ORIGIN" 10.78.0.6 443 "$T/pki/swap.pem" \
	"$T/pki/swap.key" "$T/c/expect" "$T/origin.log" > "$T/origin.err" 2>&1 &
KSB_PIDS="$KSB_PIDS $!"
ksb_wait_port "$OR" 10.78.0.6 443
for n in $NAMES; do echo "10.78.0.6 $n.swap.test"; done >> "$T/hosts"
echo "upstream-ca-file = $T/pki/ca.pem" >> "$T/ksb.conf"
# A lease carries at most 8 placeholders (CTL_LEASE_CREDS_MAX): the
# credentials go 7 to a profile, a fake guest per profile.
set -- $NAMES
np=0
while [ $# -gt 0 ]; do
	np=$((np + 1))
	echo "profile p$np {"
	echo "    allow *.swap.test"
	echo "    allow-address 10.78.0.0/24"
	for i in 1 2 3 4 5 6 7; do
		[ $# -gt 0 ] || break
		echo "    credential $1"
		echo "$1 $np" >> "$T/guest-of"
		shift
	done
	echo "}"
done > "$T/policy.d/test.policy"
ksb_gateway
for i in $(seq "$np"); do ksb_fake_guest "$i" "g$i" "p$i"; done
CA=$T/state/ca/ca.crt
ph() { # NAME GUEST
	sed -n "s|^cred=$1/[^/]*/||p" "$T/lease$2"; }
gcurl() { # GUEST ARGS...
	local g=$1
	shift
	ip netns exec "ksbt-$$-g$g" curl -sS --max-time 20 --proxy http://10.77.0.1:3128 \
		--cacert "$CA" "$@"
}

ksb_say "the swap matrix"
nph=0 bad=
while read -r n g; do
	p=$(ph "$n" "$g")
	[ -n "$p" ] || { bad="$bad $n(no placeholder)"; continue; }
	nph=$((nph + 1))
	case $n in
	header-*) a=(-H "x-api-key: $p") ;;
	bearer-*) a=(-H "Authorization: Bearer $p") ;;
	basic-*) a=(-u "agent:$p") ;;
	esac
	out=$(gcurl "$g" "${a[@]}" "https://$n.swap.test/check/$n" 2>&1) || true
	case $out in
	*'"match": true'*) ;;
	*) bad="$bad $n($(($(wc -c < "$T/c/v/$n") - 1)) bytes, placeholder ${#p}: $out)" ;;
	esac
done < "$T/guest-of"
echo "# $nph credentials tried${bad:+; failed:$bad}"
ksb_check "every form x value x placeholder length: the exact field arrived" \
	'[ -z "$bad" ] && [ "$nph" = "$(echo "$NAMES" | wc -w)" ] && [ "$nph" -ge 42 ]'
ksb_check "each swap has its audit row with the credential" \
	'ksb_sql_is "$nph" "SELECT count(DISTINCT credential) FROM requests WHERE path LIKE \"/check/%\" AND status = 200 AND reason IS NULL"'
ksb_check "the gateway log never shows a real value" \
	'! grep -qF -f <(sed -n "/^.\{8,\}$/p" "$T"/c/v/*) "$T/gatewayd.log"'

[ "$fails" = 0 ]
