#!/bin/sh
# contrib/distcheck.sh: the release tarball is complete.  In a configured
# git checkout: `make dist' must carry every tracked file (a file missing
# from EXTRA_DIST or a _SOURCES list is named), then `make distcheck-unit'
# builds the tarball in a read-only source tree, runs its unit tests,
# installs and uninstalls it.  No root needed; CI runs it (.ci/run).
set -eu
cd "$(dirname "$0")/.."
[ -f Makefile ] || { echo "distcheck: run ./configure first" >&2; exit 1; }
make -s dist >/dev/null
tarball=$(ls -t ksb-*.tar.gz | head -n 1)
top=${tarball%.tar.gz}
missing=$(git ls-files | grep -vx '\.gitignore' | sort |
	comm -23 - "$(tar tzf "$tarball" | sed "s|^$top/||" | sort > .dist.lst &&
		echo .dist.lst)")
rm -f .dist.lst
if [ -n "$missing" ]; then
	echo "distcheck: tracked files missing from $tarball (add them to Makefile.am):" >&2
	echo "$missing" | sed 's/^/  /' >&2
	exit 1
fi
echo "distcheck: $tarball carries all $(git ls-files | wc -l) tracked files"
make -s -j2 distcheck-unit
