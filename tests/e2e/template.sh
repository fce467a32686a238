#!/bin/bash
# e2e: guests from a template (vmrunner/template.c), the default under
# TCG (template = auto, checked with --print-config).  Two first starts at
# once: one boots the template and says so without -v, the other waits
# for it and restores its file; two more restore it.  Each instance must
# be its own: its command runs, and the instance ID, MAC address, guest
# address, /dev/urandom bytes, getrandom(2) bytes and the clock differ
# between the two restores (no RNG state or seed shared: init reseeds
# from the host's INSTANCE message, vmgenid too); a secret given to one
# reaches it through fw_cfg after its restore and not the other.
# A template QEMU cannot load is removed and that guest boots the cold
# way, said in one line; q35 has its own template; with no template to
# be had the guest boots the cold way too.  SIGINT while a template is
# made (booting it, or waiting for another start's build) stops that start
# within seconds (exit 130, one line, its QEMU killed, nothing saved)
# instead of after the build; a SIGTERM to the template's QEMU alone (a
# scheduler's job-wide one) does not stop the build.  Needs root, QEMU and a guest kernel (exit
# 77).
set -eu
. "$(dirname "$0")/../lib.sh"

ksb_need_root
ksb_need qemu-system-x86_64 python3 pgrep flock
ksb_need_built ksb-run ksb-guest-init ksb-gatewayd
ksb_kernel
KSB_TEST_TEMPLATE=default # the default start: from a template under TCG
ksb_env
ksb_gateway
fails=0
export KSB_ACCEL=tcg # auto resolves for TCG on any host

# What one instance reports about itself, one key=value a line.  Python
# reads /dev/urandom and getrandom(2) right after the restore.
probe='echo id=$(hostname); echo mac=$(cat /sys/class/net/eth0/address)
echo ip=$(python3 -c "import socket,fcntl,struct
s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)
print(socket.inet_ntoa(fcntl.ioctl(s.fileno(),0x8915,struct.pack(\"256s\",b\"eth0\"))[20:24]))")
echo urandom=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d " \n")
echo getrandom=$(python3 -c "import os; print(os.getrandom(16).hex())")
echo time=$(date +%s)
echo secret=$(cat /run/ksb/secrets/TPL_TOKEN 2>/dev/null || echo none)
echo ok'

mkdir -p "$T/empty"
run() { # run NAME [FLAG...]: one ephemeral instance, default settings
	local n=$1
	shift
	( cd "$T/empty" && timeout 180 ip netns exec "$GW" \
		"$KSB_BUILDDIR/ksb-run" -f "$T/ksb.conf" "$@" \
		-- /bin/sh -c "$probe" </dev/null \
		>"$T/$n.out" 2>"$T/$n.err" ) || {
		grep -v 'argv\[' "$T/$n.err" | tail -20 >&2
		ksb_fail "$n: ksb-run failed"
	}
	tr -d '\r' < "$T/$n.out" > "$T/$n.kv"
}
val() { sed -n "s/^$2=//p" "$T/$1.kv"; }

ksb_say "template = auto is on under TCG"
( cd "$T/empty" && "$KSB_BUILDDIR/ksb-run" -f "$T/ksb.conf" --print-config ) \
	> "$T/print.out"
ksb_check "print-config: template = on (auto: TCG)" \
	'grep -Eq "^template +(= on) +# default \(auto: TCG\)" "$T/print.out"'

ksb_say "two first starts at once: one boots the template, both run"
run first1 & p1=$!
run first2 & p2=$!
wait "$p1" || ksb_fail "first1 failed"
wait "$p2" || ksb_fail "first2 failed"
for i in first1 first2; do
	ksb_check "$i: the command ran" 'grep -qx ok "$T/$i.kv"'
done
ksb_check "first: one template's boot, said so without -v" \
	'[ "$(cat "$T/first1.err" "$T/first2.err" |
	     grep -c "booting it once and saving it")" = 1 ] &&
	 [ "$(cat "$T/first1.err" "$T/first2.err" |
	     grep -c "template: booted and saved")" = 1 ]'
ksb_check "first: the other start waited for it, said so" \
	'grep -q "another start is booting a template; waiting for it" \
		"$T/first1.err" "$T/first2.err"'
ksb_check "one template file, 0600, no temporary left" \
	'[ "$(find "$T/state/templates" -type f ! -name .lock -perm 0600 |
	     wc -l)" = 1 ] &&
	 [ "$(find "$T/state/templates" -type f ! -name .lock | wc -l)" = 1 ]'

