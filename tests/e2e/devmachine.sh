#!/bin/bash
# e2e: the guest is a developer's machine (issue 13).  With the default cpu
# setting the guest CPU has SSE4.2; the shell tools of the host's /usr are
# there (the /etc/alternatives links resolve: which, awk, vi, ...), every
# /usr/bin link resolves (or is broken on the host too), locale, time zone
# and os-release are the host's, /etc holds no shadow and only the guest's
# users; curl, git (dumb HTTP), Node and Python verify TLS to the test
# origin through the gateway with the test CA given as ca-file (no
# --cacert).  The same four clients meet every refusal kind (issue 15):
# not in the allowlist, no address, a screened address, a refusing
# upstream (HTTP status, X-Ksb-Deny, the one-line body) and an SNI that
# is not the CONNECT host (a TLS alert; git cannot send one), each with
# its audit row.  The origin here is Python's http.server over TLS (git's dumb
# protocol asks for info/refs?service=..., which s_server cannot serve).
set -eu
. "$(dirname "$0")/../lib.sh"

ksb_need_root
ksb_need qemu-system-x86_64 python3 git make node npm tmux
ksb_kernel
ksb_env

# The origin: $T/www over TLS, with a bare repository for git's dumb HTTP.
git init -q --bare "$T/www/repo.git"
git init -q "$T/src"
echo "dev machine" > "$T/src/README"
git -C "$T/src" add README
git -C "$T/src" -c user.name=t -c user.email=t@t commit -qm first
git -C "$T/src" push -q "$T/www/repo.git" HEAD:refs/heads/main
git -C "$T/www/repo.git" symbolic-ref HEAD refs/heads/main
git -C "$T/www/repo.git" update-server-info
( cd "$T/www" && exec ip netns exec "$OR" python3 -c '
import http.server, ssl, sys
class H(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *a): pass
s = http.server.ThreadingHTTPServer((sys.argv[1], 443), H)
c = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
c.load_cert_chain(sys.argv[2], sys.argv[3])
s.socket = c.wrap_socket(s.socket, server_side=True)
s.serve_forever()
' "$ORIGIN_IP" "$T/pki/origin.pem" "$T/pki/origin.key" >"$T/origin.log" 2>&1 ) &
KSB_PIDS="$KSB_PIDS $!"
ksb_wait_port "$OR" "$ORIGIN_IP" 443
# Refusals: nothing listens on .3 (the kernel resets), .7.7 is screened.
ip -n "$OR" addr add 10.78.0.3/24 dev ko1
printf '10.78.0.3 refused.test\n192.168.7.7 screened.test\n' >> "$T/hosts"
sed -i 's/^ *allow allowed.test$/&\n    allow nxdomain.test\n    allow screened.test\n    allow refused.test/' \
	"$T/policy.d/test.policy"
ksb_gateway

# What the guest compares with: the host's own broken /usr/bin links (the
# allow list), time zone, os-release ID, machine-id.
find /usr/bin -xtype l | LC_ALL=C sort > "$T/share/host-broken"
date +%Z > "$T/share/host-tz"
(. /etc/os-release && echo "$ID $VERSION_ID") > "$T/share/host-os"
cat /etc/machine-id > "$T/share/host-machine-id" 2>/dev/null || : > "$T/share/host-machine-id"
# The guest's Python and Node clients of a refusal: "status N deny R body
# LINE" from a CONNECT, or with an SNI "alert NAME" from the TLS library.
cat > "$T/share/refuse.py" <<'PYEOF'
import os, socket, ssl, sys, urllib.parse, urllib.request
host, sni = sys.argv[1], (sys.argv[2] if len(sys.argv) > 2 else None)
p = urllib.parse.urlsplit(os.environ["https_proxy"])
if sni is None:
    try:
        urllib.request.urlopen("https://%s/" % host, timeout=60)
        print("urllib opened")
    except OSError as e:
        print("urllib %s" % e)
s = socket.create_connection((p.hostname, p.port), timeout=60)
s.sendall(b"CONNECT %s:443 HTTP/1.1\r\n\r\n" % host.encode())
buf = b""
while b"\r\n\r\n" not in buf:
    d = s.recv(4096)
    if not d:
        break
    buf += d
head, _, rest = buf.partition(b"\r\n\r\n")
lines = head.decode("latin-1").split("\r\n")
if sni is not None:
    try:
        ssl.create_default_context().wrap_socket(s, server_hostname=sni)
        print("handshake completed")
    except ssl.SSLError as e:
        print("alert %s" % e.reason)
    sys.exit(0)
while not rest.endswith(b"\n"):
    d = s.recv(4096)
    if not d:
        break
    rest += d
deny = [l.split(":", 1)[1].strip() for l in lines
        if l.lower().startswith("x-ksb-deny:")]
print("status %s deny %s body %s" % (lines[0].split(" ")[1],
      deny[0] if deny else "-", rest.decode("latin-1").strip()))
PYEOF
cat > "$T/share/refuse.js" <<'JSEOF'
const http = require("http"), tls = require("tls");
const [host, sni] = process.argv.slice(2);
const p = new URL(process.env.https_proxy);
const req = http.request({ host: p.hostname, port: p.port, method: "CONNECT",
  path: host + ":443" });
req.on("connect", (res, sock, rest) => {
  if (sni !== undefined) {
    const t = tls.connect({ socket: sock, servername: sni });
    t.on("secureConnect", () => { console.log("handshake completed");
      process.exit(0); });
    t.on("error", (e) => { console.log("alert " + e.code); process.exit(0); });
    return;
  }
  let b = rest.toString("latin1");
  sock.on("data", (d) => b += d.toString("latin1"));
  sock.on("close", () => { console.log("status " + res.statusCode +
    " deny " + res.headers["x-ksb-deny"] + " body " + b.trim()); });
});
req.on("error", (e) => console.log("ERR " + e.message));
req.end();
JSEOF
cat > "$T/share/dev.sh" <<'GUEST'
#!/bin/bash
# In the guest, as the agent: "RESULT name ok|FAIL detail" lines.
fails=0
ok() { echo "RESULT $1 ok"; }
bad() { echo "RESULT $1 FAIL $2"; fails=$((fails + 1)); }
S=/ksb-test
URL=https://allowed.test

n=$(grep -c -w sse4_2 /proc/cpuinfo)
[ "$n" -gt 0 ] && ok cpu_sse4_2 || bad cpu_sse4_2 "no sse4_2 in /proc/cpuinfo"
grep -qw popcnt /proc/cpuinfo && grep -qw ssse3 /proc/cpuinfo && ok cpu_v2 ||
	bad cpu_v2 "$(grep -m1 flags /proc/cpuinfo)"
if out=$(which awk sed grep vi make python3 node npm git tmux 2>&1) &&
	[ "$(echo "$out" | wc -l)" = 10 ]; then ok which; else bad which "$out"; fi
for c in editor pager; do
	command -v "$c" >/dev/null && ok "alt_$c" || bad "alt_$c" "not found"
done
echo 'a b' | awk '{ print $2 }' | grep -qx b && ok awk_runs || bad awk_runs "awk"
vi --version >/dev/null 2>&1 || vi -h >/dev/null 2>&1 && ok vi_runs || bad vi_runs "vi"
npm --version >/dev/null 2>&1 && ok npm_runs || bad npm_runs "$(npm --version 2>&1 | tail -1)"

find /usr/bin -xtype l | LC_ALL=C sort > /tmp/broken
extra=$(LC_ALL=C comm -23 /tmp/broken "$S/host-broken")
[ -z "$extra" ] && ok usr_bin_links || bad usr_bin_links "unresolved: $(echo $extra)"

[ "$LANG" = C.UTF-8 ] && ok lang || bad lang "LANG=$LANG"
l=$(locale 2>&1 >/dev/null)
[ -z "$l" ] && ok locale || bad locale "$l"
[ "$(date +%Z)" = "$(cat $S/host-tz)" ] && ok tz || bad tz "$(date +%Z) vs $(cat $S/host-tz)"
[ -e /etc/localtime ] && ok localtime || bad localtime "no /etc/localtime"
os=$(. /etc/os-release 2>/dev/null && echo "$ID $VERSION_ID")
[ "$os" = "$(cat $S/host-os)" ] && ok os_release || bad os_release "'$os'"

[ ! -e /etc/shadow ] && [ ! -e /etc/gshadow ] && ok no_shadow || bad no_shadow "present"
[ ! -e /etc/ssh ] && [ ! -e /etc/ksb ] && [ ! -e /etc/ssl/private ] && ok no_secrets ||
	bad no_secrets "$(ls -d /etc/ssh /etc/ksb /etc/ssl/private 2>/dev/null)"
users=$(cut -d: -f1 /etc/passwd | tr '\n' ' ')
[ "$users" = "root agent " ] && ok passwd || bad passwd "$users"
groups=$(cut -d: -f1 /etc/group | tr '\n' ' ')
[ "$groups" = "root agent " ] && ok group || bad group "$groups"
m=$(cat /etc/machine-id 2>/dev/null)
[ ${#m} = 32 ] && [ "$m" != "$(cat $S/host-machine-id)" ] && ok machine_id ||
	bad machine_id "'$m'"

# TLS: the test CA reached the guest bundle through ca-file only.
b=$(curl -sS --max-time 60 "$URL/index.txt" 2>&1)
case "$b" in "hello from the origin"*) ok curl_tls ;; *) bad curl_tls "$b" ;; esac
r=$(timeout 120 git ls-remote "$URL/repo.git" 2>&1)
case "$r" in *refs/heads/main*) ok git_ls_remote ;; *) bad git_ls_remote "$r" ;; esac
if timeout 120 git clone -q "$URL/repo.git" /tmp/clone 2>/tmp/clone.err &&
	grep -qx "dev machine" /tmp/clone/README; then ok git_clone
