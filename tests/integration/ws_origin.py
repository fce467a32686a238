#!/usr/bin/python3
"""ws_origin.py: a WebSocket origin (python3-websockets, TLS) for
tests/integration/websocket.sh.

  ws_origin.py ADDR PORT CERT KEY REALFILE LOG

Accepts wss:// on ADDR:PORT.  Each connection's handshake is logged as
one JSON line to LOG (the x-api-key it got: "real", "placeholder" or
what else, the Sec-WebSocket-Extensions it was offered, the extensions
negotiated), then every message it receives (and whether it held the
placeholder mark), before it answers:
  "reflect"        the real value (REALFILE) as one message in two
                   fragments, the value split in its middle
  "reflect-ping"   a ping whose payload is the real value
  "split SEP"      the real value R as '<'+R[:k] (a text fragment), SEP's
                   control frames, then R[k:]+'>' (the continuation), for
                   every k in 1..63, then the text "split done".  SEP:
                   ping, pong (payload 'p'), several (ping, pong, empty
                   ping, ping: 4 frames), in-ping (a ping carrying R[k:],
                   then '>'), ping-head (a ping carrying R[:k] too),
                   many (9 pings: more than the gateway holds;
                   k = 5 only; the rest only if the gateway has not
                   closed in 10 s)
  "close K"        '<'+R[:K] (a text fragment), then a Close 1000 whose
                   reason is R[K:]+'>'
  "closehead K"    a Close 1000 whose reason is R[:K] (a value's head
                   that only the end of the stream shows whole), then
                   the connection closed
  "pingme"         '<'+R[:4] (a fragment), a ping, R[4:]+'>', then
                   "pong ok" once the pong came (or "pong timeout"
                   after 10 s), then a ping outside a message the same
                   way ("pong2 ok")
  anything else    echoed as it came (text or binary)
Frames of split, close, closehead and pingme go raw to the transport (what the
library would not send: control frames between fragments).
"""
import asyncio
import json
import ssl
import sys

import websockets
import websockets.server

ADDR, PORT, CERT, KEY, REALFILE, LOG = sys.argv[1:7]
REAL = open(REALFILE).read().strip()


def frame(b0, payload):
    """A server's frame (unmasked): b0 (FIN and opcode), payload <= 125."""
    return bytes([b0, len(payload)]) + payload


SEPS = {"ping": [frame(0x89, b"p")], "pong": [frame(0x8a, b"p")],
        "several": [frame(0x89, b"a"), frame(0x8a, b"b"), frame(0x89, b""),
                    frame(0x89, b"xyz")],
        "ping-head": [], "many": [frame(0x89, b"%d" % i) for i in range(9)]}


async def raw(ws, m):
    """The raw frames of split, close and pingme (see above)."""
    r, w = REAL.encode(), ws.transport.write
    verb, arg = m.split(" ", 1) if " " in m else (m, "")
    if verb == "split":
        for k in range(1, 64) if arg != "many" else [5]:
            w(frame(0x01, b"<" + r[:k]))
            if arg == "in-ping":
                w(frame(0x89, r[k:]) + frame(0x80, b">"))
                continue
            if arg == "ping-head":
                w(frame(0x89, r[:k]))
            for f in SEPS[arg]:
                w(f)
            if arg == "many":  # the gateway gives up before the rest
                try:
                    await asyncio.wait_for(ws.wait_closed(), 10)
                    return
                except asyncio.TimeoutError:
                    pass
            w(frame(0x80, r[k:] + b">"))
        await ws.send("split done")
    elif verb == "close":
        k = int(arg)
        w(frame(0x01, b"<" + r[:k]) + frame(0x88, b"\x03\xe8" + r[k:] + b">"))
    elif verb == "closehead":  # most of the value as a Close reason
        w(frame(0x88, b"\x03\xe8" + r[:int(arg)]))
        ws.transport.close()
    elif verb == "pingme":
        w(frame(0x01, b"<" + r[:4]))
        waiter = await ws.ping(b"are-you-there")
        w(frame(0x80, r[4:] + b">"))
        for name in ("pong", "pong2"):
            try:
                await asyncio.wait_for(waiter, 10)
                await ws.send(name + " ok")
            except asyncio.TimeoutError:
                await ws.send(name + " timeout")
            waiter = await ws.ping(b"plain")


def log(d):
    with open(LOG, "a") as f:
        f.write(json.dumps(d) + "\n")


async def handler(ws, path=None):
    h = ws.request_headers
    key = h.get("x-api-key")
    log({"path": ws.path,
         "key": "real" if key == REAL else
         ("placeholder" if key and "ksbph_" in key else key),
         "offered": h.get("Sec-WebSocket-Extensions"),
         "extensions": [type(e).__name__ for e in ws.extensions]})
    try:
        async for m in ws:
            b = m.encode() if isinstance(m, str) else m
            log({"message": len(b), "placeholder": b"ksbph_" in b.lower()})
            if m == "reflect":
                half = len(REAL) // 2
                await ws.send(iter(["real=" + REAL[:half],
                                    REAL[half:] + ";"]))
            elif isinstance(m, str) and m.split(" ")[0] in (
                    "split", "close", "closehead", "pingme"):
                await raw(ws, m)
            elif m == "reflect-ping":
                await ws.ping(REAL.encode())
                await ws.send("pinged")
            else:
                await ws.send(m)
    except websockets.ConnectionClosed as e:
        log({"closed": e.code})


async def main():
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(CERT, KEY)
    async with websockets.server.serve(handler, ADDR, int(PORT), ssl=ctx,
                                       max_size=None):
        await asyncio.Future()

asyncio.run(main())
