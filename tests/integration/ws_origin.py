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
  anything else    echoed as it came (text or binary)
"""
import asyncio
import json
import ssl
import sys

import websockets
import websockets.server

ADDR, PORT, CERT, KEY, REALFILE, LOG = sys.argv[1:7]
REAL = open(REALFILE).read().strip()


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
