#!/usr/bin/env python3
# hold_origin.py ADDR PORT CERT KEY DIR: a TLS HTTP/1.1 origin for
# requestrow.sh (keep-alive).  /fast is answered at once.  /hold writes
# DIR/got (the request's x-api-key value, for the test to await: the
# request has reached the origin) and answers only once DIR/release
# exists (at most 30 s), so that the test can act while the origin holds
# the response.
import http.server, os, ssl, sys, time

addr, port, cert, key, d = sys.argv[1], int(sys.argv[2]), sys.argv[3], \
    sys.argv[4], sys.argv[5]


class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def do_GET(self):
        if self.path.startswith("/hold"):
            with open(d + "/got.tmp", "w") as f:
                f.write(self.headers.get("x-api-key", "") + "\n")
            os.rename(d + "/got.tmp", d + "/got")
            end = time.time() + 30
            while not os.path.exists(d + "/release") and time.time() < end:
                time.sleep(0.05)
        body = b"ok\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(cert, key)
srv = http.server.ThreadingHTTPServer((addr, port), H)
srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
srv.serve_forever()
