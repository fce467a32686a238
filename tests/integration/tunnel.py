"""tunnel.py: what the guest-side test clients share (cred_*.py, ws_*.py):
a CONNECT tunnel through the gateway's proxy (RFC 9110 §9.3.6), TLS
inside it verified against the test's CA, and the WebSocket upgrade and
client frames of RFC 6455 (§4.1, §5.2: a client's frames are masked).
The peers are hostile on purpose: nothing here checks more than the
caller asks for.
"""
import os
import socket
import ssl
import struct
import sys


def connect(proxy, host, port=443, timeout=10, need_200=False):
    """CONNECT host:port through proxy ("addr:port"); returns the socket
    after the proxy's response head, read a byte at a time so that no
    tunnel byte is taken.  Exits on a close before the head, and with
    need_200 on any status but 200."""
    addr, pport = proxy.rsplit(":", 1)
    s = socket.create_connection((addr, int(pport)), timeout=timeout)
    s.sendall(b"CONNECT %s:%d HTTP/1.1\r\nHost: %s:%d\r\n\r\n"
              % (host.encode(), port, host.encode(), port))
    head = b""
    while b"\r\n\r\n" not in head:
        b = s.recv(1)
        if not b:
            sys.exit("connect: closed")
        head += b
    if need_200 and not head.startswith(b"HTTP/1.1 200"):
        sys.exit("connect: " + head.split(b"\r\n")[0].decode("latin-1"))
    return s


def tls(s, host, cafile):
    """TLS over the tunnel s, SNI host, the certificate verified against
    cafile (the gateway's CA for a terminated host)."""
    return ssl.create_default_context(cafile=cafile).wrap_socket(
        s, server_hostname=host)


def ws_upgrade(t, host, key_header, on_close_exit=True):
    """GET /ws with Upgrade: websocket (RFC 6455 §4.1) and x-api-key:
    key_header (bytes) over t; returns (response head, bytes after it).
    A close before the head ends the process (on_close_exit) or returns
    what came."""
    t.sendall(b"GET /ws HTTP/1.1\r\nHost: %s\r\nx-api-key: %s\r\n"
              b"Upgrade: websocket\r\nConnection: Upgrade\r\n"
              b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
              b"Sec-WebSocket-Version: 13\r\n\r\n" % (host.encode(), key_header))
    buf = b""
    while b"\r\n\r\n" not in buf:
        b = t.recv(4096)
        if not b:
            if on_close_exit:
                sys.exit("upgrade: closed")
            break
        buf += b
    head, _, rest = buf.partition(b"\r\n\r\n")
    return head, rest


def ws_frame(b0, payload, mask=True, length=None, b1extra=0):
    """One WebSocket frame (RFC 6455 §5.2): first byte b0 (FIN, RSV,
    opcode), masked with a fresh key unless mask is False; length
    overrides the payload length field (a lie), b1extra is or-ed into the
    second byte."""
    n = len(payload) if length is None else length
    m = 0x80 if mask else 0
    if n < 126:
        h = bytes([b0, m | b1extra | n])
    elif n < 65536:
        h = bytes([b0, m | 126]) + struct.pack(">H", n)
    else:
        h = bytes([b0, m | 127]) + struct.pack(">Q", n)
    if not mask:
        return h + payload
    key = os.urandom(4)
    return h + key + bytes(c ^ key[i & 3] for i, c in enumerate(payload))
