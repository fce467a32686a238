#!/bin/bash
# credclients.sh: real clients through the credential swap (issue 28),
# not hand-written requests.  A real ksb-gatewayd in its own namespace, a
# fake guest holding a lease (ctlhold) whose namespace reaches nothing
# but the gateway, a TLS origin of its own in the origin namespace
# (clients_origin.py) that checks the exact Authorization it received and
# that no placeholder arrived, and serves git's smart HTTP by the real
# git-http-backend.  Each credential has a value of a real format and
# length.  Checks, each client also proving it never saw the real value:
#  - git clone and git push over HTTPS with a Basic credential (a GitHub
#    fine-grained token, 93 bytes, as the password of user "agent"): the
#    push arrives in the origin's bare repository; git's own trace
#    (GIT_TRACE_CURL, unredacted) holds the placeholder, never the value;
#  - Python requests and urllib.request with a bearer key (an OpenAI
#    project key, 164 bytes); Node's fetch with a bearer token (an
#    Anthropic OAuth token, 108 bytes); the origin echoes the field it
#    received, and the clients find no real value in what they got;
#  - curl -T of 16 MiB with Expect: 100-continue (an npm token): the 100
#    arrives (no expect timeout), the body arrives whole (sha256).
set -eu
. "$(dirname "$0")/../lib.sh"

ksb_need_root
ksb_need python3
ksb_need curl
ksb_need git
ksb_need node
HOLD=$KSB_BUILDDIR/tests/integration/ctlhold
BACKEND=/usr/lib/git-core/git-http-backend
[ -x "$HOLD" ] || ksb_fail "$HOLD not built (make check builds it)"
[ -x "$BACKEND" ] || ksb_skip "$BACKEND missing (apt-get install git)"
# Libraries, not commands (ksb_need's table): skipped the same way, and
# a failure under contrib/test.sh, where bootstrap.sh installed them.
lib_need() { # PACKAGE CMD...
	local p=$1
	shift
	"$@" >/dev/null 2>&1 && return 0
	[ -z "${KSB_NEED_STRICT:-}" ] || ksb_fail "$p missing after bootstrap.sh"
	ksb_skip "$p missing (apt-get install $p)"
}
lib_need python3-requests python3 -c 'import requests'
lib_need node-undici env NODE_PATH=/usr/share/nodejs node -e 'require("undici")'
ksb_env
pass=0 fails=0
S=$KSB_SRCDIR/tests/integration

. "$S/clients_setup.sh"
clients_setup
ksb_gateway
ksb_fake_guest 1 g1 p1
ph() { sed -n "s|^cred=$1/[^/]*/||p" "$T/lease1"; }
GPH=$(ph gitpat) PPH=$(ph pykey) NPH=$(ph nodekey) UPH=$(ph upkey)
[ -n "$GPH" ] && [ -n "$PPH" ] && [ -n "$NPH" ] && [ -n "$UPH" ] ||
	ksb_fail "placeholders missing from the lease: $(cat "$T/lease1")"
CA=$T/state/ca/ca.crt
PROXY=http://10.77.0.1:3128
G() { ip netns exec "ksbt-$$-g1" "$@"; }
# never REALFILE FILE...: none of the real value's spellings (as is, and
# base64 of the Basic pair) is in FILEs.
never() {
	local v b
	v=$(head -n1 "$1")
	b=$(printf 'agent:%s' "$v" | base64 -w0)
	shift
	! grep -rqF -e "$v" -e "$b" "$@"
}
echo "# values: git $(($(wc -c < "$T/c/git") - 1)), python $(($(wc -c < "$T/c/py") - 1)), node $(($(wc -c < "$T/c/node") - 1)), npm $(($(wc -c < "$T/c/up") - 1)) bytes"

ksb_say "git over HTTPS, Basic: clone and push against git-http-backend"
# GIT_SSL_CAINFO wins over http.sslCAInfo: set it, whatever the caller has.
mkdir -p "$T/home"
GITENV=(env HOME="$T/home" GIT_SSL_CAINFO="$CA" GIT_TRACE_CURL="$T/git.trace" GIT_TRACE_REDACT=0
	GIT_TERMINAL_PROMPT=0 git -c http.proxy="$PROXY" -c http.sslCAInfo="$CA"
	-c credential.helper= -c user.name=agent -c user.email=agent@guest)
ksb_check "git clone through the gateway" \
	'G "${GITENV[@]}" clone -q "https://agent:$GPH@git.clients.test/git/repo.git" \
		"$T/work" 2> "$T/clone.err" && [ "$(cat "$T/work/README")" = seed ]'
