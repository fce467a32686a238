#!/bin/sh
# fetch-kernel.sh [DEST]: download Debian's linux-image-amd64 kernel (the
# versioned package it depends on) without installing it, extract it into
# DEST (default /var/cache/ksb/kernel) and run depmod there.  Idempotent:
# does nothing but print the paths when that version is already present.
# Also writes DEST/boot/vmlinux-VER, the uncompressed kernel (ELF with a PVH
# entry): QEMU boots it in ~2 s under TCG instead of ~7 s for the bzImage,
# and ksb-run prefers it when it sits next to vmlinuz-VER.
# Prints two lines: "kernel = PATH" and "modules-dir = PATH" (ksb.conf syntax).
set -eu

dest=${1:-/var/cache/ksb/kernel}
meta=${KSB_KERNEL_PACKAGE:-linux-image-amd64}

die() { echo "fetch-kernel.sh: $*" >&2; exit 1; }

for tool in apt-cache apt-get dpkg-deb depmod; do
	command -v "$tool" >/dev/null 2>&1 ||
	    [ -x "/sbin/$tool" ] || [ -x "/usr/sbin/$tool" ] ||
	    die "$tool not found (Debian/Ubuntu host with apt and kmod needed)"
done
PATH=$PATH:/usr/sbin:/sbin

# linux-image-amd64 depends on exactly one linux-image-<ver>-amd64.
pkg=$(apt-cache depends "$meta" 2>/dev/null |
    sed -n 's/^ *Depends: \(linux-image-[0-9][^ ]*\)$/\1/p' | head -n 1)
[ -n "$pkg" ] || die "cannot resolve $meta (run apt-get update?)"
ver=${pkg#linux-image-}
case $ver in
*[!A-Za-z0-9.+_-]*|'') die "unexpected package name: $pkg" ;;
esac

kernel=$dest/boot/vmlinuz-$ver
modules=$dest/lib/modules/$ver

# extract_vmlinux BZIMAGE OUT: find the compressed payload by its magic
# and keep the first one that decompresses to an ELF (the trick of the
# kernel's scripts/extract-vmlinux).
extract_vmlinux() {
	for m in '\3757zXZ\000:abcde:xz' '\037\213\000:xy:gzip' '(\265/\375:xxxx:zstd'; do
		magic=${m%%:*}; rest=${m#*:}; mark=${rest%%:*}; tool=${rest#*:}
		command -v "$tool" >/dev/null 2>&1 || continue
		for pos in $(tr "$magic\n$mark" "\n$mark=" < "$1" | grep -abo "^$mark"); do
			pos=${pos%%:*}
			tail -c "+$pos" "$1" | "$tool" -dc > "$2.tmp" 2>/dev/null || true
			if [ "$(head -c 4 "$2.tmp" | od -An -c | tr -d ' \n')" = '177ELF' ]; then
				mv "$2.tmp" "$2"
				return 0
			fi
		done
	done
	rm -f "$2.tmp"
	return 1
}

if [ -f "$kernel" ] && [ -f "$modules/modules.dep" ]; then
	if [ ! -f "$dest/boot/vmlinux-$ver" ]; then
		extract_vmlinux "$kernel" "$dest/boot/vmlinux-$ver" ||
		    echo "fetch-kernel.sh: could not extract vmlinux (slower boot)" >&2
	fi
	echo "kernel = $kernel"
	echo "modules-dir = $modules"
	exit 0
fi

mkdir -p "$dest"
tmp=$(mktemp -d "$dest/.fetch.XXXXXX")
chmod 755 "$tmp"	# apt-get download runs as _apt, and writes there
if id -u _apt >/dev/null 2>&1; then chown _apt "$tmp"; fi
trap 'rm -rf "$tmp"' EXIT INT TERM
(cd "$tmp" && apt-get download "$pkg" >&2) || die "apt-get download $pkg failed"
deb=$(ls "$tmp"/*.deb 2>/dev/null | head -n 1)
[ -n "$deb" ] || die "apt-get download produced no .deb"
dpkg-deb -x "$deb" "$tmp/root"
[ -f "$tmp/root/boot/vmlinuz-$ver" ] || die "$deb has no boot/vmlinuz-$ver"
depmod -b "$tmp/root" "$ver"

mkdir -p "$dest/boot" "$dest/lib/modules"
rm -rf "$modules"
mv "$tmp/root/lib/modules/$ver" "$modules"
for f in "$tmp/root/boot/"*"-$ver"; do
	mv "$f" "$dest/boot/"
done
extract_vmlinux "$kernel" "$dest/boot/vmlinux-$ver" ||
    echo "fetch-kernel.sh: could not extract vmlinux (slower boot)" >&2
echo "kernel = $kernel"
echo "modules-dir = $modules"
