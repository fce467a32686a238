#!/bin/sh
# fetch-agents.sh [DIR]: install the pinned Claude Code and Codex CLI from the
# npm registry into one npm prefix DIR (default /usr/local/lib/ksb-agents,
# in the host's /usr that guests see: its node_modules/.bin is on the
# guest's PATH, so --agent claude finds it), with their native binaries
# for this machine's architecture, so that
#   DIR/node_modules/.bin/claude   and   DIR/node_modules/.bin/codex
# work.  Idempotent: when the pinned versions are already there it only prints
# the paths.  Concurrent runs on one DIR are serialised with flock(1) if present.
# Prints "claude = PATH" and "codex = PATH".
# Exit: 0 ok; 3 the npm registry could not be reached (one line on stderr,
# for a test to skip with 77); 1 any other failure.
set -eu

# --- pinned versions: change them here only ---------------------------------
CLAUDE_VERSION=2.1.332
CODEX_VERSION=0.171.0
# -----------------------------------------------------------------------------

dir=${1:-/usr/local/lib/ksb-agents}
me=fetch-agents.sh

die() { echo "$me: $*" >&2; exit 1; }

case $(uname -m) in
x86_64|amd64) arch=x64 ;;
aarch64|arm64) arch=arm64 ;;
*) die "unsupported architecture $(uname -m)" ;;
esac
command -v npm >/dev/null 2>&1 || die "npm not found"
command -v node >/dev/null 2>&1 || die "node not found"

claude_pkg=@anthropic-ai/claude-code
claude_native=@anthropic-ai/claude-code-linux-$arch
codex_pkg=@openai/codex
codex_native=@openai/codex-linux-$arch	# an alias of @openai/codex@VER-linux-ARCH

nm=$dir/node_modules

# pkgver NAME: the version in DIR/node_modules/NAME/package.json, or nothing.
pkgver() {
	[ -f "$nm/$1/package.json" ] || return 0
	node -e 'try { process.stdout.write(String(require(process.argv[1]).version)) } catch (e) {}' \
	    "$nm/$1/package.json"
}

installed() {
	[ "$(pkgver "$claude_pkg")" = "$CLAUDE_VERSION" ] &&
	[ "$(pkgver "$claude_native")" = "$CLAUDE_VERSION" ] &&
	[ "$(pkgver "$codex_pkg")" = "$CODEX_VERSION" ] &&
	[ "$(pkgver "$codex_native")" = "$CODEX_VERSION-linux-$arch" ] &&
	[ -x "$nm/.bin/claude" ] && [ -x "$nm/.bin/codex" ] &&
	# the postinstall replaced the placeholder with the native executable
	[ "$(head -c 4 "$nm/$claude_pkg/bin/claude.exe" | od -An -c | tr -d ' \n')" = '177ELF' ]
}

report() {
	echo "claude = $nm/.bin/claude"
	echo "codex = $nm/.bin/codex"
}

mkdir -p "$dir"
if command -v flock >/dev/null 2>&1 && [ -z "${KSB_FETCH_AGENTS_LOCKED:-}" ]; then
	export KSB_FETCH_AGENTS_LOCKED=1
	exec flock -w 1800 "$dir/.lock" sh "$0" "$@"
fi

if installed; then
	report
	exit 0
fi

log=$(mktemp "${TMPDIR:-/tmp}/fetch-agents.XXXXXX")
trap 'rm -f "$log"' EXIT INT TERM

# registry_code LOGFILE: exit 3 when npm's error code says the registry
# could not be reached.
registry_code() {
	code=$(sed -n 's/^npm \(error\|ERR!\) code \([A-Za-z0-9_]*\).*/\2/p' "$1" | head -n 1)
	case $code in
	ENOTFOUND|EAI_AGAIN|ECONNREFUSED|ECONNRESET|ETIMEDOUT|ESOCKETTIMEDOUT|\
	ENETUNREACH|EHOSTUNREACH|EPROTO|ERR_SOCKET_TIMEOUT|UNABLE_TO_GET_ISSUER_CERT_LOCALLY|\
	SELF_SIGNED_CERT_IN_CHAIN|CERT_HAS_EXPIRED|E500|E502|E503|E504|FETCH_ERROR)
		echo "$me: npm registry $(npm config get registry 2>/dev/null) could not be reached ($code)" >&2
		exit 3 ;;
	esac
}

# One quick look-up first, without retries: npm's own retries make an
# unreachable registry cost minutes.  timeout(1) bounds it in any case.
if ! timeout 90 npm view --no-update-notifier --fetch-retries=0 --fetch-timeout=30000 \
	"$claude_pkg@$CLAUDE_VERSION" version >"$log" 2>&1; then
	registry_code "$log"
	grep -q 'code E' "$log" ||
	    { echo "$me: npm registry $(npm config get registry 2>/dev/null) could not be reached (no answer)" >&2; exit 3; }
	tail -n 5 "$log" >&2
	die "npm view $claude_pkg@$CLAUDE_VERSION failed"
fi

# Native packages are named explicitly (not only left to optionalDependencies),
# so a user config with omit=optional cannot leave the launchers without them.
# Scripts must run: Claude Code's postinstall links the native binary.
if ! npm install --prefix "$dir" --no-audit --no-fund --no-update-notifier \
	--save-exact --include=optional --ignore-scripts=false --engine-strict=false \
	--fetch-retries="${KSB_NPM_RETRIES:-2}" --fetch-timeout=120000 \
	"$claude_pkg@$CLAUDE_VERSION" \
	"$claude_native@$CLAUDE_VERSION" \
	"$codex_pkg@$CODEX_VERSION" \
	"$codex_native@npm:$codex_pkg@$CODEX_VERSION-linux-$arch" \
	>"$log" 2>&1; then
	registry_code "$log"
	tail -n 20 "$log" >&2
	die "npm install failed"
fi
installed || { tail -n 20 "$log" >&2; die "npm install finished but the pinned versions are not in $nm"; }
report
