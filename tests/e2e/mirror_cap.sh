#!/bin/bash
# e2e git handoff: the read-write mirror's cap holds as it is written
# (issue 29; vmrunner/mirrorfs.c).  ksb-run runs
# tests/e2e/mirror_cap_guest.py in place of QEMU (KSB_QEMU), which writes
# to the mirror's 9p export as QEMU would for the guest.  With
# mirror-max-size 32M: writing 64 MiB ends in ENOSPC below 32 MiB, the
# host's disk grows by at most the cap, the mount is ksb-run's own
# (ksbctl reads it through /proc/<ksb-run>/root); at stop the files are
# back in a plain mirror.git (the guest's owner in user.virtfs.*) and the
# image is gone.  A ksb-run killed with SIGKILL leaves its image: the
# next start copies it back.  Needs root, python3, git and a guest kernel
# file (exit 77); no QEMU.
set -eu
. "$(dirname "$0")/../lib.sh"

ksb_need_root
ksb_need python3 git
ksb_need_built ksb-run ksb-guest-init ksb-gatewayd ksbctl/ksbctl
ksb_kernel
KSB_TEST_CONF="mirror-max-size = 32M"
ksb_env
ksb_gateway
ksb_host_repo

fails=0
export KSB_TEST_OUT=$T/guest.out
I=$T/state/instances/mc
M=$I/mirror.git
: > "$KSB_TEST_OUT"
chmod 0666 "$KSB_TEST_OUT" # the stand-in runs as QEMU's user
# run MARK MIB: ksb-run --detach --name mc in the project; sets rp.
run() {
	( cd "$P" && KSB_QEMU="$KSB_SRCDIR/tests/e2e/mirror_cap_guest.py" \
		KSB_TEST_MARK=$1 KSB_TEST_WRITE_MIB=$2 timeout 60 ip netns exec "$GW" \
		"$KSB_BUILDDIR/ksb-run" -f "$T/ksb.conf" --detach --name mc \
		--accel tcg -- unused ) > /dev/null 2> "$T/err" ||
		{ cat "$T/err"; ksb_fail "ksb-run --detach"; }
	rp=$(sed -n 's/^pid=//p' "$I/state")
	KSB_PIDS="$KSB_PIDS $rp"
}
wrote() { grep -q "^wrote" "$KSB_TEST_OUT"; }
xattr_uid() { python3 -c "import os,sys; print(int.from_bytes(os.getxattr(sys.argv[1], 'user.virtfs.uid'), 'little'))" "$1"; }

ksb_say "a guest writes 64 MiB into a mirror capped at 32 MiB"
du0=$(du -sk "$T/state" | cut -f1)
run mark1 64
ksb_check "the guest's writes ended" 'ksb_until 60 wrote'
cat "$KSB_TEST_OUT"
n=$(sed -n 's/^wrote \([0-9]*\) .*/\1/p' "$KSB_TEST_OUT")
ksb_check "they ended in ENOSPC" 'grep -q "^wrote [0-9]* ENOSPC" "$KSB_TEST_OUT"'
ksb_check "below the cap ($n bytes)" '[ "$n" -lt $((32 << 20)) ]'
du1=$(du -sk "$T/state" | cut -f1)
img=$(du -k "$I/mirror.img" | cut -f1)
echo "# the state dir: $du0 KiB before, $du1 KiB with the guest's writes, $img KiB of it the image"
ksb_check "the image holds at most the cap ($img KiB)" '[ "$img" -le $((32 * 1024)) ]'
# Besides the image: ksb-run's own files (its initramfs, the checkout).
ksb_check "the rest grew by less than 8 MiB" '[ $((du1 - img - du0)) -lt 8192 ]'
ksb_check "the mount is not in the host's mount table" '! grep -q " $M " /proc/self/mountinfo'
ksb_check "it is in ksb-run's" 'grep -q " $M " "/proc/$rp/mountinfo"'
ksb_check "ksbctl's way in (/proc/PID/root) sees the guest's file" '[ -s "/proc/$rp/root$M/mark1" ]'
ksb_check "the instance still runs" 'kill -0 "$rp"'
kill -TERM "$rp"
ksb_check "ksb-run ends on SIGTERM" 'ksb_wait_dead "$rp" 30'
ksb_check "the guest's files are back in the plain mirror.git" '[ -s "$M/mark1" ] && [ -s "$M/fill" ]'
ksb_check "with the guest's owner in user.virtfs.uid" '[ "$(xattr_uid "$M/HEAD")" = 1000 ]'
ksb_check "the mirror's refs are still there" '[ -d "$M/refs/heads" ]'
ksb_check "the image is gone" '[ ! -e "$I/mirror.img" ]'
ksb_check "no lost+found copied back" '[ ! -e "$M/lost+found" ]'
du2=$(du -sk "$T/state" | cut -f1)
echo "# the state dir after the stop: $du2 KiB"
ksb_check "the host's disk, after: less than the cap + 8 MiB more" '[ $((du2 - du0)) -lt $((32 * 1024 + 8192)) ]'

ksb_say "ksb-run killed: the next start copies its image back"
: > "$KSB_TEST_OUT"
rm -f "$M/fill"
run mark2 0
ksb_check "the guest wrote its mark" 'ksb_until 60 wrote'
kill -KILL "$rp"
ksb_wait_dead "$rp" 30 || true
qp=$(sed -n 's/^qemu_pid=//p' "$I/state")
[ -n "$qp" ] && ksb_wait_dead "$qp" 30 || true
ksb_check "the image is left" '[ -e "$I/mirror.img" ] && [ ! -e "$M/mark2" ]'
: > "$KSB_TEST_OUT"
run mark3 0
ksb_check "the guest wrote its mark" 'ksb_until 60 wrote'
ksb_check "the start said it copied it back" 'grep -q "mirror.img: left by a ksb-run that did not finish" "$I/ksb-run.log" "$T/err"'
ksb_check "the dead run's file is in the new mirror" '[ -s "/proc/$rp/root$M/mark2" ]'
kill -TERM "$rp"
ksb_check "ksb-run ends on SIGTERM" 'ksb_wait_dead "$rp" 30'
ksb_check "both marks are in the plain mirror.git" '[ -s "$M/mark2" ] && [ -s "$M/mark3" ]'

[ "$fails" = 0 ] || { cat "$I/ksb-run.log"; ksb_fail "$fails check(s) failed"; }
echo "PASS"
