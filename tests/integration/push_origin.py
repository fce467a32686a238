#!/usr/bin/env python3
"""push_origin.py: a git remote over HTTP(S) for tests/integration/push.sh.

Serves the bare repositories under --root through the real
`git http-backend' (git-http-backend(1), the CGI of the git package) for
clients that send HTTP Basic credentials (RFC 7617) equal to --user and
--password; anything else gets 401 with a Basic challenge.  With --cert
and --key the listener speaks TLS.  --hang instead accepts connections
and never answers (a remote that hangs).  --log FILE gets one JSON line
per request: method, path, auth ("none", "good" or "bad"), status.
--ready-file FILE is written once listening.  Standard library only.
"""

import argparse
import base64
import http.server
import json
import os
import socket
import ssl
import subprocess
import threading
import time

ap = argparse.ArgumentParser()
ap.add_argument("--addr", required=True)
ap.add_argument("--port", type=int, required=True)
ap.add_argument("--root")
ap.add_argument("--user", default="ci")
ap.add_argument("--password", default="")
ap.add_argument("--cert")
ap.add_argument("--key")
ap.add_argument("--log")
ap.add_argument("--hang", action="store_true")
ap.add_argument("--ready-file", required=True)
a = ap.parse_args()
lock = threading.Lock()


def log(rec):
    if a.log:
        with lock, open(a.log, "a") as f:
            f.write(json.dumps(rec) + "\n")


def ready():
    with open(a.ready_file + ".tmp", "w") as f:
        f.write("%s %d\n" % (a.addr, a.port))
    os.rename(a.ready_file + ".tmp", a.ready_file)


if a.hang:
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((a.addr, a.port))
    s.listen(16)
    ready()
    held = []
    while True:
        c, _ = s.accept()
        held.append(c)  # never read, never answered, never closed
        log({"hang": "accepted"})


class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def auth(self):
        h = self.headers.get("Authorization") or ""
        if not h:
            return "none"
        want = base64.b64encode(
            ("%s:%s" % (a.user, a.password)).encode()).decode()
        return "good" if h == "Basic " + want else "bad"

    def cgi(self):
        auth = self.auth()
        if auth != "good":
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="ksbt"')
            self.send_header("Content-Length", "0")
            self.end_headers()
            log({"method": self.command, "path": self.path, "auth": auth,
                 "status": 401})
            return
        n = int(self.headers.get("Content-Length") or 0)
        if (self.headers.get("Transfer-Encoding") or "").lower() == "chunked":
            data = b""
            while True:
                size = int(self.rfile.readline().strip(), 16)
                if size == 0:
                    self.rfile.readline()
                    break
                data += self.rfile.read(size)
                self.rfile.readline()
        else:
            data = self.rfile.read(n) if n else b""
        path, _, query = self.path.partition("?")
        env = dict(os.environ, GIT_PROJECT_ROOT=a.root, GIT_HTTP_EXPORT_ALL="1",
                   REQUEST_METHOD=self.command, PATH_INFO=path,
                   QUERY_STRING=query, REMOTE_USER=a.user,
                   REMOTE_ADDR=self.client_address[0],
                   CONTENT_TYPE=self.headers.get("Content-Type") or "",
                   CONTENT_LENGTH=str(len(data)),
                   GIT_HTTP_MAX_REQUEST_BUFFER="100M")
        env.pop("GIT_DIR", None)
        out = subprocess.run(["git", "http-backend"], input=data, env=env,
                             capture_output=True, check=False).stdout
        head, _, body = out.partition(b"\r\n\r\n")
        status = 200
        hdrs = []
        for line in head.decode("latin-1").split("\r\n"):
            k, _, v = line.partition(":")
            if k.lower() == "status":
                status = int(v.strip().split()[0])
            elif k:
                hdrs.append((k, v.strip()))
        self.send_response(status)
        for k, v in hdrs:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        log({"method": self.command, "path": self.path, "auth": auth,
             "status": status})

    do_GET = cgi
    do_POST = cgi

    def log_message(self, *args):
        pass


srv = http.server.ThreadingHTTPServer((a.addr, a.port), H)
if a.cert:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(a.cert, a.key)
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
ready()
srv.serve_forever()
