#!/bin/bash
# mirror.sh: mirror creation time for a generated ~1 GiB repo vs a tiny
# one (not in make check: it writes ~1 GiB to $TMPDIR and takes a minute).
# The repos are made with the git CLI (a test witness); the mirror by
# tests/integration/mirrordrv, i.e. mirror_create() as ksb-run calls it.
#   tests/bench/mirror.sh [MiB]      (default 1024)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
builddir=${KSB_BUILDDIR:-$(cd "$here/../.." && pwd)}
drv=$builddir/tests/integration/mirrordrv
mib=${1:-1024}
T=$(mktemp -d "${TMPDIR:-/tmp}/ksbb-mirror.XXXXXX")
trap 'rm -rf "$T"' EXIT
export GIT_AUTHOR_NAME=b GIT_AUTHOR_EMAIL=b@b GIT_COMMITTER_NAME=b GIT_COMMITTER_EMAIL=b@b

git init -q "$T/tiny"
echo x > "$T/tiny/x"
git -C "$T/tiny" add x && git -C "$T/tiny" commit -qm x

git init -q "$T/big"
t0=$(date +%s.%N)
for i in $(seq 1 "$((mib / 4))"); do
	head -c $((4 << 20)) /dev/urandom > "$T/big/f$i"
done
git -C "$T/big" -c core.compression=0 -c core.looseCompression=0 add .
git -C "$T/big" commit -qm big
t1=$(date +%s.%N)
size=$(du -sm "$T/big/.git" | cut -f1)
echo "generated: $size MiB in $T/big/.git ($(echo "$t1 - $t0" | bc) s)"

measure() {	# repo label
	local best=999 i t0 t1 d
	for i in 1 2 3 4 5; do
		rm -rf "$T/inst"; mkdir "$T/inst"
		t0=$(date +%s.%N)
		"$drv" create "$1" "$T/inst" bench >/dev/null
		t1=$(date +%s.%N)
		d=$(echo "$t1 - $t0" | bc)
		best=$(echo "if ($d < $best) $d else $best" | bc)
	done
	printf '%-28s best of 5: %.4f s\n' "$2" "$best"
}
measure "$T/tiny" "mirror of a 1-file repo"
measure "$T/big" "mirror of a $size MiB repo"
