#!/usr/bin/python3
# tests/e2e/forward_hostile_guest.py: stands in for qemu-system-x86_64
# (KSB_QEMU) and plays a hostile guest *root* on the forward port
# (org.ksb.forward, proto/fwd.h), which the real guest's forwarder never
# does.  On the control port it says READY and answers STOP with EXIT 0.
# On the forward port: HELLO, then an OPEN and a SHOT of its own (the
# host must drop both: a guest never opens anything on the host), then it
# waits for the host's OPEN, answers OPENED and sends more DATA than the
# window allows, ignoring credit (the host must close that stream,
# reason protocol); then,
# after the host's next OPEN, a header with a reserved byte set (the host
# must end the channel).  What it saw goes to $KSB_TEST_OUT, a line each.
import os, select, struct, sys

from fakeqemu import chardev_fd, wait_argv, write_all

ctl, fwd = chardev_fd("ctl"), chardev_fd("fwd")
out = open(os.environ["KSB_TEST_OUT"], "a", buffering=1)
host_port = int(os.environ["KSB_TEST_HOST_PORT"])
HELLO, OPEN, SHOT, OPENED, DATA, CREDIT, EOF, CLOSE = range(1, 9)
WINDOW = 128 * 1024


def frame(t, sid, payload=b"", reserved=0):
    return struct.pack(">BBHII", t, reserved, 0, sid, len(payload)) + payload


wait_argv(ctl)
# The real init reports its enforcement self-test before READY.
write_all(ctl, b"SELFTEST ok 7 1\nREADY\n")
write_all(fwd, frame(HELLO, 0, struct.pack(">I", 1)))
# A guest-opened stream to a host port, and a SHOT: both must be dropped.
write_all(fwd, frame(OPEN, 1, struct.pack(">H", host_port)))
write_all(fwd, frame(SHOT, 2))
out.write("sent guest OPEN and SHOT\n")

fbuf, opens, fwd_open = b"", 0, True
while True:
    r, _, _ = select.select([ctl, fwd] if fwd_open else [ctl], [], [], 120)
    if not r:
        break
    if ctl in r:
        d = os.read(ctl, 4096)
        if not d or b"STOP" in d:
            write_all(ctl, b"EXIT 0\n")
            sys.exit(0)
    if fwd in r:
        d = os.read(fwd, 65536)
        if not d:
            # The host ended the channel; the "VM" runs on.
            out.write("host closed the forward port\n")
            fwd_open = False
            continue
        fbuf += d
        while len(fbuf) >= 12:
            t, r1, r2, sid, n = struct.unpack(">BBHII", fbuf[:12])
            if len(fbuf) < 12 + n:
                break
            body, fbuf = fbuf[12:12 + n], fbuf[12 + n:]
            if t == OPEN:
                opens += 1
                out.write("host OPEN %d\n" % sid)
                write_all(fwd, frame(OPENED, sid))
                if opens == 1:
                    # 64 windows, credits ignored: far more than the
                    # host can have drained into its client meanwhile.
                    chunk = b"x" * 32768
                    for _ in range(64 * WINDOW // len(chunk)):
                        write_all(fwd, frame(DATA, sid, chunk))
                    out.write("sent %d bytes on %d\n" % (64 * WINDOW, sid))
                else:
                    write_all(fwd, frame(DATA, sid, b"y", reserved=1))
                    out.write("sent a bad header\n")
            elif t == CLOSE:
                out.write("host CLOSE %d reason %d\n" % (sid, struct.unpack(">I", body)[0]))
            elif t == HELLO:
                out.write("host HELLO\n")
