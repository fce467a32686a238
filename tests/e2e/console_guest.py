#!/usr/bin/python3
# tests/e2e/console_guest.py: stands in for qemu-system-x86_64 (KSB_QEMU)
# and plays a guest that writes hostile terminal sequences to its serial
# console (OSC 52 clipboard, titles, DCS, APC, window operations, 8-bit
# C1) between ordinary colour (SGR) and cursor movement, then KSBT-END,
# then EXIT 0 after KSB_TEST_CONSOLE_HOLD_S seconds (ksbctl attach's
# replay needs the instance alive).  For tests/e2e/console_filter.sh.
# A witness, not product code.
import os, select, sys, time

ctl = con = None
for a in sys.argv:
    if a.startswith("socket,id=ctl,fd="):
        ctl = int(a.split("=")[-1])
    if a.startswith("socket,id=con,fd="):
        con = int(a.split("=")[-1])
if ctl is None or con is None:
    sys.exit("no control or console chardev")
os.set_blocking(ctl, True)
os.set_blocking(con, True)

buf = b""
end = time.monotonic() + 30
while b"ARGV " not in buf and time.monotonic() < end:
    r, _, _ = select.select([ctl], [], [], 1)
    if r:
        d = os.read(ctl, 65536)
        if not d:
            sys.exit(0)
        buf += d

def write_all(fd, b):
    while b:
        b = b[os.write(fd, b):]

write_all(ctl, b"SELFTEST ok 7 1\nREADY\n")
write_all(con, b"KSBT-BEGIN\r\n"
          b"\033[1;31mKSBT-RED\033[0m\r\n"          # SGR: passes
          b"\033[5;10HKSBT-AT\033[2A\033[K\r\n"      # cursor: passes
          b"\033]52;c;S1NCVC1DTElQ\007"              # OSC 52, BEL
          b"\033]52;p;S1NCVC1DTElQ\033\\"            # OSC 52, ST
          b"\033]0;KSBT-TITLE\007\033]2;KSBT-TITLE\033\\"
          b"\033P+q544e\033\\\033_KSBT-APC\033\\"    # DCS, APC
          b"\033[8;1000;1000t\033[21t"               # window ops
          b"\x9d0;KSBT-C1\x07\x9b8;1;1t"             # 8-bit OSC, CSI
          b"KSBT-END\r\n")
# A last line without its newline (console_filter.sh: the shell's prompt
# after ksb-run must still start a line).
write_all(con, os.environ.get("KSB_TEST_CONSOLE_TAIL", "").encode())
hold = float(os.environ.get("KSB_TEST_CONSOLE_HOLD_S", "0"))
end = time.monotonic() + hold
while time.monotonic() < end:
    time.sleep(0.2)
write_all(ctl, b"EXIT 0\n")
end = time.monotonic() + 30
while time.monotonic() < end:
    r, _, _ = select.select([ctl], [], [], 1)
    if r:
        d = os.read(ctl, 65536)
        if not d or b"BYE" in d:
            break
sys.exit(0)
