#!/usr/bin/env python3
# tests/bench/save.py KERNEL INIT DIR MIB... : what saving, restoring and
# forking a live guest costs under this host's QEMU, by guest memory size
# (issue 34).  The guest is save_init.c as PID 1 (no 9p share, which QEMU
# could not save: ksbctl(1), stop --save), its memory half written.
# Per size: the save (QMP stop + migrate to a file passed with getfd,
# as vmrunner/template.c saves templates), the restore to running and to
# its next console tick, and three children forked from the saved state,
# two ways: (a) three restores of the saved file (their RAM loaded into
# private memory), (b) the guest's RAM in a file (memory-backend-file,
# share=on) saved with x-ignore-shared, so the stream holds only the
# devices, and each child maps that file MAP_PRIVATE (share=off): pages
# shared until written.  Host memory (Pss, /proc/PID/smaps_rollup) of
# three such children against three fresh guests.  Every child must go
# on with the parent's tick counter and checksum, or the run fails.
import json, os, re, socket, subprocess, sys, time

KERNEL, INIT, DIR = sys.argv[1], sys.argv[2], sys.argv[3]
SIZES = [int(m) for m in sys.argv[4:]] or [512, 1024]
N = 3
TIMEOUT = 300


def cpio(path):
    """A newc archive (the kernel's initramfs format) holding /init."""
    data = open(INIT, "rb").read()
    out = b""
    for name, mode, body in (("init", 0o100755, data), ("TRAILER!!!", 0, b"")):
        nm = name.encode() + b"\0"
        hdr = "070701" + "".join("%08x" % v for v in (
            0, mode, 0, 0, 1, 0, len(body), 0, 0, 0, 0, len(nm), 0))
        out += hdr.encode() + nm
        out += b"\0" * (-len(out) % 4) + body
        out += b"\0" * (-len(out) % 4)
    open(path, "wb").write(out)


class Qmp:
    def __init__(self, path):
        deadline = time.time() + 30
        while True:
            try:
                self.s = socket.socket(socket.AF_UNIX)
                self.s.connect(path)
                break
            except OSError:
                self.s.close()
                if time.time() > deadline:
                    raise
                time.sleep(0.05)
        self.s.settimeout(TIMEOUT)
        self.f = self.s.makefile("r")
        self.events = []
        json.loads(self.f.readline())
        self.ex("qmp_capabilities")

    def ex(self, cmd, args=None, fd=None):
        msg = {"execute": cmd}
        if args is not None:
            msg["arguments"] = args
        b = (json.dumps(msg) + "\n").encode()
        if fd is None:
            self.s.sendall(b)
        else:
            socket.send_fds(self.s, [b], [fd])
        while True:
            m = json.loads(self.f.readline())
            if "event" in m:
                self.events.append(m)
                continue
            if "error" in m:
                raise RuntimeError("%s: %s" % (cmd, m["error"]["desc"]))
            return m["return"]

    def event(self, name, cond=lambda e: True):
        while True:
            for i, e in enumerate(self.events):
                if e["event"] == name and cond(e):
                    del self.events[i]
                    return e
            self.events.append(json.loads(self.f.readline()))


