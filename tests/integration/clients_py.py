#!/usr/bin/env python3
"""clients_py.py: Python's HTTP clients through the credential swap.

  clients_py.py requests|urllib PROXY URL CAFILE PLACEHOLDER REALFILE

A GET and a POST (a JSON body) to URL with "Authorization: Bearer
PLACEHOLDER" through the CONNECT proxy PROXY (http://ADDR:PORT),
verifying the server against CAFILE: the python3-requests library, or
urllib.request of the standard library.  Prints one line per request,
"METHOD status=N auth=A leak=no|yes", A being what the origin
(clients_origin.py) said of the field it received; leak=yes when the
real value (REALFILE, first line) is anywhere in the status line,
headers or body the client received.  Exits 0 only when every request
was answered 200 with auth=ok and no leak.
"""
import json
import ssl
import sys

MODE, PROXY, URL, CA, PH, REAL = sys.argv[1:7]
DUMP = REAL[5:] if REAL.startswith("dump:") else None
real = None if DUMP else open(REAL, "rb").read().split(b"\n")[0]
hdr = {"Authorization": "Bearer " + PH, "Content-Type": "application/json"}
body = json.dumps({"model": "x", "messages": [{"role": "user",
                                               "content": "hi"}]}).encode()
ok = True


def judge(method, status, raw, payload):
    global ok
    try:
        auth = json.loads(payload).get("auth")
    except ValueError:
        auth = "unparsed"
    if DUMP:
        with open(DUMP, "ab") as f:
            f.write(raw)
        leak, word = False, "dumped"
    else:
        leak = real in raw
        word = "yes" if leak else "no"
    print("%s status=%d auth=%s leak=%s" % (method, status, auth, word))
    ok = ok and status == 200 and auth == "ok" and not leak


if MODE == "requests":
    import requests
    s = requests.Session()
    s.trust_env = False
    for m in ("GET", "POST"):
        r = s.request(m, URL, headers=hdr, data=body if m == "POST" else None,
                      proxies={"https": PROXY}, verify=CA, timeout=30)
        raw = (r.reason or "").encode() + b"".join(
            (k + ": " + v).encode("latin-1") for k, v in r.headers.items())
        judge(m, r.status_code, raw + r.content, r.content)
else:
    import urllib.request
    ctx = ssl.create_default_context(cafile=CA)
    op = urllib.request.build_opener(
        urllib.request.ProxyHandler({"https": PROXY}),
        urllib.request.HTTPSHandler(context=ctx))
    for m in ("GET", "POST"):
        rq = urllib.request.Request(URL, data=body if m == "POST" else None,
                                    headers=hdr, method=m)
        with op.open(rq, timeout=30) as r:
            b = r.read()
            raw = (r.reason or "").encode() + str(r.headers).encode("latin-1")
            judge(m, r.status, raw + b, b)
sys.exit(0 if ok else 1)
