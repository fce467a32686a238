#!/bin/bash
# policy_reload.sh: end-to-end reload time of a running ksb-gatewayd for
# policies of 1k, 10k and 100k rules (or the sizes given): the `ms=' the
# gateway reports for RELOAD (read ksb.conf and the files, parse, validate,
# index, digest, swap, re-check every tunnel, free the old policy: the time
# its event loop is busy; best of 3) and the wall time of `ksbctl reload'.  Also prints the
# lookup figures of tests/bench/policy_bench.  Root (network namespaces);
# not part of `make check'.
#
#   tests/bench/policy_reload.sh [RULES...]
set -eu
. "$(dirname "$0")/../lib.sh"

ksb_need_root
ksb_need python3
BENCH=$KSB_BUILDDIR/tests/bench/policy_bench
[ -x "$BENCH" ] || ksb_fail "$BENCH not built (make tests/bench/policy_bench)"
sizes=${*:-1000 10000 100000}
ksb_env
# gen N: a policy of N rules (exact, wildcard, address), and `default'.
gen() {
	python3 - "$1" <<'EOF'
import sys
n = int(sys.argv[1])
print("profile big {")
for i in range(n // 2):
    print("    allow host%d.svc%d.example.com" % (i, i % 97))
for i in range(n // 4):
    print("    allow *.zone%d.example.net:443,8443" % i)
for i in range(n - n // 2 - n // 4):
    print("    allow-address 10.%d.%d.0/24:443" % ((i >> 8) & 255, i & 255))
print("}")
print("profile default extends big {\n    allow allowed.test\n"
      "    allow-address 10.78.0.0/24\n}")
EOF
}
ksb_gateway

printf '%8s %10s %14s %14s\n' rules bytes "gateway ms" "ksbctl ms"
for n in $sizes; do
	gen "$n" > "$T/policy.d/test.policy.new"
	mv "$T/policy.d/test.policy.new" "$T/policy.d/test.policy"
	best_g=; best_w=
	for _ in 1 2 3; do
		t0=$(date +%s%N)
		out=$("$KSB_BUILDDIR/ksbctl/ksbctl" -f "$T/ksb.conf" reload)
		t1=$(date +%s%N)
		g=$(echo "$out" | sed -n 's/.* ms=\([0-9]*\).*/\1/p')
		w=$(( (t1 - t0) / 1000000 ))
		[ -z "$best_g" ] || [ "$g" -lt "$best_g" ] && best_g=$g
		[ -z "$best_w" ] || [ "$w" -lt "$best_w" ] && best_w=$w
	done
	printf '%8s %10s %14s %14s\n' "$n" \
		"$(stat -c %s "$T/policy.d/test.policy")" "$best_g" "$best_w"
done
echo
echo "parse + index only, and lookup cost per decision (policy_bench):"
"$BENCH" $sizes
