#!/bin/bash
# tree.sh: what the repository itself must hold.  No committed build output
# (an ELF file anywhere in git), no formatting drift (every product
# source is as clang-format, .clang-format at the top, would write it),
# no #include across the gateway's process boundary, no circle between
# files, ARCHITECTURE.md's file list matching the tree, the guest's
# stage names within what ksb-run accepts, no raw qsort(3).  Needs git
# and clang-format (Debian: git, clang-format); no root, no network.
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

# 5. ARCHITECTURE.md's "Files" block is the tree: every product source git
# lists has a line there, and every name a line starts with exists.  A
# line's name is what comes before its first two blanks: a path, a glob
# (audit/schema/migrate-*.sql, tests/unit/test_*.c, man/*) or a directory
# (contrib/); after a comma, more of them in the first one's directory
# (tests/unit/test_*.c, tap.h; debian/, flake.nix) or the first one's
# stem with another suffix (common/reason.h, .c).  Lines that start with a
# blank continue the one above.
names=$(awk '
	/^## Files$/ { files = 1; next }
	files && /^```/ { if (block) exit; block = 1; next }
	!block || /^[[:space:]]/ || $0 == "" { next }
	{
		col = $0; i = index(col, "  "); if (i) col = substr(col, 1, i - 1)
		n = split(col, part, /, */)
		dir = part[1]; sub(/\/$/, "", dir); sub(/[^\/]*$/, "", dir)
		stem = part[1]; sub(/\.[^.\/]*$/, "", stem)
		print part[1]
		for (k = 2; k <= n; k++)
			print (part[k] ~ /^\./ ? stem : dir) part[k]
	}' ARCHITECTURE.md)
set -f # the names are patterns: no pathname expansion but where asked
nofile=
for p in $names; do
	set +f
	# shellcheck disable=SC2086 # a glob must name at least one file
	set -- $p
	set -f
	[ -e "$1" ] || nofile="$nofile $p"
done
missing=
for f in $(git ls-files 'common/*' 'proto/*' 'audit/*' 'policy/*' 'mirror/*' \
	'gateway/*' 'vmrunner/*' 'ksbctl/*' 'guest/*'); do
	hit=
	for p in $names; do
		# shellcheck disable=SC2254 # p is a pattern on purpose
		case $f in $p) hit=1; break ;; esac
	done
	[ -n "$hit" ] || missing="$missing $f"
done
set +f
[ -z "$missing" ] || echo "# not in ARCHITECTURE.md's Files (one line each):$missing"
[ -z "$nofile" ] || echo "# in ARCHITECTURE.md's Files but no such file:$nofile"
check "ARCHITECTURE.md's Files block lists every product source and only files that exist" \
	"$([ -z "$missing$nofile" ] && [ -n "$names" ]; echo $?)"

# 6. Every boot stage the guest names (port_stage("...") in guest/) is one
# ksb-run accepts: 1..GUESTCTL_STAGE_NAME (40) bytes of a-z, 0-9, space
# and '-' (proto/guestctl.c, guestctl_parse_stage); else its STAGE line is
# refused on every boot as an unknown control line.
badstage=$(git grep -h -o 'port_stage("[^"]*")' -- 'guest/*.c' |
	sed 's/^port_stage("\(.*\)")$/\1/' | grep -Ev '^[a-z0-9 -]{1,40}$' || true)
[ -z "$badstage" ] || echo "# stage names ksb-run refuses: $badstage"
check "every guest stage name is one ksb-run accepts" "$([ -z "$badstage" ]; echo $?)"

# 7. No qsort(3) in the product outside common/util.c's xqsort: a NULL
# base with 0 elements is undefined (C11 7.22.5) and UBSan ends the process on it
# (an empty nftables set once did, under contrib/sanitize.sh).
# guest/treefs.c is ksb-guest-clone's own (no common/), its one call
# inside `k < d->nkids'.
rawsort=$(git grep -n -E '(^|[^x_[:alnum:]])qsort\(' -- '*.c' \
	':!common/util.c' ':!guest/treefs.c' ':!tests/*' || true)
[ -z "$rawsort" ] || echo "# qsort outside xqsort: $rawsort"
check "no qsort(3) outside xqsort (common/util.c)" "$([ -z "$rawsort" ]; echo $?)"

echo "# $((n - fails)) passed, $fails failed"
[ "$fails" = 0 ]