else bad git_clone "$(tail -2 /tmp/clone.err)"; fi
b=$(timeout 120 python3 -c '
import urllib.request
print(urllib.request.urlopen("https://allowed.test/index.txt", timeout=60).read().decode())' 2>&1)
case "$b" in "hello from the origin"*) ok python_tls ;; *) bad python_tls "$(echo "$b" | tail -1)" ;; esac
b=$(timeout 120 node -e '
// CONNECT through the gateway, then TLS verified against the Node CAs plus
// NODE_EXTRA_CA_CERTS (Node 20 has no https_proxy support of its own).
const http = require("http"), tls = require("tls");
const p = new URL(process.env.https_proxy);
const fail = (m) => { console.log("ERR " + m); process.exit(1); };
const req = http.request({ host: p.hostname, port: p.port, method: "CONNECT",
  path: "allowed.test:443" });
req.on("connect", (res, sock) => {
  if (res.statusCode !== 200) fail("CONNECT " + res.statusCode);
  const t = tls.connect({ socket: sock, servername: "allowed.test" }, () => {
    t.write("GET /index.txt HTTP/1.0\r\nHost: allowed.test\r\n\r\n");
  });
  let b = "";
  t.on("data", (d) => b += d);
  t.on("end", () => console.log(b.split("\r\n\r\n")[1]));
  t.on("error", (e) => fail(e.message));
});
req.on("error", (e) => fail(e.message));
req.end();' 2>&1)
case "$b" in "hello from the origin"*) ok node_tls ;; *) bad node_tls "$(echo "$b" | tail -1)" ;; esac
# Every refusal kind as curl, git, Python and Node show it.
body_ok() {	# body_ok NAME OUT STATUS REASON HOST
	case "$2" in
	"status $3 deny $4 body ksb: refused CONNECT $5:443 ($4): "*"ksbctl"*) ok "$1" ;;
	*) bad "$1" "$2" ;;
	esac
}
for k in "403 not_in_allowlist nope.test" "502 resolve_failed nxdomain.test" \
	"403 address_screened screened.test" "502 connect_refused refused.test"; do
	set -- $k
	e=$(curl -sS -v --max-time 60 "https://$3/" 2>&1)
	case "$e" in *"X-Ksb-Deny: $2"*) ;; *) e="no header: $e" ;; esac
	case "$e" in *"CONNECT tunnel failed, response $1"*) ok "curl_$2" ;;
	*) bad "curl_$2" "$(echo "$e" | tail -1)" ;; esac
	e=$(timeout 120 git ls-remote "https://$3/repo.git" 2>&1)
	case "$e" in *"CONNECT tunnel failed, response $1"*) ok "git_$2" ;;
	*) bad "git_$2" "$e" ;; esac
	e=$(timeout 120 python3 "$S/refuse.py" "$3" 2>&1)
	case "$e" in "urllib <urlopen error Tunnel connection failed: $1 "*) ok "python_urllib_$2" ;;
	*) bad "python_urllib_$2" "$e" ;; esac
	body_ok "python_$2" "$(echo "$e" | tail -1)" "$1" "$2" "$3"
	body_ok "node_$2" "$(timeout 120 node "$S/refuse.js" "$3" 2>&1)" "$1" "$2" "$3"
