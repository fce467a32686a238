#!/usr/bin/env python3
"""cred_values.py: the credentials of tests/integration/credswap.sh.

  cred_values.py DIR SEED

Writes, for every form (header x-api-key, header authorization bearer,
basic) times every value (the real formats users bind, the lengths 1,
53, 108, 164, 4096 and 8192 bytes, and two random lengths from SEED),
the value DIR/v/NAME (mode 0600, one line), the exact field the origin
must receive DIR/expect/NAME ("FIELD\\nVALUE", cred_reflect.py), and
the credential's block of the policy on stdout; each credential is bound
to NAME.swap.test, with a placeholder prefix of 0, 3 or 32 bytes in
turn (so placeholders of 46, 49 and 78 bytes meet every value length).
"""
import base64
import os
import random
import sys

DIR, SEED = sys.argv[1], int(sys.argv[2])
rnd = random.Random(SEED)
ALNUM = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
TOKEN = ALNUM + "-_.~+/="


def s(n, alphabet=ALNUM):
    return "".join(rnd.choice(alphabet) for _ in range(n))


VALUES = [
    ("anthropic", "sk-ant-api03-" + s(95, ALNUM + "-_") + "AA"),
    ("anthropic-oauth", "sk-ant-oat01-" + s(95, ALNUM + "-_") + "AA"),
    ("openai", "sk-proj-" + s(156, ALNUM + "-_")),
    ("ghp", "ghp_" + s(36)),
    ("github-pat", "github_pat_" + s(22) + "_" + s(59)),
    ("npm", "npm_" + s(36)),
    ("len1", s(1)),
    ("len53", s(53, TOKEN)),
    ("len108", s(108, TOKEN)),
    ("len164", s(164, TOKEN)),
    ("len4096", s(4096, TOKEN)),
    ("len8192", s(8192, TOKEN)),
    ("rand-a", s(rnd.randint(2, 8192), TOKEN)),
    ("rand-b", s(rnd.randint(2, 300), TOKEN)),
]
PREFIXES = ["", "sk-", "p" * 32]
os.makedirs(DIR + "/v", mode=0o700, exist_ok=True)
os.makedirs(DIR + "/expect", exist_ok=True)
k = 0
for form in ("header", "bearer", "basic"):
    for label, v in VALUES:
        name = "%s-%s" % (form, label)
        if form == "header":
            field, want, decl = "x-api-key", v, "header x-api-key"
        elif form == "bearer":
            field, want = "authorization", "Bearer " + v
            decl = "header authorization bearer"
        else:
            field = "authorization"
            want = "Basic " + base64.b64encode(
                ("agent:" + v).encode()).decode()
            decl = "basic"
        fd = os.open("%s/v/%s" % (DIR, name),
                     os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.write(fd, (v + "\n").encode())
        os.close(fd)
        with open("%s/expect/%s" % (DIR, name), "w") as f:
            f.write(field + "\n" + want)
        prefix = PREFIXES[k % len(PREFIXES)]
        k += 1
        print("credential %s {\n    host %s.swap.test\n    %s\n"
              "    source file %s/v/%s\n    secret S_%d\n%s}" %
              (name, name, decl, DIR, name, k,
               "    placeholder-prefix %s\n" % prefix if prefix else ""))
