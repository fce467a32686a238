#!/bin/bash
# contrib/deb-build.sh [OUTDIR]: build the Debian package from this
# checkout's tracked files (their working-tree content) and print the
# .deb's path.  Cached: the .deb of the same files (a SHA-256 of the tar
# of the tracked files but the tests, which the package does not hold
# and this build does not run) is kept in OUTDIR (default /var/cache/ksb/deb) and
# printed again without a build, so that tests/e2e/systemd.sh and a rerun
# pay for one build.  DEB_BUILD_OPTIONS=nocheck (the unit tests run
# elsewhere); the build log is OUTDIR/build.log.  Exit 1 with the log's
# tail on a failed build.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-/var/cache/ksb/deb}
for t in dpkg-buildpackage dh git; do
	command -v "$t" >/dev/null || {
		echo "deb-build: needs $t (contrib/bootstrap.sh installs dpkg-dev debhelper git)" >&2
		exit 1
	}
done
ver=$(sed -n '1s/^ksb (\([^)]*\)).*/\1/p' debian/changelog)
key=$(git ls-files -z -- . ':!tests' ':!.ci' | tar --null -T - --sort=name --mtime=@0 --owner=0 \
	--group=0 --numeric-owner -cf - | sha256sum | cut -c1-16)
mkdir -p "$out"
exec {lk}> "$out/.lock"
flock "$lk"
deb=$out/ksb_${ver}_$key.deb
if [ -s "$deb" ]; then
	echo "$deb"
	exit 0
fi
W=$(mktemp -d /var/tmp/ksb-debbuild.XXXXXX)
trap 'rm -rf --one-file-system "$W"' EXIT
mkdir -p "$W/ksb-$ver"
git ls-files -z | tar --null -T - -cf - | tar -xf - -C "$W/ksb-$ver"
(cd "$W/ksb-$ver" && DEB_BUILD_OPTIONS=nocheck dpkg-buildpackage -us -uc -b \
	-j"$(nproc)") > "$out/build.log" 2>&1 || {
	tail -n 40 "$out/build.log" >&2
	exit 1
}
# One .deb kept: the older ones are another checkout's.
rm -f "$out"/ksb_*.deb
cp "$W"/ksb_"$ver"_*.deb "$deb.tmp"
mv "$deb.tmp" "$deb"
echo "$deb"
