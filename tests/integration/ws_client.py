#!/usr/bin/python3
"""ws_client.py: a guest's WebSocket client (python3-websockets) over a
CONNECT tunnel, for tests/integration/websocket.sh.

  ws_client.py PROXY HOST CAFILE MODE

CONNECT HOST:443 through PROXY (addr:port), then wss://HOST/ws with
x-api-key: $KSB_PH, the library offering permessage-deflate as it does
by default.  MODE:
  echo     a text message, a fragmented one with pings between its
           fragments, a 300-byte and a 70000-byte binary: each echoed
  reflect  asks the origin for the real value in two fragments, and in
           a ping; prints what arrived
  split    the placeholder split across two fragments of a message
  ping     the placeholder as a ping's payload
  pings    the origin pings inside a message the gateway holds (its
           fragment could begin the real value), then outside one: the
           library's pongs reach it
Prints "extensions: ..." and one line per result; for a closed
connection "closed CODE REASON"; "timeout: ..." after 30 s.  Exit 0
whenever it got that far.
"""
import asyncio
import os
import ssl
import sys

from tunnel import connect

import websockets
import websockets.client

proxy, host, cafile, mode = sys.argv[1:5]
PH = os.environ.get("KSB_PH", "")


def tunnel():
    s = connect(proxy, host, need_200=True)
    s.settimeout(None)
    return s


async def run():
    ctx = ssl.create_default_context(cafile=cafile)
    async with websockets.client.connect(
            "wss://%s/ws" % host, sock=tunnel(), ssl=ctx,
            server_hostname=host, extra_headers={"x-api-key": PH},
            max_size=None, open_timeout=15) as ws:
        print("extensions:", [type(e).__name__ for e in ws.extensions])
        try:
            await session(ws)
        except websockets.ConnectionClosed as e:
            print("closed", e.rcvd.code if e.rcvd else "none",
                  e.rcvd.reason if e.rcvd else "")


async def frags(ws, parts):
    """One message in fragments, a ping between each two."""
    async def gen():
        for i, p in enumerate(parts):
            if i > 0:
                await ws.ping(b"between%d" % i)
            yield p
    await ws.send(gen())


async def session(ws):
    if mode == "echo":
        await ws.send("hello")
        print("text:", await ws.recv() == "hello")
        await frags(ws, ["frag-one ", "frag-two ", "frag-three"])
        print("fragmented:",
              await ws.recv() == "frag-one frag-two frag-three")
        for n in (300, 70000):
            b = os.urandom(n).replace(b"k", b"K")
            await ws.send(b)
            print("binary %d:" % n, await ws.recv() == b)
    elif mode == "reflect":
        real = open(os.environ["KSB_REALFILE"]).read().strip()
        await ws.send("reflect")
        m = await ws.recv()
        print("reflect: real %s, masked %s" %
              (real in m, m == "real=" + "*" * len(real) + ";"))
        await ws.send("reflect-ping")
        print("reflect-ping:", await ws.recv())
    elif mode == "split":
        half = len(PH) // 2
        await frags(ws, ["key=" + PH[:half], PH[half:]])
        print("unexpected:", await ws.recv())
    elif mode == "pings":
        real = open(os.environ["KSB_REALFILE"]).read().strip()
        await ws.send("pingme")
        m = await ws.recv()
        print("pingme: masked %s" % (m == "<" + "*" * len(real) + ">"))
        print("pingme:", await ws.recv(), await ws.recv())
    elif mode == "ping":
        await ws.ping(PH.encode())
        print("unexpected:", await ws.recv())


try:
    asyncio.run(asyncio.wait_for(run(), 30))
except asyncio.TimeoutError:
    print("timeout: no answer in 30 s")
