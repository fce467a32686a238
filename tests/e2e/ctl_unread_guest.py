#!/usr/bin/python3
# tests/e2e/ctl_unread_guest.py: stands in for qemu-system-x86_64
# (KSB_QEMU) as a hostile guest root on the control port in agent mode:
# after the header, READY and HELLO it sends PINGs (each answered by a
# PONG) for up to $KSB_TEST_UNREAD_S seconds (150) and never reads a byte
# again.  It reports "pinged <bytes> <how it ended>" to $KSB_TEST_OUT.
# KSB_TEST_MODE=reports: instead, 1000 REPORTs a second for 8 s, reading
# its port ("reported <n>"), then it waits for STOP.
import os, select, sys, time

fd = None
for a in sys.argv:
    if a.startswith("socket,id=ctl,fd="):
        fd = int(a.split("=")[-1])
out = open(os.environ["KSB_TEST_OUT"], "a", buffering=1)


def write_all(b):
    while b:
        b = b[os.write(fd, b):]


buf = b""
while b"ARGV " not in buf or not buf.endswith(b"\0"):
    r, _, _ = select.select([fd], [], [], 10)
    if not r:
        break
    d = os.read(fd, 65536)
    if not d:
        sys.exit(0)
    buf += d
write_all(b"SELFTEST ok 7 1\nREADY\nHELLO 1 0\n")
if os.environ.get("KSB_TEST_MODE") == "reports":
    # 100 reports every 0.1 s for 8 s (over 20 a second each second),
    # reading what comes; then on to STOP.
    seq, end = 1, time.time() + 8
    while time.time() < end:
        write_all(b"".join(b"REPORT %d 0 info r\n" % (seq + i)
                           for i in range(100)))
        seq += 100
        time.sleep(0.1)
        while select.select([fd], [], [], 0)[0]:
            buf = os.read(fd, 65536)
            if not buf or b"STOP" in buf:
                write_all(b"EXIT 0\n")
                sys.exit(0)
    out.write("reported %d\n" % (seq - 1))
    while True:
        buf = os.read(fd, 65536)
        if not buf or b"STOP" in buf:
            write_all(b"EXIT 0\n")
            sys.exit(0)
chunk = b"".join(b"PING %d\n" % (1000000 + i) for i in range(5000))
sent, how = 0, "time out"
end = time.time() + float(os.environ.get("KSB_TEST_UNREAD_S", "150"))
try:
    while time.time() < end:
        write_all(chunk)
        sent += len(chunk)
except OSError as e:
    how = "the port closed (%s)" % e.__class__.__name__
out.write("pinged %d %s\n" % (sent, how))
