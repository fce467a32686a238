# tests/lib.sh: shared set-up for the integration and e2e tests and the demo.
# Sourced by bash scripts.  Everything lives in network namespaces this
# script creates (ksbt-<pid>-*) and in a temp dir; `ksb_cleanup' removes
# them and is installed as the EXIT trap by ksb_env.
#
# Layout:
#   ns GW  (ksbt-$$-gw): bridge ksb0 10.77.0.1/24 (made by ksb-gatewayd),
#                        veth ko0 10.78.0.1/24, ksb-gatewayd, QEMU guests
#   ns OR  (ksbt-$$-or): veth ko1 10.78.0.2/24, the TLS origin (openssl
#                        s_server) for allowed.test and denied.test
# No packet leaves these namespaces.

KSB_BUILDDIR=${KSB_BUILDDIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
KSB_SRCDIR=${KSB_SRCDIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
ORIGIN_IP=10.78.0.2

ksb_skip() { echo "SKIP: $*"; exit 77; }
ksb_fail() { echo "FAIL: $*" >&2; exit 1; }
ksb_say() { printf '\n== %s\n' "$*"; }

# ksb_pkg TOOL: the Debian 12 package that provides TOOL (a command name
# or an absolute path), as contrib/bootstrap.sh installs it; "?" when the
# table does not know it (tests/unit/packages.sh keeps the two in step).
ksb_pkg() {
	case ${1##*/} in
	ip | ss | bridge) echo iproute2 ;;
	nft) echo nftables ;;
	pgrep | pkill | ps | sysctl) echo procps ;;
	protocols | services) echo netbase ;;
	openssl) echo openssl ;;
	sqlite3) echo sqlite3 ;;
	curl) echo curl ;;
	python3) echo python3 ;;
	websockets) echo python3-websockets ;; # Debian's module directory
	git) echo git ;;
	tmux) echo tmux ;;
	cpio) echo cpio ;;
	busybox) echo busybox-static ;;
	qemu-system-x86_64) echo qemu-system-x86 ;;
	qemu-img) echo qemu-utils ;;
	mkfs.ext4 | chattr | lsattr) echo e2fsprogs ;;
	setpriv | flock | unshare | nsenter) echo util-linux ;;
	make) echo make ;;
	node) echo nodejs ;;
	npm) echo npm ;;
	clang) echo clang ;;
	clang-format) echo clang-format ;;
	cppcheck) echo cppcheck ;;
	file) echo file ;;
	systemd-analyze) echo systemd ;;
	systemd-nspawn) echo systemd-container ;;
	debootstrap) echo debootstrap ;;
	dpkg-buildpackage) echo dpkg-dev ;;
	sbatch | srun | squeue | sstat | sacct | sacctmgr | scontrol | scancel | slurmctld | slurmd) echo slurm-wlm ;;
	slurmdbd) echo slurmdbd ;;
	mariadbd | mariadb-install-db | mariadb) echo mariadb-server ;;
	munged | mungekey) echo munge ;;
	man) echo man-db ;;
	depmod | modprobe) echo kmod ;;
	timeout | mkfifo | stat | sha256sum | base64 | od) echo coreutils ;;
	nix-store | nix-build | nix-instantiate) echo nix-bin ;;
	*) echo "?" ;;
	esac
}

