# clients_setup.sh: sourced by tests/integration/credclients.sh and
# tests/e2e/clients.sh (after tests/lib.sh and ksb_env; $S is
# tests/integration).  clients_setup: a certificate for *.clients.test
# from the test CA; four credentials of real formats and lengths in
# $T/c/NAME (git: a GitHub fine-grained token, 93 bytes, as Basic;
# py: an OpenAI project key, 164; node: an Anthropic OAuth token, 108;
# up: an npm token, 40; all three bearer) and the exact Authorization
# each host must receive in $T/c/expect/HOST; a bare repository
# $T/git/repo.git with one commit on main, pushes accepted; the origin
# clients_origin.py on 10.78.0.8:443 in ns OR; the hosts and the
# upstream CA in the gateway's configuration; profile p1 with the four
# credentials.
clients_setup() {
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
	-keyout "$T/pki/cl.key" -out "$T/pki/cl.csr" -subj "/CN=clients.test" \
	>/dev/null 2>&1
printf 'subjectAltName=DNS:*.clients.test\n' > "$T/pki/cl.ext"
openssl x509 -req -in "$T/pki/cl.csr" -CA "$T/pki/ca.pem" \
	-CAkey "$T/pki/ca.key" -CAcreateserial -days 2 \
	-extfile "$T/pki/cl.ext" -out "$T/pki/cl.pem" >/dev/null 2>&1
# Values of the real formats and lengths; the exact field each host's
# requests must carry.
mkdir -p "$T/c/expect"
umask 077
python3 - "$T/c" <<'PY'
import base64, os, secrets, string, sys
d = sys.argv[1]
A = string.ascii_letters + string.digits
def s(n, cs=A):
    return "".join(secrets.choice(cs) for _ in range(n))
vals = {
    "git": ("github_pat_" + s(22) + "_" + s(59), "basic"),
    "py": ("sk-proj-" + s(156, A + "-_"), "bearer"),
    "node": ("sk-ant-oat01-" + s(95, A + "-_"), "bearer"),
    "up": ("npm_" + s(36), "bearer"),
}
for name, (v, form) in vals.items():
    with open("%s/%s" % (d, name), "w") as f:
        f.write(v + "\n")
    want = ("Basic " + base64.b64encode(("agent:" + v).encode()).decode()
            if form == "basic" else "Bearer " + v)
    with open("%s/expect/%s.clients.test" % (d, name), "w") as f:
        f.write(want)
PY
umask 022
chmod 755 "$T/c" "$T/c/expect"
chmod 644 "$T/c/expect"/*
# The bare repository git-http-backend serves, with one commit on main.
git init -q --bare -b main "$T/git/repo.git"
git -C "$T/git/repo.git" config http.receivepack true
git init -q -b main "$T/seed"
echo seed > "$T/seed/README"
git -C "$T/seed" add README
git -C "$T/seed" -c user.name=t -c user.email=t@t commit -qm seed
git -C "$T/seed" push -q "$T/git/repo.git" main
ip -n "$OR" addr add 10.78.0.8/24 dev ko1
ip netns exec "$OR" python3 "$S/clients_origin.py" 10.78.0.8 443 \
	"$T/pki/cl.pem" "$T/pki/cl.key" "$T/c/expect" "$T/git" \
	"$T/origin.log" > "$T/origin.err" 2>&1 &
KSB_PIDS="$KSB_PIDS $!"
ksb_wait_port "$OR" 10.78.0.8 443
for n in git py node up; do echo "10.78.0.8 $n.clients.test"; done >> "$T/hosts"
echo "upstream-ca-file = $T/pki/ca.pem" >> "$T/ksb.conf"
cat > "$T/policy.d/test.policy" <<POL
credential gitpat {
    host git.clients.test
    basic
    source file $T/c/git
    secret GIT_TOKEN
}
credential pykey {
    host py.clients.test
    header authorization bearer
    source file $T/c/py
    secret OPENAI_API_KEY
    placeholder-prefix sk-proj-
}
credential nodekey {
    host node.clients.test
    header authorization bearer
    source file $T/c/node
    secret ANTHROPIC_AUTH_TOKEN
    placeholder-prefix sk-ant-oat01-
}
credential upkey {
    host up.clients.test
    header authorization bearer
    source file $T/c/up
    secret NPM_TOKEN
}
profile p1 {
    allow *.clients.test
    allow-address 10.78.0.0/24
    credential gitpat
    credential pykey
    credential nodekey
    credential upkey
}
POL

}
