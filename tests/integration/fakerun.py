# fakerun.py: stands in for ksb-run on the control socket (tests only).
#   fakerun.py SOCK ID PROFILE resume|hold   REGISTER, keep the tap fd;
#       resume: when the gateway goes away, RESUME every 100 ms (<= 60 s)
#   fakerun.py SOCK - - send LINE            send one line, print the reply
# Prints every reply line, flushed.  Bounded: exits after 300 s.
import os, socket, sys, time

sock, ident, profile, mode = sys.argv[1:5]
deadline = time.time() + 300

def connect():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(sock)
    return s

def reply(s):
    # The reply line with the fds it carried; lines that came with it
    # (RELOADED after RESUME's OK) each on their own.  Read to the end
    # of its line: one read may end inside it (bounded: 64 KiB, 10 s).
    msg, fds = b"", []
    end = time.time() + 10
    while b"\n" not in msg and len(msg) < 65536 and time.time() < end:
        s.settimeout(max(0.01, end - time.time()))
        d, f, _, _ = socket.recv_fds(s, 4096, 4)
        if not d:
            break
        msg += d
        fds += f
    s.settimeout(None)
    lines = msg.decode(errors="replace").strip().split("\n")
    print(lines[0], "fds=%d" % len(fds), flush=True)
    for l in lines[1:]:
        print(l, flush=True)
    return msg.decode(errors="replace"), fds

if mode == "send":
    s = connect()
    s.sendall((sys.argv[5] + "\n").encode())
    reply(s)
    sys.exit(0)

s = connect()
s.sendall(("REGISTER %s %s\n" % (ident, profile)).encode())
line, fds = reply(s)
if not line.startswith("OK "):
    sys.exit(1)
tap = dict(kv.split("=", 1) for kv in line.split()[1:])["tap"]
while time.time() < deadline:
    s.settimeout(1)
    try:
        if s.recv(1024) == b"":
            raise ConnectionError
        continue
    except socket.timeout:
        continue
    except OSError:
        pass
    print("lost the gateway", flush=True)
    if mode != "resume":
        time.sleep(max(0, deadline - time.time()))
        break
    end = time.time() + 60
    while time.time() < end:
        try:
            s = connect()
            s.sendall(("RESUME %s %s\n" % (ident, tap)).encode())
            line, _ = reply(s)
            if line.startswith("OK "):
                break
        except OSError:
            pass
        time.sleep(0.1)