MSG="pushed through ksb $$"
echo "$MSG" > "$T/work/NEW"
ksb_check "git push through the gateway: the commit is in the origin's repository" \
	'G "${GITENV[@]}" -C "$T/work" add NEW &&
	 G "${GITENV[@]}" -C "$T/work" commit -qm "$MSG" &&
	 G "${GITENV[@]}" -C "$T/work" push -q origin main 2> "$T/push.err" &&
	 [ "$(git --git-dir="$T/git/repo.git" log -1 --format=%s main)" = "$MSG" ]'
ksb_check "the origin got the exact Basic field on upload-pack and receive-pack" \
	'grep -q "\"path\": \"/git/repo.git/git-upload-pack\", .*\"auth\": \"ok\"" "$T/origin.log" &&
	 grep -q "\"path\": \"/git/repo.git/git-receive-pack\", .*\"auth\": \"ok\"" "$T/origin.log"'
ksb_check "git sent the placeholder (its own trace), never the value" \
	'grep -qF "Authorization: Basic $(printf "agent:%s" "$GPH" | base64 -w0)" "$T/git.trace" &&
	 never "$T/c/git" "$T/git.trace" "$T/work" "$T/clone.err" "$T/push.err"'

ksb_say "Python requests and urllib.request, bearer"
for m in requests urllib; do
	out=$(G python3 "$S/clients_py.py" "$m" "$PROXY" \
		"https://py.clients.test/v1/chat/completions" "$CA" "$PPH" \
		"$T/c/py" 2>&1) && rc=0 || rc=$?
	echo "$out" | sed "s/^/# $m: /"
	ksb_check "python $m: GET and POST, the exact field, nothing real back" \
		'[ "$rc" = 0 ] && [ "$(echo "$out" | grep -c "status=200 auth=ok leak=no")" = 2 ]'
done

ksb_say "Node's fetch, bearer"
out=$(G env NODE_PATH=/usr/share/nodejs node "$S/clients_node.js" "$PROXY" \
	"https://node.clients.test/v1/messages" "$CA" "$NPH" "$T/c/node" 2>&1) &&
	rc=0 || rc=$?
echo "$out" | sed "s/^/# node: /"
ksb_check "node fetch: GET and POST, the exact field, nothing real back" \
	'[ "$rc" = 0 ] && [ "$(echo "$out" | grep -c "status=200 auth=ok leak=no")" = 2 ]'
ksb_check "the masked echo: the value went back as '*'s, not at all in clear" \
	'ksb_sql_is 4 "SELECT count(*) FROM requests WHERE path = \"/v1/chat/completions\" AND reason = \"credential_reflected\" AND credential = \"pykey\""'

ksb_say "curl -T of 16 MiB, Expect: 100-continue"
head -c $((16 << 20)) /dev/urandom > "$T/big.bin"
SUM=$(sha256sum "$T/big.bin" | cut -d" " -f1)
tt=$(G curl -sS -v --max-time 120 --proxy "$PROXY" --cacert "$CA" \
	-H "Authorization: Bearer $UPH" -T "$T/big.bin" -o "$T/put.out" \
	-w '%{time_total}' "https://up.clients.test/upload/big.bin" 2> "$T/put.err") || true
echo "# curl -T 16 MiB: ${tt}s; $(cat "$T/put.out" 2>/dev/null)"
ksb_check "curl -T: Expect sent, the 100 Continue relayed to curl" \
	'grep -q "^> Expect: 100-continue" "$T/put.err" &&
	 grep -q "^< HTTP/1.1 100 Continue" "$T/put.err"'
ksb_check "the body arrived whole, with the exact field" \
	'grep -q "\"len\": $((16 << 20)), \"sha256\": \"$SUM\", \"auth\": \"ok\"" "$T/put.out"'

ksb_say "what arrived, what came back"
ksb_check "no placeholder, no wrong field ever reached the origin" \
	'! grep -qE "\"auth\": \"(placeholder|wrong)\"" "$T/origin.log" &&
	 [ "$(grep -c "\"auth\": \"ok\"" "$T/origin.log")" -ge 10 ]'
ksb_check "the gateway log never shows a real value" \
	'for f in git py node up; do never "$T/c/$f" "$T/gatewayd.log" || exit 1; done'
ksb_check "clients_leakscan.py (tests/e2e/clients.sh's witness) finds a value by its hash" \
	'v=$(head -n1 "$T/c/py") &&
	 sp="sk-proj-:${#v}:$(printf %s "$v" | sha256sum | cut -c1-64)" &&
	 python3 "$S/clients_leakscan.py" "$sp" -- "$T/c" | grep -q "^leak=yes" &&
	 python3 "$S/clients_leakscan.py" "$sp" -- "$T/put.out" | grep -qx "leak=no"'
ksb_check "each swapped request has its row with its credential" \
	'ksb_sql_is 4 "SELECT count(DISTINCT credential) FROM requests WHERE status IN (200, 401)"'
[ "$fails" = 0 ]
