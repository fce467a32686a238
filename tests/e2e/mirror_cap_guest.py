#!/usr/bin/python3
# tests/e2e/mirror_cap_guest.py: stands in for qemu-system-x86_64
# (KSB_QEMU) as a guest root writing to its read-write mirror share (the
# 9p export with security_model=mapped-xattr: the same file system QEMU
# would write for the guest).  It writes $KSB_TEST_MARK (a small file),
# then up to $KSB_TEST_WRITE_MIB MiB into "fill", 1 MiB a write, and
# reports "wrote <bytes> <errno name or ok>" to $KSB_TEST_OUT; then READY
# on the control port and EXIT 0 on STOP.
import errno, os, select, sys

from fakeqemu import chardev_fd, share_path, wait_argv, write_all

ctl = chardev_fd("ctl")
share = share_path("security_model=mapped-xattr")
out = open(os.environ["KSB_TEST_OUT"], "a", buffering=1)


wait_argv(ctl)

with open(os.path.join(share, os.environ["KSB_TEST_MARK"]), "w") as f:
    f.write("the guest was here\n")
n, how = 0, "ok"
mib = int(os.environ.get("KSB_TEST_WRITE_MIB", "0"))
if mib:
    fd = os.open(os.path.join(share, "fill"), os.O_WRONLY | os.O_CREAT, 0o600)
    chunk = b"g" * (1 << 20)
    try:
        for _ in range(mib):
            n += os.write(fd, chunk)
        os.fsync(fd)
    except OSError as e:
        how = errno.errorcode.get(e.errno, str(e.errno))
    os.close(fd)
out.write("wrote %d %s\n" % (n, how))
write_all(ctl, b"SELFTEST ok 7 1\nREADY\n")
while True:
    r, _, _ = select.select([ctl], [], [], 120)
    if not r:
        break
    d = os.read(ctl, 4096)
    if not d or b"STOP" in d:
        write_all(ctl, b"EXIT 0\n")
        sys.exit(0)
