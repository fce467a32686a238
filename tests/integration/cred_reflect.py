#!/usr/bin/env python3
"""cred_reflect.py: the TLS origin of tests/integration/credswap.sh.

  cred_reflect.py ADDR PORT CERT KEY EXPECTDIR LOG

HTTP/1.1 with keep-alive (standard library only).  Every request it
receives is one JSON line in LOG (method, target, every Host field as
received), so a test can prove what reached it and what did not.

  GET /check/NAME   (origin- or absolute-form, any query) compares the exact field the gateway must have
                    written against EXPECTDIR/NAME (first line "FIELD",
                    second line the exact value, no newline after it):
                    200 {"match": true} when the field is there once and
                    equal byte for byte, else 200 {"match": false,
                    "why": ...} (lengths only, never the value)
  GET /reflect/ENC/FRAMING
                    hands back the credential it received (x-api-key, the
                    Bearer token or the Basic password) encoded as ENC
                    (reflect_encodings) in FRAMING: length, chunked (7-byte
                    chunks), eof (delimited by the close), sse (an event
                    stream), header (a response field), status (the
                    reason phrase), interim (a 103 before the answer),
                    dribble (a byte per write), tail (the body ends in
                    all of the value but its last byte), eofcut (eof
                    ended by a TCP close, no close_notify), short (a
                    Content-Length 50 bytes over what is sent, then a TCP
                    close), gzip (compressed when
                    the request accepts gzip); always Connection: close
  HEAD ...          200, Content-Length: 5, no body (keep-alive)
  PUT /early/...    413 at once, before reading the body (early())
  PUT ...           reads the body (a 100 Continue first when asked),
                    200 {"len": bytes}
  anything else     200 {"ok": true}
"""
import http.server
import base64
import gzip
import json
import os
import socket
import socketserver
import ssl
import sys
import threading
import time
import urllib.parse

ADDR, PORT, CERT, KEY, EXPECTDIR, LOG = sys.argv[1:7]
LOCK = threading.Lock()


def reflect_encodings(v):
    """ENC -> the bytes a server quoting v (bytes) would write."""
    def pct(hexd):
        return "".join(chr(c) if chr(c).isalnum() or chr(c) in "-._~"
                       else ("%%%02" + hexd) % c for c in v).encode()
    def pcteach(fmt):  # every byte %XX, fmt(i, c) its two hex digits
        return "".join("%" + fmt(i, c) for i, c in enumerate(v)).encode()

    def mixcase(i, c):  # upper/lower chosen per digit
        d = "%02x" % c
        return "".join(x.upper() if (i + k) % 2 else x
                       for k, x in enumerate(d))

    def jsonu(i, c):  # \u00XX either case, every third byte raw
        if i % 3 == 2 and chr(c) not in '"\\':
            return chr(c)
        return ("\\u%04X" if i % 2 else "\\u%04x") % c
    j = json.dumps(v.decode("latin-1"))[1:-1].encode()
    return {
        "pctall": pcteach(lambda i, c: "%02X" % c),
        "pctallower": pcteach(lambda i, c: "%02x" % c),
        "pctmix": pcteach(mixcase),
        "pctsome": "".join(chr(c) if i % 2 and chr(c).isalnum()
                           else "%" + mixcase(i, c)
                           for i, c in enumerate(v)).encode(),
        "jsonu": "".join("\\u%04x" % c for c in v).encode(),
        "jsonumix": "".join(jsonu(i, c) for i, c in enumerate(v)).encode(),
        "raw": v,
        "b64": base64.b64encode(v),
        "b64a1": base64.b64encode(b"x" + v),
        "b64a2": base64.b64encode(b"xy" + v),
        "b64url": base64.urlsafe_b64encode(b"x" + v),
        # wrapped: MIME (76 columns, CRLF; RFC 2045 §6.8), PEM (64, LF)
        "b64mime": base64.encodebytes(b"x" + v).replace(b"\n", b"\r\n"),
        "b64pem": b"\n".join(base64.b64encode(b"xy" + v)[i:i + 64] for i in
                             range(0, len(base64.b64encode(b"xy" + v)), 64)),
        "pct": pct("X"),
        "pctlower": pct("x"),
        "json": j,
        "jsonslash": j.replace(b"/", b"\\/"),
    }


