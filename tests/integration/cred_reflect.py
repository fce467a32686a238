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
  anything else     200 {"ok": true}
"""
import http.server
import json
import os
import socketserver
import ssl
import sys
import threading
import urllib.parse

ADDR, PORT, CERT, KEY, EXPECTDIR, LOG = sys.argv[1:7]
LOCK = threading.Lock()


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

    def do_GET(self):
        self.record()
        path = urllib.parse.urlsplit(self.path).path
        if path.startswith("/check/"):
            return self.reply(self.check(path[7:]))
        self.reply({"ok": True})

    do_POST = do_GET


class S(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(CERT, KEY)
ctx.set_alpn_protocols(["http/1.1"])
srv = S((ADDR, int(PORT)), H)
srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
srv.serve_forever()
