#!/bin/sh
# contrib/test.sh: set up (contrib/bootstrap.sh) and run the whole test
# suite: unit, fuzz (bounded), integration (netns) and e2e (QEMU guest).
set -eu
cd "$(dirname "$0")/.."
contrib/bootstrap.sh
KSB_KERNEL=$(ls /var/cache/ksb/kernel/boot/vmlinuz-* | head -n 1)
KSB_MODULES=/var/cache/ksb/kernel/lib/modules/${KSB_KERNEL##*/vmlinuz-}
export KSB_KERNEL KSB_MODULES
rc=0
make -j2 check || rc=$?
# One summary line for people and CI.
if [ -f test-suite.log ]; then
	pass=$(grep -h '^:test-result: PASS' tests/*/*.trs tests/*/*/*.trs 2>/dev/null | wc -l)
	fail=$(grep -hE '^:test-result: (FAIL|ERROR|XPASS)' tests/*/*.trs tests/*/*/*.trs 2>/dev/null | wc -l)
	skip=$(grep -h '^:test-result: SKIP' tests/*/*.trs tests/*/*/*.trs 2>/dev/null | wc -l)
	[ "$rc" = 0 ] || cat test-suite.log
	echo "$pass passed, $fail failed, $skip skipped"
fi
exit $rc