class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    wbufsize = 65536

    def log_message(self, *a):
        pass

    def record(self):
        d = {"method": self.command, "target": self.path,
             "host": self.headers.get_all("host") or []}
        with LOCK, open(LOG, "a") as f:
            f.write(json.dumps(d) + "\n")

    def reply(self, obj):
        b = (json.dumps(obj) + "\n").encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(b)))
        self.end_headers()
        self.wfile.write(b)

    def check(self, name):
        if "/" in name or name.startswith("."):
            return {"match": False, "why": "bad name"}
        with open(os.path.join(EXPECTDIR, name), "rb") as f:
            field, want = f.read().split(b"\n", 1)
        got = self.headers.get_all(field.decode()) or []
        if len(got) != 1:
            return {"match": False, "why": "%d fields" % len(got)}
        # http.client decodes field values as latin-1
        g = got[0].encode("latin-1")
        if g != want:
            return {"match": False,
                    "why": "got %d bytes, want %d; same start: %s" %
                    (len(g), len(want), g[:7] == want[:7])}
        return {"match": True}

    def secret(self):
        k = self.headers.get("x-api-key")
        a = self.headers.get("authorization") or ""
        if k is not None:
            return k.encode("latin-1")
        if a.lower().startswith("bearer "):
            return a[7:].encode("latin-1")
        if a.lower().startswith("basic "):
            return base64.b64decode(a[6:]).split(b":", 1)[1]
        return b"none"

    def out(self, b):
        self.wfile.write(b)

    def reflect(self, enc, framing):
        e = reflect_encodings(self.secret())[enc]
        body = b'{"echo": "' + e + b'", "n": 1}\n'
        if framing == "tail":  # the body ends in all of it but one byte
            body = b'{"echo": "' + e[:-1]
        self.close_connection = True
        w = self.out
        if framing == "gzip":  # compressed when the client accepts it
            ae = self.headers.get("accept-encoding") or ""
            gz = "gzip" in ae
            if gz:
                body = gzip.compress(body)
            w(b"HTTP/1.1 200 OK\r\nConnection: close\r\n" +
              (b"Content-Encoding: gzip\r\n" if gz else b"") +
              b"X-Got-Accept-Encoding: " + ae.encode() +
              b"\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
            self.wfile.flush()
            return
        if framing == "interim":
            w(b"HTTP/1.1 103 Early Hints\r\nLink: </s?k=" + e +
              b">; rel=preload\r\n\r\n")
        status = b"200 OK " + e if framing == "status" else b"200 OK"
        w(b"HTTP/1.1 " + status + b"\r\nConnection: close\r\n")
        if framing == "header":
            w(b"X-Echo: " + e + b"\r\n")
        if framing in ("chunked", "sse"):
            if framing == "sse":
                w(b"Content-Type: text/event-stream\r\n")
                body = b"event: echo\ndata: " + e + b"\n\n"
            w(b"Transfer-Encoding: chunked\r\n\r\n")
            for i in range(0, len(body), 7):
                c = body[i:i + 7]
                w(b"%x\r\n%s\r\n" % (len(c), c))
                self.wfile.flush()
            w(b"0\r\n\r\n")
        elif framing in ("eof", "eofcut"):
            w(b"\r\n" + body)
        elif framing == "short":  # the close comes before the body's end
            w(b"Content-Length: %d\r\n\r\n" % (len(body) + 50) + body)
        else:
            w(b"Content-Length: %d\r\n\r\n" % len(body))
            if framing == "dribble":
                self.wfile.flush()
                for c in body:
                    self.connection.sendall(bytes([c]))
            else:
                w(body)
        self.wfile.flush()
        if framing in ("eofcut", "short"):  # a TCP close, no close_notify
            self.connection.shutdown(socket.SHUT_RDWR)
        if framing == "eof":  # close_notify: the body's end, not a cut
            try:
                self.connection.unwrap()
            except (OSError, ssl.SSLError):
                pass

    def do_GET(self):
        self.record()
        path = urllib.parse.urlsplit(self.path).path
        if path.startswith("/reflect/"):
            enc, framing = path.split("/")[2:4]
            return self.reflect(enc, framing)
        if path.startswith("/check/"):
            return self.reply(self.check(path[7:]))
        self.reply({"ok": True})

    do_POST = do_GET

    def handle_expect_100(self):  # sent at once (wfile is buffered)
        r = super().handle_expect_100()
        self.wfile.flush()
        return r

    def early(self):
        """413 at once, the body unread (RFC 9112 §9.6) for 3 s, then
        what comes of it read and dropped (2 s without a byte ends it)
        before the close, as a server that lingers does; the bytes that
        came are logged."""
        b = b"too large\n"
        self.close_connection = True
        self.wfile.write(b"HTTP/1.1 413 Content Too Large\r\n"
                         b"Content-Length: %d\r\nConnection: close\r\n"
                         b"\r\n%s" % (len(b), b))
        self.wfile.flush()
        time.sleep(3)
        self.connection.settimeout(2)
        n, want = 0, int(self.headers.get("content-length", "0"))
        try:
            while n < want:
                x = self.rfile.read1(65536)
                if not x:
                    break
                n += len(x)
        except (OSError, ssl.SSLError):
            pass
        with LOCK, open(LOG, "a") as f:
            f.write(json.dumps({"early_body_bytes": n}) + "\n")

    def do_HEAD(self):
        self.record()
        self.send_response(200)
        self.send_header("Content-Length", "5")
        self.end_headers()

    def do_PUT(self):  # http.server answers Expect: 100-continue itself
        self.record()
        if self.path.startswith("/early/"):
            return self.early()
        n = int(self.headers.get("content-length", "0"))
        self.reply({"len": len(self.rfile.read(n))})


class S(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(CERT, KEY)
ctx.set_alpn_protocols(["http/1.1"])
srv = S((ADDR, int(PORT)), H)
srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
srv.serve_forever()