# ksb_need TOOL...: each TOOL (a command in $PATH, or an absolute path that
# must exist) is there, or the test is skipped (77) with the Debian
# package to install named.  Under contrib/test.sh (KSB_NEED_STRICT=1,
# after contrib/bootstrap.sh) a missing one fails instead: bootstrap.sh
# should have installed it.
ksb_need() {
	local t why
	for t in "$@"; do
		case $t in
		/*) [ -e "$t" ] && continue ;;
		*) command -v "$t" >/dev/null 2>&1 && continue ;;
		esac
		why="needs $t: install the Debian package $(ksb_pkg "$t")"
		why="$why (apt-get install $(ksb_pkg "$t"), or contrib/bootstrap.sh)"
		[ -n "${KSB_NEED_STRICT:-}" ] && ksb_fail "$why"
		ksb_skip "$why"
	done
}

ksb_need_root() {
	[ "$(id -u)" = 0 ] || ksb_skip "needs root (network namespaces, nftables, taps)"
	# What lib.sh itself runs, and /etc/protocols: without it nft prints
	# `meta l4proto 1' for icmp.
	ksb_need ip ss nft openssl sqlite3 curl timeout flock /etc/protocols
	ip netns add "ksbt-probe-$$" 2>/dev/null || ksb_skip "cannot create network namespaces"
	ip netns del "ksbt-probe-$$"
}

ksb_cleanup() {
	local rc=$?
	set +e
	# Only positive pids: a pid read from a state file can be 0 or empty
	# (an instance that never started), and `kill 0' would signal this
	# test's whole process group, make(1) included.
	local p pids=
	for p in ${KSB_PIDS:-}; do
		case $p in '' | *[!0-9]* | 0 | 1) ;; *) pids="$pids $p" ;; esac
	done
	[ -n "$pids" ] && kill $pids 2>/dev/null
	for p in $pids; do
		ksb_wait_dead "$p" 10
	done
	ip netns del "$GW" 2>/dev/null
	ip netns del "$OR" 2>/dev/null
	for ns in ${KSB_NETNS:-}; do ip netns del "$ns" 2>/dev/null; done
	if [ "$rc" != 0 ] && [ -d "${T:-}" ]; then
		echo "--- gateway log"; tail -n 40 "$T/gatewayd.log" 2>/dev/null
	fi
	[ -n "${T:-}" ] && [ -z "${KSB_KEEP:-}" ] && rm -rf "$T"
	exit "$rc"
}

# ksb_env: temp dir, namespaces, veth, test CA and origin, config files.
ksb_env() {
	T=$(mktemp -d /tmp/ksbt.XXXXXX)
	chmod 755 "$T"
	GW=ksbt-$$-gw
	OR=ksbt-$$-or
	KSB_PIDS=
	trap ksb_cleanup EXIT
	trap 'exit 130' INT TERM
	ip netns add "$GW"
	ip netns add "$OR"
	ip -n "$GW" link set lo up
	ip -n "$OR" link set lo up
	ip link add ko0 netns "$GW" type veth peer name ko1 netns "$OR"
	ip -n "$GW" addr add 10.78.0.1/24 dev ko0
	ip -n "$OR" addr add "$ORIGIN_IP/24" dev ko1
	ip -n "$GW" link set ko0 up
	ip -n "$OR" link set ko1 up

	# Test CA and a certificate for both names.
	mkdir -p "$T/pki" "$T/www" "$T/share" "$T/policy.d" "$T/state"
	chmod 755 "$T/share"
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
		-keyout "$T/pki/ca.key" -out "$T/pki/ca.pem" -days 2 \
		-subj "/CN=ksb test CA" >/dev/null 2>&1
	openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
		-keyout "$T/pki/origin.key" -out "$T/pki/origin.csr" \
		-subj "/CN=allowed.test" >/dev/null 2>&1
	printf 'subjectAltName=DNS:allowed.test,DNS:denied.test\n' > "$T/pki/ext"
	openssl x509 -req -in "$T/pki/origin.csr" -CA "$T/pki/ca.pem" \
		-CAkey "$T/pki/ca.key" -CAcreateserial -days 2 \
		-extfile "$T/pki/ext" -out "$T/pki/origin.pem" >/dev/null 2>&1
	cp "$T/pki/ca.pem" "$T/share/ca.pem"
	chmod 644 "$T/share/ca.pem"
	echo "hello from the origin $$" > "$T/www/index.txt"
	ORIGIN_BODY="hello from the origin $$"

	printf '%s allowed.test\n%s denied.test\n' "$ORIGIN_IP" "$ORIGIN_IP" > "$T/hosts"
	cat > "$T/policy.d/test.policy" <<-POL
	# The e2e test's profile: one allowed name, and the origin's network
	# allowed as an upstream address (it is RFC 1918, screened otherwise).
	profile default {
	    allow allowed.test
	    allow-address 10.78.0.0/24
	}
	POL
	cat > "$T/ksb.conf" <<-CONF
	bridge = ksb0
	bridge-address = 10.77.0.1/24
	proxy-port = 3128
	control-socket = $T/gateway.sock
	state-dir = $T/state
	hosts-file = $T/hosts
	# Nothing listens here: names outside the hosts file fail at once.
	resolver = 127.0.0.1:53
	policy = $T/policy.d/*.policy
	CONF
	if [ -n "${KSB_KERNEL:-}" ]; then
		printf 'kernel = %s\nmodules-dir = %s\n' "$KSB_KERNEL" "$KSB_MODULES" >> "$T/ksb.conf"
	fi
	# Guests boot the cold way unless the test set KSB_TEST_TEMPLATE:
	# "default" leaves ksb-run's default (template = auto: from a
	# template under TCG), anything else is written as the template
	# setting.  A template is per state dir, so its boot and save would
	# cost each test more than its restores save (tests/bench/RESULTS.md);
	# agent.sh, git.sh, lifecycle.sh, live.sh and template.sh run on
	# the default.
	if [ "${KSB_TEST_TEMPLATE:-off}" != default ]; then
		printf 'template = %s\n' "${KSB_TEST_TEMPLATE:-off}" >> "$T/ksb.conf"
	fi
	# KSB_TEST_CONF: more ksb.conf lines (the last of a key wins).
	if [ -n "${KSB_TEST_CONF:-}" ]; then
		printf '%s\n' "$KSB_TEST_CONF" >> "$T/ksb.conf"
	fi
}

# ksb_origin: the TLS origin in ns OR, serving $T/www on 443.
ksb_origin() {
	( cd "$T/www" && exec ip netns exec "$OR" openssl s_server -quiet -WWW \
		-accept 443 -cert "$T/pki/origin.pem" -key "$T/pki/origin.key" \
		>"$T/origin.log" 2>&1 ) &
	KSB_PIDS="$KSB_PIDS $!"
	ksb_wait_port "$OR" "$ORIGIN_IP" 443
}

# ksb_until SECS CMD...: run CMD until it succeeds, polled every 0.1 s for
# at most about SECS s (a bound for a loaded machine, not an expectation);
# 1 if it never did.
ksb_until() {
	local end=$((SECONDS + $1))
	shift
	until "$@"; do
		[ "$SECONDS" -lt "$end" ] || return 1
		sleep 0.1
	done
}

# ksb_dead PID: PID has exited: it is gone, or a zombie (its parent, or an
# init that reaps orphans late, has not collected it yet).  kill -0 calls
# a zombie alive.
ksb_dead() {
	local st
	read -r st 2>/dev/null < "/proc/$1/stat" || return 0
	st=${st##*) }
	case ${st%% *} in Z|X) return 0 ;; esac
	return 1
}

# ksb_wait_dead PID [SECS]: until ksb_dead PID (default 30 s); 1 if not.
ksb_wait_dead() { ksb_until "${2:-30}" ksb_dead "$1"; }

# ksb_listening NS PORT: something listens on TCP PORT in NS.
ksb_listening() { ip netns exec "$1" ss -Hltn "sport = :$2" | grep -q LISTEN; }

# ksb_wait_port NS ADDR PORT: wait (<= 30 s) until something listens.
ksb_wait_port() {
	ksb_until 30 ksb_listening "$1" "$3" || ksb_fail "nothing listens on $2:$3 in $1"
}

# ksb_gateway: start ksb-gatewayd -d in ns GW and wait (<= 60 s) until it
# says it is ready.  The log is emptied first, by this shell: after a
# restart neither the old log's "ready" nor the old (stale) socket may
# pass for the new gateway's.
ksb_gateway() {
	: > "$T/gatewayd.log"
	# KSB_GATEWAY_WRAP: a command to run it under (setpriv: the
	# systemd unit's capabilities, tests/integration/filemode.sh).
	ip netns exec "$GW" ${KSB_GATEWAY_WRAP:-} "$KSB_BUILDDIR/ksb-gatewayd" -d -f "$T/ksb.conf" \
		>>"$T/gatewayd.log" 2>&1 &
	KSB_GATEWAY_PID=$!
	KSB_PIDS="$KSB_PIDS $KSB_GATEWAY_PID"
	local end=$((SECONDS + 60))
	while [ "$SECONDS" -lt "$end" ]; do
		[ -S "$T/gateway.sock" ] && grep -q '^ksb-gatewayd: ready: ' "$T/gatewayd.log" && return 0
		kill -0 "$KSB_GATEWAY_PID" 2>/dev/null || { cat "$T/gatewayd.log"; ksb_fail "ksb-gatewayd died"; }
		sleep 0.1
	done
	ksb_fail "ksb-gatewayd did not become ready"
}

# ksb_kernel: find or fetch the guest kernel; sets KSB_KERNEL/KSB_MODULES.
ksb_kernel() {
	if [ -z "${KSB_KERNEL:-}" ]; then
		local d=/var/cache/ksb/kernel lk
		# One fetch at a time: e2e tests run in parallel (make -j) would
		# otherwise replace the modules under each other's feet.
		mkdir -p "${d%/*}"
		exec {lk}>"${d%/*}/.fetch-kernel.lock"
		flock "$lk"
		if ! ls "$d"/boot/vmlinuz-* >/dev/null 2>&1; then
			"$KSB_SRCDIR/contrib/fetch-kernel.sh" "$d" >/dev/null ||
				{ exec {lk}>&-; ksb_skip "no guest kernel (contrib/fetch-kernel.sh failed)"; }
		fi
		exec {lk}>&-
		KSB_KERNEL=$(ls "$d"/boot/vmlinuz-* | head -n 1)
		KSB_MODULES=$d/lib/modules/${KSB_KERNEL##*/vmlinuz-}
	fi
	[ -r "$KSB_KERNEL" ] || ksb_skip "kernel $KSB_KERNEL not readable"
	[ -d "$KSB_MODULES" ] || ksb_skip "modules $KSB_MODULES missing"
	export KSB_KERNEL KSB_MODULES
}

