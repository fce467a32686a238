#!/bin/bash
# push.sh: ksb-run --push-to's push (mirror_push, through mirrordrv push)
# to remotes that ask for credentials or hang (issue 33).  In the test's
# own namespaces: push_origin.py in ns OR serves bare repositories through
# the real git http-backend over TLS (a certificate of the test CA for
# git.test) and over plain HTTP, both behind HTTP Basic, and a listener
# that accepts and never answers; the pushes run in ns GW, git.test in a
# hosts file bound over /etc/hosts in a mount namespace of their own.
#  - the configured user:password (a token of GitHub's format): the branch
#    arrives (git as the witness), the remote saw the credential once;
#  - none configured, or a wrong one: the push fails saying so, the wrong
#    one offered once (no loop), nothing arrives;
#  - plain http:// never gets the credential;
#  - a TLS remote not signed by the configured CA: refused;
#  - the hanging remote: the push stops after its timeout (3 s) with
#    "no answer in 3 s", not later.
# Root (namespaces); skips (77) naming what is missing.
set -eu
. "$(dirname "$0")/../lib.sh"

ksb_need_root
ksb_need git python3 unshare
ksb_need_built tests/integration/mirrordrv
ksb_env
DRV=$KSB_BUILDDIR/tests/integration/mirrordrv
fails=0

openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
	-keyout "$T/pki/git.key" -out "$T/pki/git.csr" -subj "/CN=git.test" >/dev/null 2>&1
printf 'subjectAltName=DNS:git.test\n' > "$T/pki/git.ext"
openssl x509 -req -in "$T/pki/git.csr" -CA "$T/pki/ca.pem" -CAkey "$T/pki/ca.key" \
	-CAcreateserial -days 2 -extfile "$T/pki/git.ext" -out "$T/pki/git.pem" >/dev/null 2>&1
# Another CA, which signed nothing here.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
	-keyout "$T/pki/other.key" -out "$T/pki/other.pem" -days 2 \
	-subj "/CN=another CA" >/dev/null 2>&1
printf '127.0.0.1 localhost\n%s git.test\n' "$ORIGIN_IP" > "$T/push-hosts"

export GIT_CONFIG_NOSYSTEM=1 HOME=$T/home GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@t \
	GIT_COMMITTER_NAME=t GIT_COMMITTER_EMAIL=t@t
mkdir -p "$HOME" "$T/remotes"
git init -q -b main "$T/src"
echo one > "$T/src/a.txt"
git -C "$T/src" add a.txt
git -C "$T/src" commit -qm one
TIP=$(git -C "$T/src" rev-parse HEAD)
git init -q --bare "$T/remotes/r.git"
git -C "$T/remotes/r.git" config http.receivepack true
# A personal access token's format: ghp_ and 36 characters.
PASS=ghp_$(openssl rand -base64 48 | tr -dc 'A-Za-z0-9' | cut -c1-36)

serve() { # NAME PORT ARGS...: push_origin.py in ns OR
	local name=$1 port=$2
	shift 2
	ip netns exec "$OR" python3 "$KSB_SRCDIR/tests/integration/push_origin.py" \
		--addr "$ORIGIN_IP" --port "$port" --root "$T/remotes" --user ci \
		--password "$PASS" --log "$T/$name.log" --ready-file "$T/$name.ready" \
		"$@" > "$T/$name.err" 2>&1 &
	KSB_PIDS="$KSB_PIDS $!"
	ksb_until 30 test -s "$T/$name.ready" || ksb_fail "$name did not start: $(cat "$T/$name.err")"
	touch "$T/$name.log"
}
serve https 443 --cert "$T/pki/git.pem" --key "$T/pki/git.key"
serve http 80
serve hang 444 --hang