done
e=$(curl -sS --max-time 60 --connect-to denied.test:443:allowed.test:443 \
	https://denied.test/ 2>&1)
case "$e" in *"unrecognized name"*) ok curl_sni_mismatch ;;
*) bad curl_sni_mismatch "$e" ;; esac
e=$(timeout 120 python3 "$S/refuse.py" allowed.test denied.test 2>&1)
[ "$e" = "alert TLSV1_UNRECOGNIZED_NAME" ] && ok python_sni_mismatch ||
	bad python_sni_mismatch "$e"
e=$(timeout 120 node "$S/refuse.js" allowed.test denied.test 2>&1)
[ "$e" = "alert ERR_SSL_TLSV1_UNRECOGNIZED_NAME" ] && ok node_sni_mismatch ||
	bad node_sni_mismatch "$e"
[ "$SSL_CERT_FILE" = /etc/ssl/certs/ca-certificates.crt ] &&
	[ "$NODE_EXTRA_CA_CERTS" = "$SSL_CERT_FILE" ] && [ "$REQUESTS_CA_BUNDLE" = "$SSL_CERT_FILE" ] &&
	ok ca_env || bad ca_env "SSL_CERT_FILE=$SSL_CERT_FILE NODE_EXTRA_CA_CERTS=$NODE_EXTRA_CA_CERTS"
