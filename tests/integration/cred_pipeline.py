#!/usr/bin/env python3
"""cred_pipeline.py: Python's http.client pipelining N requests over a
CONNECT tunnel, for tests/integration/credential.sh.

  cred_pipeline.py PROXY HOST CAFILE N

CONNECT HOST:443 through PROXY, TLS verified against CAFILE, then N
requests GET /pipe-cI (x-api-key: $KSB_PH) written with http.client's own
request writer, all before any response is read (its state reset by hand
between them: http.client does not pipeline by itself), then the N
responses read with http.client.HTTPResponse, in order.  Prints one line
per response: "STATUS BODY".
"""
import http.client
import os
import socket
import ssl
import sys

proxy, host, cafile, n = sys.argv[1:5]
addr, port = proxy.rsplit(":", 1)
s = socket.create_connection((addr, int(port)), timeout=20)
s.sendall(b"CONNECT %s:443 HTTP/1.1\r\nHost: %s:443\r\n\r\n"
          % (host.encode(), host.encode()))
head = b""
while b"\r\n\r\n" not in head:
    b = s.recv(1)
    if not b:
        sys.exit("connect: closed")
    head += b
conn = http.client.HTTPConnection(host)
conn.sock = ssl.create_default_context(cafile=cafile).wrap_socket(
    s, server_hostname=host)
for i in range(int(n)):
    conn.putrequest("GET", "/pipe-c%d" % i)
    conn.putheader("x-api-key", os.environ.get("KSB_PH", ""))
    conn.endheaders()
    conn._HTTPConnection__state = http.client._CS_IDLE
for i in range(int(n)):
    r = http.client.HTTPResponse(conn.sock, method="GET")
    r.begin()
    print(r.status, r.read().decode().strip())
