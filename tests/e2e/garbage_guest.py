#!/usr/bin/python3
# tests/e2e/garbage_guest.py: stands in for qemu-system-x86_64 (KSB_QEMU)
# and plays a guest root that writes KSB_TEST_GARBAGE_KIB KiB of garbage
# (binary bytes, overlong lines, lines ksb-run does not know) to the
# control port after READY (unasked SELFTEST lines too), then EXIT 7, and exits on BYE (or after 60 s).
# KSB_TEST_DEAF=1: closes the control port after READY instead, and waits.
# For tests/e2e/ctl_garbage.sh.  A witness, not product code.
import os, select, sys, time

fd = None
for a in sys.argv:
    if a.startswith("socket,id=ctl,fd="):
        fd = int(a.split("=")[-1])
if fd is None:
    sys.exit("no control chardev")
os.set_blocking(fd, True)
kib = int(os.environ.get("KSB_TEST_GARBAGE_KIB", "256"))

buf = b""
end = time.monotonic() + 30
while b"ARGV " not in buf and time.monotonic() < end:
    r, _, _ = select.select([fd], [], [], 1)
    if r:
        d = os.read(fd, 65536)
        if not d:
            sys.exit(0)
        buf += d

def write_all(b):
    while b:
        b = b[os.write(fd, b):]

# The real init reports its enforcement self-test before READY.
write_all(b"SELFTEST ok 7 1\nREADY\n")
if os.environ.get("KSB_TEST_DEAF"):
    # A guest that closes its control port after READY: it takes no
    # SELFTEST request after a reload; ksb-run must stop it (SIGHUP to
    # this stand-in) within its 30 s, not wait for it.
    os.close(fd)
    sys.stderr.write("deaf guest: control port closed\n")
    time.sleep(120)
    sys.exit(0)
# Self-test answers nobody asked for (and malformed ones) must not count:
# no audit record, no stop (ctl_garbage.sh).
chunk = (bytes(range(256)) + b"\n" + b"x" * 3000 + b"\n" +
         b"NOSUCH line\n" + b"EXIT nope\n" + b"SELFTEST fail tcp-outside\n" +
         b"SELFTEST ok 7 1\n" + b"SELFTEST ok 99 x\n" +
         b"SELFTEST fail NOT/A-NAME\n")
sent = 0
t0 = time.monotonic()
while sent < kib * 1024:
    write_all(chunk)
    sent += len(chunk)
sys.stderr.write("garbage guest: %d bytes in %.1f s\n" %
                 (sent, time.monotonic() - t0))
write_all(b"EXIT 7\n")
end = time.monotonic() + 60
while time.monotonic() < end:
    r, _, _ = select.select([fd], [], [], 1)
    if r:
        d = os.read(fd, 4096)
        if not d or b"BYE" in d:
            break
