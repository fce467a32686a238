# selftest_ctl.py SOCK: plays ksb-run (and a second root client) on the
# control socket to check who may write enforcement self-test records
# (SELFTEST, RELOADED: proto/ctl.h) and what is refused.  One "ok/not ok"
# line per check on stdout; exit 1 if any failed.  A witness for
# tests/integration/selftest_ctl.sh, not product code.  Bounded: every
# read times out after 10 s.  SOCK resume: a reload during a gateway
# restart (the RESUME's reload=N).
import os, socket, sys

sock = sys.argv[1]
fails = 0
keep_fds, kept = False, []


def connect():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(10)
    s.connect(sock)
    return s


class Lines:
    def __init__(self, s):
        self.s, self.buf = s, b""

    def line(self):
        while b"\n" not in self.buf:
            msg, fds, _, _ = socket.recv_fds(self.s, 4096, 4)
            for fd in fds:
                if keep_fds:
                    kept.append(fd)  # the tap lives while it is open
                else:
                    os.close(fd)
            if not msg:
                return None
            self.buf += msg
        l, self.buf = self.buf.split(b"\n", 1)
        return l.decode()

    def ask(self, text):
        self.s.sendall((text + "\n").encode())
        return self.line()


def check(desc, ok):
    global fails
    print(("ok - " if ok else "not ok - ") + desc, flush=True)
    fails += 0 if ok else 1


if len(sys.argv) > 2 and sys.argv[2] == "resume":
    # A reload while the gateway waits for this lease's RESUME (it was
    # restarted): the RESUME's reply says reload=N, and the result for
    # N counts.  stdin: "go" once the gateway was restarted and
    # reloaded (selftest_ctl.sh).
    keep_fds = True
    e = Lines(connect())
    r = e.ask("REGISTER st-c default")
    check("REGISTER st-c: %s" % r, r is not None and r.startswith("OK tap="))
    tap = r.split()[1].split("=")[1]
    print("registered", flush=True)
    go = sys.stdin.readline().strip()
    check("told to resume: %s" % go, go == "go")
    f = Lines(connect())
    r = f.ask("RESUME st-c %s" % tap)
    check("RESUME st-c: %s" % r, r is not None and r.startswith("OK tap="))
    kv = dict(w.split("=", 1) for w in (r or "").split()[1:] if "=" in w)
    check("the reply names the reload announced meanwhile: %s" %
          kv.get("reload"), kv.get("reload", "").isdigit())
    r = f.ask("SELFTEST st-c reload %s ok 7 3 -" % kv.get("reload", "1"))
    check("that reload's result recorded: %s" % r, r == "OK")
    sys.exit(1 if fails else 0)

a = Lines(connect())
r = a.ask("REGISTER st-a default")
check("REGISTER st-a: %s" % r, r is not None and r.startswith("OK tap="))
b = Lines(connect())
r = b.ask("REGISTER st-b default")
check("REGISTER st-b: %s" % r, r is not None and r.startswith("OK tap="))

r = a.ask("SELFTEST st-a boot 0 ok 7 400 -")
check("boot result from the lease holder recorded: %s" % r, r == "OK")
r = a.ask("SELFTEST st-a boot 0 fail 0 - tcp-outside")
check("a second boot result refused: %s" % r,
      r == "ERR a boot result was recorded already")
r = b.ask("SELFTEST st-a reload 1 fail 0 - tcp-outside")
check("another instance's ksb-run cannot report for st-a: %s" % r,
      r == "ERR no instance `st-a' on this connection")
r = a.ask("SELFTEST st-a reload 1 ok 7 1 -")
check("a reload result before any reload refused: %s" % r,
      r == "ERR no reload self-test is awaited")
for bad in ("SELFTEST st-a boot 0 ok 7 400",
            "SELFTEST st-a boot 0 ok 99 400 -",
            "SELFTEST st-a boot 0 fail 0 - ../../etc",
            "SELFTEST st-a boot 0 ok 7 400 - extra",
            "SELFTEST st-a whenever 0 ok 7 400 -"):
    r = a.ask(bad)
    check("malformed refused: %s -> %s" % (bad, r),
          r is not None and r.startswith("ERR SELFTEST: "))

# A reload through a third connection: both lease holders are told.
c = Lines(connect())
c.s.sendall(b"RELOAD\n")
while True:
    r = c.line()
    if r is None or r == "END":
        break
ra, rb = a.line(), b.line()
check("RELOADED to st-a's ksb-run: %s" % ra,
      ra is not None and ra.startswith("RELOADED "))
check("RELOADED to st-b's ksb-run: %s" % rb, rb == ra)
n = int(ra.split()[1])
r = a.ask("SELFTEST st-a reload %d ok 7 1 -" % (n + 1))
check("a result for a reload not announced refused: %s" % r,
      r == "ERR not the reload announced last")
r = a.ask("SELFTEST st-a reload %d fail 0 - tcp-gateway" % n)
check("the reload's result recorded: %s" % r, r == "OK")
r = a.ask("SELFTEST st-a reload %d ok 7 1 -" % n)
check("a second answer for that reload refused: %s" % r,
      r == "ERR no reload self-test is awaited")
r = b.ask("SELFTEST st-b reload %d ok 7 2 -" % n)
check("st-b's own reload result recorded: %s" % r, r == "OK")

# Two reloads in a row: a failure for the first, which the guest was
# testing when the second came, still counts (ksb-run stops the
# instance), once; not a pass, nor a second answer for an older one.
ns = []
for k in range(2):
    c.s.sendall(b"RELOAD\n")
    while True:
        r = c.line()
        if r is None or r == "END":
            break
    ra, rb = a.line(), b.line()
    check("RELOADED %d to both: %s %s" % (k, ra, rb),
          ra is not None and ra == rb and ra.startswith("RELOADED "))
    ns.append(int(ra.split()[1]) if ra else 0)
r = b.ask("SELFTEST st-b reload %d ok 7 2 -" % ns[0])
check("a pass for the older reload refused: %s" % r,
      r == "ERR not the reload announced last")
r = a.ask("SELFTEST st-a reload %d fail 0 - tcp-gateway" % n)
check("a failure for a reload answered before refused: %s" % r,
      r == "ERR not the reload announced last")
r = b.ask("SELFTEST st-b reload %d fail 0 - tcp-gateway" % ns[0])
check("a failure for the older reload recorded: %s" % r, r == "OK")
r = b.ask("SELFTEST st-b reload %d fail 0 - tcp-gateway" % ns[0])
check("... once: %s" % r, r == "ERR not the reload announced last")
sys.exit(1 if fails else 0)
