#!/usr/bin/python3
# tests/e2e/forward_flood_guest.py: stands in for qemu-system-x86_64
# (KSB_QEMU) and floods the forward port (org.ksb.forward, proto/fwd.h)
# as a hostile guest root would.  KSB_TEST_FLOOD says how:
#   errors: KSB_TEST_FLOOD_N (100000) OPEN frames, each a protocol error
#           the host would log (the guest never opens anything);
#   unread: KSB_TEST_FLOOD_MIB (64) MiB of HELLO frames, each answered by
#           the host, whose answers this guest never reads;
#   hold:   no flood: it reads the host's frames, writes "host SHOT <id>"
#           for each SHOT and never answers one.
# It stops when the host closes the channel or the flood is out, writes
# "flood done <bytes sent> <how it ended>" to $KSB_TEST_OUT, and runs on:
# READY on the control port, EXIT 0 on STOP.
import os, select, struct, sys

from fakeqemu import chardev_fd, wait_argv, write_all

ctl, fwd = chardev_fd("ctl"), chardev_fd("fwd")
out = open(os.environ["KSB_TEST_OUT"], "a", buffering=1)
mode = os.environ.get("KSB_TEST_FLOOD", "errors")
HELLO, OPEN = 1, 2


def frame(t, sid, payload=b""):
    return struct.pack(">BBHII", t, 0, 0, sid, len(payload)) + payload


wait_argv(ctl)
write_all(ctl, b"SELFTEST ok 7 1\nREADY\n")

if mode == "hold":
    os.write(fwd, frame(HELLO, 0, struct.pack(">I", 1)))
    fbuf = b""
    while True:
        r, _, _ = select.select([ctl, fwd], [], [], 120)
        if not r:
            sys.exit(0)
        if ctl in r:
            d = os.read(ctl, 4096)
            if not d or b"STOP" in d:
                write_all(ctl, b"EXIT 0\n")
                sys.exit(0)
        if fwd in r:
            d = os.read(fwd, 65536)
            if not d:
                sys.exit(0)
            fbuf += d
            while len(fbuf) >= 12:
                t, _, _, sid, n = struct.unpack(">BBHII", fbuf[:12])
                if len(fbuf) < 12 + n:
                    break
                fbuf = fbuf[12 + n:]
                if t == 3:
                    out.write("host SHOT %d\n" % sid)
if mode == "errors":
    one = frame(OPEN, 1, struct.pack(">H", 22))
    total = int(os.environ.get("KSB_TEST_FLOOD_N", "100000")) * len(one)
    first = frame(HELLO, 0, struct.pack(">I", 1))
else:
    one = frame(HELLO, 0, struct.pack(">I", 1))
    total = int(os.environ.get("KSB_TEST_FLOOD_MIB", "64")) << 20
    first = b""
chunk = one * (65536 // len(one))
sent, how = 0, "flood out"
try:
    write_all(fwd, first)
    while sent < total:
        write_all(fwd, chunk)
        sent += len(chunk)
except OSError as e:
    how = "host closed the channel (%s)" % e.__class__.__name__
out.write("flood done %d %s\n" % (sent, how))

while True:
    r, _, _ = select.select([ctl], [], [], 120)
    if not r:
        break
    d = os.read(ctl, 4096)
    if not d or b"STOP" in d:
        write_all(ctl, b"EXIT 0\n")
        sys.exit(0)
