#!/bin/sh
# contrib/test.sh: set up (contrib/bootstrap.sh) and run the whole test
# suite: unit, fuzz (bounded), integration (netns) and e2e (QEMU guest).
set -eu
cd "$(dirname "$0")/.."
contrib/bootstrap.sh
KSB_KERNEL=$(ls /var/cache/ksb/kernel/boot/vmlinuz-* | head -n 1)
KSB_MODULES=/var/cache/ksb/kernel/lib/modules/${KSB_KERNEL##*/vmlinuz-}
# After bootstrap.sh every tool a test needs is there: one missing fails
# its test (tests/lib.sh ksb_need) instead of skipping it.
KSB_NEED_STRICT=1
export KSB_KERNEL KSB_MODULES KSB_NEED_STRICT
rc=0
make -j2 check || rc=$?
# One summary line for people and CI.
if [ -f test-suite.log ]; then
	pass=$(grep -h '^:test-result: PASS' tests/*/*.trs tests/*/*/*.trs 2>/dev/null | wc -l)
	fail=$(grep -hE '^:test-result: (FAIL|ERROR|XPASS)' tests/*/*.trs tests/*/*/*.trs 2>/dev/null | wc -l)
	skip=$(grep -h '^:test-result: SKIP' tests/*/*.trs tests/*/*/*.trs 2>/dev/null | wc -l)
	[ "$rc" = 0 ] || cat test-suite.log
	# Why each skipped test skipped (its log's SKIP: line).
	for trs in $(grep -l '^:test-result: SKIP' tests/*/*.trs 2>/dev/null); do
		echo "skipped ${trs%.trs}: $(grep -h -m1 '^SKIP' "${trs%.trs}.log")"
	done
	echo "$pass passed, $fail failed, $skip skipped"
fi
exit $rc
