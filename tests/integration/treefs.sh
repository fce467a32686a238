#!/bin/bash
# treefs.sh: the guest's lazily read work tree (guest/treefs.c), run on
# the host: `ksb-guest-clone --serve-tree' mounts a git index (made by the
# git CLI, a witness) over the repository's objects; the mount holds what
# `git archive' holds (contents, symlinks, the executable bit, the agent as
# owner, the index's sizes and mtimes) plus the index itself as .git/index,
# is read-only, finds a directory whose name sorts after its siblings in
# the index's order.  The index is read after the mount, in a thread: with
# the thread held (KSB_TREEFS_HOLD), .git/index is served at once, the
# clone (--no-checkout, into an overlay's upper dir as the guest init
# does) and the overlay mount send nothing that waits, and a read and a
# write through the overlay started meanwhile wait for it (fusectl's
# `waiting' count, not a sleep) and then see the right bytes; git works on
# the overlay (status clean, commit: the new index in the upper layer, the
# host's untouched).  An index whose header it cannot use (version 4,
# truncated) is refused with nothing mounted; a bad entry found by the
# thread makes the tree answer EIO, said on stderr.  Needs root and
# /dev/fuse (the fuse module), overlayfs; no network.
set -eu

. "$(dirname "$0")/../lib.sh"
builddir=$KSB_BUILDDIR
clone=$builddir/ksb-guest-clone
ksb_need git python3
ksb_need_root
[ -c /dev/fuse ] || { echo "SKIP: needs /dev/fuse (modprobe fuse)"; exit 77; }
[ -x "$clone" ] || { echo "FAIL: ksb-guest-clone not built"; exit 99; }

T=$(mktemp -d "${TMPDIR:-/tmp}/ksbt-treefs.XXXXXX")
chmod 755 "$T"	# the server reads the objects as uid 1000
M=$T/mnt
FUSECTL=/sys/fs/fuse/connections
fusectl_mounted=
cleanup() {
	[ -n "${hold_fd:-}" ] && exec {hold_fd}>&- 2>/dev/null
	umount "$T/ov" 2>/dev/null || true
	umount "$M" 2>/dev/null || true
	[ -n "$fusectl_mounted" ] && umount "$FUSECTL" 2>/dev/null
	rm -rf "$T"
}
trap cleanup EXIT
export GIT_CONFIG_NOSYSTEM=1 HOME=$T/home GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@t \
	GIT_COMMITTER_NAME=t GIT_COMMITTER_EMAIL=t@t
mkdir -p "$HOME" "$M"
git config --global safe.directory '*'
export LC_ALL=C
if ! grep -q " $FUSECTL fusectl " /proc/mounts; then
	mount -t fusectl fusectl "$FUSECTL" 2>/dev/null && fusectl_mounted=1 ||
		{ echo "SKIP: needs fusectl on $FUSECTL"; exit 77; }
fi

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
check "the mount holds what git archive holds, and .git" \
	'diff -r --no-dereference -x .git "$T/ref" "$M" &&
	 [ "$(ls -A "$M" | tr "\n" " ")" = ".git ab ab-0 ab-1 ab-2 ab-3 ab-4 ab-5 ab-d ab.c sub " ]'
check ".git holds the index only, its bytes and mtime" \
	'[ "$(ls -A "$M/.git")" = index ] && cmp -s "$T/index" "$M/.git/index" &&
	 [ "$(stat -c %Y:%s "$M/.git/index")" = "$(stat -c %Y:%s "$T/index")" ]'
check "files have their index entries' mtimes and ctimes" \
	'[ "$(stat -c %Y:%Z "$M/ab.c")" = "$(stat -c %Y:%Z "$P/ab.c")" ] &&
	 [ "$(stat -c %Y:%Z "$M/sub/run.sh")" = "$(stat -c %Y:%Z "$P/sub/run.sh")" ]'
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

# The load held: what needs no index is served, what needs it waits.
mkfifo -m 666 "$T/hold"
rc=0
KSB_TREEFS_HOLD=$T/hold timeout 20 "$clone" --serve-tree "$T/index" "$P/.git" "$M" \
	2> "$T/hold.err" || rc=$?
check "held: --serve-tree exits 0 once mounted" '[ "$rc" = 0 ]'
check "held: the root, .git and .git/index are served" \
	'[ "$(timeout 10 stat -c %a:%u "$M")" = 755:1000 ] &&
	 [ "$(timeout 10 ls -A "$M/.git")" = index ] &&
	 timeout 10 cmp -s "$T/index" "$M/.git/index"'
mkdir "$T/up" "$T/wk" "$T/ov"
br=$(git -C "$P" symbolic-ref --short HEAD)
rc=0
timeout 30 "$clone" --no-checkout "$P/.git" "$br" "$T/up" 2> "$T/clone.err" || rc=$?
check "held: the clone into the upper dir (--no-checkout) needs no lookup" \
	'[ "$rc" = 0 ] && [ -f "$T/up/.git/HEAD" ] && [ ! -e "$T/up/.git/index" ] &&
	 [ "$(git config -f "$T/up/.git/config" core.checkStat)" = minimal ]'
rc=0
timeout 20 mount -t overlay overlay \
	-o "lowerdir=$M,upperdir=$T/up,workdir=$T/wk" "$T/ov" || rc=$?