ksb_say "two more starts at once restore the saved template"
export TPL_SECRET="tpl-$$-secret"
run a -v --secret TPL_TOKEN=env:TPL_SECRET & pa=$!
run b -v & pb=$!
wait "$pa" || ksb_fail "a failed"
wait "$pb" || ksb_fail "b failed"
for i in a b; do
	ksb_check "$i: no new template" \
		'! grep -q "template: booted" "$T/$i.err"'
	ksb_check "$i: the command ran" 'grep -qx ok "$T/$i.kv"'
	ksb_check "$i: restored (breakdown row)" \
		'grep -q "QEMU start and restore (to init)" "$T/$i.err"'
	ksb_check "$i: the guest's clock is the host's" \
		'[ $(( $(val $i time) - $(date +%s) )) -gt -60 ]'
	ksb_check "$i: the enforcement self-test passed" \
		'grep -q "enforcement self-test passed" "$T/$i.err"'
done
for k in id mac ip urandom getrandom; do
	ksb_check "the two restores differ in $k ($(val a $k) vs $(val b $k))" \
		'[ -n "$(val a $k)" ] && [ "$(val a $k)" != "$(val b $k)" ]'
done
ksb_check "a: its secret, through fw_cfg after the restore" \
	'[ "$(val a secret)" = "[secret TPL_TOKEN]" ]' # ksb-run redacts it
ksb_check "b: no secret (given none; a's is not in the template)" \
	'[ "$(val b secret)" = none ]'
ksb_check "the guest's address is its lease" \
	'grep -q "instance $(val a id): $(val a ip)/" "$T/a.err"'
ksb_check "the guest's MAC is its lease's, not the template's" \
	'[ "$(val a mac)" != 52:54:00:6b:73:62 ]'

ksb_say "a template QEMU cannot load: removed, that guest boots cold"
tpl=$(find "$T/state/templates" -type f ! -name .lock)
truncate -s 1M "$tpl"
set +e
( cd "$T/empty" && timeout 180 ip netns exec "$GW" "$KSB_BUILDDIR/ksb-run" \
	-f "$T/ksb.conf" -v -- /bin/sh -c 'echo bad-ok' </dev/null \
	>"$T/bad.out" 2>"$T/bad.err" )
rc=$?
set -e
ksb_check "bad template: the command ran all the same ($rc)" \
	'[ "$rc" = 0 ] && grep -q bad-ok "$T/bad.out"'
ksb_check "bad template: removed, said in one line" \
	'[ ! -e "$tpl" ] &&
	 [ "$(grep -c "template .*: QEMU quit before the guest ran: removed; booting the guest the cold way" "$T/bad.err")" = 1 ]'
ksb_check "bad template: booted (no restore row)" \
	'grep -q "kernel (to init.s first stage)" "$T/bad.err" &&
	 ! grep -q "QEMU start and restore" "$T/bad.err"'

# start_bg NAME: a start in the background (no template now: it builds
# one); $bg is ksb-run's pid (the subshell execs ip, ip execs ksb-run).
start_bg() {
	( cd "$T/empty" && exec ip netns exec "$GW" "$KSB_BUILDDIR/ksb-run" \
		-f "$T/ksb.conf" -- /bin/sh -c "echo $1-ok" </dev/null \
		>"$T/$1.out" 2>"$T/$1.err" ) &
	bg=$!
}
# stopped NAME RC: what a start stopped by SIGINT before its guest must show
stopped() {
	sn=$1 src=$2 # ksb_check evaluates its test with the globals
	ksb_check "$sn: exit 130 (SIGINT), the command never ran ($src)" \
		'[ "$src" = 130 ] && ! grep -q "$sn-ok" "$T/$sn.out"'
	ksb_check "$sn: said why, in one line" \
		'[ "$(grep -c "got signal 2 while the template was being made: stopping (nothing saved" "$T/$sn.err")" = 1 ]'
	ksb_check "$sn: it did not go on to boot the guest" \
		'! grep -q "none to restore, booting the guest" "$T/$sn.err"'
	ksb_check "$sn: no template and no temporary file left" \
		'[ -z "$(find "$T/state/templates" -type f ! -name .lock)" ]'
	ksb_check "$sn: its instance is gone" \
		'[ -z "$(ls -A "$T/state/instances" 2>/dev/null)" ]'
}

ksb_say "SIGINT while the template boots: stopped at once, nothing saved"
start_bg intr
ksb_until 120 grep -q "booting it once and saving it" "$T/intr.err" ||
	ksb_fail "intr: no template build began: $(tail -3 "$T/intr.err")"
ksb_until 30 pgrep -P "$bg" -f qemu-system >/dev/null ||
	ksb_fail "intr: the template's QEMU did not start"
