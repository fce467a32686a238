#!/bin/bash
# e2e lifecycle test (real QEMU guests behind a real ksb-gatewayd, own
# namespaces and temp dir): a detached named instance with a secret and a
# disk, ksbctl list/status/stop of a busy guest, resume keeps the disk
# and the instance's --forward and --display (and the audit records the
# forward each time), ksbctl rm; ksbctl prune and list's disk use; kill -9 of a detached
# supervisor -> lost, lease gone; an
# ephemeral instance leaves nothing behind; --print-config; the preflight
# reports a missing secret.  Needs root, QEMU and a guest kernel (exit 77).
set -eu
. "$(dirname "$0")/../lib.sh"

ksb_need_root
ksb_need qemu-system-x86_64 /usr/sbin/mkfs.ext4 python3	# instance disks
ksb_need_built ksb-run ksb-guest-init ksb-gatewayd ksbctl/ksbctl
ksb_kernel
KSB_TEST_TEMPLATE=default # the default start: from a template under TCG
ksb_env
ksb_gateway

fails=0
run() { timeout 180 ip netns exec "$GW" "$KSB_BUILDDIR/ksb-run" -f "$T/ksb.conf" "$@"; }
ctl() { timeout 120 "$KSB_BUILDDIR/ksbctl/ksbctl" -f "$T/ksb.conf" "$@"; }
# await_unlocked DIR: until no ksb-run holds DIR/lock (<= 60 s).
await_unlocked() {
	local i
	for i in $(seq 1 600); do
		flock -n -s "$1/lock" true 2>/dev/null && return 0
		sleep 0.1
	done
	return 1
}
I=$T/state/instances
SECRET="s3cr3t-$$-$RANDOM-value"
export KSB_TEST_SECRET=$SECRET

ksb_say "--print-config: where each setting came from"
mkdir -p "$T/proj/.ksb"
printf 'cpus = 1\nmemory = 384\nprofile = default\nsecret = TOKEN=env:KSB_TEST_SECRET\n' \
	> "$T/proj/.ksb/instance.conf"
# profile and secret are privileged: the file is trusted (ksbctl trust).
ctl trust "$T/proj" > /dev/null
(cd "$T/proj" && "$KSB_BUILDDIR/ksb-run" -f "$T/ksb.conf" --memory 512 --print-config) > "$T/pc"
cat "$T/pc"
ksb_check "memory from the flag" 'grep -Eq "^memory += 512 +# --memory" "$T/pc"'
ksb_check "cpus from the project file" 'grep -Eq "^cpus += 1 +# .ksb/instance.conf:1" "$T/pc"'
ksb_check "disk-size: none for an ephemeral instance" \
	'grep -Eq "^disk-size += none +# default \(no disk without --name\)" "$T/pc"'
ksb_check "disk-size default 8G with --name" \
	'(cd "$T/proj" && "$KSB_BUILDDIR/ksb-run" -f "$T/ksb.conf" --name pc1 --print-config) | grep -Eq "^disk-size += 8G +# default"'
ksb_check "secret value not printed" '! grep -q "$SECRET" "$T/pc"'
printf 'memory = lots\n' > "$T/bad.conf"
ksb_check "bad project file: file:line error, exit 2" \
	'! "$KSB_BUILDDIR/ksb-run" -f "$T/ksb.conf" -c "$T/bad.conf" --print-config 2>"$T/e" && grep -q "bad.conf:1: memory: invalid value" "$T/e"'

