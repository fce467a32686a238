#!/usr/bin/python3
"""h2_grpc.py: gRPC (Debian's python3-grpcio) for tests/integration/h2.sh.

  h2_grpc.py server ADDR PORT CERT KEY REALFILE LOG
  h2_grpc.py client PROXY HOST CAFILE TOKEN

No protobuf: the methods take and return raw bytes.  The server checks
the "authorization" metadata against "Bearer " + the real value:

  /t.T/Unary   -> "auth=real|other|none", the real value in its trailing
                  metadata (x-echo: it must reach the client masked)
  /t.T/Deny    -> aborts PERMISSION_DENIED (grpc-status 7 in trailers)
  /t.T/Bidi    -> a bidirectional stream: each message answered with
                  "echo:N:<msg>" as it comes; the client sends the next
                  only after the answer (a long-lived stream, no
                  END_STREAM until the end)
Every call is one JSON line in LOG.  The client prints one line per check.
"""
import json
import sys
import threading
from concurrent import futures

import grpc

LOCK = threading.Lock()


def server(addr, port, cert, key, realfile, log):
    real = open(realfile).read().split("\n")[0]

    def seen(ctx, method):
        md = dict(ctx.invocation_metadata())
        a = md.get("authorization")
        v = "none" if a is None else ("real" if a == "Bearer " + real
                                      else "other")
        with LOCK, open(log, "a") as f:
            f.write(json.dumps({"method": method, "auth": v,
                                "placeholder": "ksbph_" in json.dumps(md)})
                    + "\n")
        return v

    def unary(req, ctx):
        v = seen(ctx, "Unary")
        ctx.set_trailing_metadata((("x-echo", real),))
        return ("auth=" + v).encode()

    def deny(req, ctx):
        seen(ctx, "Deny")
        ctx.abort(grpc.StatusCode.PERMISSION_DENIED, "denied here")

    def bidi(it, ctx):
        seen(ctx, "Bidi")
        for i, m in enumerate(it):
            yield b"echo:%d:" % i + m

    h = grpc.method_handlers_generic_handler("t.T", {
        "Unary": grpc.unary_unary_rpc_method_handler(unary),
        "Deny": grpc.unary_unary_rpc_method_handler(deny),
        "Bidi": grpc.stream_stream_rpc_method_handler(bidi),
    })
    s = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    s.add_generic_rpc_handlers((h,))
    creds = grpc.ssl_server_credentials(
        [(open(key, "rb").read(), open(cert, "rb").read())])
    s.add_secure_port("%s:%s" % (addr, port), creds)
    s.start()
    s.wait_for_termination()


def client(proxy, host, ca, token):
    creds = grpc.ssl_channel_credentials(open(ca, "rb").read())
    ch = grpc.secure_channel("%s:443" % host, creds,
                             options=[("grpc.http_proxy", "http://" + proxy)])
    md = (("authorization", "Bearer " + token),)
    unary = ch.unary_unary("/t.T/Unary")
    r, call = unary.with_call(b"x", metadata=md, timeout=20)
    print("unary", r.decode(), "status", call.code().name)
    print("trailer", dict(call.trailing_metadata()).get("x-echo", "-"))
    try:
        ch.unary_unary("/t.T/Deny")(b"x", metadata=md, timeout=20)
        print("deny none")
    except grpc.RpcError as e:
        print("deny", e.code().name, e.details())
    # a long-lived bidirectional stream: one message, its answer, then the
    # next (the request stream stays open between them)
    q = []
    ev = threading.Event()

    def gen():
        for i in range(3):
            yield b"m%d" % i
            ev.wait(10)
            ev.clear()
    bidi = ch.stream_stream("/t.T/Bidi")
    for m in bidi(gen(), metadata=md, timeout=30):
        q.append(m.decode())
        ev.set()
    print("bidi", " ".join(q))
    try:
        ch.unary_unary("/t.T/Unary")(
            b"x", metadata=(("x-other", token),), timeout=20)
        print("misuse none")
    except grpc.RpcError as e:
        print("misuse", e.code().name)


if sys.argv[1] == "server":
    server(*sys.argv[2:8])
else:
    client(*sys.argv[2:6])
