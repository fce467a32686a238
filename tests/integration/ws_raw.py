#!/usr/bin/python3
"""ws_raw.py: hand-made WebSocket frames from a guest over a CONNECT
tunnel, for tests/integration/websocket.sh (what no library sends).

  ws_raw.py PROXY HOST CAFILE CASE

The upgrade to wss://HOST/ws with x-api-key: $KSB_PH, then CASE's frames
(each TLS record one write; with "dribble" in CASE a byte per record,
TCP_NODELAY, so the gateway reads them in pieces).  Prints the status
line, then what the server sent until it closed (10 s at most): "close
CODE REASON" for a Close frame, "text ..." for a text frame, and
"real: yes|no" (did any byte of it hold the real value, $KSB_REALFILE).
"""
import os
import socket
import ssl
import struct
import sys

from tunnel import connect, tls, ws_frame, ws_upgrade

proxy, host, cafile, case = sys.argv[1:5]
PH = os.environ.get("KSB_PH", "").encode()
REAL = open(os.environ["KSB_REALFILE"]).read().strip().encode()


frame = ws_frame


half = len(PH) // 2
CASES = {
    "ok": [frame(0x81, b"hello")],
    "text": [frame(0x81, b"key=" + PH)],
    "binary": [frame(0x82, b"\x00" + PH)],
    "fragments": [frame(0x01, b"key=" + PH[:half]), frame(0x80, PH[half:])],
    "fragments-ping-between": [frame(0x01, b"key=" + PH[:3]),
                               frame(0x89, b"x"),
                               frame(0x80, PH[3:])],
    "ping": [frame(0x89, PH)],
    "pong": [frame(0x8a, PH)],
    "close-reason": [frame(0x88, b"\x03\xe8" + PH)],
    "dribble-text": [frame(0x81, b"key=" + PH)],
    "unmasked": [frame(0x81, b"hello", mask=False)],
    "reserved-opcode": [frame(0x83, b"hello")],
    "rsv1": [frame(0xc1, b"hello")],
    "ping-126": [frame(0x89, b"p" * 126)],
    "fragmented-ping": [frame(0x09, b"p")],
    "len64-high-bit": [bytes([0x82, 0xff]) + b"\x80" + b"\0" * 6 + b"\x05"
                       + b"abcd"],
    "reflect": [frame(0x81, b"reflect")],
    "reflect-ping": [frame(0x81, b"reflect-ping")],
}
t = tls(connect(proxy, host), host, cafile)
head, buf = ws_upgrade(t, host, PH, on_close_exit=False)
print(head.split(b"\r\n")[0].decode("latin-1"))
t.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
for f in CASES[case]:
    if "dribble" in case:
        for i in range(len(f)):
            t.sendall(f[i:i + 1])
    else:
        t.sendall(f)


def frames(got):
    """The complete frames in got: (opcode, payload)."""
    out, at = [], 0
    while at + 2 <= len(got):
        b0, n, h = got[at], got[at + 1] & 0x7f, 2
        if n == 126:
            h = 4
            n = struct.unpack(">H", got[at + 2:at + 4])[0] \
                if at + 4 <= len(got) else 1 << 62
        elif n == 127:
            h = 10
            n = struct.unpack(">Q", got[at + 2:at + 10])[0] \
                if at + 10 <= len(got) else 1 << 62
        if at + h + n > len(got):
            break
        out.append((b0 & 0x0f, got[at + h:at + h + n]))
        at += h + n
    return out


got = buf
try:
    while not any(op in (1, 8) for op, _ in frames(got)):
        b = t.recv(65536)
        if not b:
            break
        got += b
except (socket.timeout, ssl.SSLError, ConnectionError):
    pass
for op, p in frames(got):
    if op == 8:
        code = struct.unpack(">H", p[:2])[0] if len(p) >= 2 else "none"
        print("close", code, p[2:].decode("latin-1"))
    elif op == 1:
        print("text", p.decode("latin-1"))
    elif op == 9:
        print("ping", p.decode("latin-1"))
print("real:", "yes" if REAL in got else "no")
