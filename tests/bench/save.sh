#!/bin/sh
# tests/bench/save.sh [MIB...]: save, restore and fork of a live guest by
# memory size (default 512 1024), and the host memory of three forked
# children against three fresh guests (issue 34); save.py says how.  The
# guest is the ksb guest kernel with save_init.c as its init, because
# QEMU saves no ksb guest (9p, ksbctl(1) stop --save): these figures are
# what QEMU's save itself costs here.  Prints one JSON line per size.
# Needs QEMU, a C compiler with a static libc, python3 and the guest kernel
# (KSB_KERNEL, else the first of /var/cache/ksb/kernel/boot).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
kernel=${KSB_KERNEL:-$(ls /var/cache/ksb/kernel/boot/vmlinuz-* 2>/dev/null | head -n 1)}
[ -n "$kernel" ] && [ -r "$kernel" ] || { echo "save.sh: no guest kernel" >&2; exit 77; }
for t in qemu-system-x86_64 cc python3; do
	command -v "$t" > /dev/null || { echo "save.sh: no $t" >&2; exit 77; }
done
d=$(mktemp -d /tmp/ksb-save.XXXXXX)
trap 'rm -rf "$d"' EXIT
cc -O2 -static -o "$d/init" "$here/save_init.c"
python3 "$here/save.py" "$kernel" "$d/init" "$d" "$@"
