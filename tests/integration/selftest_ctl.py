# selftest_ctl.py SOCK MARKER: plays ksb-run (and a second root client)
# on the control socket to check who may write enforcement self-test
# records (SELFTEST, RELOADED: proto/ctl.h) and what is refused; a lease
# that ends with a result awaited (aborted); then creates MARKER, and
# while selftest_ctl.sh restarts the gateway, RESUMEs st-a's lease (every
# 100 ms, at most 60 s): the resumed lease is announced RELOADED and its
# result recorded.  One "ok/not ok" line per check on stdout; exit 1 if
# any failed.  A witness for tests/integration/selftest_ctl.sh, not
# product code.  Bounded: every read times out after 10 s.
import socket, sys, time

sock = sys.argv[1]
fails = 0
taps = []


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
            taps.extend(fds)  # kept open, as QEMU would: the tap stays
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


a = Lines(connect())
r = a.ask("REGISTER st-a default")
check("REGISTER st-a: %s" % r, r is not None and r.startswith("OK tap="))
tap_a = r.split()[1][4:] if r else "?"
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


def reload():
    c = Lines(connect())
    c.s.sendall(b"RELOAD\n")
    while True:
        r = c.line()
        if r is None or r == "END":
            break
    c.s.close()


# Another reload: st-a answers, st-b's ksb-run goes away without one
# (its lease ends): the gateway records that test as aborted.
reload()
ra, rb = a.line(), b.line()
check("second RELOADED to both: %s %s" % (ra, rb),
      ra is not None and ra.startswith("RELOADED ") and rb == ra)
n = int(ra.split()[1])
r = a.ask("SELFTEST st-a reload %d ok 7 3 -" % n)
check("st-a's second reload result recorded: %s" % r, r == "OK")
b.s.close()

# The gateway restarts (selftest_ctl.sh, once MARKER exists); the lease
# resumed by this process (the registering pid) is announced RELOADED
# right after RESUME's OK: the policy may have changed meanwhile.
open(sys.argv[2], "w").close()
a.s.settimeout(60)
check("the gateway went away (EOF on the lease)", a.line() is None)
a.s.close()
end, r = time.time() + 60, None
while time.time() < end:
    try:
        a = Lines(connect())
        r = a.ask("RESUME st-a %s" % tap_a)
        if r is not None and r.startswith("OK tap="):
            break
        a.s.close()
    except OSError:
        pass
    time.sleep(0.1)
check("RESUME st-a after the restart: %s" % r,
      r is not None and r.startswith("OK tap="))
rr = a.line()
check("the resumed lease is announced RELOADED: %s" % rr,
      rr is not None and rr.startswith("RELOADED "))
m = int(rr.split()[1]) if rr and rr.startswith("RELOADED ") else 1
r = a.ask("SELFTEST st-a reload %d ok 7 4 -" % (m + 1))
check("not another number: %s" % r, r == "ERR not the reload announced last")
r = a.ask("SELFTEST st-a reload %d ok 7 4 -" % m)
check("the resumed lease's result recorded: %s" % r, r == "OK")
r = a.ask("UNREGISTER st-a")
check("UNREGISTER st-a with nothing awaited: %s" % r, r == "OK")
sys.exit(1 if fails else 0)
