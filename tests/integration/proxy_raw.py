#!/usr/bin/env python3
# proxy_raw.py: a hostile "guest" for tests/integration/proxy.sh.  It speaks
# to the CONNECT proxy byte by byte where curl cannot: malformed requests,
# slow senders, split ClientHellos, wrong SNI.  A witness, not product code.
#
#   proxy_raw.py PROXY_IP PORT CASE [ARG...]
#
# Prints one line: "status N deny REASON" for an HTTP answer, "tls BODY"
# when a TLS exchange through the tunnel worked, "alert NAME" when the
# proxy ended the tunnel with a TLS alert (OpenSSL's name for it, or the
# description number for the non-TLS cases), "closed" when the proxy
# closed without an answer (after the 200, for tunnel cases), "timeout"
# when nothing happened in time.  Case "body" prints the refusal's body
# line after the status.  Every wait is bounded.
import os
import socket
import ssl
import sys
import time

ip, port, case = sys.argv[1], int(sys.argv[2]), sys.argv[3]
args = sys.argv[4:]
DEADLINE = 15.0


def conn():
    s = socket.create_connection((ip, port), timeout=DEADLINE)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def read_head(s):
    buf = b""
    end = time.monotonic() + DEADLINE
    while b"\r\n\r\n" not in buf and time.monotonic() < end:
        try:
            d = s.recv(4096)
        except socket.timeout:
            return None, buf
        except ConnectionResetError:
            break
        if not d:
            break
        buf += d
    if b"\r\n\r\n" not in buf:
        return None, buf
    head, rest = buf.split(b"\r\n\r\n", 1)
    return head.decode("latin-1"), rest


def answer(s):
    head, _ = read_head(s)
    if head is None:
        return "closed"
    lines = head.split("\r\n")
    status = lines[0].split(" ")[1]
    deny = "-"
    for l in lines[1:]:
        if l.lower().startswith("x-ksb-deny:"):
            deny = l.split(":", 1)[1].strip()
    return "status %s deny %s" % (status, deny)


def send_raw(data, slow=0.0):
    s = conn()
    if slow:
        for b in data:
            s.sendall(bytes([b]))
            time.sleep(slow)
    else:
        s.sendall(data)
    return answer(s)