# ksb_sql QUERY: run a query against the audit database.
# (WAL: readers do not wait for the writer, but may meet a busy moment.)
ksb_sql() {
	sqlite3 -bail -cmd '.timeout 10000' "$T/state/audit.db" "$1"
}

# ---- assertions and fake guests shared by the integration and e2e tests -----

# ksb_check DESC EXPR: eval EXPR; print "ok - DESC" or "not ok - DESC" and
# count it in the caller's $pass or $fails (a failed check does not stop
# the test: it ends with `[ "$fails" = 0 ]').
ksb_check() {
	if eval "$2"; then echo "ok - $1"; pass=$((${pass:-0} + 1))
	else echo "not ok - $1"; fails=$((${fails:-0} + 1)); fi
}

# ksb_check_template: where the template setting resolves on (as
# --print-config says: under TCG by default), the test's guests started
# from a template: its file is there (a restore that fails removes it, a
# build that fails leaves none) and no start fell back to a boot.
ksb_check_template() {
	"$KSB_BUILDDIR/ksb-run" -f "$T/ksb.conf" --print-config 2>/dev/null |
		grep -Eq '^template +=  *on ' || return 0
	ksb_check "the guests started from a template (template on)" \
		'[ -n "$(find "$T/state/templates" -type f ! -name .lock 2>/dev/null)" ] &&
		 ! grep -rqs -e "booting the guest the cold way" \
			-e "template: none to restore" "$T" --include="*.log" \
			--include="*.err"'
}

