#!/bin/bash
# static.sh: static analysis of the product code, clean.  cppcheck
# (warnings, portability; std and posix libraries corrected by static.cfg)
# over every directory of the programs and their libraries, two jobs; any
# finding fails, except those in static.supp, each with its reason.  No
# root, no build needed.  Needs cppcheck (Debian: cppcheck).
set -eu
S=${KSB_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
. "$S/tests/lib.sh"
ksb_need cppcheck
work=$(mktemp -d "${TMPDIR:-/tmp}/ksb-static-XXXXXX")
trap 'rm -rf "$work"' EXIT

# The suppressions: every line an ID and a file glob, and a reason.
bad=$(grep -vE '^(#|$)' "$S/tests/unit/static.supp" |
	grep -vE '^[A-Za-z][A-Za-z0-9_]*:[^ #]*/[^ #]* # .{10,}$' || :)
if [ -n "$bad" ]; then
	echo "not ok 1 - static.supp: a line without ID:FILE-GLOB # reason:"
	echo "$bad" | sed 's/^/# /'
	echo "1..1"
	exit 1
fi
sed -n 's/^\([A-Za-z][^ #]*\) # .*/\1/p' "$S/tests/unit/static.supp" >"$work/supp"

# Absolute paths, so that the */ globs of static.supp match.
rc=0
cppcheck -q -j2 --std=c11 -D_GNU_SOURCE -I"$S" \
	--enable=warning,portability --library=posix \
	--library="$S/tests/unit/static.cfg" \
	--suppressions-list="$work/supp" --error-exitcode=1 \
	--template='{file}:{line}: {severity}: {message} [{id}]' \
	"$S/common" "$S/proto" "$S/audit" "$S/policy" "$S/mirror" \
	"$S/gateway" "$S/vmrunner" "$S/ksbctl" "$S/guest" \
	>"$work/out" 2>&1 || rc=$?
grep -E '^/.*: [a-z]+: ' "$work/out" | sed "s|^$S/||" >"$work/findings" || :
if [ "$rc" = 0 ] && [ ! -s "$work/findings" ]; then
	echo "ok 1 - cppcheck: no finding in the product code"
else
	echo "not ok 1 - cppcheck: $(wc -l <"$work/findings") findings (fix them, or add to static.supp with a reason)"
	sed 's/^/# /' "$work/out"
	echo "1..1"
	exit 1
fi
echo "1..1"
