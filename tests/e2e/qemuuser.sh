#!/bin/bash
# qemuuser.sh: QEMU never runs as root (issue 29).  ksb-run starts a real
# QEMU behind a real ksb-gatewayd; QEMU is a wrapper ($T/qemu) that notes
# its uid, capabilities and no_new_privs and swaps in the test's own tiny
# initramfs (busybox-static, the 9p modules from $KSB_MODULES/modules.dep,
# an /init script), then execs the real QEMU.  As ROOT in the guest, the
# init mounts the host /usr share (tag "usr", as ksb-guest-init does) and
# reads two files the test put under the host's /usr: one 0600 root (must
# fail: QEMU reads the share with its own user's rights) and one 0644
# beside it (must succeed).  While the guest runs, the host checks QEMU's
# process: uid not 0, no capabilities, no_new_privs, a seccomp filter
# (QEMU's -sandbox).  Needs root, QEMU, a guest kernel, busybox-static.
set -eu
. "$(dirname "$0")/../lib.sh"

ksb_need_root
QEMU=${KSB_QEMU:-qemu-system-x86_64}
ksb_need "$QEMU" cpio pgrep
ksb_need_built ksb-run ksb-guest-init ksb-gatewayd
BUSYBOX=${KSB_BUSYBOX:-/bin/busybox}
[ -x "$BUSYBOX" ] && ! ldd "$BUSYBOX" >/dev/null 2>&1 ||
	ksb_skip "needs a static busybox at $BUSYBOX: install the Debian package busybox-static"
ksb_kernel
ksb_env
REAL_QEMU=$(command -v "$QEMU")

# The host files, under the host /usr (shared read-only into every guest).
U=/usr/local/share/ksbt-qemuuser-$$
trap 'rc=$?; rm -rf "$U"; (exit $rc); ksb_cleanup' EXIT
mkdir -m 0755 -p "$U"
echo "KSBT-KEPT-$$" > "$U/kept"
chmod 0600 "$U/kept"
echo "KSBT-OPEN-$$" > "$U/open"
chmod 0644 "$U/open"

# ---- the guest's initramfs ---------------------------------------------------
R=$T/root
mkdir -p "$R/bin" "$R/proc" "$R/sys" "$R/dev" "$R/mnt" "$R/lib/modules"
cp "$BUSYBOX" "$R/bin/busybox"
mods=
for m in virtio_pci virtio_mmio 9pnet_virtio 9p; do
	line=$(grep -E "(^|/)$m\.ko(\.[a-z]+)?:" "$KSB_MODULES/modules.dep") ||
		ksb_skip "no $m in $KSB_MODULES/modules.dep"
	deps=${line#*:}
	for d in $(echo $deps | tr ' ' '\n' | tac) "${line%%:*}"; do
		case " $mods " in *" $d "*) ;; *) mods="$mods $d" ;; esac
	done
done
: > "$R/modules.order"
for d in $mods; do
	case "$d" in *.ko) ;; *) ksb_skip "compressed module $d (busybox insmod needs .ko)" ;; esac
	cp "$KSB_MODULES/$d" "$R/lib/modules/"
	echo "${d##*/}" >> "$R/modules.order"
done
cat > "$R/init" <<INIT
#!/bin/busybox sh
/bin/busybox --install -s
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
exec >/dev/ttyS0 2>&1
for m in \$(cat /modules.order); do insmod "/lib/modules/\$m" 2>/dev/null; done
i=0
until mount -t 9p -o trans=virtio,version=9p2000.L,ro usr /mnt 2>/dev/null; do
	i=\$((i + 1)); [ \$i -lt 50 ] || break; sleep 0.1
done
echo "KSBT whoami \$(id -u)"
echo "KSBT kept \$(cat /mnt/local/share/ksbt-qemuuser-$$/kept 2>&1)"
echo "KSBT open \$(cat /mnt/local/share/ksbt-qemuuser-$$/open 2>&1)"
echo "KSBT done"
sleep 60
poweroff -f
INIT
chmod 755 "$R/init"
( cd "$R" && find . | cpio -o -H newc --quiet ) > "$T/qu.cpio"
chmod 0644 "$T/qu.cpio"