class Guest:
    n = 0
    every = []  # killed at the end, whatever happened

    def __init__(self, mib, ram=None, share=False, incoming=False):
        Guest.n += 1
        tag = "g%d" % Guest.n
        self.serial = os.path.join(DIR, tag + ".serial")
        sock = os.path.join(DIR, tag + ".qmp")
        if ram is None:
            backend = "memory-backend-ram,id=m0,size=%dM" % mib
        else:
            backend = ("memory-backend-file,id=m0,size=%dM,mem-path=%s,"
                       "share=%s" % (mib, ram, "on" if share else "off"))
        argv = ["qemu-system-x86_64", "-machine", "pc,memory-backend=m0",
                "-accel", "tcg", "-m", "%dM" % mib, "-object", backend,
                "-nodefaults", "-no-user-config", "-display", "none",
                "-kernel", KERNEL, "-initrd", os.path.join(DIR, "init.cpio"),
                "-append", "console=ttyS0 quiet panic=-1 dirty=%d" % (mib // 2),
                "-serial", "file:" + self.serial,
                "-qmp", "unix:%s,server=on,wait=off" % sock]
        if incoming:
            argv += ["-incoming", "defer"]
        self.t0 = time.time()
        self.p = subprocess.Popen(argv, stdin=subprocess.DEVNULL)
        Guest.every.append(self.p)
        self.q = Qmp(sock)

    def lines(self):
        """The console's complete lines (QEMU may be mid-line)."""
        try:
            text = open(self.serial, errors="replace").read()
        except FileNotFoundError:
            return []
        return text[:text.rfind("\n") + 1].splitlines()

    def tick(self, after=-1):
        """Await a tick line numbered above after: (n, sum, seconds)."""
        deadline = time.time() + TIMEOUT
        while time.time() < deadline:
            for l in reversed(self.lines()):
                m = re.search(r"^tick (\d+) sum ([0-9a-f]{16})$", l)
                if m and int(m.group(1)) > after:
                    return int(m.group(1)), m.group(2), time.time()
                if m:
                    break
            if self.p.poll() is not None:
                raise RuntimeError("QEMU exited: %s" % self.lines()[-5:])
            time.sleep(0.05)
        raise RuntimeError("no tick above %d in %d s" % (after, TIMEOUT))

    def pss_kib(self):
        for l in open("/proc/%d/smaps_rollup" % self.p.pid):
            if l.startswith("Pss:"):
                return int(l.split()[1])
        return 0

    def quit(self):
        try:
            self.q.ex("quit")
        except Exception:
            pass
        self.p.wait(30)


def caps(q, shared):
    c = [{"capability": "events", "state": True}]
    if shared:
        c.append({"capability": "x-ignore-shared", "state": True})
    q.ex("migrate-set-capabilities", {"capabilities": c})


def save(g, path, shared):
    """Stop g and migrate it to path: (seconds, tick, sum)."""
    n, s, _ = g.tick()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    t0 = time.time()
    g.q.ex("stop")
    n, s, _ = g.tick(n - 1)  # the last tick before the stop
    caps(g.q, shared)
    g.q.ex("migrate-set-parameters", {"max-bandwidth": 1 << 36})
    g.q.ex("getfd", {"fdname": "out"}, fd)
    g.q.ex("migrate", {"uri": "fd:out"})
    e = g.q.event("MIGRATION", lambda e: e["data"]["status"] in
                  ("completed", "failed", "cancelled"))
    if e["data"]["status"] != "completed":
        raise RuntimeError("migration " + e["data"]["status"])
    os.fsync(fd)
    os.close(fd)
    return round(time.time() - t0, 2), n, s


def restore(mib, path, ram=None, shared=False):
    """A guest restored from path: (guest, seconds to running)."""
    g = Guest(mib, ram=ram, share=False, incoming=True)
    caps(g.q, shared)
    fd = os.open(path, os.O_RDONLY)
    g.q.ex("getfd", {"fdname": "in"}, fd)
    os.close(fd)
    g.q.ex("migrate-incoming", {"uri": "fd:in"})
    # The source was stopped first: the stream says so, the copy waits.
    e = g.q.event("MIGRATION", lambda e: e["data"]["status"] in
                  ("completed", "failed", "cancelled"))
    if e["data"]["status"] != "completed":
        raise RuntimeError("incoming migration " + e["data"]["status"])
    g.q.ex("cont")
    g.q.event("RESUME")
    return g, time.time() - g.t0


def check(g, n, s, what):
    m, t, _ = g.tick(n)
    if t != s:
        raise RuntimeError("%s: checksum %s after the restore, %s before"
                           % (what, t, s))
    return m


def one_size(mib):
    r = {"mib": mib, "dirty_mib": mib // 2}
    state = os.path.join(DIR, "state-%d" % mib)
    # Fresh guests: boot to the first tick; N of them for the memory.
    fresh = [Guest(mib) for _ in range(N)]
    for g in fresh:
        _, _, t = g.tick()
    r["boot_to_tick_s"] = round(t - fresh[-1].t0, 2)
    r["pss_fresh_mib"] = round(sum(g.pss_kib() for g in fresh) / 1024)
    # (a) the plain save of one of them, and its restores.
    r["save_s"], n, s = save(fresh[0], state, False)
    r["state_mib"] = round(os.path.getsize(state) / 1048576)
    for g in fresh:
        g.quit()
    kids = []
    t0 = time.time()
    for i in range(N):
        g, secs = restore(mib, state)
        kids.append(g)
        if i == 0:
            r["restore_running_s"] = round(secs, 2)
            check(g, n, s, "restore")
            r["restore_tick_s"] = round(time.time() - g.t0, 2)
    for g in kids:
        check(g, n, s, "restored child")
    r["fork_restore_s"] = round(time.time() - t0, 2)
    r["pss_restored_mib"] = round(sum(g.pss_kib() for g in kids) / 1024)
    for g in kids:
        g.quit()
    # (b) the RAM in a file, the stream without it, children MAP_PRIVATE.
    ram = os.path.join(DIR, "ram-%d" % mib)
    p = Guest(mib, ram=ram, share=True)
    p.tick()
    r["save_shared_s"], n, s = save(p, state, True)
    r["state_shared_kib"] = round(os.path.getsize(state) / 1024)
    p.quit()
    kids = []
    t0 = time.time()
    for i in range(N):
        g, secs = restore(mib, state, ram=ram, shared=True)
        kids.append(g)
        if i == 0:
            r["restore_shared_running_s"] = round(secs, 2)
    for g in kids:
        check(g, n, s, "forked child")
    r["fork_shared_s"] = round(time.time() - t0, 2)
    r["pss_forked_mib"] = round(sum(g.pss_kib() for g in kids) / 1024)
    for g in kids:
        g.quit()
    os.unlink(ram)
    os.unlink(state)
    return r


cpio(os.path.join(DIR, "init.cpio"))
try:
    for mib in SIZES:
        print(json.dumps(one_size(mib)), flush=True)
finally:
    for p in Guest.every:
        if p.poll() is None:
            p.kill()
            p.wait()
