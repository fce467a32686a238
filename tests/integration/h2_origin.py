#!/usr/bin/python3
"""h2_origin.py: the h2 TLS origin of tests/integration/h2.sh.

  h2_origin.py ADDR PORT CERT KEY REALFILE LOG

Speaks HTTP/2 only (ALPN h2; python3-h2), a thread per connection, and
checks what it receives against the real value in REALFILE:

  /echo      200, JSON {"key", "auth": "real" | "none" | "other",
             "placeholder": any "ksbph_" in the headers or body,
             "authority", "len": body bytes}, trailers x-echo-trailer: ok
  /reflect   200, the real value in a header, in the body (split across
             two DATA frames) and in a trailer: all must reach the guest
             masked
  /slow      200, its body sent after 3 s (a stream held open)
  /early     200 as soon as its HEADERS come, before the request's body
  /hold...   never answered (the stream stays open)
  /hname     the real value lowercased as a response field's name
  /push      a PUSH_PROMISE on its stream (the gateway disabled push)
Every request is one JSON line in LOG.
"""
import json
import socket
import ssl
import struct
import sys
import threading
import time

import h2.config
import h2.connection
import h2.events

ADDR, PORT, CERT, KEY, REALFILE, LOG = sys.argv[1:7]
REAL = open(REALFILE).read().split("\n")[0]
LOCK = threading.Lock()


def classify(v):
    if v is None:
        return "none"
    if v.lower().startswith("bearer "):
        v = v[7:]
    return "real" if v == REAL else "other"


def log(rec):
    with LOCK, open(LOG, "a") as f:
        f.write(json.dumps(rec) + "\n")


def answer(conn, sock, sid, hdrs, body):
    path = hdrs.get(":path", "").split("?")[0]
    seen = "ksbph_" in json.dumps(hdrs).lower() or b"ksbph_" in body.lower()
    rec = {"path": path, "key": classify(hdrs.get("x-api-key")),
           "auth": classify(hdrs.get("authorization")),
           "placeholder": seen, "authority": hdrs.get(":authority"),
           "len": len(body)}
    log(rec)
    if path.startswith("/hold"):
        return  # never answered: the stream stays open
    if path == "/hname":
        # the real value, lowercased (h2 names are), as a field's name
        conn.send_headers(sid, [(":status", "200"),
                                ("x-" + REAL.lower(), "1")], end_stream=True)
        sock.sendall(conn.data_to_send())
        return
    if path == "/push":
        # a PUSH_PROMISE (promised stream 2; :method GET, :scheme https,
        # :path / from HPACK's static table) though push is disabled
        p = struct.pack(">I", 2) + b"\x82\x87\x84"
        sock.sendall(conn.data_to_send() + struct.pack(">I", len(p))[1:] +
                     bytes([5, 4]) + struct.pack(">I", sid) + p)
        return
    if path == "/reflect":
        b = ("before " + REAL + " after\n").encode()
        conn.send_headers(sid, [(":status", "200"), ("x-echo", REAL)])
        conn.send_data(sid, b[:10])
        sock.sendall(conn.data_to_send())
        conn.send_data(sid, b[10:])
        conn.send_headers(sid, [("x-trail", REAL)], end_stream=True)
    elif path == "/slow":
        conn.send_headers(sid, [(":status", "200")])
        sock.sendall(conn.data_to_send())
        time.sleep(3)
        conn.send_data(sid, b"slow done\n", end_stream=True)
    else:
        out = (json.dumps(rec) + "\n").encode()
        conn.send_headers(sid, [(":status", "200"),
                                ("content-type", "application/json")])
        conn.send_data(sid, out)
        conn.send_headers(sid, [("x-echo-trailer", "ok")], end_stream=True)
    sock.sendall(conn.data_to_send())


def serve(sock):
    conn = h2.connection.H2Connection(
        h2.config.H2Configuration(client_side=False, validate_inbound_headers=True))
    conn.initiate_connection()
    sock.sendall(conn.data_to_send())
    heads, bodies = {}, {}
    while True:
        try:
            data = sock.recv(65536)
        except OSError:
            return
        if not data:
            return
        for ev in conn.receive_data(data):
            if isinstance(ev, h2.events.RequestReceived):
                heads[ev.stream_id] = {k.decode() if isinstance(k, bytes) else k:
                                       v.decode() if isinstance(v, bytes) else v
                                       for k, v in ev.headers}
                bodies[ev.stream_id] = b""
                if heads[ev.stream_id].get(":path") == "/early":
                    # answered before the request's body ends
                    conn.send_headers(ev.stream_id, [(":status", "200")])
                    conn.send_data(ev.stream_id, b"early\n", end_stream=True)
            elif isinstance(ev, h2.events.DataReceived):
                bodies[ev.stream_id] = bodies.get(ev.stream_id, b"") + ev.data
                conn.acknowledge_received_data(
                    ev.flow_controlled_length, ev.stream_id)
            elif isinstance(ev, h2.events.StreamEnded):
                sid = ev.stream_id
                if heads.get(sid, {}).get(":path") == "/early":
                    heads.pop(sid, None)
                    continue
                answer(conn, sock, sid, heads.pop(sid, {}), bodies.pop(sid, b""))
            elif isinstance(ev, h2.events.ConnectionTerminated):
                sock.sendall(conn.data_to_send())
                return
        sock.sendall(conn.data_to_send())


def main():
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(CERT, KEY)
    ctx.set_alpn_protocols(["h2"])
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((ADDR, int(PORT)))
    ls.listen(64)
    while True:
        c, _ = ls.accept()
        try:
            s = ctx.wrap_socket(c, server_side=True)
        except (ssl.SSLError, OSError):
            c.close()
            continue
        threading.Thread(target=serve, args=(s,), daemon=True).start()


main()
