#!/bin/bash
# packages.sh: every tool a test asks for with ksb_need (tests/lib.sh) has
# a Debian package in ksb_pkg's table, and contrib/bootstrap.sh installs
# each package of that table (coreutils is Essential: always there).  So a
# fresh Debian 12 after bootstrap.sh has what the tests run, and a test
# without it names the package.  No root.
set -u
S=${KSB_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
. "$S/tests/lib.sh"
fails=0 n=0
check() {
	n=$((n + 1))
	if [ "$2" = 0 ]; then echo "ok $n - $1"; else echo "not ok $n - $1"; fails=$((fails + 1)); fi
}
pkgs=$(sed -n '/^PKGS="/,/"$/p' "$S/contrib/bootstrap.sh" | tr -d '"' |
	sed 's/^PKGS=//')
pkgs="$pkgs nodejs npm coreutils"	# (bootstrap.sh adds node when missing)
# The literal words after ksb_need in the tests (variables are skipped).
tools=$(grep -ho '^[[:space:]]*ksb_need [^#]*' "$S"/tests/*/*.sh "$S/tests/lib.sh" |
	sed 's/^[[:space:]]*ksb_need //' | tr ' \t' '\n\n' | grep -v '^\$\|^"\|^$' |
	sort -u)
check "the tests ask for tools with ksb_need ($(echo "$tools" | wc -l) names)" \
	"$([ "$(echo "$tools" | wc -l)" -ge 10 ]; echo $?)"
for t in $tools; do
	p=$(ksb_pkg "$t")
	check "$t: Debian package $p" "$([ "$p" != "?" ]; echo $?)"
done
for p in $(sed -n '/^ksb_pkg() {/,/^}/p' "$S/tests/lib.sh" |
	sed -n 's/.*) echo \([a-z0-9.+-]*\) ;;.*/\1/p' | sort -u); do
	in=1
	for q in $pkgs; do [ "$q" = "$p" ] && in=0; done
	check "contrib/bootstrap.sh installs $p" "$in"
done
# No test of contrib/test.sh skips on a missing tool by hand (`command -v
# X || ... SKIP`): ksb_need names the package, and fails under
# contrib/test.sh, where bootstrap.sh should have installed it.
hand=$(cd "$S" &&
    for f in tests/unit/*.sh tests/integration/*.sh tests/e2e/*.sh; do
	[ "$f" = tests/unit/packages.sh ] && continue
	awk -v f="$f" '/command -v/ { l = $0; n = FNR; getline nx
		if ((l nx) ~ /ksb_skip|SKIP|exit 77/) print f ":" n }' "$f"
done)
[ -z "$hand" ] || echo "# hand-made skips: $hand"
check "no test skips on a missing tool without ksb_need" \
	"$([ -z "$hand" ]; echo $?)"
# A missing tool: skipped (77) with its package named; failed under
# KSB_NEED_STRICT (contrib/test.sh).
out=$(PATH=/nonexistent; unset KSB_NEED_STRICT; ksb_need pgrep 2>&1); rc=$?
check "a missing pgrep skips naming procps" \
	"$([ $rc = 77 ] && echo "$out" | grep -q 'Debian package procps'; echo $?)"
out=$(PATH=/nonexistent KSB_NEED_STRICT=1; ksb_need pgrep 2>&1); rc=$?
check "under KSB_NEED_STRICT it fails" \
	"$([ $rc = 1 ] && echo "$out" | grep -q 'procps'; echo $?)"
echo "1..$n"
[ "$fails" = 0 ]
