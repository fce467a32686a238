#!/usr/bin/python3
# tests/e2e/agent_flood_guest.py: stands in for qemu-system-x86_64
# (KSB_QEMU) and plays a hostile guest *root* on the control port, which
# the real guest's init would never let the agent user do: it speaks the
# agent protocol (READY, HELLO, ACK and REPORT done for every PROMPT,
# PONG) and, for KSB_TEST_FLOOD_S seconds, writes as fast as ksb-run
# reads: overlong lines, binary garbage, forged and malformed frames,
# ERR lines, reports by the thousand, pane output.  (Not EXIT: a guest
# may always end itself.)  It exits on STOP (EXIT 0).
import os, select, sys, time

argv = sys.argv
fd = None
for i, a in enumerate(argv):
    if a.startswith("socket,id=ctl,fd="):
        fd = int(a.split("=")[-1])
if fd is None:
    sys.exit("no control chardev")
flood_s = float(os.environ.get("KSB_TEST_FLOOD_S", "10"))
os.set_blocking(fd, True)

buf = b""
def readmore(timeout):
    global buf
    r, _, _ = select.select([fd], [], [], timeout)
    if r:
        d = os.read(fd, 65536)
        if not d:
            sys.exit(0)
        buf += d

# The header: everything up to ARGV <len>\n and its payload.
while True:
    readmore(5)
    i = buf.find(b"ARGV ")
    if i >= 0:
        nl = buf.find(b"\n", i)
        if nl > 0:
            n = int(buf[i + 5:nl])
            if len(buf) >= nl + 1 + n:
                buf = buf[nl + 1 + n:]
                break

def send(b):
    os.write(fd, b) if len(b) < 4096 else write_all(b)

def write_all(b):
    while b:
        n = os.write(fd, b)
        b = b[n:]

seq = 1
last_turn = 0
# The real init reports its enforcement self-test before READY.
write_all(b"SELFTEST ok 7 1\nREADY\nHELLO 1 0\nREPORT 1 0 starting \n")
chunks = [
    b"A" * (1 << 20) + b"\n",                       # one 1 MiB line
    bytes((i * 131 + (i >> 7)) & 255 for i in range(65536)) + b"\n",
    b"ACK 1000000\nREPORT 99 99999999 done forged\nHELLO 2 0\nPROMPT 9 x\n"
    b"REPORT 5 1 rooted x\nACK 1 1\nERR " + b"e" * 300 + b"\n" * 2,
    b"".join(b"PING %d\n" % i for i in range(2000)),
    b"".join(b"OUT " + b"o" * 3000 + b"\n" for _ in range(20)),
]
start = time.time()
k = 0
flooded = 0
while True:
    now = time.time()
    flooding = now - start < flood_s
    readmore(0 if flooding else 0.5)
    while b"\n" in buf:
        line, buf = buf.split(b"\n", 1)
        f = line.split(b" ")
        if f[0] == b"PROMPT" and len(f) >= 2:
            t = int(f[1])
            out = b"ACK %d\n" % t
            if t > last_turn:
                last_turn = t
                seq += 1
                out += b"REPORT %d %d done fake%%20done\n" % (seq, t)
            write_all(out)
        elif f[0] == b"PING":
            write_all(b"PONG " + f[1] + b"\n")
        elif f[0] == b"HELLO":
            write_all(b"HELLO 1 %d\n" % last_turn)
        elif f[0] == b"STOP":
            write_all(b"STOPPING\nEXIT 0\n")
            time.sleep(0.5)
            sys.exit(0)
    if flooding:
        c = chunks[k % len(chunks)]
        if k % len(chunks) == 2:
            seq += 1
            c = c.replace(b"REPORT 5 1", b"REPORT %d 1" % seq)
            seq += 1
            c = c.replace(b"REPORT 99 ", b"REPORT %d " % seq)
            seq += 1
            c += b"REPORT %d 0 info %s\n" % (seq, b"i" * 3000)
        write_all(c)
        flooded += len(c)
        k += 1
    elif flooded:
        sys.stderr.write("fake guest: flooded %d bytes\n" % flooded)
        flooded = 0