ksb_say "detached named instance with a secret and a disk"
t0=$(date +%s.%N)
id=$(cd "$T/proj" && run --detach --name lc-named --disk-size 2G \
	--forward 127.0.0.1:0:8000 --display=320x240 -- /bin/sh -c \
	'echo hello-disk > ~/f; sha256sum < /run/ksb/secrets/TOKEN > ~/s;
	 stat -c %a:%U /run/ksb/secrets/TOKEN > ~/m;
	 { cat /sys/firmware/qemu_fw_cfg/by_name/opt/org.ksb/secrets/raw || echo fwcfg-unreadable; } > ~/fw 2>&1;
	 cat /run/ksb/secrets/TOKEN; echo; base64 -w0 < /run/ksb/secrets/TOKEN; echo;
	 sync; echo lc-files-written; exec sleep 600' 2>"$T/err-d")
echo "detach returned after $(echo "$(date +%s.%N) - $t0" | bc) s: $id"
cat "$T/err-d" >&2
ksb_check "--detach printed the ID" '[ "$id" = lc-named ]'
ksb_check "list shows it running" 'ctl list | grep -Eq "^lc-named +running"'
ksb_check "status by unique prefix" 'ctl status lc- | grep -q "state: *running"'
ksb_check "status --json" 'ctl status --json lc-named | grep -q "\"state\":\"running\""'
# The balloon's statistics come every 10 s (QEMU_BALLOON_STATS_S).
balloon_stats() { ctl status --json lc-named | grep -Eq '"guest_held_bytes":[1-9]'; }
ksb_until 30 balloon_stats || true
ksb_check "status: QEMU's RSS and what the guest holds (virtio-balloon)" \
	'ctl status --json lc-named | grep -Eq "\"qemu_rss_kib\":[1-9][0-9]*," &&
	 balloon_stats && ctl status lc-named | grep -Eq "^memory: +QEMU RSS [0-9.]+ MiB"'
qpid=$(sed -n 's/^qemu_pid=//p' "$I/lc-named/state")
ksb_check "secret not in QEMU's argv" '! tr "\0" "\n" < /proc/$qpid/cmdline | grep -q "$SECRET"'
ksb_check "secret not in QEMU's environment" '! tr "\0" "\n" < /proc/$qpid/environ | grep -q "$SECRET"'
ksb_check "QEMU environment has no KSB_TEST_SECRET" '! tr "\0" "\n" < /proc/$qpid/environ | grep -q KSB_TEST_SECRET'
# The command has written its files (it is busy afterwards) once its
# marker is on the console (ksbctl attach replays what the console said).
files_written() {
	timeout 3 "$KSB_BUILDDIR/ksbctl/ksbctl" -f "$T/ksb.conf" attach lc-named </dev/null 2>/dev/null \
		> "$T/att"
	grep -aq lc-files-written "$T/att"
}
ksb_check "the command wrote its files" 'ksb_until 120 files_written'
B64=$(printf %s "$SECRET" | base64 -w0 | cut -c1-16)
ksb_check "console: the secret shown as [secret TOKEN], raw and base64" \
	'[ "$(grep -ac "\[secret TOKEN\]" "$T/att")" -ge 2 ]'
ksb_check "console: no trace of the secret (raw, base64)" \
	'! grep -aq "$SECRET" "$T/att" && ! grep -aqF "$B64" "$T/att"'
ksb_check "secret in no file under the state dir" '! grep -rqa "$SECRET" "$T/state"'
ksb_check "secret in no file under the runtime dir" '! grep -rqa "$SECRET" "$T" --exclude-dir=proj --exclude=pc 2>/dev/null'

ksb_say "ksbctl stop of a busy guest"
t0=$(date +%s.%N)
ctl stop lc-named | tee "$T/stop"
echo "stop took $(echo "$(date +%s.%N) - $t0" | bc) s"
ksb_check "stop: powered down" 'grep -q "lc-named: powerdown" "$T/stop"'
ksb_check "stop: QEMU gone" '! kill -0 "$qpid" 2>/dev/null'
ksb_check "list shows it stopped" 'ctl list | grep -Eq "^lc-named +stopped"'
echo "idle named instance on disk: $(du -sh --apparent-size "$I/lc-named" | cut -f1) apparent, $(du -sh "$I/lc-named" | cut -f1) allocated"

ksb_say "resume keeps the disk"
run --name lc-named -- /bin/sh -c 'cat ~/f ~/s ~/m ~/fw; echo x > /usr/local/y && echo usr-local-writable;
	for c in /proc/[0-9]*/cmdline; do tr "\0" " " <"$c"; echo; done 2>/dev/null |
	sed -n "s/^Xvfb .*-screen 0 \([0-9x]*\) .*/xvfb=\1/p"' \
	</dev/null >"$T/out-r" 2>"$T/err-r" || true
cat "$T/out-r"; cat "$T/err-r" >&2
ksb_check "resume keeps the forward (a listener for guest port 8000 again)" \
	'grep -q "its 1 forward(s) of the last start" "$T/err-r" &&
	 [ "$(grep -c " add listen=127.0.0.1:[0-9]* guest-port=8000$" "$I/lc-named/forward.log")" = 2 ]'
ksb_check "resume keeps the display (Xvfb at 320x240)" 'grep -qx "xvfb=320x240x24" "$T/out-r"'
ksb_check "audit: the forward added and removed at both starts" \
	'ksb_sql_is "2|2" "SELECT sum(event = '"'add'"'), sum(event = '"'remove'"' AND reason = '"'stopped'"') FROM forwards WHERE instance = '"'lc-named'"' AND guest_port = 8000"'
ksb_check "kept.conf has them" 'grep -qx "forward=127.0.0.1:0:8000" "$I/lc-named/kept.conf" && grep -qx "display=320x240" "$I/lc-named/kept.conf"'
ksb_check "file written before the stop is there" 'grep -qx hello-disk "$T/out-r"'
ksb_check "agent read the secret" 'grep -q "$(printf %s "$SECRET" | sha256sum | cut -d" " -f1)" "$T/out-r"'
ksb_check "secret file 0400 owned by agent" 'grep -qx 400:agent "$T/out-r"'
ksb_check "fw_cfg entry unreadable to the agent" 'grep -q fwcfg-unreadable "$T/out-r"'
ksb_check "/usr/local writable (overlay on the disk)" 'grep -qx usr-local-writable "$T/out-r"'
ksb_check "rm of a stopped instance" 'ctl rm lc-named && [ ! -e "$I/lc-named" ]'

ksb_say "kill -9 of a detached supervisor"
id=$(run --detach -- /bin/sleep 600 2>/dev/null)
spid=$(sed -n 's/^pid=//p' "$I/$id/state")
ip=$(sed -n 's/^ip=//; s/\/.*//p' "$I/$id/state")
ksb_check "the gateway holds its lease" 'ctl list | grep -Eq "^$id +running .* yes +[0-9]"'

ksb_say "ksbctl prune: stopped instances, their disks, mirrors and checkouts; never a running one"
# A stopped named instance with a disk and a mirror (a host repo made with
# the git CLI), next to the running one above.
Q=$T/prunerepo
git init -q "$Q" && echo x > "$Q/x" && git -C "$Q" add x &&
	git -C "$Q" -c user.name=t -c user.email=t@t.invalid commit -qm x
run --name lc-prune --disk-size 64M --repo "$Q" -- /bin/true </dev/null >/dev/null 2>"$T/err-p" || cat "$T/err-p"
ksb_check "the stopped instance has a disk, a mirror and a checkout" \
	'[ -f "$I/lc-prune/disk.img" ] && [ -d "$I/lc-prune/mirror.git" ] &&
	 [ -d "$T/state/checkouts/$(git -C "$Q" rev-parse HEAD)" ]'
ksb_check "list shows each instance's disk use" \
	'ctl list | grep -Eq "^lc-prune +stopped .* [0-9.]+ (B|KiB|MiB)$"'
ctl prune --older-than 1d --dry-run > "$T/prune0" 2>&1 || true
ksb_check "prune --older-than 1d: nothing that young" 'grep -qx "nothing to prune" "$T/prune0"'
ctl prune --dry-run > "$T/prune1" 2>&1 || true
cat "$T/prune1"
# The instance dirs and checkout caches, before and after.
snap() { (cd "$T/state" && find instances checkouts -mindepth 1 -maxdepth 1 ! -name .lock | sort); }
snap > "$T/snap0"
ctl prune > "$T/prune2" 2>&1; prc=$?
cat "$T/prune2"
snap > "$T/snap1"
# What went: the top-level paths that disappeared.
comm -23 "$T/snap0" "$T/snap1" > "$T/gone"
sed -n 's/^removed [a-z]* [^ ]* (.*): //p' "$T/prune2" | sed "s|^$T/state/||" | sort > "$T/listed"
sed -n 's/^would remove [a-z]* [^ ]* (.*): //p' "$T/prune1" | sed "s|^$T/state/||" | sort > "$T/listed0"
cat "$T/gone"
ksb_check "prune exited 0" '[ "$prc" = 0 ]'
ksb_check "prune --dry-run removed nothing and listed what prune then removed" \
	'cmp -s "$T/listed0" "$T/listed"'
ksb_check "prune removed exactly what it listed" '[ -s "$T/gone" ] && cmp -s "$T/gone" "$T/listed"'
ksb_check "it listed the stopped instance and its checkout" \
	'grep -qx "instances/lc-prune" "$T/listed" &&
	 grep -qx "checkouts/$(git -C "$Q" rev-parse HEAD)" "$T/listed"'
ksb_check "the running instance is untouched and still running" \
	'! grep -q "$id" "$T/listed" && ctl list | grep -Eq "^$id +running"'
ctl prune > "$T/prune3" 2>&1 || true
ksb_check "a second prune has nothing to do" 'grep -qx "nothing to prune" "$T/prune3"'
kill -9 "$spid"
await_unlocked "$I/$id"
lost_no_lease() { ctl list | grep -Eq "^$id +lost .* no +[0-9]"; }
ksb_until 30 lost_no_lease || true
ctl list
ksb_check "list shows it lost, without a lease" 'ctl list | grep -Eq "^$id +lost .* no +[0-9]"'
ksb_check "its address left the nftables set" '! ip netns exec "$GW" nft list ruleset | grep -qw "$ip"'
ksb_check "rm of a lost instance" 'ctl rm "$id" && [ ! -e "$I/$id" ]'

ksb_say "an ephemeral instance leaves nothing behind"
run -- /bin/true </dev/null >/dev/null 2>&1
ksb_check "no instance dir" '[ -z "$(ls -A "$I")" ]'
ksb_check "no tap" '[ -z "$(ip -n "$GW" -o link show type tun)" ]'
ksb_check "no guest address in nftables" '! ip netns exec "$GW" nft list ruleset | grep -Eq "10\.77\.0\.([02-9]|[1-9][0-9]+)\b"'

ksb_say "a signal during set-up still cleans up"
# A gateway that accepts and never answers holds ksb-run in its REGISTER
# (after the instance directory exists); SIGTERM then must not kill it with
# the default action: it waits for the reply timeout and cleans up.
python3 - "$T/mute.sock" "$T/mute.log" <<'EOF2' &
import socket, sys, time
s = socket.socket(socket.AF_UNIX)
s.bind(sys.argv[1]); s.listen(4)
c, _ = s.accept()
open(sys.argv[2], "w").write("accepted\n")
time.sleep(120)
EOF2
KSB_PIDS="$KSB_PIDS $!"
sed "s|^control-socket = .*|control-socket = $T/mute.sock|" "$T/ksb.conf" > "$T/mute.conf"
ksb_until 60 test -S "$T/mute.sock" || ksb_fail "the mute gateway did not start"
"$KSB_BUILDDIR/ksb-run" -f "$T/mute.conf" -- /bin/true </dev/null >"$T/mute.out" 2>&1 &
mpid=$!
ksb_check "ksb-run reached REGISTER" 'ksb_until 120 grep -qs accepted "$T/mute.log"'
ksb_check "its instance directory exists meanwhile" '[ -n "$(ls -A "$I")" ]'
kill -TERM "$mpid" || true
set +e
wait "$mpid"
set -e
cat "$T/mute.out"
ksb_check "after SIGTERM in set-up: no instance dir left" '[ -z "$(ls -A "$I")" ]'

ksb_say "preflight"
printf 'secret = GONE=env:KSB_NO_SUCH_VARIABLE\n' > "$T/miss.conf"
ctl trust "$T/miss.conf" > /dev/null
set +e
ctl status -c "$T/miss.conf" > "$T/pre"; rc=$?
set -e
cat "$T/pre"
ksb_check "preflight: missing secret reported" 'grep -Eq "^MISSING +secret .*KSB_NO_SUCH_VARIABLE" "$T/pre"'
ksb_check "preflight: exit 1" '[ "$rc" = 1 ]'
ksb_check "preflight: gateway OK" 'grep -Eq "^OK +gateway" "$T/pre"'

ksb_check_template
[ "$fails" = 0 ] || ksb_fail "$fails check(s) failed"
echo "PASS"