# The wrapper QEMU execs as (QEMU's user after the drop): what it is, then
# the real QEMU with the test's initramfs.
cat > "$T/qemu" <<EOF
#!/bin/bash
echo "KSBT wrapper uid=\$(id -u) \$(grep -E '^(CapEff|CapPrm|CapBnd|NoNewPrivs):' /proc/self/status | tr -s '\t\n' '  ')" >&2
a=()
while [ \$# -gt 0 ]; do
	if [ "\$1" = -initrd ]; then a+=(-initrd "$T/qu.cpio"); shift 2; continue; fi
	a+=("\$1"); shift
done
exec "$REAL_QEMU" "\${a[@]}"
EOF
chmod 0755 "$T/qemu"

ksb_gateway
fails=0

ksb_say "a guest whose root reads the host's /usr"
KSB_QEMU=$T/qemu timeout 180 ip netns exec "$GW" "$KSB_BUILDDIR/ksb-run" \
	-f "$T/ksb.conf" -- true </dev/null >"$T/out" 2>"$T/err" &
run=$!
KSB_PIDS="$KSB_PIDS $run"
ksb_until 150 grep -q "KSBT done" "$T/out" || true
qpid=$(pgrep -f "^$REAL_QEMU .*$T/qu.cpio" | head -n 1 || true)
st=
[ -n "$qpid" ] && st=$(grep -E '^(Uid|CapEff|CapPrm|CapBnd|NoNewPrivs|Seccomp):' "/proc/$qpid/status" | tr -s '\t\n' '  ')
echo "QEMU pid ${qpid:-none}: $st"
[ -n "$qpid" ] && ps -o uid=,user=,comm= -p "$qpid"
grep KSBT "$T/out" "$T/err" || true
ksb_check "the guest ran as root" 'grep -q "^KSBT whoami 0" "$T/out"'
ksb_check "guest root cannot read a host file kept from other users" \
	'grep -q "^KSBT kept .*ermission denied" "$T/out" && ! grep -q "KSBT-KEPT-$$" "$T/out"'
ksb_check "guest root reads the world-readable file beside it" \
	'grep -q "^KSBT open KSBT-OPEN-$$" "$T/out"'
ksb_check "QEMU's uid is not 0 (ps)" \
	'[ -n "$qpid" ] && [ "$(ps -o uid= -p "$qpid" | tr -d " ")" != 0 ]'
# No qemu-user: the instance's own uid and gid, qemu-uid-base (default
# 2145386496) + its address's slot (10.77.0.2: 2).
ksb_check "QEMU's uid and gid are the instance's own (2145386498)" \
	'[ -n "$qpid" ] && echo "$st" | grep -q "Uid: 2145386498 2145386498 2145386498 2145386498" && grep -q "^Gid:.2145386498.2145386498.2145386498.2145386498" "/proc/$qpid/status"'
ksb_check "QEMU has no capabilities, not even bounded" \
	'echo "$st" | grep -q "CapPrm: 0000000000000000 CapEff: 0000000000000000 CapBnd: 0000000000000000"'
ksb_check "QEMU has no_new_privs and a seccomp filter" \
	'echo "$st" | grep -q "NoNewPrivs: 1 Seccomp: 2"'
ksb_check "the wrapper ran unprivileged" \
	'grep -q "KSBT wrapper uid=2145386498 CapPrm: 0000000000000000 CapEff: 0000000000000000" "$T/err"'
# QEMU never outlives its ksb-run: the uid drop clears the parent-death
# signal (prctl(2)), which must be set again after it.  The guest sleeps
# 60 s after "done"; QEMU must be gone well before.
rpid=$(pgrep -P "$run" | head -n 1 || true)
[ -n "$rpid" ] && kill -9 "$rpid" 2>/dev/null || true
qemu_gone() { [ -n "$qpid" ] && ! kill -0 "$qpid" 2>/dev/null; }
ksb_until 10 qemu_gone || true
ksb_check "QEMU exits when its ksb-run is killed (SIGKILL)" qemu_gone
[ -n "$qpid" ] && kill "$qpid" 2>/dev/null || true
kill "$run" 2>/dev/null || true
ksb_wait_dead "$run" 30 || true

ksb_say "a per-instance uid that is one of the host's is refused"
# 65532 + slot 2 = 65534, nobody's (Debian's passwd): refused before QEMU.
cp "$T/ksb.conf" "$T/clash.conf"
echo "qemu-uid-base = 65532" >> "$T/clash.conf"
set +e
KSB_QEMU=$T/qemu timeout 120 ip netns exec "$GW" "$KSB_BUILDDIR/ksb-run" \
	-f "$T/clash.conf" -- true </dev/null >"$T/out2" 2>"$T/err2"
rc=$?
set -e
sed 's/^/# /' "$T/err2" | tail -n 3
ksb_check "refused (exit 125), the line names the user and qemu-uid-base" \
	'[ "$rc" = 125 ] && grep -q "qemu-uid-base 65532: uid 65534 (this instance.s) is user .nobody. of the host" "$T/err2" && ! grep -q "KSBT wrapper" "$T/err2"'

[ "$fails" = 0 ] || ksb_fail "$fails check(s) failed"
echo "PASS: qemuuser"
