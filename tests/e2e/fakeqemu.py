# tests/e2e/fakeqemu.py: what the stand-ins for qemu-system-x86_64
# (KSB_QEMU, tests/e2e/*_guest.py) share: the socket descriptors ksb-run
# passes on QEMU's command line ("-chardev socket,id=NAME,fd=N"), the
# share path of a 9p export, a write that finishes, and the wait for the
# guest's argument line on the control port (proto/guestctl.h: "ARGV ..."
# ending in a NUL byte).  A hostile guest root speaks through these.
import os
import select
import sys


def chardev_fd(name, argv=None):
    """The fd of -chardev socket,id=NAME,fd=N in argv (sys.argv), or None."""
    for a in argv or sys.argv:
        if a.startswith("socket,id=%s,fd=" % name):
            return int(a.split("=")[-1])
    return None


def share_path(marker, argv=None):
    """path= of the first -fsdev/-virtfs argument holding marker, or None."""
    for a in argv or sys.argv:
        if marker in a:
            return [o[5:] for o in a.split(",") if o.startswith("path=")][0]
    return None


def write_all(fd, b):
    """Write all of b to fd (blocking), as many writes as it takes."""
    while b:
        b = b[os.write(fd, b):]


def wait_argv(ctl, timeout=10):
    """Read the control port until the ARGV line's NUL (or timeout seconds
    of silence); exit 0 when the host closes it first.  Returns the bytes."""
    buf = b""
    while b"ARGV " not in buf or not buf.endswith(b"\0"):
        r, _, _ = select.select([ctl], [], [], timeout)
        if not r:
            break
        d = os.read(ctl, 65536)
        if not d:
            sys.exit(0)
        buf += d
    return buf
