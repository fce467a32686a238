#!/bin/bash
# bench: the real agents' turn latency in a ksb guest, per mode, against
# the same agent run on the host, all with tests/e2e/fakeapi.py (the same
# scripted replies: one shell tool call that commits, then a text).
#   first:  ksbctl prompt (or the host process) started -> the fake API's
#           first request of that turn (s)
#   turn:   started -> the turn ended (prompt --wait returned, or the host
#           process exited) (s)
# The host run is the agent's headless mode in the origin's namespace
# (/etc/hosts bind-mounted there so the real API names reach the fake;
# no proxy, the fake's CA as the only CA), as root with IS_SANDBOX=1.
# The overhead lines are the guest mean minus the host mean over turns
# 2..N (turn 1 includes the agent's first start).
# usage: tests/bench/agents.sh [claude] [codex]   (KSB_BENCH_TURNS, default 3;
# KSB_BENCH_MODES, default "headless interactive").  Rows are printed as
# they are measured; a guest turn that does not end within 300 s ends that
# mode's run ("no end").
# Needs root, QEMU, the built tree and a guest kernel; not in TESTS.
set -eu
. "$(dirname "$0")/../lib.sh"

AGENTS=${*:-claude codex}
N=${KSB_BENCH_TURNS:-3}
MODES=${KSB_BENCH_MODES:-headless interactive}
CACHE=${KSB_AGENTS_CACHE:-/var/cache/ksb/agents}
BIN=$CACHE/node_modules/.bin

ksb_need_root
ksb_need qemu-system-x86_64
ksb_need_built ksb-run ksb-guest-init ksb-gatewayd ksbctl/ksbctl
ksb_fetch_agents "$CACHE"
ksb_kernel
ksb_env
# Codex refuses a CODEX_HOME under /tmp: the host run's home is in /var/tmp.
HH=$(mktemp -d /var/tmp/ksbt-bench.XXXXXX)
trap 'rc=$?; rm -rf "$HH"; (exit $rc); ksb_cleanup' EXIT
ksb_fakeapi
ksb_gateway

ksb_host_repo
export KSBT_ANTHROPIC_KEY="sk-ant-api03-bench-$(openssl rand -hex 16)"
export KSBT_OPENAI_KEY="sk-proj-bench-$(openssl rand -hex 16)"

now() { date +%s.%N; }
ROWS=

# run_cmd ID N: the turn's shell command, as in tests/e2e/agents_real.sh.
run_cmd() {
	echo "RUN: cd $3 && echo $2 > f$2.txt && git add f$2.txt &&" \
		"git commit -qm $1-turn$2 && git push -q origin" \
		"HEAD:refs/heads/sandbox/$1 && echo pushed-$1-turn$2"
}

# row AGENT WHERE N T0 T1 ID: one table row from the fake API's log.
row() {
	local first
	first=$(ksb_api_turn "$6-turn$3" | sed -n 's/.* first=\([^ ]*\) .*/\1/p')
	[ "$first" = - ] && first=$5
	local r="$1 $2 $3 $(echo "$first - $4" | bc) $(echo "$5 - $4" | bc)"
	echo "# $r"
	ROWS="$ROWS$r
"
}

# guest AGENT MODE: a named instance, N turns with ksbctl prompt --wait.
guest() {
	local id=b${1:0:2}${2:0:1} n t0 secret
	case $1 in
	claude) secret=ANTHROPIC_API_KEY=env:KSBT_ANTHROPIC_KEY ;;
	codex) secret=OPENAI_API_KEY=env:KSBT_OPENAI_KEY ;;
	esac
	timeout 300 ip netns exec "$GW" "$KSB_BUILDDIR/ksb-run" -f "$T/ksb.conf" \
		--detach --name "$id" --repo "$P" --disk-size 1G --memory 1024 \
		--ca-file "$T/api/ca.pem" --share-ro "$CACHE:/opt/ksb-agents" \
		--secret "$secret" --agent "/opt/ksb-agents/node_modules/.bin/$1" \
		--agent-mode "$2" > "$T/$id.boot" 2>&1 || { cat "$T/$id.boot"; return 0; }
	KSB_PIDS="$KSB_PIDS $(sed -n 's/^pid=//p' "$T/state/instances/$id/state")"
	for n in $(seq 1 "$N"); do
		t0=$(now)
		timeout 300 "$KSB_BUILDDIR/ksbctl/ksbctl" -f "$T/ksb.conf" prompt "$id" \
			"$(run_cmd "$id" "$n" '~/work')" --wait > "$T/$id.$n" 2>&1 || true
		grep -q 'ended' "$T/$id.$n" || { echo "# $1 guest-$2 turn $n: no end"; break; }
		row "$1" "guest-$2" "$n" "$t0" "$(now)" "$id"
	done
	"$KSB_BUILDDIR/ksbctl/ksbctl" -f "$T/ksb.conf" stop "$id" > /dev/null 2>&1 || true
}

