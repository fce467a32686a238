#!/usr/bin/env python3
"""rebind_client.py: a keep-alive client across a reload, for
tests/integration/rebind.sh.

  rebind_client.py PROXY HOST CAFILE FIFO

One http.client connection tunnelled through PROXY (addr:port, CONNECT
HOST:443), TLS verified against CAFILE (the origin's CA and the
gateway's: the tunnel may be opaque or terminated).  GET /before on it,
then it blocks reading a line from FIFO (the test writes one once its
reload is done), then GET /after on the same connection, with
"x-api-key: $KSB_PH" on both.  A connection the gateway closed meanwhile
is reopened once, as a real client library retries an idempotent
request on a new connection.  Prints one line per request: "before" or
"after", "reused" or "new", the status, the X-Ksb-Deny header ("-"
without) and the origin's JSON when it answered.
"""
import http.client
import os
import ssl
import sys

proxy, host, cafile, fifo = sys.argv[1:5]
addr, port = proxy.rsplit(":", 1)
ctx = ssl.create_default_context(cafile=cafile)
hdrs = {"x-api-key": os.environ.get("KSB_PH", "")}


def connect():
    c = http.client.HTTPSConnection(addr, int(port), context=ctx, timeout=20)
    c.set_tunnel(host, 443)
    return c


def get(c, path):
    c.request("GET", path, headers=hdrs)
    r = c.getresponse()
    body = r.read().decode("latin-1").strip()
    return "%d %s %s" % (r.status, r.getheader("x-ksb-deny", "-"), body)


c = connect()
print("before reused", get(c, "/before"), flush=True)
with open(fifo) as f:
    f.readline()
try:
    print("after reused", get(c, "/after"), flush=True)
except (http.client.HTTPException, ConnectionError, ssl.SSLError, OSError):
    c.close()
    print("after new", get(connect(), "/after"), flush=True)
