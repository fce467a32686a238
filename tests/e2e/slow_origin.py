#!/usr/bin/env python3
# slow_origin.py: a TLS origin for tests/e2e/top_guests.sh (the network
# edge, in the test's namespace): HTTP/1.1 over TLS, one thread per
# connection.  GET /slow sends SIZE bytes at RATE bytes a second (in
# tenths of a second), so that a download keeps its tunnel open and
# moving bytes for SIZE / RATE seconds; any other path is a file of DIR.
# A witness, not product code; every wait is bounded.
#
#   slow_origin.py ADDR PORT CERT KEY DIR SIZE RATE READY-FILE
import http.server
import os
import socketserver
import ssl
import sys
import time

addr, port, cert, key, root = sys.argv[1:6]
size, rate, ready = int(sys.argv[6]), int(sys.argv[7]), sys.argv[8]


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 30

    def do_GET(self):
        if self.path == "/slow":
            self.send_response(200)
            self.send_header("Content-Length", str(size))
            self.end_headers()
            chunk, left = bytes(rate // 10 or 1), size
            while left > 0:
                n = min(left, len(chunk))
                self.wfile.write(chunk[:n])
                self.wfile.flush()
                left -= n
                time.sleep(0.1)
            return
        name = os.path.join(root, os.path.basename(self.path))
        if not os.path.isfile(name):
            self.send_error(404)
            return
        with open(name, "rb") as f:
            body = f.read()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, fmt, *args):
        sys.stderr.write("%s\n" % (fmt % args))


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True


ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(cert, key)
srv = Server((addr, int(port)), Handler)
srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
with open(ready, "w") as f:
    f.write("ready\n")
srv.serve_forever()
