#!/usr/bin/env python3
"""rebind_lease.py: plays ksb-run's lease connection, for
tests/integration/rebind.sh.

  rebind_lease.py SOCK ID PROFILE

REGISTERs ID with PROFILE on the control socket SOCK, prints the OK
line, then every line the gateway sends on the lease's connection
(RELOADED n, CREDS ..., proto/ctl.h) as it comes, until the gateway
closes it or stdin ends (then it exits, which ends the lease).  Lines
are flushed one by one, so the test can wait for them.
"""
import select
import socket
import sys

sock, ident, profile = sys.argv[1:4]
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(10)
s.connect(sock)
s.sendall(("REGISTER %s %s\n" % (ident, profile)).encode())
fds = []
buf = b""
while True:
    r, _, _ = select.select([s, sys.stdin], [], [], 600)
    if not r or sys.stdin in r and not sys.stdin.readline():
        break
    if s not in r:
        continue
    msg, got, _, _ = socket.recv_fds(s, 65536, 4)
    fds.extend(got)  # the tap stays open, as QEMU would keep it
    if not msg:
        break
    buf += msg
    while b"\n" in buf:
        line, buf = buf.split(b"\n", 1)
        print(line.decode("latin-1"), flush=True)
