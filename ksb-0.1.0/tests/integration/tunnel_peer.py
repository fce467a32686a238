#!/usr/bin/env python3
# tunnel_peer.py: both ends of a tunnel through the CONNECT proxy, for
# tests/integration/proxy.sh and failclosed.sh.  A witness, not product
# code.  The proxy needs a real ClientHello with the SNI; after it the
# bytes are the test's own, so the origin is plain TCP: it skips the
# ClientHello record, reads one mode line and then:
#   sink NAME   counts what arrives until EOF (STATSDIR/NAME holds the
#               running count), then answers "got N\n" and closes;
#   flood NAME  sends until the peer goes away (bounded: 30 s, 256 MiB);
#   idle NAME   waits for EOF (30 s), then writes "eof" to STATSDIR/NAME.
#
#   tunnel_peer.py origin ADDR PORT STATSDIR
#   tunnel_peer.py client PROXY PORT HOST:PORT CASE [ARG]
# client cases (one line on stdout; every wait bounded):
#   halfclose N   N bytes, shutdown(SHUT_WR), read the answer to EOF:
#                 "reply <answer> up=<bytes sent after the 200>"
#   stream SECS   16 KiB every 20 ms for at most SECS s or until an error:
#                 "sent N error E" (a line "streaming" once 1 MiB went out)
#   idle          nothing after the mode line; "closed after T s"
#   noread        asks for a flood and does not read until a line comes
#                 on stdin (30 s at most); then reads to EOF (10 s):
#                 "eof after N bytes" (or "no eof after N bytes")
import os
import select
import socket
import ssl
import struct
import sys
import threading
import time


def origin(addr, port, statsdir):
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((addr, port))
    ls.listen(64)
    end = time.monotonic() + 600
    while time.monotonic() < end:
        c, _ = ls.accept()
        threading.Thread(target=serve, args=(c, statsdir), daemon=True).start()


def recv_exact(c, n):
    b = b""
    while len(b) < n:
        d = c.recv(n - len(b))
        if not d:
            raise EOFError
        b += d
    return b


def put(statsdir, name, text):
    tmp = os.path.join(statsdir, "." + name)
    with open(tmp, "w") as f:
        f.write(text)
    os.rename(tmp, os.path.join(statsdir, name))


def serve(c, statsdir):
    c.settimeout(30)
    try:
        hdr = recv_exact(c, 5)
        recv_exact(c, struct.unpack("!H", hdr[3:5])[0])
        line = b""
        while not line.endswith(b"\n"):
            line += recv_exact(c, 1)
        mode, name = line.decode().split()
        if mode == "sink":
            n, last = 0, 0.0
            while True:
                d = c.recv(65536)
                if not d:
                    break
                n += len(d)
                if time.monotonic() - last > 0.05:
                    put(statsdir, name, "%d\n" % n)
                    last = time.monotonic()
            put(statsdir, name, "%d\n" % n)
            c.sendall(b"got %d\n" % n)
        elif mode == "flood":
            buf, sent, end = b"x" * 65536, 0, time.monotonic() + 30
            while sent < 256 << 20 and time.monotonic() < end:
                sent += c.send(buf)
            put(statsdir, name, "%d\n" % sent)
        elif mode == "idle":
            while c.recv(4096):
                pass
            put(statsdir, name, "eof\n")
    except (OSError, EOFError, ValueError) as e:
        try:
            put(statsdir, name + ".err", "%s\n" % e)
        except (OSError, NameError):
            pass
    finally:
        c.close()


def hello(host):
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = ctx.wrap_bio(inc, out, server_hostname=host)
    try:
        tls.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return out.read()


def tunnel(proxy, port, host, mode):
    s = socket.create_connection((proxy, port), timeout=15)
    s.sendall(("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" %
               (host, host)).encode())
    buf = b""
    while b"\r\n\r\n" not in buf:
        d = s.recv(4096)
        if not d:
            sys.exit("no answer: %r" % buf)
        buf += d
    if buf.split(b" ")[1] != b"200":
        sys.exit("answer: %r" % buf.split(b"\r\n")[0])
    first = hello(host.rsplit(":", 1)[0]) + mode.encode() + b"\n"
    s.sendall(first)
    return s, len(first)


def client(proxy, port, host, case, arg):
    if case == "halfclose":
        s, up = tunnel(proxy, port, host, "sink hc")
        n = int(arg)
        s.sendall(b"y" * n)
        s.shutdown(socket.SHUT_WR)
        reply = b""
        while True:
            d = s.recv(4096)
            if not d:
                break
            reply += d
        print("reply %s up=%d" % (reply.decode().strip(), up + n))
    elif case == "stream":
        s, _ = tunnel(proxy, port, host, "sink fc")
        chunk, sent, err = b"z" * 16384, 0, "none"
        end = time.monotonic() + float(arg)
        said = False
        while time.monotonic() < end:
            try:
                s.sendall(chunk)
            except OSError as e:
                err = e.__class__.__name__
                break
            sent += len(chunk)
            if sent >= 1 << 20 and not said:
                print("streaming", flush=True)
                said = True
            time.sleep(0.02)
        print("sent %d error %s" % (sent, err), flush=True)
    elif case == "idle":
        s, _ = tunnel(proxy, port, host, "idle idle")
        t0 = time.monotonic()
        s.settimeout(20)
        try:
            while s.recv(4096):
                pass
        except OSError:
            pass
        print("closed after %.1f s" % (time.monotonic() - t0))
    elif case == "noread":
        s, _ = tunnel(proxy, port, host, "flood flood")
        print("flooded", flush=True)
        select.select([sys.stdin], [], [], 30)
        n, end = 0, time.monotonic() + 10
        s.settimeout(2)
        try:
            while time.monotonic() < end:
                d = s.recv(1 << 20)
                if not d:
                    print("eof after %d bytes" % n)
                    return
                n += len(d)
        except OSError as e:
            print("%s after %d bytes" % (e.__class__.__name__, n))
            return
        print("no eof after %d bytes" % n)
    else:
        sys.exit("unknown case " + case)


if sys.argv[1] == "origin":
    origin(sys.argv[2], int(sys.argv[3]), sys.argv[4])
else:
    client(sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5],
           sys.argv[6] if len(sys.argv) > 6 else None)
