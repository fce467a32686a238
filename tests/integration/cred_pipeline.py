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
import sys

from tunnel import connect, tls

proxy, host, cafile, n = sys.argv[1:5]
conn = http.client.HTTPConnection(host)
conn.sock = tls(connect(proxy, host, timeout=20), host, cafile)
for i in range(int(n)):
    conn.putrequest("GET", "/pipe-c%d" % i)
    conn.putheader("x-api-key", os.environ.get("KSB_PH", ""))
    conn.endheaders()
    conn._HTTPConnection__state = http.client._CS_IDLE
for i in range(int(n)):
    r = http.client.HTTPResponse(conn.sock, method="GET")
    r.begin()
    print(r.status, r.read().decode().strip())