# ksb_sql_is WANT QUERY: poll (bounded, 20 s) until QUERY against the audit
# database prints WANT: the audit writer may lag.  Says what it got if not.
ksb_sql_is() {
	local got end=$((SECONDS + 20))
	while :; do
		got=$(ksb_sql "$2")
		[ "$got" = "$1" ] && return 0
		[ "$SECONDS" -lt "$end" ] || break
		sleep 0.1
	done
	echo "# $2 -> '$got', want '$1'" >&2
	return 1
}

# ksb_traffic ID: the gateway's traffic of instance ID as "TUNNELS UP
# DOWN" (LIST's tunnels=, up=, down=; proto/ctl.h), nothing if ID is not
# registered.  ksb_audit_bytes ID: "UP DOWN", the sums of its audit rows.
# ksb_traffic_is_audit ID: no tunnel open and the gateway's bytes are the
# audit's (true as soon as the last tunnel's row is closed: the gateway
# counts closed tunnels from their close records, ksb-gatewayd(8)).
ksb_traffic() {
	python3 - "$T/gateway.sock" "$1" <<'PY'
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(10)
s.connect(sys.argv[1])
s.sendall(b"LIST\n")
b = b""
while not b.endswith(b"END\n"):
    d = s.recv(65536)
    if not d:
        break
    b += d
for line in b.decode().splitlines():
    kv = dict(w.split("=", 1) for w in line.split()[1:] if "=" in w)
    if kv.get("id") == sys.argv[2]:
        print(kv["tunnels"], kv["up"], kv["down"])
PY
}
ksb_audit_bytes() {
	ksb_sql "SELECT coalesce(sum(bytes_up), 0), coalesce(sum(bytes_down), 0)
	    FROM connections WHERE instance = '$1'" | tr '|' ' '
}
ksb_traffic_is_audit() { [ "$(ksb_traffic "$1")" = "0 $(ksb_audit_bytes "$1")" ]; }

