#!/usr/bin/env python3
"""cred_origin.py: the TLS origin of tests/integration/credential.sh.

  cred_origin.py ADDR PORT CERT KEY REALFILE LOG

Serves HTTP/1.1 with keep-alive (standard library only) and checks the
credential it receives against the real value in REALFILE (what the
gateway must swap in; the guest only has a placeholder):

  GET  /echo...        200, JSON: {"key": "real" | "none" | "other",
                       "auth": same for Authorization (Bearer or the Basic
                       password), "placeholder": bool (any "ksbph_" seen in
                       the head or body), "host": Host}
  POST /upload         200, JSON as /echo plus "len": body bytes read
  POST /v1/messages    an SSE stream (chunked): event 1, then waits for
                       the client's "GO" on /go (bounded 10 s), event 2:
                       so the client sees event 1 before event 2 exists
                       only if the gateway relays without buffering
  GET  /go             200: releases the waiting stream
  GET  /hname          the real value lowercased as a response field name
  GET  /ws             101 to an Upgrade: websocket, then echoes bytes
  GET  /wsext          as /ws, its 101 naming permessage-deflate
  GET  /dribble        200 with 8 KiB of head, one byte per TLS record,
                       then closes
  GET  /big?mb=N       200, N MiB (Content-Length), each MiB the real
                       value then "a"s and a LF: a download to mask
  POST /trickle        reads its body a byte at a time, writing the count
                       so far to LOG.trickle after each of the last 100
                       (and every 4096 before); then as /upload
Every request is one JSON line in LOG: method, path, key, auth,
placeholder.
"""
import base64
import http.server
import json
import socketserver
import ssl
import sys
import threading

ADDR, PORT, CERT, KEY, REALFILE, LOG = sys.argv[1:7]
REAL = open(REALFILE).read().split("\n")[0]
GO = threading.Event()
LOCK = threading.Lock()


def classify(v):
    if v is None:
        return "none"
    return "real" if v == REAL else "other"


class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # no 40 ms delayed-ACK stalls
    wbufsize = 65536  # a response in one write (flushed per request)

    def log_message(self, *a):
        pass

    def seen(self, body=b""):
        auth = self.headers.get("authorization")
        a = None
        if auth and auth.lower().startswith("bearer "):
            a = auth[7:]
        elif auth and auth.lower().startswith("basic "):
            dec = base64.b64decode(auth[6:]).decode("latin-1")
            a = dec.split(":", 1)[1] if ":" in dec else dec
        head = str(self.requestline) + str(self.headers)
        ph = "ksbph_" in head or b"ksbph_" in body
        d = {"method": self.command, "path": self.path,
             "key": classify(self.headers.get("x-api-key")),
             "auth": classify(a), "placeholder": ph,
             "host": self.headers.get("host")}
        with LOCK, open(LOG, "a") as f:
            f.write(json.dumps(d) + "\n")
        return d

    def reply(self, code, obj, extra=()):
        b = (json.dumps(obj) + "\n").encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(b)))
        for k, v in extra:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(b)

    def dribble(self):
        pad = "a" * 2000
        head = "HTTP/1.1 200 OK\r\n" + "".join(
            "x-pad-%d: %s\r\n" % (i, pad) for i in range(4)) + \
            "Content-Length: 3\r\nConnection: close\r\n\r\nok\n"
        for c in head.encode():
            self.connection.sendall(bytes([c]))
        self.close_connection = True

    def big(self):
        mb = int(self.path.split("mb=", 1)[1])
        block = (REAL + "a" * ((1 << 20) - len(REAL) - 1) + "\n").encode()
        self.seen()
        self.send_response(200)
        self.send_header("Content-Length", str(mb << 20))
        self.end_headers()
        for _ in range(mb):
            self.wfile.write(block)
        self.wfile.flush()

    def trickle(self, n):
        got = 0
        body = b""
        while got < n:
            b = self.rfile.read(1)
            if not b:
                break
            body += b
            got += 1
            if n - got < 100 or got % 4096 == 0:  # the slow tail: each
                with open(LOG + ".trickle", "w") as f:
                    f.write("%d\n" % got)
        return body

    def do_GET(self):
        if self.path.startswith("/big"):
            return self.big()
        if self.path.startswith("/dribble"):
            return self.dribble()
        if self.path.startswith("/go"):
            GO.set()
            return self.reply(200, {"go": True})
        if self.path.startswith("/hname"):
            # the real value, lowercased, as a response field's name
            return self.reply(200, {"hname": True},
                              [("x-" + REAL.lower(), "1")])
        if self.path.startswith("/ws"):
            self.seen()
            self.send_response(101)
            self.send_header("Upgrade", "websocket")
            self.send_header("Connection", "Upgrade")
            if self.path.startswith("/wsext"):  # never offered to it
                self.send_header("Sec-WebSocket-Extensions",
                                 "permessage-deflate")
            self.end_headers()
            self.wfile.flush()
            data = self.rfile.read1(4096)
            self.wfile.write(b"echo:" + data)
            self.wfile.flush()
            self.close_connection = True
            return
        self.reply(200, self.seen())

    def do_POST(self):
        n = int(self.headers.get("content-length", "0"))
        if self.path.startswith("/trickle"):
            body = self.trickle(n)
        else:
            body = self.rfile.read(n)
        d = self.seen(body)
        if self.path.startswith("/v1/messages"):
            GO.clear()
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for i, ev in enumerate([b"event: one\ndata: {}\n\n",
                                    b"event: two\ndata: {}\n\n"]):
                if i == 1:
                    GO.wait(10)
                self.wfile.write(b"%x\r\n%s\r\n" % (len(ev), ev))
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            return
        d["len"] = len(body)
        self.reply(200, d)


class S(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(CERT, KEY)
ctx.set_alpn_protocols(["http/1.1"])
srv = S((ADDR, int(PORT)), H)
srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
srv.serve_forever()
