#!/usr/bin/env python3
"""clients_leakscan.py: is a secret in these files, without holding it?

  clients_leakscan.py PREFIX:LEN:SHA256 ... -- FILE...

For a guest, which must never hold a real value: each spec names a
spelling of it by its public start (the format's prefix: "sk-proj-",
"github_pat_", "YWdlbnQ6" for base64 of "agent:"), its length in bytes
and the SHA-256 (hex) of the whole.  Every LEN-byte window that starts
with PREFIX is hashed.  Prints "leak=no" and exits 0 when no file holds
any spelling, else "leak=yes FILE" and exits 1.
"""
import hashlib
import os
import sys

args = sys.argv[1:]
cut = args.index("--")
specs = []
for a in args[:cut]:
    p, n, h = a.rsplit(":", 2)
    specs.append((p.encode(), int(n), h))
paths = []
for f in args[cut + 1:]:
    if os.path.isdir(f):
        for d, _, names in os.walk(f):
            paths += [os.path.join(d, x) for x in names]
    else:
        paths.append(f)
for f in paths:
    try:
        b = open(f, "rb").read()
    except OSError:
        continue
    for p, n, h in specs:
        i = b.find(p)
        while i != -1:
            if hashlib.sha256(b[i:i + n]).hexdigest() == h:
                print("leak=yes " + f)
                sys.exit(1)
            i = b.find(p, i + 1)
print("leak=no")