# host_home: the host run's HOME: Codex's config (a custom provider on the
# real URL, quiet start); Claude Code's -p needs none.
host_home() {
	mkdir -p "$HH/.codex"
	cat > "$HH/.codex/config.toml" <<-'TOML'
	model = "gpt-5.5"
	model_provider = "ksb"
	check_for_update_on_startup = false
	approval_policy = "never"
	sandbox_mode = "danger-full-access"
	[analytics]
	enabled = false
	[features]
	plugins = false
	apps = false
	api_key_model_discovery = false
	remote_plugin = false
	[model_providers.ksb]
	name = "ksb"
	base_url = "https://api.openai.com/v1"
	env_key = "OPENAI_API_KEY"
	wire_api = "responses"
	TOML
	for h in $KSB_API_HOSTS; do echo "$ORIGIN_IP $h"; done > "$T/hosts.or"
	echo "127.0.0.1 localhost" >> "$T/hosts.or"
}

# host AGENT: N headless turns on the host, in ns OR, in a clone of $P.
host() {
	local id=h${1:0:2} w=$HH/work-$1 n t0 u
	git clone -q --bare "$P" "$HH/$1.git"
	git clone -q "$HH/$1.git" "$w"
	u=$(cat /proc/sys/kernel/random/uuid)
	for n in $(seq 1 "$N"); do
		local -a cmd
		case $1 in
		claude) cmd=("$BIN/claude" -p "$(run_cmd "$id" "$n" "$w")" --output-format
			stream-json --verbose --dangerously-skip-permissions)
			[ "$n" = 1 ] && cmd+=(--session-id "$u") || cmd+=(--resume "$u") ;;
		codex) cmd=("$BIN/codex" exec)
			[ "$n" = 1 ] || cmd+=(resume --last)
			cmd+=(--json --dangerously-bypass-approvals-and-sandbox
				--skip-git-repo-check "$(run_cmd "$id" "$n" "$w")") ;;
		esac
		t0=$(now)
		( cd "$w" && exec ip netns exec "$OR" sh -c \
			'mount --bind "$0" /etc/hosts && exec "$@"' "$T/hosts.or" \
			env -u https_proxy -u HTTPS_PROXY -u http_proxy -u HTTP_PROXY \
			HOME="$HH" CODEX_HOME="$HH/.codex" IS_SANDBOX=1 \
			CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 \
			NODE_EXTRA_CA_CERTS="$T/api/ca.pem" SSL_CERT_FILE="$T/api/ca.pem" \
			ANTHROPIC_API_KEY="$KSBT_ANTHROPIC_KEY" OPENAI_API_KEY="$KSBT_OPENAI_KEY" \
			"${cmd[@]}" < /dev/null > "$T/$id.$n" 2>&1 ) || echo "# host $1 turn $n: exit $?"
		row "$1" host "$n" "$t0" "$(now)" "$id"
	done
}

host_home
for a in $AGENTS; do
	host "$a"
	for m in $MODES; do guest "$a" "$m"; done
done

echo
printf '%-7s %-18s %4s %9s %9s\n' agent where turn first-s turn-s
printf '%s' "$ROWS" | awk '{ printf "%-7s %-18s %4s %9.2f %9.2f\n", $1, $2, $3, $4, $5 }'
echo
printf '%s' "$ROWS" | awk '
$3 > 1 { k = $1 " " $2; f[k] += $4; t[k] += $5; c[k]++ }
END {
	for (k in c) { split(k, p, " "); if (p[2] == "host") { hf[p[1]] = f[k] / c[k]; ht[p[1]] = t[k] / c[k] } }
	for (k in c) {
		split(k, p, " ")
		if (p[2] == "host" || !(p[1] in ht)) continue
		printf "overhead %-7s %-18s first %+7.2f s  turn %+7.2f s  (x%.1f)\n", p[1], p[2],
		    f[k] / c[k] - hf[p[1]], t[k] / c[k] - ht[p[1]], (t[k] / c[k]) / ht[p[1]]
	}
}' | sort