check "held: the overlay mounts" '[ "$rc" = 0 ]'
conn=$FUSECTL/$(stat -c %d "$M")
# The loader is parked on the FIFO (it holds it open until it reads a
# byte, before it reads any entry: a writer can open it), at nice 19.
parked() {
	python3 -c 'import os, sys
os.close(os.open(sys.argv[1], os.O_WRONLY | os.O_NONBLOCK))' "$T/hold" 2>/dev/null
}
for i in $(seq 1 200); do parked && break; sleep 0.05; done
daemon=$(pgrep -n -f -- "--serve-tree $T/index ")	# the newest
loader=$(ls "/proc/$daemon/task" | grep -vx "$daemon" | head -n 1)
nice_of() { awk '{ print $19 }' "/proc/$daemon/task/$loader/stat"; }
# Nice 19, raised to 0 later, needs RLIMIT_NICE raised (CAP_SYS_RESOURCE,
# which the guest's init has; some containers' root has not).
low=19
python3 -c 'import resource
resource.setrlimit(resource.RLIMIT_NICE, (20, 20))' 2>/dev/null || {
	low=0
	echo "# no CAP_SYS_RESOURCE here: the loader runs at nice 0 throughout"
}
check "held: the loader waits on the FIFO, at nice $low" \
	'parked && [ -n "$loader" ] && [ "$(nice_of)" = "$low" ]'
CA=/etc/ssl/certs/ca-certificates.crt
check "the server's own mount namespace has /dev/null over the CA bundle" \
	'[ ! -f "$CA" ] || { grep -q " $CA " "/proc/$daemon/mountinfo" &&
	 ! grep -q " $CA " /proc/self/mountinfo; }'
timeout 30 cat "$T/ov/ab/e" > "$T/early.out" 2>&1 &
reader=$!
timeout 30 sh -c 'echo more >> "$1"' sh "$T/ov/ab.c" 2> "$T/early.err" &
writer=$!
for i in $(seq 1 200); do
	[ "$(cat "$conn/waiting" 2>/dev/null || echo 0)" -ge 1 ] && break
	sleep 0.05
done
check "held: a read and a write wait for the load, which is raised to nice 0" \
	'[ "$(cat "$conn/waiting")" -ge 1 ] && kill -0 "$reader" 2>/dev/null &&
	 kill -0 "$writer" 2>/dev/null && parked && [ "$(nice_of)" = 0 ]'
# Read-write: the open does not wait for the loader's end of the FIFO.
exec {hold_fd}<> "$T/hold"
echo go >&"$hold_fd"
rr=0 rw=0
wait "$reader" || rr=$?
wait "$writer" || rw=$?
check "after the load: the early read has the file's bytes" \
	'[ "$rr" = 0 ] && [ "$(cat "$T/early.out")" = "in the dir" ]'
check "after the load: the early write was copied up onto the blob" \
	'[ "$rw" = 0 ] && [ "$(printf "dot\nmore")" = "$(cat "$T/ov/ab.c")" ] &&
	 [ "$(cat "$M/ab.c")" = dot ]'
check "git on the overlay: only the written file is modified" \
	'[ "$(git -C "$T/ov" status --porcelain)" = " M ab.c" ] &&
	 [ "$(git -C "$T/ov" rev-parse HEAD)" = "$(git -C "$P" rev-parse HEAD)" ]'
check "git commit on the overlay: its index in the upper layer, the host's kept" \
	'git -C "$T/ov" commit -qam "in the overlay" &&
	 [ -z "$(git -C "$T/ov" status --porcelain)" ] && [ -f "$T/up/.git/index" ] &&
	 ! cmp -s "$T/index" "$T/up/.git/index" && cmp -s "$T/index" "$M/.git/index" &&
	 [ "$(git -C "$T/ov" log -1 --format=%s)" = "in the overlay" ]'
exec {hold_fd}>&-
hold_fd=
umount "$T/ov"
umount "$M"

# A bad entry: found by the thread after the mount; the tree answers EIO.
python3 - "$T/index" "$T/badentry" <<'PY'
import sys
b = open(sys.argv[1], "rb").read()
assert b.count(b"sub/link\0") == 1
open(sys.argv[2], "wb").write(b.replace(b"sub/link\0", b"sub/../k\0"))
PY
rc=0 rl=0
timeout 20 "$clone" --serve-tree "$T/badentry" "$P/.git" "$M" 2> "$T/bad.err" || rc=$?
timeout 20 ls "$M" > "$T/bad.ls" 2>&1 || rl=$?
check "a bad entry: mounted, the tree answers EIO, said on stderr" \
	'[ "$rc" = 0 ] && [ "$rl" != 0 ] && grep -q "Input/output error" "$T/bad.ls" &&
	 grep -q "bad entry .* at offset .*; the tree answers EIO" "$T/bad.err"'
check "a bad entry: .git/index is still served" 'cmp -s "$T/badentry" "$M/.git/index"'
umount "$M"

# Indexes whose header it cannot use: refused, nothing mounted.
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
check "a truncated index is refused" \
	'[ "$rcs" = 1 ] && grep -q "short: truncated: [0-9]* entries in 100 bytes" "$T/short.err"'
check "nothing mounted after the refusals" '! grep -q " $M " /proc/mounts'

echo "# $((n - fails)) passed, $fails failed"
[ "$fails" = 0 ]
