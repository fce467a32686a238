#!/bin/bash
# console_filter.sh: a guest's console output reaches the operator's
# terminal filtered (issue 29), in both paths: ksb-run in the foreground
# and ksbctl attach of a detached instance.  ksb-run runs
# tests/e2e/console_guest.py in place of QEMU (KSB_QEMU), a guest that
# prints OSC 52 (clipboard), titles, DCS, APC, window operations and
# 8-bit C1 between SGR colour and cursor movement; the "host terminal"
# is a pty whose every byte the test records (python3 pty).  Neither the
# clipboard payload nor the title nor any OSC/DCS/APC/C1 byte arrives;
# the SGR and cursor sequences do, byte for byte.  In the foreground,
# ksb-run's own lines in raw mode end in CR LF, and a guest's last line
# without a newline is ended before the shell's prompt.  Needs root, python3
# and a guest kernel file (exit 77); no QEMU.
set -eu
. "$(dirname "$0")/../lib.sh"

ksb_need_root
ksb_need python3
ksb_need_built ksb-run ksb-guest-init ksb-gatewayd ksbctl/ksbctl
ksb_kernel
ksb_env
ksb_gateway
fails=0
pass=0
GUEST=$KSB_SRCDIR/tests/e2e/console_guest.py

# pty OUT SECS CMD...: CMD on a new pty (its stdin, stdout and stderr),
# every byte it writes to the terminal into OUT, until CMD exits, OUT
# holds KSBT-END (then CMD is killed), or SECS pass.
pty() {
	python3 - "$@" <<'PY'
import os, pty, select, signal, sys, time
out, secs, cmd = sys.argv[1], float(sys.argv[2]), sys.argv[3:]
pid, fd = pty.fork()
if pid == 0:
    os.execvp(cmd[0], cmd)
got = b""
end = time.monotonic() + secs
until = os.environ.get("PTY_UNTIL", "KSBT-END").encode()
while time.monotonic() < end and until not in got:
    r, _, _ = select.select([fd], [], [], 0.5)
    if r:
        try:
            d = os.read(fd, 65536)
        except OSError:
            break
        if not d:
            break
        got += d
open(out, "wb").write(got)
try:
    os.kill(pid, signal.SIGTERM)
except ProcessLookupError:
    pass
os.waitpid(pid, 0)
PY
}

# check_tty FILE WHAT: the captured bytes hold the good sequences and
# none of the hostile ones.
check_tty() {
	local f=$1 w=$2
	ksb_check "$w: the guest's output arrived" 'grep -aq KSBT-END "$f"'
	ksb_check "$w: SGR colour passes byte for byte" \
		'grep -aqF "$(printf "\033[1;31mKSBT-RED\033[0m")" "$f"'
	ksb_check "$w: cursor movement passes byte for byte" \
		'grep -aqF "$(printf "\033[5;10HKSBT-AT\033[2A\033[K")" "$f"'
	ksb_check "$w: no OSC 52 (clipboard), its payload neither" \
		'! grep -aq "52;\|S1NCVC1DTElQ" "$f"'
	ksb_check "$w: no title" '! grep -aq "KSBT-TITLE" "$f"'
	ksb_check "$w: no OSC, DCS, APC, SOS, PM introducer at all" \
		'! grep -aqP "\x1b[\]P_X^]" "$f"'
	ksb_check "$w: no window operation (resize, title report)" \
		'! grep -aqF "$(printf "\033[8;1000")" "$f" && ! grep -aqF "$(printf "\033[21t")" "$f"'
	ksb_check "$w: no 8-bit C1 byte" '! LC_ALL=C grep -aqP "[\x80-\x9f]" "$f"'
}

ksb_say "ksb-run in the foreground"
KSB_QEMU=$GUEST pty "$T/tty1" 60 ip netns exec "$GW" "$KSB_BUILDDIR/ksb-run" \
	-f "$T/ksb.conf" --accel tcg -- /bin/true
od -c "$T/tty1" | tail -n 12
check_tty "$T/tty1" "foreground"

ksb_say "ksb-run in the foreground: its lines in raw mode, the last line"
# -v: the start-time breakdown is logged once the guest is ready, with the
# terminal raw; the guest's last line has no newline.  Read to the end.
KSB_QEMU=$GUEST KSB_TEST_CONSOLE_TAIL=KSBT-MID PTY_UNTIL=KSBT-NEVER \
	pty "$T/tty3" 60 ip netns exec "$GW" "$KSB_BUILDDIR/ksb-run" \
	-f "$T/ksb.conf" --accel tcg -v -- /bin/true
od -c "$T/tty3" | tail -n 6
crlf() {
	python3 - "$T/tty3" "$1" <<'PY'
import re, sys
d = open(sys.argv[1], "rb").read()
i = d.find(b"console escape")
if i < 0:
    sys.exit(1)
if sys.argv[2] == "lines":
    # Every line ksb-run wrote with the terminal raw ends in CR LF.
    sys.exit(1 if re.search(rb"[^\r]\n", d[i:]) or d[i:].count(b"ksb-run: ") < 2 else 0)
j = d.find(b"KSBT-MID")
sys.exit(0 if j >= 0 and d[j + 8:j + 10] == b"\r\n" and d.endswith(b"\r\n") else 1)
PY
}
ksb_check "foreground: every ksb-run line in raw mode ends in CR LF" 'crlf lines'
ksb_check "foreground: a guest's last line is ended before the shell's prompt" 'crlf tail'

ksb_say "ksbctl attach"
id=$(KSB_QEMU=$GUEST KSB_TEST_CONSOLE_HOLD_S=30 timeout 60 ip netns exec "$GW" \
	"$KSB_BUILDDIR/ksb-run" -f "$T/ksb.conf" --detach --name con1 --accel tcg \
	-- /bin/true 2>"$T/err2")
ksb_check "--detach printed the ID" '[ "$id" = con1 ]'
pty "$T/tty2" 30 "$KSB_BUILDDIR/ksbctl/ksbctl" -f "$T/ksb.conf" attach con1
od -c "$T/tty2" | tail -n 12
check_tty "$T/tty2" "attach"
"$KSB_BUILDDIR/ksbctl/ksbctl" -f "$T/ksb.conf" stop con1 >/dev/null 2>&1 || true

[ "$fails" = 0 ] || ksb_fail "$fails check(s) failed"
echo "PASS: console_filter ($pass checks)"