qp=$(pgrep -P "$bg" -f qemu-system | head -1)
t0=$(date +%s%N)
kill -INT "$bg"
ksb_until 20 ksb_dead "$bg" || ksb_fail "intr: ksb-run still runs 20 s after SIGINT"
set +e; wait "$bg"; rc=$?; set -e
echo "# intr: ksb-run exited $(( ($(date +%s%N) - t0) / 1000000 )) ms after SIGINT"
stopped intr "$rc"
ksb_check "intr: the template's QEMU is gone (${qp:-none found})" \
	'[ -n "$qp" ] && ksb_dead "$qp"'

ksb_say "SIGINT while waiting for another start's build: stopped at once"
# flock -o: the lock is flock's own, not sleep's; it ends with sleep.
flock -o "$T/state/templates/.lock" sleep 300 & holder=$!
ksb_until 10 sh -c '! flock -n "$1" true' _ "$T/state/templates/.lock" ||
	ksb_fail "wait: the lock was not taken"
start_bg wait
ksb_until 60 grep -q "another start is booting a template; waiting for it" \
	"$T/wait.err" || ksb_fail "wait: it did not wait: $(tail -3 "$T/wait.err")"
kill -INT "$bg"
ksb_until 20 ksb_dead "$bg" || ksb_fail "wait: ksb-run still runs 20 s after SIGINT"
set +e; wait "$bg"; rc=$?; set -e
pkill -P "$holder" sleep 2>/dev/null || true
wait "$holder" 2>/dev/null || true
ksb_check "wait: the holder let the lock go" \
	'flock -n "$T/state/templates/.lock" true'
stopped wait "$rc"

ksb_say "SIGTERM to the template's QEMU (a job-wide stop's share): ignored"
# A scheduler's SIGTERM to every process of a job (Slurm's
# proctrack/linuxproc) reaches the template's QEMU too: it runs with
# SIGINT, SIGTERM and SIGQUIT blocked, as an instance's, so the build goes
# on (ksb-run, which got no signal here, makes and restores it).
start_bg term
ksb_until 120 grep -q "booting it once and saving it" "$T/term.err" ||
	ksb_fail "term: no template build began: $(tail -3 "$T/term.err")"
ksb_until 30 pgrep -P "$bg" -f qemu-system >/dev/null ||
	ksb_fail "term: the template's QEMU did not start"
qp=$(pgrep -P "$bg" -f qemu-system | head -1)
ksb_check "term: the template's QEMU blocks SIGTERM (SigBlk of ${qp:-none})" \
	'[ $(( 0x$(awk "/^SigBlk:/ { print \$2 }" /proc/$qp/status) >> 14 & 1 )) = 1 ]'
kill -TERM "$qp"
ksb_until 300 ksb_dead "$bg" || ksb_fail "term: ksb-run still runs 300 s later"
set +e; wait "$bg"; rc=$?; set -e
ksb_check "term: the build went on, saved, the command ran ($rc)" \
	'[ "$rc" = 0 ] && grep -q term-ok "$T/term.out" &&
	 grep -q "template: booted and saved" "$T/term.err"'
ksb_check "term: QEMU did not die of the SIGTERM" \
	'! grep -q "terminating on signal" "$T/term.err" &&
	 ! grep -q "none to restore, booting the guest" "$T/term.err"'

ksb_say "q35 (PCI, vmgenid): its own template, booted, saved and restored"
run q35 -v --machine q35
ksb_check "q35: the template was built and restored" \
	'grep -q "template: booted and saved" "$T/q35.err" &&
	 grep -q "QEMU start and restore (to init)" "$T/q35.err" &&
	 grep -q "start time (q35, tcg" "$T/q35.err"'
ksb_check "q35: the command ran, its own address" \
	'grep -qx ok "$T/q35.kv" && [ "$(val q35 mac)" != 52:54:00:6b:73:62 ]'

ksb_say "no template can be made: the guest boots without one (the cold path)"
rm -rf "$T/state/templates"
echo not-a-directory > "$T/state/templates"
( cd "$T/empty" && timeout 180 ip netns exec "$GW" "$KSB_BUILDDIR/ksb-run" \
	-f "$T/ksb.conf" -v -- /bin/sh -c 'echo cold-ok' \
	</dev/null >"$T/cold.out" 2>"$T/cold.err" ) ||
	ksb_fail "cold: $(grep -v 'argv\[' "$T/cold.err" | tail -5)"
ksb_check "cold: the command ran" 'grep -q cold-ok "$T/cold.out"'
ksb_check "cold: said why" \
	'grep -q "template: none to restore, booting the guest" "$T/cold.err"'
ksb_check "cold: booted (no restore row)" \
	'grep -q "kernel (to init.s first stage)" "$T/cold.err" &&
	 ! grep -q "QEMU start and restore" "$T/cold.err"'

[ "$fails" = 0 ] || ksb_fail "$fails check(s) failed"
echo "PASS"
