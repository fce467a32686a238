#!/bin/bash
# tree.sh: what the repository itself must hold.  No committed build output
# (an ELF file anywhere in git), no formatting drift (every product
# source is as clang-format, .clang-format at the top, would write it)
# and no #include across the gateway's process boundary.
# Needs git and clang-format (Debian: git, clang-format); no root, no
# network.
set -eu
S=${KSB_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
# The build tree (make check runs the tests from its top): check 4 reads
# its objects.
B=${KSB_BUILDDIR:-$(pwd)}
cd "$S"
. "$S/tests/lib.sh"
ksb_need git clang-format
git rev-parse --git-dir >/dev/null 2>&1 ||
	{ echo "SKIP: $S is not a git checkout (a release tarball)"; exit 77; }
fails=0 n=0
check() {
	n=$((n + 1))
	if [ "$2" = 0 ]; then echo "ok $n - $1"; else echo "not ok $n - $1"; fails=$((fails + 1)); fi
}

# 1. No ELF file is tracked (magic 0x7f 'E' 'L' 'F').
elfs=
while IFS= read -r -d '' f; do
	[ -f "$f" ] || continue
	[ "$(head -c 4 "$f" | od -An -c | tr -d ' ')" = '177ELF' ] && elfs="$elfs $f"
done < <(git ls-files -z)
[ -z "$elfs" ] || echo "# committed ELF files:$elfs"
check "no ELF file is committed" "$([ -z "$elfs" ]; echo $?)"

# 2. The product sources are formatted (the directories of the programs and
# their libraries; tests may be laid out by hand).
srcs=$(git ls-files 'common/*.[ch]' 'proto/*.[ch]' 'audit/*.[ch]' 'policy/*.[ch]' \
	'mirror/*.[ch]' 'gateway/*.[ch]' 'vmrunner/*.[ch]' 'ksbctl/*.[ch]' 'guest/*.[ch]')
drift=
for f in $srcs; do
	clang-format --dry-run --Werror "$f" >/dev/null 2>&1 || drift="$drift $f"
done
[ -z "$drift" ] || echo "# not as clang-format writes them (clang-format -i FILE):$drift"
check "product sources have no formatting drift ($(echo "$srcs" | wc -w) files)" \
	"$([ -z "$drift" ]; echo $?)"

# 3. The gateway's process boundary (ARCHITECTURE.md, "Processes"): the
# proxy process's files include neither the parent's header, nor a netlink
# one (gateway/net/), nor the audit writer's; the parent's files do not
# include the proxy's header; the parsers include neither.  A plain grep
# over the #include lines.
inc() { # PATTERN FILES...: every matching #include line, file:line:text
	git grep -n -E "^[[:space:]]*#[[:space:]]*include[[:space:]]*\"($1)\"" -- "${@:2}" || true
}
bad=$( (
	inc 'gateway/parent/parent\.h|gateway/net/[^"]*\.h|audit/audit\.h' 'gateway/proxy/*.[ch]'
	inc 'gateway/proxy/proxy\.h' 'gateway/parent/*.[ch]'
	inc 'gateway/parent/parent\.h|gateway/proxy/proxy\.h' 'gateway/parse/*.[ch]'
))
[ -z "$bad" ] || printf '%s\n' "$bad" | sed 's/^/# across the process boundary: /'
check "gateway/proxy, parent and parse stay on their side of the boundary" \
	"$([ -z "$bad" ]; echo $?)"

# 4. No circle between product files and no function name defined in two
# of them (tests/unit/filegraph.py over the built objects; the command
# table of ksbctl.c is the one circle allowed).
if command -v python3 >/dev/null 2>&1 && command -v nm >/dev/null 2>&1 &&
	[ -f "$B/ksbctl/ksbctl" ]; then
	graph=$(python3 "$S/tests/unit/filegraph.py" "$B" "$S"; echo "rc=$?")
	printf '%s\n' "$graph" | grep -v '^rc=' | sed 's/^/# /'
	check "no circle between product files, no name defined twice" \
		"$(case "$graph" in *rc=0) echo 0 ;; *) echo 1 ;; esac)"
else
	echo "# check 4 needs python3, nm and a built tree at $B (ksbctl/ksbctl)"
	check "no circle between product files (not built: not checked)" 1
fi

echo "# $((n - fails)) passed, $fails failed"
[ "$fails" = 0 ]
