#!/bin/bash
# e2e test of `ksbctl stop --save' (issue 34; real QEMU guest under TCG
# behind a real ksb-gatewayd, own namespaces and temp dir).  QEMU saves
# no guest with a 9p share mounted (hw/9pfs/9p.c registers a migration
# blocker at each attach) and every ksb guest mounts the host's /usr over
# 9p: the command asks QEMU first and refuses with its reasons, the guest
# untouched.  Shown: QEMU's own query-migrate names the blockers (the
# witness), stop --save says why in one line and exits 1, the guest's
# loop keeps ticking, nothing is written into the instance directory, a
# paused one stays paused, a plain stop still works, --save of a stopped
# instance says so.
# Needs root, QEMU and a guest kernel (exit 77).
set -eu
. "$(dirname "$0")/../lib.sh"

ksb_need_root
ksb_need qemu-system-x86_64 /usr/sbin/mkfs.ext4 python3
ksb_need_built ksb-run ksb-guest-init ksb-gatewayd ksbctl/ksbctl
ksb_kernel
ksb_env
ksb_gateway

fails=0
run() { timeout 180 ip netns exec "$GW" "$KSB_BUILDDIR/ksb-run" -f "$T/ksb.conf" "$@"; }
ctl() { timeout 120 "$KSB_BUILDDIR/ksbctl/ksbctl" -f "$T/ksb.conf" "$@"; }
I=$T/state/instances/sv1

ksb_say "a detached named instance whose shell loop ticks on the console"
run --detach --name sv1 --memory 384 --disk-size 1G -- /bin/sh -c \
	'i=0; while :; do i=$((i+1)); echo "sv-tick-$i"; sleep 1; done' \
	> "$T/id" 2> "$T/err-d" || { cat "$T/err-d" >&2; ksb_fail "ksb-run --detach"; }
# The last tick the console replay (ksbctl attach) shows, or 0.
last_tick() {
	timeout 3 "$KSB_BUILDDIR/ksbctl/ksbctl" -f "$T/ksb.conf" attach sv1 \
		</dev/null 2>/dev/null | grep -ao 'sv-tick-[0-9]*' | tail -n 1 |
		sed 's/sv-tick-//' | grep . || echo 0
}
tick_above() { [ "$(last_tick)" -gt "$1" ]; }
ksb_check "the loop ticks" 'ksb_until 120 tick_above 1'

ksb_say "QEMU itself: query-migrate's blocked-reasons (the witness)"
python3 - "$I/qmp.sock" > "$T/witness" <<'PY'
import json, socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(10)
s.connect(sys.argv[1])
f = s.makefile("rw")
f.readline()
def ex(cmd, args=None):
    m = {"execute": cmd}
    if args is not None:
        m["arguments"] = args
    f.write(json.dumps(m) + "\n")
    f.flush()
    while True:
        m = json.loads(f.readline())
        if "event" not in m:
            return m
ex("qmp_capabilities")
for r in ex("query-migrate")["return"].get("blocked-reasons", []):
    print(r)
# An internal snapshot (HMP savevm) is refused for the same reason.
print("savevm:", ex("human-monitor-command",
                    {"command-line": "savevm ksbt"})["return"].strip())
PY
cat "$T/witness"
ksb_check "QEMU names the 9p export of /usr as a blocker" \
	"grep -q \"^Migration is disabled .*mount_tag 'usr'\" '$T/witness'"
ksb_check "QEMU's savevm is refused by the same blocker" \
	"grep -q \"^savevm: Error: Migration is disabled .*mount_tag\" '$T/witness'"

ksb_say "ksbctl stop --save: refused, the guest untouched"
ls -1 "$I" | sort > "$T/before"
t=$(last_tick)
rc=0
ctl stop --save sv1 > "$T/out" 2> "$T/err" || rc=$?
cat "$T/err"
ksb_check "exit status 1" '[ "$rc" = 1 ]'
ksb_check "one line on stderr, nothing on stdout" \
	'[ "$(wc -l < "$T/err")" = 1 ] && [ ! -s "$T/out" ]'
ksb_check "it says why: QEMU's version and the 9p shares, /usr first" \
	'grep -Eq "^ksbctl stop --save: sv1: cannot save: QEMU [0-9]+\.[0-9]+\.[0-9]+ saves no guest with a 9p share mounted, and this one mounts usr \(the host.s /usr\)" "$T/err"'
ksb_check "it says the instance keeps running" 'grep -q "; it keeps running$" "$T/err"'
ksb_check "every blocker QEMU named is in the line" \
	'for tag in $(grep -o "mount_tag '"'"'[^'"'"']*" "$T/witness" | sed "s/.*'"'"'//"); do
		grep -q "[ ,]$tag\b" "$T/err" || exit 1; done'
ksb_check "still running" 'ctl list | grep -Eq "^sv1 +running"'
ksb_check "the guest's loop still ticks (not paused, not stopped)" \
	"ksb_until 60 tick_above $t"
ls -1 "$I" | sort > "$T/after"
ksb_check "nothing new in the instance directory" 'diff "$T/before" "$T/after"'

ksb_say "a paused instance: refused too, and left paused"
ksb_check "ksbctl pause" 'ctl pause sv1 | grep -q "^sv1: paused"'
rc=0
ctl stop --save sv1 2> "$T/errp" || rc=$?
ksb_check "refused: exit 1, the same reason" \
	'[ "$rc" = 1 ] && grep -q "cannot save: QEMU .* mounts usr.*; it stays paused$" "$T/errp"'
ksb_check "still paused (not continued as a plain stop does)" \
	'ctl pause sv1 | grep -q "^sv1: already paused"'
ksb_check "ksbctl resume" 'ctl resume sv1 | grep -q "^sv1: resumed"'

ksb_say "a plain stop still works; --save of a stopped instance"
ksb_check "ksbctl stop: powerdown" 'ctl stop sv1 | grep -q "^sv1: powerdown"'
rc=0
ctl stop --save sv1 2> "$T/err2" || rc=$?
cat "$T/err2"
ksb_check "--save of a stopped instance: exit 1, said" \
	'[ "$rc" = 1 ] && grep -q "^ksbctl stop --save: sv1 is not running: nothing to save$" "$T/err2"'
ksb_check "--help names --save" 'ctl stop --help | grep -q -- "--save"'
ctl rm sv1 > /dev/null

[ "$fails" = 0 ] || ksb_fail "$fails check(s) failed"
echo "PASS"
