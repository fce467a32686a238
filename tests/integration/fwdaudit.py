# fwdaudit.py: stands in for ksb-run's forward records on the control
# socket (tests only, tests/integration/forwards.sh).
#   fwdaudit.py SOCK OUT   REGISTER fa1 and fa2 (one connection each), then
#   on fa1's: good FORWARD lines of every event, hostile ones, fa2's id
#   (not this connection's), and a flood past the audit budget; fa2's
#   connection sends one of its own.  Prints "sent N" per phase and every
#   reply line the gateway gave (it answers only refusals).  Bounded in
#   lines and time (every read <= 5 s).
import socket, sys, time

sock, out = sys.argv[1:3]
log = open(out, "w")

def connect():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(sock)
    return s

def register(ident):
    s = connect()
    s.sendall(("REGISTER %s default\n" % ident).encode())
    msg, fds, _, _ = socket.recv_fds(s, 4096, 4)
    if not msg.startswith(b"OK "):
        sys.exit("REGISTER %s: %r" % (ident, msg))
    return s, fds

def drain(s, secs):
    """Every line the gateway sends within secs."""
    got = b""
    end = time.time() + secs
    while time.time() < end:
        s.settimeout(max(0.01, end - time.time()))
        try:
            b = s.recv(65536)
        except socket.timeout:
            break
        if not b:
            break
        got += b
    for line in got.decode(errors="replace").splitlines():
        print("reply", line, file=log, flush=True)

a, afds = register("fa1")
b, bfds = register("fa2")
good = [
    "FORWARD fa1 add 127.0.0.1 8080 80",
    "FORWARD fa1 open 127.0.0.1 8080 80 1 127.0.0.1",
    "FORWARD fa1 close 127.0.0.1 8080 80 1 82 104857807 5004 done",
    "FORWARD fa1 refused 127.0.0.1 8080 80 ::1 limit",
    "FORWARD fa1 remove 127.0.0.1 8080 80 removed",
]
a.sendall(("\n".join(good) + "\n").encode())
print("sent good %d" % len(good), file=log, flush=True)
drain(a, 1)
# Each in its own second, so that the one-a-second refusal shows each.
hostile = [
    "FORWARD fa1 open 127.0.0.1 8080 80 0 127.0.0.1",
    "FORWARD fa1 close 127.0.0.1 8080 80 2 -1 0 0 done",
    "FORWARD fa2 add 127.0.0.1 9090 90",
    "FORWARD nosuch add 127.0.0.1 9090 90",
    "FORWARD fa1 add 127.0.0.1 8080 80 \x1b[31m",
]
for h in hostile:
    a.sendall((h + "\n").encode())
    print("sent hostile", file=log, flush=True)
    drain(a, 1.1)
b.sendall(b"FORWARD fa2 add 127.0.0.1 9090 90\n")
drain(b, 1)
# The flood: more than the budget (audit-budget-records a second) at once.
flood = "".join("FORWARD fa1 open 127.0.0.1 8080 80 %d 127.0.0.1\n" % (i + 10)
                for i in range(400))
a.sendall(flood.encode())
print("sent flood 400", file=log, flush=True)
drain(a, 2)
print("done", file=log, flush=True)
# Keep the leases until told to go (stdin closed).
sys.stdin.read()