exit $fails
GUEST
chmod 755 "$T/share/dev.sh"

ksb_say "ksb-run: a developer's guest (cpu auto, ca-file = the test CA)"
set +e
timeout -k 10 600 ip netns exec "$GW" "$KSB_BUILDDIR/ksb-run" -f "$T/ksb.conf" \
	--state-dir "$T/state" --share-ro "$T/share:/ksb-test" \
	--ca-file "$T/pki/ca.pem" -- /bin/bash /ksb-test/dev.sh > "$T/guest.out" 2> "$T/run.err"
rc=$?
set -e
cat "$T/guest.out"
cat "$T/run.err" >&2

fails=0
ksb_check "ksb-run exited 0 (every guest check passed)" '[ "$rc" = 0 ]'
names="cpu_sse4_2 cpu_v2 which alt_editor alt_pager awk_runs vi_runs npm_runs
usr_bin_links lang locale tz localtime os_release no_shadow no_secrets passwd group
machine_id curl_tls git_ls_remote git_clone python_tls node_tls ca_env"
for k in not_in_allowlist resolve_failed address_screened connect_refused; do
	names="$names curl_$k git_$k python_urllib_$k python_$k node_$k"
done
names="$names curl_sni_mismatch python_sni_mismatch node_sni_mismatch"
n=1
for r in $names; do
	ksb_check "guest: $r" "grep -qx 'RESULT $r ok' '$T/guest.out'"
	n=$((n + 1))
