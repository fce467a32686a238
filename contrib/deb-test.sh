#!/bin/bash
# contrib/deb-test.sh: build the Debian package from this checkout's tracked
# files (dpkg-buildpackage -us -uc -b), run lintian (any E: fails), and try
# the .deb in a fresh Debian 12 root made by debootstrap: install it with
# dpkg, check the user, group, modes and conffiles, `ksb-gatewayd -n' and
# `ksbctl policy check'; start the gateway (in a network namespace of its
# own), remove the package: no bridge, table or ksb process left; purge:
# no state, user or group left, nothing asked.  Root.
#
# The root is cached in /var/cache/ksb/debroot (minbase plus the package's
# Depends and the witnesses iproute2 and nftables; rebuilt when older than
# 7 days): each run uses a throwaway copy of it (overlayfs), so the only
# network use after the first run is none.  KSB_DEBROOT_MIRROR sets the
# Debian mirror (default: the first of this machine's apt sources).
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "deb-test: needs root (debootstrap, chroot)" >&2; exit 1; }
for t in dpkg-buildpackage dh lintian debootstrap unshare; do
	command -v "$t" >/dev/null || {
		echo "deb-test: needs $t (contrib/bootstrap.sh installs dpkg-dev debhelper lintian debootstrap)" >&2
		exit 1
	}
done
W=$(mktemp -d /var/tmp/ksb-deb.XXXXXX)
cleanup() {
	mountpoint -q "$W/root" && umount -l "$W/root"
	rm -rf --one-file-system "$W"
}
trap cleanup EXIT

# ---- build and lintian ------------------------------------------------------
ver=$(sed -n '1s/^ksb (\([^)]*\)).*/\1/p' debian/changelog)
mkdir -p "$W/src/ksb-$ver"
git ls-files -z | tar --null -T - -cf - | tar -xf - -C "$W/src/ksb-$ver"
echo "deb-test: dpkg-buildpackage (log $W/build.log)"
(cd "$W/src/ksb-$ver" && dpkg-buildpackage -us -uc -b -j"$(nproc)") \
	> "$W/build.log" 2>&1 || { tail -n 40 "$W/build.log"; exit 1; }
deb=$(ls "$W"/src/ksb_"$ver"_*.deb)
echo "deb-test: built ${deb##*/} ($(stat -c %s "$deb") bytes)"
lintian "$W"/src/ksb_"$ver"_*.changes 2>&1 | grep -v 'running with root' |
	tee "$W/lintian.out" || true
if grep -q '^E:' "$W/lintian.out"; then
	echo "deb-test: lintian reports errors" >&2
	exit 1
fi
echo "deb-test: lintian: $(grep -c '^E:' "$W/lintian.out") errors, $(grep -c '^W:' "$W/lintian.out") warnings"

# ---- the cached root ----------------------------------------------------------
cache=/var/cache/ksb/debroot
# The mirror: the first Debian one of this machine's apt sources.
mirror=${KSB_DEBROOT_MIRROR:-$(cat /etc/apt/sources.list \
	/etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources 2>/dev/null |
	sed -n 's/^deb \(\[[^]]*\] \)\{0,1\}\(http[^ ]*\/debian\) .*/\2/p
		s/^URIs: *\(http[^ ]*\/debian\)$/\1/p' | head -n 1 || true)}
mirror=${mirror:-http://deb.debian.org/debian}
deps=$(dpkg-deb -f "$deb" Depends | tr ',' '\n' | sed 's/(.*//; s/|.*//; s/ //g' |
	grep -v '^$' | tr '\n' ',')
if [ ! -f "$cache/.ksb-ready" ] || [ -n "$(find "$cache/.ksb-ready" -mtime +7)" ] ||
	[ "$(cat "$cache/.ksb-ready")" != "$deps" ]; then
	echo "deb-test: debootstrap bookworm from $mirror into $cache"
	rm -rf --one-file-system "$cache"
	mkdir -p "$cache"
	debootstrap --variant=minbase --include="${deps}iproute2,nftables" \
		bookworm "$cache" "$mirror" > "$W/debootstrap.log" 2>&1 ||
		{ tail -n 20 "$W/debootstrap.log"; exit 1; }
	rm -rf "$cache"/var/cache/apt/archives/*.deb
	echo "$deps" > "$cache/.ksb-ready"
fi

# ---- install, check, remove, purge in a throwaway copy ----------------------------
mkdir -p "$W/upper" "$W/work" "$W/root"
mount -t overlay overlay -o "lowerdir=$cache,upperdir=$W/upper,workdir=$W/work" "$W/root"
cp "$deb" "$W/root/tmp/ksb.deb"
cp contrib/deb-test-inside.sh "$W/root/tmp/inside.sh"
# Own mount, pid and network namespaces: the gateway's bridge and tables
# are made (and must be gone) there, never on this host.
unshare --mount --pid --net --fork --mount-proc="$W/root/proc" \
	env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive \
	chroot "$W/root" /bin/bash /tmp/inside.sh < /dev/null