def connect_req(host):
    """host, or host:port (default 443)."""
    hp = host if ":" in host else host + ":443"
    return ("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (hp, hp)).encode()


def tunnel_tls(host, sni, cafile, chunk=0, pipeline=False, path="/index.txt"):
    """CONNECT host, then TLS with SNI sni through the tunnel.  chunk > 0
    sends the ClientHello that many bytes per TCP write."""
    s = conn()
    if cafile == "-":
        ctx = ssl._create_unverified_context()
    else:
        ctx = ssl.create_default_context(cafile=cafile)
    if sni is None:
        ctx.check_hostname = False
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = ctx.wrap_bio(inc, out, server_hostname=sni)
    try:
        tls.do_handshake()
    except ssl.SSLWantReadError:
        pass
    hello = out.read()
    req = connect_req(host)
    if pipeline:
        s.sendall(req + hello)
        head, rest = read_head(s)
        if head is None or " 200 " not in head + " ":
            return answer_from(head)
    else:
        s.sendall(req)
        head, rest = read_head(s)
        if head is None or head.split(" ")[1] != "200":
            return answer_from(head)
        if chunk:
            # One write per chunk, paced by 2 ms for separate segments,
            # but the whole well inside the gateway's hello-timeout (10 s)
            # on a loaded machine too, where each paused segment cost the
            # starved gateway a wakeup of tens of ms and ~500 of them ran
            # out the timeout: after 1 s no more pauses.
            pace_end = time.monotonic() + 1.0
            for i in range(0, len(hello), chunk):
                s.sendall(hello[i:i + chunk])
                if time.monotonic() < pace_end:
                    time.sleep(0.002)
        else:
            s.sendall(hello)
    if rest:
        inc.write(rest)
    end = time.monotonic() + DEADLINE

    def pump():
        d = out.read()
        if d:
            s.sendall(d)
        try:
            r = s.recv(65536)
        except (socket.timeout, ConnectionResetError):
            r = b""
        if not r:
            return False
        inc.write(r)
        return True

    while time.monotonic() < end:
        try:
            tls.do_handshake()
            break
        except ssl.SSLWantReadError:
            if not pump():
                return "closed"
        except ssl.SSLError as e:
            return "alert " + str(e.reason)
    else:
        return "timeout"
    tls.write(("GET %s HTTP/1.0\r\nHost: %s\r\n\r\n" % (path, host)).encode())
    body = b""
    while time.monotonic() < end:
        try:
            body += tls.read(65536)
            continue
        except ssl.SSLWantReadError:
            pass
        except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
            break
        if not pump():
            break
    text = body.split(b"\r\n\r\n", 1)[-1].decode("latin-1").strip()
    return "tls " + text


def answer_from(head):
    if head is None:
        return "closed"
    deny = "-"
    for l in head.split("\r\n")[1:]:
        if l.lower().startswith("x-ksb-deny:"):
            deny = l.split(":", 1)[1].strip()
    return "status %s deny %s" % (head.split(" ")[1], deny)


def tunnel_bytes(host, data):
    """CONNECT host, then send data as the 'ClientHello'."""
    s = conn()
    s.sendall(connect_req(host))
    head, rest = read_head(s)
    if head is None or head.split(" ")[1] != "200":
        return answer_from(head)
    if data:
        s.sendall(data)
    d = b""
    try:
        while len(d) < 7:
            r = s.recv(7 - len(d))
            if not r:
                break
            d += r
    except socket.timeout:
        return "timeout"
    except ConnectionResetError:
        pass
    if not d:
        return "closed"
    if len(d) == 7 and d[:6] == b"\x15\x03\x03\x00\x02\x02":
        return "alert %d" % d[6]
    return "data"


def body(host, port):
    """CONNECT host:port; the status, X-Ksb-Deny and the body's line."""
    s = conn()
    s.sendall(("CONNECT %s:%s HTTP/1.1\r\n\r\n" % (host, port)).encode())
    head, rest = read_head(s)
    if head is None:
        return "closed"
    end = time.monotonic() + DEADLINE
    while b"\n" not in rest and time.monotonic() < end:
        try:
            d = s.recv(4096)
        except (socket.timeout, ConnectionResetError):
            break
        if not d:
            break
        rest += d
    return answer_from(head) + " body " + rest.decode("latin-1").rstrip("\n")


def hold(n, slow, extra=None):
    """Open n connections that each send a partial request head, one byte
    every slow seconds, and report how they ended and when.  With extra
    (a host), one more connection once the n are open, CONNECT extra: its
    answer goes first, on a line "extra <answer>" (in this process, so it
    comes while the n are surely held, however slowly a new process would
    start)."""
    socks = [conn() for _ in range(n)]
    for s in socks:
        s.sendall(b"CONNECT allowed.test:443 HTTP/1.1\r\n")
        s.setblocking(False)
    start = time.monotonic()
    if extra:
        print("extra " + send_raw(connect_req(extra)), flush=True)
    results = {}
    while len(results) < n and time.monotonic() - start < DEADLINE:
        for i, s in enumerate(socks):
            if i in results:
                continue
            try:
                d = s.recv(4096)
                results[i] = (d.split(b"\r\n")[0].decode("latin-1"),
                              time.monotonic() - start)
                continue
            except BlockingIOError:
                pass
            except ConnectionResetError:
                results[i] = ("reset", time.monotonic() - start)
                continue
            try:
                s.send(b"X")
            except OSError:
                pass
        time.sleep(slow)
    print("%d/%d answered, max %.1f s: %s" % (
        len(results), n, max([t for _, t in results.values()] or [0]),
        sorted(set(r for r, _ in results.values()))))


def greedy(n, secs, status):
    """Keep n connections open that each send a partial request head, one
    byte a second; open a new one, at most 20 a second, whenever one ends
    (answered, reset).  For secs seconds; the number held (open, not
    answered, for a second or more: a refused one is answered within
    that) is written to the file status whenever it changes."""
    held = []
    end = time.monotonic() + secs
    last = -1
    tick = 0
    since = {}
    while time.monotonic() < end:
        if len(held) < n:
            try:
                s = conn()
                s.sendall(b"CONNECT allowed.test:443 HTTP/1.1\r\n")
                s.setblocking(False)
                held.append(s)
                since[s] = time.monotonic()
            except OSError:
                pass
        keep = []
        for s in held:
            try:
                d = s.recv(4096)
                s.close()  # answered (429, 408) or closed
                continue
            except BlockingIOError:
                keep.append(s)
            except OSError:
                s.close()
        held = keep
        now = time.monotonic()
        old = sum(1 for s in held if now - since[s] >= 1.0)
        if old != last:
            last = old
            with open(status + ".tmp", "w") as f:
                f.write("%d\n" % last)
            os.replace(status + ".tmp", status)
        time.sleep(0.05)
        tick += 1
        for s in held if tick % 20 == 0 else []:
            try:
                s.send(b"X")
            except OSError:
                pass


if case == "raw":
    print(send_raw(args[0].encode("latin-1").decode("unicode_escape")
                   .encode("latin-1")))
elif case == "big":
    print(send_raw(b"CONNECT allowed.test:443 HTTP/1.1\r\nX-Pad: " +
                   b"a" * int(args[0]) + b"\r\n\r\n"))
elif case == "silent":
    s = conn()
    print(answer(s))
elif case == "tls":
    # tls HOST SNI|- CAFILE [chunk] [pipeline]
    sni = None if args[1] == "-" else args[1]
    chunk = int(args[3]) if len(args) > 3 else 0
    pipeline = len(args) > 4 and args[4] == "pipeline"
    print(tunnel_tls(args[0], sni, args[2], chunk, pipeline))
elif case == "connect":
    # connect HOST: the CONNECT's status only ("status 200 deny -" once
    # the gateway let it through).
    s = conn()
    s.sendall(connect_req(args[0]))
    print(answer(s))
elif case == "body":
    # body HOST PORT
    print(body(args[0], args[1]))
elif case == "bytes":
    print(tunnel_bytes(args[0], args[1].encode()))
elif case == "greedy":
    # greedy N SECS STATUS-FILE
    greedy(int(args[0]), float(args[1]), args[2])
elif case == "hold":
    # hold N SLOW [EXTRA_HOST]
    hold(int(args[0]), float(args[1]), args[2] if len(args) > 2 else None)
elif case == "flood":
    # flood N: N connections at once; count the answers by status.
    socks = []
    for _ in range(int(args[0])):
        try:
            socks.append(conn())
        except OSError:
            pass
    counts = {}
    for s in socks:
        s.sendall(connect_req("denied.test"))
    for s in socks:
        a = answer(s)
        counts[a] = counts.get(a, 0) + 1
    print(" ".join("%s=%d" % (k.replace(" ", "_"), v)
                   for k, v in sorted(counts.items())))
elif case == "seq":
    # seq N: N connections one after the other; count the answers.
    counts = {}
    for _ in range(int(args[0])):
        s = conn()
        s.sendall(connect_req("denied.test"))
        a = answer(s)
        s.close()
        counts[a] = counts.get(a, 0) + 1
    print(" ".join("%s=%d" % (k.replace(" ", "_"), v)
                   for k, v in sorted(counts.items())))
else:
    sys.exit("unknown case " + case)
