#!/bin/bash
# e2e: real clients through the credential swap from a real guest (issue
# 28).  The setup of tests/integration/credclients.sh (clients_setup.sh:
# credentials of real formats and lengths, a TLS origin in its own
# namespace that checks the exact Authorization it received, git's smart
# HTTP by the real git-http-backend); one boot of a guest of profile p1
# that runs, with the placeholders it was given and the environment the
# agent gets (HTTPS_PROXY, SSL_CERT_FILE: the gateway CA), the host's
# /usr/bin/git, python3 and node:
#  - git clone and git push over HTTPS with the Basic credential: the
#    commit arrives in the origin's bare repository;
#  - Python requests and Node's fetch with bearer keys;
#  - the guest never held a real value: everything its clients received
#    (git's unredacted trace, the HTTP responses) and its home directory
#    are scanned for each spelling by hash (clients_leakscan.py: the
#    guest knows a value only by its public prefix, length and SHA-256).
# Needs root, QEMU, a guest kernel, git, python3-requests, node-undici.
set -eu
. "$(dirname "$0")/../lib.sh"

ksb_need_root
ksb_need qemu-system-x86_64 git python3 node
ksb_need_built ksb-run ksb-guest-init ksb-gatewayd
S=$KSB_SRCDIR/tests/integration
lib_need() { # PACKAGE CMD...
	local p=$1
	shift
	"$@" >/dev/null 2>&1 && return 0
	[ -z "${KSB_NEED_STRICT:-}" ] || ksb_fail "$p missing after bootstrap.sh"
	ksb_skip "$p missing (apt-get install $p)"
}
lib_need python3-requests python3 -c 'import requests'
lib_need node-undici env NODE_PATH=/usr/share/nodejs node -e 'require("undici")'
ksb_kernel
ksb_env
pass=0 fails=0
. "$S/clients_setup.sh"
clients_setup
ksb_gateway

