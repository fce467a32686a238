#!/bin/bash
# The policy digest names files canonically: however the configuration's
# path (and so its relative `policy =' glob) is spelled, `ksbctl policy
# check' reports the digest the gateway records.  No root, no network.
set -eu
B=${KSB_BUILDDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
mkdir -p "$T/etc/policy.d" "$T/other"
printf 'profile a {\n    allow x.example.com\n}\n' > "$T/etc/policy.d/a.policy"
printf 'policy = policy.d/*.policy\n' > "$T/etc/gw.conf"
ln -s "$T/etc" "$T/link"
d1=$(cd "$T/etc" && "$B/ksbctl/ksbctl" -f gw.conf policy check | sed -n 's/^  digest //p')
d2=$("$B/ksbctl/ksbctl" -f "$T/etc/gw.conf" policy check | sed -n 's/^  digest //p')
d3=$(cd "$T/other" && "$B/ksbctl/ksbctl" -f ../etc/gw.conf policy check | sed -n 's/^  digest //p')
d4=$("$B/ksbctl/ksbctl" -f "$T/link/gw.conf" policy check | sed -n 's/^  digest //p')
echo "# $d1 $d2 $d3 $d4"
if [ -n "$d1" ] && [ "$d1" = "$d2" ] && [ "$d1" = "$d3" ] && [ "$d1" = "$d4" ]; then
	echo "ok - one digest for four spellings of the configuration path"
	echo "# 1 passed, 0 failed"
else
	echo "not ok - digests differ by path spelling"
	echo "# 0 passed, 1 failed"
	exit 1
fi
