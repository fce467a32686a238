#!/usr/bin/env python3
# reload_peer.py: peers for tests/integration/reload.sh.  A witness, not
# product code.  Every loop is bounded in time.
#
#   reload_peer.py echo CERT KEY ADDR PORT
#       TLS echo origin: every connection gets its bytes back.  Exits by
#       itself after LIFETIME seconds.
#   reload_peer.py stream PROXY PORT HOST STATUS
#       One tunnel through the CONNECT proxy to HOST:443 (TLS, SNI = HOST,
#       no certificate check: the gateway is under test, not TLS), then
#       rounds of 1 KiB sent and read back, each checked, every 20 ms.
#       After each round STATUS holds "live N BYTES"; on the tunnel's end
#       "closed N BYTES REASON"; when STATUS.stop appears the tunnel is
#       closed cleanly and STATUS holds "done N BYTES".  A corrupted echo
#       writes "corrupt N".
#   reload_peer.py once PROXY PORT HOST
#       One CONNECT; prints "403 <X-Ksb-Deny>" (or the status) for an
#       answer, "ok" after a TLS echo round through the tunnel, "closed"
#       when the tunnel closed without an echo.
import os
import socket
import ssl
import sys
import threading
import time

LIFETIME = 300.0
DEADLINE = 15.0


def echo(cert, key, addr, port):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((addr, port))
    ls.listen(64)
    ls.settimeout(1.0)
    end = time.monotonic() + LIFETIME

    def serve(c):
        try:
            c.settimeout(LIFETIME)
            t = ctx.wrap_socket(c, server_side=True)
            while True:
                d = t.recv(65536)
                if not d:
                    break
                t.sendall(d)
            t.close()
        except (OSError, ssl.SSLError):
            pass
        finally:
            c.close()

    while time.monotonic() < end:
        try:
            c, _ = ls.accept()
        except socket.timeout:
            continue
        threading.Thread(target=serve, args=(c,), daemon=True).start()


def connect(proxy, port, host):
    """CONNECT; returns (socket, None) after a 200, else (None, answer)."""
    s = socket.create_connection((proxy, port), timeout=DEADLINE)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s.sendall(("CONNECT %s:443 HTTP/1.1\r\nHost: %s:443\r\n\r\n" %
               (host, host)).encode())
    buf = b""
    while b"\r\n\r\n" not in buf:
        d = s.recv(1)   # byte by byte: nothing of the tunnel is consumed
        if not d:
            s.close()
            return None, "closed"
        buf += d
    head = buf.decode("latin-1").split("\r\n")
    status = head[0].split(" ")[1] if len(head[0].split(" ")) > 1 else "?"
    if status == "200":
        return s, None
    deny = [h.split(":", 1)[1].strip() for h in head
            if h.lower().startswith("x-ksb-deny:")]
    s.close()
    return None, "%s %s" % (status, deny[0] if deny else "-")


def tls(s, host):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx.wrap_socket(s, server_hostname=host)


def recv_exact(t, n):
    out = b""
    while len(out) < n:
        d = t.recv(n - len(out))
        if not d:
            raise ConnectionError("eof")
        out += d
    return out


def put(path, text):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text + "\n")
    os.rename(tmp, path)


def stream(proxy, port, host, status):
    n = nbytes = 0
    try:
        s, answer = connect(proxy, port, host)
        if s is None:
            put(status, "closed 0 0 refused:" + answer.replace(" ", "_"))
            return
        t = tls(s, host)
    except (OSError, ssl.SSLError) as e:
        put(status, "closed 0 0 %s" % type(e).__name__)
        return
    end = time.monotonic() + LIFETIME
    while time.monotonic() < end:
        if os.path.exists(status + ".stop"):
            t.close()
            put(status, "done %d %d" % (n, nbytes))
            return
        chunk = (("%08d" % n) * 128).encode()
        try:
            t.sendall(chunk)
            back = recv_exact(t, len(chunk))
        except (OSError, ssl.SSLError, ConnectionError) as e:
            put(status, "closed %d %d %s" % (n, nbytes, type(e).__name__))
            return
        if back != chunk:
            put(status, "corrupt %d" % n)
            return
        n += 1
        nbytes += len(chunk)
        put(status, "live %d %d" % (n, nbytes))
        time.sleep(0.02)
    put(status, "closed %d %d lifetime" % (n, nbytes))


def once(proxy, port, host):
    try:
        s, answer = connect(proxy, port, host)
        if s is None:
            print(answer)
            return
        t = tls(s, host)
        t.sendall(b"ping\n")
        print("ok" if recv_exact(t, 5) == b"ping\n" else "corrupt")
        t.close()
    except (OSError, ssl.SSLError, ConnectionError):
        print("closed")


if __name__ == "__main__":
    mode, args = sys.argv[1], sys.argv[2:]
    if mode == "echo":
        echo(args[0], args[1], args[2], int(args[3]))
    elif mode == "stream":
        stream(args[0], int(args[1]), args[2], args[3])
    elif mode == "once":
        once(args[0], int(args[1]), args[2])
    else:
        sys.exit("unknown mode " + mode)
