#!/usr/bin/env python3
"""clients_origin.py: the TLS origin of tests/integration/credclients.sh
and tests/e2e/clients.sh, for real clients through the credential swap.

  clients_origin.py ADDR PORT CERT KEY EXPECTDIR GITROOT LOG

HTTP/1.1 with keep-alive (standard library only).  EXPECTDIR/HOST holds
the exact Authorization value the gateway must have written for requests
to HOST (no newline after it).  Every request is one JSON line in LOG:
method, path, host, and auth = "ok" (the field is there once and equal
byte for byte), "missing", "wrong" or "placeholder" (a ksbph_ mark
arrived: the swap did not happen); never the value.

  /git/...   git's smart HTTP (gitprotocol-http(5)) by the real
             /usr/lib/git-core/git-http-backend as a CGI over GITROOT:
             401 with a Basic challenge until the exact field arrives
             (git sends credentials only when challenged), 403 for a
             wrong one; chunked request bodies decoded for the CGI
  PUT ...    reads the body (http.server sends the 100 Continue when
             asked), 200 {"len": bytes, "sha256": hex, "auth": ...}
  anything   200 {"auth": ..., "echo": the Authorization received}: the
             echo hands the real value back, so that a client that sees
             it would prove the gateway let it flow back
"""
import hashlib
import http.server
import json
import os
import socketserver
import ssl
import subprocess
import sys
import threading

ADDR, PORT, CERT, KEY, EXPECTDIR, GITROOT, LOG = sys.argv[1:8]
LOCK = threading.Lock()
BACKEND = "/usr/lib/git-core/git-http-backend"


class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def log_message(self, *a):
        pass

    def auth(self):
        host = (self.headers.get("host") or "").split(":")[0].lower()
        got = self.headers.get_all("authorization") or []
        if any("ksbph_" in g for g in got):
            return "placeholder"
        if not got:
            return "missing"
        try:
            with open(os.path.join(EXPECTDIR, os.path.basename(host)),
                      "rb") as f:
                want = f.read()
        except OSError:
            return "wrong"
        return "ok" if len(got) == 1 and \
            got[0].encode("latin-1") == want else "wrong"

    def record(self, a):
        d = {"method": self.command, "path": self.path,
             "host": self.headers.get("host"), "auth": a}
        with LOCK, open(LOG, "a") as f:
            f.write(json.dumps(d) + "\n")

    def send(self, code, body, ctype="application/json", extra=()):
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in extra:
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def body(self):
        """The request body, chunked (RFC 9112 §7.1) or by length."""
        if "chunked" in (self.headers.get("transfer-encoding") or ""):
            out = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0], 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b""):
                        pass
                    return out
                out += self.rfile.read(size)
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("content-length") or 0))

    def git(self):
        path, _, query = self.path[len("/git"):].partition("?")
        data = self.body()
        env = {"GIT_PROJECT_ROOT": GITROOT, "GIT_HTTP_EXPORT_ALL": "1",
               "PATH_INFO": path, "QUERY_STRING": query,
               "REQUEST_METHOD": self.command, "REMOTE_USER": "agent",
               "REMOTE_ADDR": self.client_address[0],
               "CONTENT_TYPE": self.headers.get("content-type") or "",
               "CONTENT_LENGTH": str(len(data)),
               "PATH": "/usr/bin:/bin", "HOME": GITROOT}
        for h in ("git-protocol", "content-encoding"):
            if self.headers.get(h):
                env["HTTP_" + h.upper().replace("-", "_")] = \
                    self.headers.get(h)
        if self.headers.get("git-protocol"):
            env["GIT_PROTOCOL"] = self.headers.get("git-protocol")
        p = subprocess.run([BACKEND], input=data, env=env,
                           capture_output=True, timeout=60)
        head, _, body = p.stdout.partition(b"\r\n\r\n")
        code, extra, ctype = 200, [], "text/plain"
        for line in head.split(b"\r\n"):
            k, _, v = line.decode("latin-1").partition(":")
            k, v = k.strip().lower(), v.strip()
            if k == "status":
                code = int(v.split()[0])
            elif k == "content-type":
                ctype = v
            elif k and k not in ("content-length",):
                extra.append((k, v))
        self.send(code, body, ctype, extra)

    def handle_one(self):
        a = self.auth()
        self.record(a)
        if self.path.startswith("/git/"):
            if a == "missing":
                self.body()
                return self.send(401, b"auth\n", "text/plain",
                                 [("WWW-Authenticate", 'Basic realm="git"')])
            if a != "ok":
                self.body()
                return self.send(403, b"wrong credential\n", "text/plain")
            return self.git()
        if self.command == "PUT":
            data = self.body()
            return self.send(200, (json.dumps(
                {"len": len(data), "sha256": hashlib.sha256(data).hexdigest(),
                 "auth": a}) + "\n").encode())
        self.body()
        self.send(200, (json.dumps(
            {"auth": a, "echo": self.headers.get("authorization") or ""}) +
            "\n").encode())

    do_GET = do_POST = do_PUT = do_HEAD = handle_one


class S(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


srv = S((ADDR, int(PORT)), H)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(CERT, KEY)
srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
srv.serve_forever()