# ksb_rows WHERE: the number of audit rows (connections) matching WHERE, now.
ksb_rows() { ksb_sql "SELECT count(*) FROM connections WHERE $1"; }

# ksb_row_is N WHERE: poll (bounded, 20 s) until exactly N rows match WHERE.
ksb_row_is() { ksb_sql_is "$1" "SELECT count(*) FROM connections WHERE $2"; }

# ksb_rows_ge N WHERE: poll (bounded, 20 s) until at least N rows match
# WHERE (denials are written in batches).
ksb_rows_ge_now() { [ "$(ksb_rows "$2")" -ge "$1" ] 2>/dev/null; }
ksb_rows_ge() { ksb_until 20 ksb_rows_ge_now "$@"; }

# ksb_fake_guest N ID [PROFILE]: a "guest" without QEMU.  Holds a lease for
# instance ID (profile PROFILE, default `default') through the control
# socket with tests/integration/ctlhold (needs $HOLD set to it and a
# running gateway), then puts namespace ksbt-$$-gN on veth kvgN in the
# bridge ksb0 with the leased address on its eth0.  The veth is not named
# like a tap, so the bridge's per-tap anti-spoofing rules do not apply; the
# inet table still admits only leased addresses.  The lease lives while
# the fd in $HOLDFDn is open (the holder's pid is $HOLDPIDn): see
# ksb_unguest.  Fails the test if the REGISTER gets no lease within 30 s.
ksb_fake_guest() {
	local n=$1 id=$2 profile=${3:-default} ns=ksbt-$$-g$1 lease fd
	ip netns add "$ns" 2>/dev/null || true
	KSB_NETNS="${KSB_NETNS:-} $ns"
	mkfifo "$T/hold$n"
	ip netns exec "$GW" "$HOLD" "$T/gateway.sock" "$id" "$profile" \
		< "$T/hold$n" > "$T/lease$n" 2>&1 &
	KSB_PIDS="$KSB_PIDS $!"
	eval "HOLDPID$n=$!"
	exec {fd}>"$T/hold$n"
	eval "HOLDFD$n=$fd"
	ksb_until 30 test -s "$T/lease$n" || true
	lease=$(sed -n 's/^ip=\([^ ]*\).*/\1/p' "$T/lease$n")
	[ -n "$lease" ] || ksb_fail "REGISTER $id: $(cat "$T/lease$n")"
	ip link add "kvg$n" netns "$GW" type veth peer name eth0 netns "$ns"
	ip -n "$GW" link set "kvg$n" master ksb0 up
	ip -n "$ns" addr add "$lease" dev eth0
	ip -n "$ns" link set eth0 up
	ip -n "$ns" link set lo up
	rm -f "$T/hold$n"
}

# ksb_unguest N: end fake guest N's lease and delete its veth; its
# namespace stays until ksb_cleanup.  Closing $HOLDFDn is not enough by
# itself: every child this shell started since holds a copy of that fd
# (bash cannot mark it close-on-exec), so the holder is also told to go,
# and waited for: its control connection is closed when this returns (the
# gateway ends the lease as it reads that).
ksb_unguest() {
	local fdv pid
	eval "fdv=\$HOLDFD$1 pid=\$HOLDPID$1"
	exec {fdv}>&-
	kill "$pid" 2>/dev/null || true
	ksb_wait_dead "$pid" || true
	ip -n "$GW" link del "kvg$1" 2>/dev/null || true
	rm -f "$T/lease$1"
}

# ksb_need_built PROG...: skip (77) unless each PROG is built in the build dir.
ksb_need_built() {
	local b
	for b in "$@"; do
		[ -x "$KSB_BUILDDIR/$b" ] || ksb_skip "$b not built"
	done
}

# ---- the real agents and the fake model API (issue 13) ---------------------

# ksb_fetch_agents [DIR]: the pinned Claude Code and Codex in DIR (default
# /var/cache/ksb/agents) through contrib/fetch-agents.sh; skips (77) when
# the npm registry cannot be reached, fails on any other error.
ksb_fetch_agents() {
	local out rc=0
	out=$("$KSB_SRCDIR/contrib/fetch-agents.sh" "${1:-/var/cache/ksb/agents}" 2>&1) || rc=$?
	[ "$rc" = 3 ] && ksb_skip "npm registry unreachable: $out"
	[ "$rc" = 0 ] || ksb_fail "contrib/fetch-agents.sh failed ($rc): $out"
}

