#!/usr/bin/env python3
"""cred_leakcheck.py: what a guest received, checked for a real value,
for tests/integration/credswap.sh.

  cred_leakcheck.py PROXY HOST CAFILE REALFILE REQFILE

CONNECT HOST:443 through PROXY (addr:port), TLS verified against CAFILE,
the bytes of REQFILE ("@PH@" replaced by $KSB_PH), then every byte until
the server closes (10 s at most).  Prints one line:

  status=NNN parse=ok|ERROR leaks=none|ENC,... masked=yes|no len=N

status: the final status; parse: the bytes are one well-formed HTTP/1.1
response (interim ones before it) whose body reads to its end; leaks: the
encodings (raw, base64 and base64url at each alignment, percent-encoding
in both cases, JSON string escaping with and without "\\/") of the first
line of REALFILE found anywhere in the bytes received (base64 also with
the line breaks taken out: "b64lines"); masked: a run of
8 '*' was seen.
"""
import base64
import re
import urllib.parse
import http.client
import io
import json
import os
import socket
import ssl
import sys

from tunnel import connect, tls

proxy, host, cafile, realfile, reqfile = sys.argv[1:6]
real = open(realfile, "rb").read().split(b"\n")[0]


def patterns(v):
    p = {"raw": v}
    for a in range(3):
        first, last = (8 * a + 5) // 6, 8 * (a + len(v)) // 6
        e = base64.b64encode(b"\0" * a + v)[first:last]
        p["b64a%d" % a] = e
        p["b64urla%d" % a] = e.replace(b"+", b"-").replace(b"/", b"_")
    for name, h in (("pct", "X"), ("pctlower", "x")):
        p[name] = "".join(chr(c) if chr(c).isalnum() or chr(c) in "-._~"
                          else ("%%%02" + h) % c for c in v).encode()
    j = json.dumps(v.decode("latin-1"))[1:-1].encode()
    p["json"] = j
    p["jsonslash"] = j.replace(b"/", b"\\/")
    return {k: e for k, e in p.items() if len(e) >= 8}


def jsonesc(m):
    e = m.group(1)
    if e[:1] == b"u":
        return chr(int(e[1:], 16)).encode("utf-8", "surrogatepass")
    return {b"b": b"\b", b"f": b"\f", b"n": b"\n", b"r": b"\r",
            b"t": b"\t"}.get(e, e)


t = tls(connect(proxy, host), host, cafile)
t.sendall(open(reqfile, "rb").read().replace(
    b"@PH@", os.environ.get("KSB_PH", "").encode()))
buf = b""
try:
    while True:
        b = t.recv(65536)
        if not b:
            break
        buf += b
except (socket.timeout, ssl.SSLError, ConnectionError):
    pass


final = buf
while final[9:10] == b"1" and final[9:12] != b"101" and b"\r\n\r\n" in final:
    final = final[final.index(b"\r\n\r\n") + 4:]  # an interim response


class Fake:
    def makefile(self, *a, **k):
        return io.BytesIO(final)


status, parse, n = 0, "ok", 0
try:
    r = http.client.HTTPResponse(Fake())
    r.begin()
    status = r.status
    n = len(r.read())
except Exception as e:  # any framing error
    parse = "ERROR:" + type(e).__name__
leaks = [k for k, e in patterns(real).items() if e in buf]
# what a percent-decoder and a JSON string decoder read from the bytes:
# any mix of raw and escaped bytes (RFC 3986 §2.1, RFC 8259 §7)
if real in urllib.parse.unquote_to_bytes(buf):
    leaks.append("pctdecoded")
if real in re.sub(rb'\\(u[0-9a-fA-F]{4}|["\\/bfnrt])', jsonesc, buf):
    leaks.append("jsondecoded")
# base64 broken into lines (MIME, PEM): the bytes without their line breaks
flat = buf.replace(b"\r", b"").replace(b"\n", b"")
if any(k.startswith("b64") and e in flat for k, e in patterns(real).items()):
    leaks.append("b64lines")
print("status=%d parse=%s leaks=%s masked=%s len=%d" % (
    status, parse, ",".join(leaks) or "none",
    "yes" if b"*" * 8 in buf else "no", n))