# Each spelling the guest must never see, by public prefix, length, hash.
spec() { # PREFIX VALUE
	printf '%s:%s:%s' "$1" "${#2}" "$(printf %s "$2" | sha256sum | cut -c1-64)"
}
GV=$(head -n1 "$T/c/git") PV=$(head -n1 "$T/c/py") NV=$(head -n1 "$T/c/node")
SPECS="$(spec github_pat_ "$GV") $(spec YWdlbnQ6 "$(printf 'agent:%s' "$GV" | base64 -w0)")
$(spec sk-proj- "$PV") $(spec sk-ant-oat01- "$NV")"
cp "$S/clients_py.py" "$S/clients_node.js" "$S/clients_leakscan.py" "$T/share/"
chmod 644 "$T/share"/*.py "$T/share"/*.js
MSG="pushed from the guest $$"
cat > "$T/share/clients-guest.sh" <<GUEST
# Runs in the guest as the agent.  One RESULT line per check.
r() { echo "RESULT \$1 \$2"; }
ph() { eval "v=\\\${\$1:-}"; [ -n "\$v" ] || v=\$(cat /run/ksb/secrets/\$1); printf %s "\$v"; }
G=\$(ph GIT_TOKEN) P=\$(ph OPENAI_API_KEY) N=\$(ph ANTHROPIC_AUTH_TOKEN)
case \$G in *ksbph_*) r placeholders ok ;; *) r placeholders "bad: \$G" ;; esac
# ~/work is the instance's workspace: the clone goes beside it.
cd "\$HOME"
D=\$HOME/received
export GIT_TRACE_CURL=\$HOME/git.trace GIT_TRACE_REDACT=0 GIT_TERMINAL_PROMPT=0
g() { git -c user.name=agent -c user.email=agent@guest "\$@"; }
if g clone -q "https://agent:\$G@git.clients.test/git/repo.git" gitclone 2> clone.err &&
	[ "\$(cat gitclone/README)" = seed ]; then r clone ok; else r clone "bad: \$(tail -c 300 clone.err)"; fi
echo "$MSG" > gitclone/NEW
if g -C gitclone add NEW && g -C gitclone commit -qm "$MSG" &&
	g -C gitclone push -q origin main 2> push.err; then r push ok; else r push "bad: \$(tail -c 300 push.err)"; fi
out=\$(python3 /ksb-test/clients_py.py requests "\$HTTPS_PROXY" \
	https://py.clients.test/v1/chat/completions "\$SSL_CERT_FILE" "\$P" "dump:\$D" 2>&1)
echo "\$out" | sed 's/^/# requests: /'
[ "\$(echo "\$out" | grep -c 'status=200 auth=ok leak=dumped')" = 2 ] && r requests ok || r requests bad
out=\$(NODE_PATH=/usr/share/nodejs node /ksb-test/clients_node.js "\$HTTPS_PROXY" \
	https://node.clients.test/v1/messages "\$SSL_CERT_FILE" "\$N" "dump:\$D" 2>&1)
echo "\$out" | sed 's/^/# node: /'
[ "\$(echo "\$out" | grep -c 'status=200 auth=ok leak=dumped')" = 2 ] && r node ok || r node bad
grep -qF "Authorization: Basic \$(printf 'agent:%s' "\$G" | base64 -w0)" git.trace &&
	r git_sent_placeholder ok || r git_sent_placeholder bad
[ -s "\$D" ] && r dumped ok || r dumped bad
out=\$(python3 /ksb-test/clients_leakscan.py $(echo $SPECS) -- "\$HOME" /tmp 2>&1)
echo "# scan: \$out"
[ "\$out" = leak=no ] && r noleak ok || r noleak bad
exit 0
GUEST
chmod 644 "$T/share/clients-guest.sh"

ksb_say "ksb-run: the guest's clients"
t0=$SECONDS
set +e
timeout -k 10 600 ip netns exec "$GW" "$KSB_BUILDDIR/ksb-run" -f "$T/ksb.conf" \
	--name clients --state-dir "$T/state" --profile p1 --disk-size 256M \
	--memory 1024 --share-ro "$T/share:/ksb-test" \
	-- /bin/bash /ksb-test/clients-guest.sh > "$T/guest.out" 2> "$T/run.err"
rc=$?
set -e
grep -v '^RESULT' "$T/guest.out" | tail -n 20
grep '^RESULT' "$T/guest.out"
tail -n 5 "$T/run.err" >&2
echo "# ksb-run exit status $rc after $((SECONDS - t0)) s"
ksb_check "ksb-run exited 0" '[ "$rc" = 0 ]'
for r in placeholders clone push requests node git_sent_placeholder dumped noleak; do
	ksb_check "guest: $r" "grep -qx 'RESULT $r ok' '$T/guest.out'"
done
ksb_check "the guest's push is in the origin's repository" \
	'[ "$(git --git-dir="$T/git/repo.git" log -1 --format=%s main)" = "$MSG" ]'
ksb_check "the origin got the exact fields: git (Basic), python, node (bearer)" \
	'grep -q "\"path\": \"/git/repo.git/git-receive-pack\", .*\"auth\": \"ok\"" "$T/origin.log" &&
	 [ "$(grep -c "\"host\": \"py.clients.test\", \"auth\": \"ok\"" "$T/origin.log")" = 2 ] &&
	 [ "$(grep -c "\"host\": \"node.clients.test\", \"auth\": \"ok\"" "$T/origin.log")" = 2 ]'
ksb_check "no placeholder, no wrong field reached the origin" \
	'! grep -qE "\"auth\": \"(placeholder|wrong)\"" "$T/origin.log"'
ksb_check "the guest's output holds no real value" \
	'! grep -qF -e "$GV" -e "$PV" -e "$NV" "$T/guest.out" "$T/run.err"'
ksb_check "each client's requests have rows with their credential" \
	'ksb_sql_is 3 "SELECT count(DISTINCT credential) FROM requests WHERE status = 200 AND credential IN (\"gitpat\", \"pykey\", \"nodekey\")"'
[ "$fails" = 0 ]
