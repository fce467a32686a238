#!/bin/bash
# treefs.sh: the guest's lazily read work tree (guest/treefs.c), run on
# the host: `ksb-guest-clone --serve-tree' mounts a git index (made by the
# git CLI, a witness) over the repository's objects; the mount holds what
# `git archive' holds (contents, symlinks, the executable bit, the agent as
# owner, the index's sizes), is read-only, finds a directory whose name
# sorts after its siblings in the index's order, and an index it cannot
# read (version 4, truncated) is refused with nothing mounted.  Needs
# root and /dev/fuse (the fuse module); no network.
set -eu

. "$(dirname "$0")/../lib.sh"
builddir=$KSB_BUILDDIR
clone=$builddir/ksb-guest-clone
ksb_need git
ksb_need_root
[ -c /dev/fuse ] || { echo "SKIP: needs /dev/fuse (modprobe fuse)"; exit 77; }
[ -x "$clone" ] || { echo "FAIL: ksb-guest-clone not built"; exit 99; }

T=$(mktemp -d "${TMPDIR:-/tmp}/ksbt-treefs.XXXXXX")
chmod 755 "$T"	# the server reads the objects as uid 1000
M=$T/mnt
cleanup() {
	umount "$M" 2>/dev/null || true
	rm -rf "$T"
}
trap cleanup EXIT
export GIT_CONFIG_NOSYSTEM=1 HOME=$T/home GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@t \
	GIT_COMMITTER_NAME=t GIT_COMMITTER_EMAIL=t@t
mkdir -p "$HOME" "$M"

fails=0
n=0
check() {
	n=$((n + 1))
	if eval "$2"; then echo "ok $n - $1"; else echo "not ok $n - $1"; fails=$((fails + 1)); fi
}

P=$T/proj
git init -q "$P"
mkdir -p "$P/ab" "$P/sub/deep"
# Index order: ab-0..ab-5, ab-d, ab.c, ab/e: without its sort, a binary
# search of the root's children for "ab" would miss it.
for i in 0 1 2 3 4 5; do echo "$i" > "$P/ab-$i"; done
echo "dash" > "$P/ab-d"
echo "dot" > "$P/ab.c"
echo "in the dir" > "$P/ab/e"
printf '#!/bin/sh\necho hi\n' > "$P/sub/run.sh"
chmod 755 "$P/sub/run.sh"
head -c 300000 /dev/urandom > "$P/sub/deep/big.bin"	# more than one read
ln -s ../ab/e "$P/sub/link"
git -C "$P" add -A
git -C "$P" commit -qm one
cp "$P/.git/index" "$T/index"

# mounted: the parent exits 0 once the file system is there.
"$clone" --serve-tree "$T/index" "$P/.git" "$M" 2> "$T/serve.err"
rc=$?
check "--serve-tree exits 0 once mounted" '[ "$rc" = 0 ] && grep -q " $M fuse.ksb ro," /proc/mounts'
mkdir "$T/ref"
git -C "$P" archive HEAD | tar -C "$T/ref" -x
check "the mount holds what git archive holds" 'diff -r --no-dereference "$T/ref" "$M"'
check "a directory that sorts after its siblings is found" '[ "$(cat "$M/ab/e")" = "in the dir" ]'
check "symlink target" '[ "$(readlink "$M/sub/link")" = ../ab/e ]'
check "the executable bit, 0644 otherwise, the agent as owner" \
	'[ "$(stat -c %a:%u:%g "$M/sub/run.sh")" = 755:1000:1000 ] &&
	 [ "$(stat -c %a "$M/ab.c")" = 644 ]'
check "sizes are the index's" \
	'[ "$(stat -c %s "$M/sub/deep/big.bin")" = 300000 ] && [ "$(stat -c %s "$M/ab-d")" = 5 ]'
check "read-only: no new file, no write" \
	'! (: > "$M/new") 2>/dev/null && ! (echo x >> "$M/ab.c") 2>/dev/null'
check "a name not in the index is not there" '[ ! -e "$M/nope" ] && [ ! -e "$M/ab/nope" ]'
umount "$M"
check "unmounted" '! grep -q " $M " /proc/mounts'

# Indexes it cannot read: refused, nothing mounted.
cp "$T/index" "$T/index4"
GIT_INDEX_FILE=$T/index4 git -C "$P" update-index --index-version 4
set +e
"$clone" --serve-tree "$T/index4" "$P/.git" "$M" 2> "$T/v4.err"
rc4=$?
head -c 100 "$T/index" > "$T/short"
"$clone" --serve-tree "$T/short" "$P/.git" "$M" 2> "$T/short.err"
rcs=$?
set -e
cat "$T/v4.err" "$T/short.err"
check "a version 4 index is refused" \
	'[ "$rc4" = 1 ] && grep -q "not a git index of version 2 or 3" "$T/v4.err"'
check "a truncated index is refused with the entry's offset" \
	'[ "$rcs" = 1 ] && grep -q "bad entry .* at offset" "$T/short.err"'
check "nothing mounted after the refusals" '! grep -q " $M " /proc/mounts'

echo "# $((n - fails)) passed, $fails failed"
[ "$fails" = 0 ]