done
ksb_check "no x86-64-v2 warning with cpu auto" '! grep -q "the guest lacks" "$T/run.err"'
n=$((n + 1))
# The audit rows of the refusals: one per client (4 kinds x 5 CONNECTs,
# curl, git, urllib, the raw Python one and Node; git may retry), and the
# three SNI mismatches.
for k in "nope.test not_in_allowlist" "nxdomain.test resolve_failed" \
	"screened.test address_screened" "refused.test connect_refused"; do
	set -- $k
	ksb_check "audit: $1 refused as $2 for each client" \
		'[ "$(ksb_rows "host = '"'$1'"' AND decision = '"'deny'"' AND reason = '"'$2'"'")" -ge 5 ]'
done
ksb_check "audit: three SNI mismatches" \
	'ksb_row_is 3 "host = '"'allowed.test'"' AND sni = '"'denied.test'"' AND reason = '"'sni_mismatch'"'"'
n=$((n + 5))

ksb_say "--cpu qemu64: refused nothing, but warned about"
set +e
timeout -k 10 300 ip netns exec "$GW" "$KSB_BUILDDIR/ksb-run" -f "$T/ksb.conf" \
	--state-dir "$T/state" --cpu qemu64 -- /bin/sh -c \
	'grep -c -w sse4_2 /proc/cpuinfo' > "$T/q64.out" 2> "$T/q64.err"
set -e
cat "$T/q64.out" "$T/q64.err"
if grep -qw sse4_2 /proc/cpuinfo; then
	ksb_check "qemu64: ksb-run warns the guest lacks sse4_2" \
		'grep -q "cpu qemu64.*the guest lacks.*sse4_2" "$T/q64.err"'
else
	ksb_check "qemu64: no warning on a host without sse4_2" '! grep -q "the guest lacks" "$T/q64.err"'
fi
ksb_check "qemu64: the guest has no sse4_2" 'grep -qx 0 "$T/q64.out"'
ksb_check "--cpu 'max -smp 8' is refused before boot" \
	'! ip netns exec "$GW" "$KSB_BUILDDIR/ksb-run" -f "$T/ksb.conf" --state-dir "$T/state" --cpu "max -smp 8" -- true 2>"$T/bad.err" && grep -q "invalid CPU model" "$T/bad.err"'
n=$((n + 3))

ksb_say "ksbctl status: the preflight's cpu line"
ip netns exec "$GW" "$KSB_BUILDDIR/ksbctl/ksbctl" -f "$T/ksb.conf" status > "$T/pre" 2>&1 || :
sed 's/^cpu = .*//' "$T/ksb.conf" > "$T/q64.conf"
echo "cpu = qemu64" >> "$T/q64.conf"
ip netns exec "$GW" "$KSB_BUILDDIR/ksbctl/ksbctl" -f "$T/q64.conf" status > "$T/pre64" 2>&1 || :
grep cpu "$T/pre" "$T/pre64" || :
ksb_check "preflight: cpu auto is OK" 'grep -Eq "^OK +cpu +cpu (max|host)" "$T/pre"'
if grep -qw sse4_2 /proc/cpuinfo; then
	ksb_check "preflight: cpu qemu64 is reported as lacking sse4_2" \
		'grep -Eq "^MISSING +cpu +cpu qemu64: the guest lacks .*sse4_2" "$T/pre64"'
else
	ksb_check "preflight: cpu qemu64 on a host without sse4_2 is OK" \
		'grep -Eq "^OK +cpu" "$T/pre64"'
fi
n=$((n + 2))
echo "# $((n - fails)) passed, $fails failed"
[ "$fails" = 0 ]