# ksb_fakeapi: after ksb_env, before ksb_gateway: the model APIs' hosts
# (KSB_API_HOSTS) resolve to the origin in the gateway's hosts file, the
# default profile allows them, and tests/e2e/fakeapi.py serves them on
# $ORIGIN_IP:443 in ns OR with certificates from fakeapi_certs.sh
# ($T/api/ca.pem is its CA), logging each request to $T/api.log.  Its
# arguments go to fakeapi.py (--oauth-lifetime S ...).
KSB_API_HOSTS="api.anthropic.com platform.claude.com api.openai.com"
ksb_fakeapi() {
	local h
	for h in $KSB_API_HOSTS; do echo "$ORIGIN_IP $h"; done >> "$T/hosts"
	{
		echo "profile default {"
		for h in $KSB_API_HOSTS; do echo "    allow $h"; done
		echo "    allow-address 10.78.0.0/24"
		echo "}"
	} > "$T/policy.d/test.policy"
	sh "$KSB_SRCDIR/tests/e2e/fakeapi_certs.sh" "$T/api"
	ip netns exec "$OR" python3 "$KSB_SRCDIR/tests/e2e/fakeapi.py" \
		--cert "$T/api/server.pem" --key "$T/api/server.key" \
		--addr "$ORIGIN_IP" --port 443 --log "$T/api.log" \
		--ready-file "$T/api.ready" "$@" > "$T/fakeapi.err" 2>&1 &
	KSB_PIDS="$KSB_PIDS $!"
	ksb_until 30 test -s "$T/api.ready" ||
		ksb_fail "fakeapi did not start: $(cat "$T/fakeapi.err")"
}

# ksb_api_turn MARKER: what the fake API saw for the turn whose prompt has
# MARKER (a request belongs to the turn of the last user text in it with a
# "RUN:" line), as "tools=N results=N seen=N first=TS auth=SHA": tool
# calls, tool results, how often the turn's text is in its last request (1:
# it went in once), the time of its first request (epoch s), and the
# credential hash of that request.
ksb_api_turn() {
	python3 - "$T/api.log" "$1" <<'PY'
import json, sys
log, marker = sys.argv[1], sys.argv[2]
tools = results = seen = 0
first = auth = "-"
for line in open(log):
    r = json.loads(line)
    if r.get("method") != "POST" or r.get("reply") not in ("tool", "text"):
        continue
    texts = r.get("user_texts") or []
    runs = [t for t in texts if "RUN:" in t]
    if not runs or marker not in runs[-1]:
        continue
    if first == "-":
        first = r["ts"]
    if r.get("tool_result"):
        results += 1
    elif r["reply"] == "tool":
        tools += 1
    seen = sum(1 for t in texts if marker in t)
    auth = (r.get("auth") or {}).get("sha256", "-")
print("tools=%d results=%d seen=%d first=%s auth=%s"
      % (tools, results, seen, first, auth))
PY
}

# ksb_host_repo: a git identity of the test's own (no system or user
# config) and a host repository $P = $T/proj with one commit on main, for
# a guest to work on (--repo "$P").
ksb_host_repo() {
	export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=$T/gitconfig \
		GIT_AUTHOR_NAME=host GIT_AUTHOR_EMAIL=host@example.invalid \
		GIT_COMMITTER_NAME=host GIT_COMMITTER_EMAIL=host@example.invalid
	git config --global init.defaultBranch main
	P=$T/proj
	git init -q "$P"
	echo readme > "$P/README"
	git -C "$P" add README
	git -C "$P" commit -qm "host: first"
}

# ksb_open_hole LOG: open a hole in the test gateway's own ruleset on
# purpose, for the enforcement self-test to find (its tcp-gateway probe):
# nft rules accepting the gateway's port 22 both ways on the bridge (past
# the refusals in prerouting too).  The gateway's self-test canary listens
# there (gateway/parent/canary.c) and logs "self-test canary: TCP connect
# from ADDR" per connection: LOG is made a link to the gateway's log.  The
# hole stays until the namespace goes.
ksb_open_hole() {
	ln -sf "$T/gatewayd.log" "$1"
	ip netns exec "$GW" nft insert rule inet ksb prerouting iifname ksb0 \
		tcp dport 22 accept
	ip netns exec "$GW" nft insert rule inet ksb input iifname ksb0 \
		tcp dport 22 accept
	ip netns exec "$GW" nft insert rule inet ksb output oifname ksb0 \
		tcp sport 22 accept
}
