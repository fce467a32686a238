#!/bin/sh
# contrib/bootstrap.sh: install what ksb needs on Debian 12 (as root), fetch
# a guest kernel into /var/cache/ksb/kernel and build ksb in this tree.
# Idempotent: re-running skips what is already there.
set -eu
cd "$(dirname "$0")/.."

# node-undici, python3-requests: real clients of tests/integration/credclients.sh.
PKGS="build-essential autoconf automake pkg-config libevent-dev libssl-dev
libnftnl-dev libmnl-dev libgit2-dev libfuse3-dev libsqlite3-dev libseccomp-dev libjson-c-dev libcurl4-openssl-dev libpng-dev libnghttp2-dev
libncurses-dev
qemu-system-x86 qemu-utils
nftables iproute2 openssl curl sqlite3 ca-certificates python3 python3-websockets kmod cpio bc
git clang libclang-rt-14-dev busybox-static tmux e2fsprogs util-linux
make vim-tiny clang-format cppcheck procps netbase file xvfb x11-apps systemd man-db
dpkg-dev debhelper lintian debootstrap nix-bin systemd-container slurm-wlm munge
slurmdbd slurm-wlm-mysql-plugin mariadb-server
node-undici python3-requests"
# Node.js and npm (the guest's developer tools; npm installs the pinned
# agents for the tests): Debian's, unless a node and npm are already there
# (another vendor's nodejs package ships npm and conflicts with Debian's).
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
	PKGS="$PKGS nodejs npm"
fi

if [ "$(id -u)" != 0 ]; then
	echo "bootstrap: run as root (apt-get, /var/cache/ksb)" >&2
	exit 1
fi
missing=
for p in $PKGS; do
	dpkg-query -W -f '${Status}' "$p" 2>/dev/null | grep -q 'ok installed' ||
		missing="$missing $p"
done
if [ -n "$missing" ]; then
	echo "bootstrap: installing$missing"
	echo "bootstrap: (apt-get, quietly: a few minutes on a new machine)"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive DEBCONF_NOWARNINGS=yes \
		apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi
contrib/fetch-kernel.sh /var/cache/ksb/kernel >/dev/null
if [ ! -x configure ]; then
	autoreconf -fi
fi
if [ ! -f Makefile ]; then
	./configure --sysconfdir=/etc --localstatedir=/var -q
fi
make -j"$(nproc)" -s
