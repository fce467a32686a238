#!/usr/bin/python3
"""ws_split.py: a real value the origin splits across the fragments of a
message with control frames between (audit2 F1), for
tests/integration/websocket.sh; hand-made frames, every byte checked.

  ws_split.py PROXY HOST CAFILE CASE

CASE: ping, pong, several, in-ping, ping-head, many (ws_origin.py "split SEP": one
connection, the value split at every k in 1..63), or close (ws_origin.py
"close K": one connection for each k in 1..63), or closehead (ws_origin.py
"closehead K" for K 8, 40, 100 and all but the value's last byte).  Prints one line per
case: "CASE: N masked, M bad" (a message, ping or Close reason not as
the real value masked to the byte; each bad one also on a line
"bad k=..."), then "parts: none|..." (any 8 bytes in a row of the real
value, $KSB_REALFILE, anywhere in what the guest got), "pings: N" (ping
frames received), "closed: CODE" ("eof" for none).
"""
import os
import socket
import ssl
import struct
import sys

from tunnel import connect as tunnel_connect, tls, ws_frame, ws_upgrade

proxy, host, cafile, case = sys.argv[1:5]
PH = os.environ.get("KSB_PH", "").encode()
REAL = open(os.environ["KSB_REALFILE"]).read().strip().encode()
N = len(REAL)


frame = ws_frame


def connect():
    t = tls(tunnel_connect(proxy, host), host, cafile)
    head, buf = ws_upgrade(t, host, PH)
    if not head.startswith(b"HTTP/1.1 101"):
        sys.exit("upgrade: " + head.split(b"\r\n")[0].decode("latin-1"))
    return t, buf


def frames(got):
    """The complete frames in got (server frames, payload < 126)."""
    out, at = [], 0
    while at + 2 <= len(got) and at + 2 + (got[at + 1] & 0x7f) <= len(got):
        n = got[at + 1] & 0x7f
        out.append((got[at] & 0x0f, got[at + 2:at + 2 + n]))
        at += 2 + n
    return out


def session(msg, until):
    """Send msg, read until until(frames) or the close (20 s at most)."""
    t, got = connect()
    t.sendall(frame(0x81, msg))
    try:
        while not until(frames(got)):
            b = t.recv(65536)
            if not b:
                break
            got += b
    except (socket.timeout, ssl.SSLError, ConnectionError):
        pass
    t.close()
    return got


def parts(got):
    return [i for i in range(N - 7) if REAL[i:i + 8] in got]


allgot, bad, good = b"", [], 0
if case == "close":
    for k in range(1, 64):
        got = session(b"close %d" % k, lambda f: any(o == 8 for o, _ in f))
        allgot += got
        f = frames(got)
        want = [(1, b"<" + b"*" * k), (8, b"\x03\xe8" + b"*" * (N - k) + b">")]
        if f == want:
            good += 1
        else:
            bad.append("bad k=%d %r" % (k, got[:200]))
elif case == "closehead":
    for k in (8, 40, 100, N - 1):
        got = session(b"closehead %d" % k, lambda f: any(o == 8 for o, _ in f))
        allgot += got
        if frames(got) == [(8, b"\x03\xe8" + b"*" * k)]:
            good += 1
        else:
            bad.append("bad k=%d %r" % (k, got[:200]))
else:
    allgot = session(b"split " + case.encode(), lambda f: any(
        o == 1 and p == b"split done" for o, p in f) or any(
        o == 8 for o, _ in f))
    msg, k = b"", 1
    for op, p in frames(allgot):
        if op == 9 and case in ("in-ping", "ping-head"):
            if p != b"*" * (N - k if case == "in-ping" else k):
                bad.append("bad k=%d ping %r" % (k, p))
        if op in (0, 1) and p != b"split done":
            msg += p
        if op in (0, 1) and p.endswith(b">"):
            want = b"<" + b"*" * (k if case == "in-ping" else N) + b">"
            if msg == want:
                good += 1
            else:
                bad.append("bad k=%d %r" % (k, msg))
            msg, k = b"", k + 1
f = frames(allgot)
print("%s: %d masked, %d bad" % (case, good, len(bad)))
for b in bad[:5]:
    print(b)
print("parts:", parts(allgot) or "none")
print("pings:", sum(1 for o, _ in f if o == 9))
c = [p for o, p in f if o == 8]
print("closed:", struct.unpack(">H", c[-1][:2])[0] if c else "eof")