# push DST URL TIMEOUT [CA]: mirrordrv push in ns GW; its stderr in $T/out.
push() {
	local dst=$1 url=$2 to=$3
	shift 3
	ip netns exec "$GW" unshare -m sh -c 'mount --bind "$1" /etc/hosts && shift && exec "$@"' \
		sh "$T/push-hosts" "$DRV" push "$T/src/.git" refs/heads/main "$url" \
		"refs/heads/sandbox/$dst" "$to" "$@" > "$T/out" 2>&1
}
arrived() { [ "$(git --git-dir="$T/remotes/r.git" rev-parse -q --verify "refs/heads/sandbox/$1")" = "$TIP" ]; }
absent() { ! git --git-dir="$T/remotes/r.git" rev-parse -q --verify "refs/heads/sandbox/$1" > /dev/null; }
said() { grep -q "$1" "$T/out" || { sed 's/^/# out: /' "$T/out"; false; }; }
auths() { grep -c "\"auth\": \"$2\"" "$T/$1.log" || true; }

rc=0; KSBT_PUSH_CRED=ci:$PASS push t1 https://git.test/r.git 20 "$T/pki/ca.pem" || rc=$?
sed 's/^/# out: /' "$T/out"
ksb_check "https with the configured credential: the push succeeds" '[ "$rc" = 0 ]'
ksb_check "the branch arrived (git http-backend, git as the witness)" 'arrived t1'
ksb_check "the remote got the credential (Basic, user ci)" '[ "$(auths https good)" -ge 1 ]'

: > "$T/https.log"
rc=0; push t2 https://git.test/r.git 20 "$T/pki/ca.pem" || rc=$?
ksb_check "https, no credential configured: the push fails saying so" \
	'[ "$rc" = 1 ] && said "asks for credentials and none are configured"'
ksb_check "nothing arrived" 'absent t2'

: > "$T/https.log"
rc=0; KSBT_PUSH_CRED=ci:ghp_$(openssl rand -hex 18) push t3 https://git.test/r.git 20 "$T/pki/ca.pem" || rc=$?
ksb_check "https, a wrong credential: the push fails, refused" \
	'[ "$rc" = 1 ] && said "refused the configured credential"'
ksb_check "the wrong credential was offered once, not in a loop ($(auths https bad))" '[ "$(auths https bad)" = 1 ]'
ksb_check "nothing arrived" 'absent t3'

rc=0; KSBT_PUSH_CRED=ci:$PASS push t4 http://git.test/r.git 20 || rc=$?
ksb_check "plain http: the credential is not given, the push fails" \
	'[ "$rc" = 1 ] && said "https:// URL of --push-to only"'
ksb_check "the http remote never saw a credential" \
	'[ "$(auths http good)" = 0 ] && [ "$(auths http bad)" = 0 ] && [ "$(auths http none)" -ge 1 ]'
ksb_check "nothing arrived" 'absent t4'

: > "$T/https.log"
rc=0; KSBT_PUSH_CRED=ci:$PASS push t5 https://git.test/r.git 20 "$T/pki/other.pem" || rc=$?
sed 's/^/# out: /' "$T/out"
ksb_check "https signed by another CA than the configured one: refused" '[ "$rc" = 1 ]'
ksb_check "that remote got no request" '[ ! -s "$T/https.log" ]'
ksb_check "nothing arrived" 'absent t5'

t0=$(date +%s%N)
rc=0; push t6 "https://git.test:444/r.git" 3 "$T/pki/ca.pem" || rc=$?
ms=$((($(date +%s%N) - t0) / 1000000))
echo "# the hanging remote: the push returned after $ms ms"
ksb_check "a remote that accepts and never answers: stopped after 3 s" \
	'[ "$rc" = 1 ] && said "no answer in 3 s"'
ksb_check "not before the bound, not much after it ($ms ms)" '[ "$ms" -ge 3000 ] && [ "$ms" -lt 8000 ]'
ksb_check "the hanging remote had the connection" 'grep -q accepted "$T/hang.log"'
ksb_check "nothing arrived" 'absent t6'

[ "$fails" = 0 ] || ksb_fail "$fails check(s) failed"
echo PASS
