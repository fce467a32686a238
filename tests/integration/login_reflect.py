#!/usr/bin/env python3
"""login_reflect.py PROXY CAFILE PLACEHOLDER STORE: one keep-alive tunnel
through the gateway to api.anthropic.com; GET /fakeapi/echo-auth with the
placeholder, then again after the login's store changed (a refresh: the
gateway swaps in a new access token on the open tunnel).  Prints each
answer's body on a line.  Exit 1 if the store did not change in 30 s."""
import os
import socket
import ssl
import sys
import time

proxy, cafile, ph, store = sys.argv[1:5]
host, port = proxy.rsplit(":", 1)
s = socket.create_connection((host, int(port)), timeout=20)
s.sendall(b"CONNECT api.anthropic.com:443 HTTP/1.1\r\nHost: api.anthropic.com:443\r\n\r\n")
head = b""
while b"\r\n\r\n" not in head:
    head += s.recv(1)
assert b" 200 " in head.split(b"\r\n")[0], head
ctx = ssl.create_default_context(cafile=cafile)
t = ctx.wrap_socket(s, server_hostname="api.anthropic.com")
f = t.makefile("rb")


def get():
    t.sendall(("GET /fakeapi/echo-auth HTTP/1.1\r\nHost: api.anthropic.com\r\n"
               "Authorization: Bearer %s\r\n\r\n" % ph).encode())
    n = 0
    while True:
        line = f.readline()
        if line in (b"\r\n", b""):
            break
        if line.lower().startswith(b"content-length:"):
            n = int(line.split(b":")[1])
    print(f.read(n).decode(errors="replace"), flush=True)


get()
m0 = os.stat(store).st_mtime_ns
end = time.time() + 30
while os.stat(store).st_mtime_ns == m0:
    if time.time() > end:
        sys.exit(1)
    time.sleep(0.2)
time.sleep(1.5)  # the gateway's reload after the store changed (1 s tick)
get()
