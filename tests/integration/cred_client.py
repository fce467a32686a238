#!/usr/bin/env python3
"""cred_client.py: a guest's raw HTTP/1.1 over a CONNECT tunnel, for
tests/integration/credential.sh (cases curl will not send).

  cred_client.py PROXY HOST CAFILE ALPN REQFILE

CONNECT HOST:443 through PROXY (addr:port), TLS with the given ALPN list
(comma-separated, "-" for none) verified against CAFILE, then the bytes
of REQFILE (with "@PH@" replaced by $KSB_PH) sent as they are; prints
every response status line and X-Ksb-Deny header it reads (until the
server closes, 10 s at most), or "tls-error: <reason>" when the
handshake fails.  Exit 0 whenever it got that far.  With $KSB_DRIBBLE
set, the CONNECT head goes a byte per write and the request one byte per
TLS record (TCP_NODELAY).  From an "@SLOW@" in REQFILE on (the marker
itself not sent), the bytes go one per TLS record every 50 ms.
"@PAUSE@" in REQFILE: the bytes after it go 0.5 s later.
"""
import os
import socket
import ssl
import sys
import time

proxy, host, cafile, alpn, reqfile = sys.argv[1:6]
addr, port = proxy.rsplit(":", 1)
# KSB_CLIENT_TIMEOUT: seconds per socket operation (contrib/sanitize.sh
# raises it: the sanitized gateway is several times slower).
s = socket.create_connection((addr, int(port)),
                             timeout=float(os.environ.get("KSB_CLIENT_TIMEOUT", "10")))
connect = (b"CONNECT %s:443 HTTP/1.1\r\nHost: %s:443\r\n\r\n"
           % (host.encode(), host.encode()))
if os.environ.get("KSB_DRIBBLE"):
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    for i in range(len(connect)):
        s.sendall(connect[i:i + 1])
else:
    s.sendall(connect)
head = b""
while b"\r\n\r\n" not in head:
    b = s.recv(1)
    if not b:
        print("connect: closed")
        sys.exit(0)
    head += b
if not head.startswith(b"HTTP/1.1 200"):
    print("connect:", head.split(b"\r\n")[0].decode())
    sys.exit(0)
ctx = ssl.create_default_context(cafile=cafile)
if alpn != "-":
    ctx.set_alpn_protocols(alpn.split(","))
try:
    t = ctx.wrap_socket(s, server_hostname=host)
except ssl.SSLError as e:
    print("tls-error:", e.reason or e)
    sys.exit(0)
req = open(reqfile, "rb").read().replace(
    b"@PH@", os.environ.get("KSB_PH", "").encode())
req, slow = req.split(b"@SLOW@", 1) if b"@SLOW@" in req else (req, b"")
if os.environ.get("KSB_DRIBBLE"):
    t.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    for i in range(len(req)):
        t.sendall(req[i:i + 1])
else:  # "@PAUSE@": the rest goes 0.5 s later (a body still coming)
    for i, part in enumerate(req.split(b"@PAUSE@")):
        if i:
            time.sleep(0.5)
        t.sendall(part)
t.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
for i in range(len(slow)):
    time.sleep(0.05)
    t.sendall(slow[i:i + 1])
buf = b""
try:
    while True:
        b = t.recv(65536)
        if not b:
            break
        buf += b
except (socket.timeout, ssl.SSLError, ConnectionError):
    pass
for line in buf.split(b"\r\n"):
    if line.startswith(b"HTTP/1.1 ") or line.lower().startswith(
            b"x-ksb-deny:"):
        print(line.decode("latin-1"))
    elif line.startswith(b"{"):
        print(line.decode("latin-1"))
