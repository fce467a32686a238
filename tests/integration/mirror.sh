#!/bin/bash
# mirror.sh: `ksbctl fetch' against hostile mirrors.  The "guest" is this
# script writing into the instance's mirror.git the way a root guest could
# (git CLI as a witness and plain file writes); the host side is the real
# ksbctl.  Every case checks: the fetch executes nothing (marker files),
# writes nothing outside the host repo, and a failed fetch leaves the host
# repo's refs and objects exactly as they were.  No network, no root.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
builddir=${KSB_BUILDDIR:-$(cd "$here/../.." && pwd)}
drv=$builddir/tests/integration/mirrordrv
ksbctl=$builddir/ksbctl/ksbctl
. "$here/../lib.sh"
ksb_need git	# the test witness
[ -x "$drv" ] && [ -x "$ksbctl" ] || { echo "FAIL: mirrordrv/ksbctl not built"; exit 99; }

T=$(mktemp -d "${TMPDIR:-/tmp}/ksbt-mirror.XXXXXX")
trap 'rm -rf "$T"' EXIT
export GIT_CONFIG_NOSYSTEM=1 HOME=$T/home GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@t \
	GIT_COMMITTER_NAME=t GIT_COMMITTER_EMAIL=t@t
mkdir -p "$HOME"
git config --global init.defaultBranch main
git config --global protocol.file.allow always
git config --global safe.directory '*'

fails=0
n=0
ok() { n=$((n + 1)); echo "ok $n - $*"; }
notok() { n=$((n + 1)); fails=$((fails + 1)); echo "not ok $n - $*"; }
check() { local what=$1; shift; if "$@"; then ok "$what"; else notok "$what"; fi; }

H=$T/host
git init -q "$H"
echo one > "$H/a.txt"
git -C "$H" add a.txt
git -C "$H" commit -qm one
echo "state-dir = $T/state" > "$T/ksb.conf"
KSBCTL() { timeout 60 "$ksbctl" -f "$T/ksb.conf" "$@"; }

# A secret repo elsewhere on the host, which the guest must not reach.
S=$T/secret
git init -q "$S"
echo "top secret" > "$S/s.txt"
git -C "$S" add s.txt
git -C "$S" commit -qm secret
SECRET_COMMIT=$(git -C "$S" rev-parse HEAD)
SECRET_BLOB=$(git -C "$S" rev-parse HEAD:s.txt)

host_state() {	# refs and every object file of the host repo
	(cd "$H/.git" && { git for-each-ref --format='%(refname) %(objectname)';
		find objects -type f -printf '%P %s\n' | sort; })
}

# new_instance ID: a fresh mirror; the guest's view of it in $M.
new_instance() {
	I=$T/state/instances/$1
	ID=$1
	mkdir -p "$I"
	"$drv" create "$H" "$I" "$ID" >/dev/null
	M=$I/mirror.git
	guest_view
}

# In the guest the mirror's alternates name the read-only share of the host
# objects; here that is the host path itself (the host ignores this file).
guest_view() {
	echo "$H/.git/objects" > "$M/objects/info/alternates"
}

# guest_push: commit a file in a clone and push it to sandbox/$ID, with the
# host objects visible the way the guest sees them through its share.
guest_push() {
	local w=$T/work-$ID
	[ -d "$w" ] || git clone -q "$H" "$w"
	echo "$1" > "$w/$1.txt"
	git -C "$w" add "$1.txt"
	git -C "$w" commit -qm "guest $1"
	git -C "$w" push -q "$M" "HEAD:refs/heads/sandbox/$ID"
	git -C "$w" rev-parse HEAD
}

# fetch_fails WHAT PATTERN: fetch must fail with PATTERN in its message,
# change nothing in the host repo and write nothing outside it.
fetch_fails() {
	local before after out rc=0
	before=$(host_state)
	touch "$T/stamp"
	sleep 0.01
	out=$(KSBCTL fetch "$ID" 2>&1) || rc=$?
	after=$(host_state)
	if [ "$rc" = 1 ] && grep -q -- "$2" <<<"$out" && [ "$before" = "$after" ]; then
		ok "$1: refused ($out)"
	else
		notok "$1: rc=$rc out=$out"
		[ "$before" = "$after" ] || echo "# host repo changed"
	fi
	nothing_outside "$1"
}

nothing_outside() {
	local new
	new=$(find "$T" -newer "$T/stamp" -not -path "$H/.git*" -not -path "$T/state*" \
		-not -path "$T" -print)
	check "$1: nothing written outside the host repo" [ -z "$new" ]
	check "$1: nothing executed" [ ! -e "$T/pwned" ]
}

# ---- a normal round trip ---------------------------------------------------
new_instance ok1
out=$(KSBCTL fetch ok1)
check "fresh instance: nothing new" grep -q "nothing new" <<<"$out"
tip=$(guest_push f1)
out=$(KSBCTL fetch ok1)
check "fetch brings sandbox/ok1 ($out)" \
	[ "$(git -C "$H" rev-parse refs/remotes/ksb/ok1)" = "$tip" ]
check "fetched content readable" [ "$(git -C "$H" show refs/remotes/ksb/ok1:f1.txt)" = f1 ]
check "1 commit ahead, 1 file" grep -q "1 commit ahead of the seed .*, 1 file changed" <<<"$out"
check "host branches untouched" [ "$(git -C "$H" for-each-ref --format='%(refname)' refs/heads)" = refs/heads/main ]
out=$(KSBCTL fetch ok1)
check "again: nothing new" grep -q "nothing new" <<<"$out"
git -C "$H" fsck --strict --no-dangling >/dev/null 2>&1
check "host repo passes git fsck" [ $? = 0 ]

# ---- hooks and config planted by the guest ---------------------------------
new_instance hooks
guest_push h1 >/dev/null
for h in post-update post-receive post-checkout post-merge reference-transaction \
	pre-push fsmonitor-watchman; do
	printf '#!/bin/sh\ntouch %s/pwned\n' "$T" > "$M/hooks/$h"
	chmod +x "$M/hooks/$h"
done
cat >> "$M/config" <<EOF
[core]
	fsmonitor = touch $T/pwned
	hooksPath = $M/hooks
	sshCommand = touch $T/pwned
[include]
	path = $T/pwned-include
EOF
touch "$T/stamp"
sleep 0.01
out=$(KSBCTL fetch hooks 2>&1)
check "hooks + fsmonitor/hooksPath config: fetch works ($out)" \
	git -C "$H" rev-parse -q --verify refs/remotes/ksb/hooks
nothing_outside "hooks/config"

# ---- a symlinked objects dir ------------------------------------------------
new_instance symobj
guest_push s1 >/dev/null
mv "$M/objects" "$T/state/elsewhere"
ln -s "$T/state/elsewhere" "$M/objects"
fetch_fails "symlinked objects dir" "objects is not a directory"

# ---- a symlinked loose object (pointing at the secret repo's object) --------
new_instance symfile
d=${SECRET_BLOB:0:2}
mkdir -p "$M/objects/$d"
ln -s "$S/.git/objects/$d/${SECRET_BLOB:2}" "$M/objects/$d/${SECRET_BLOB:2}"
guest_push l1 >/dev/null
fetch_fails "symlinked object file" "not a regular file"

# ---- alternates pointing into a host directory ------------------------------
new_instance alt
echo "$S/.git/objects" > "$M/objects/info/alternates"
echo "$SECRET_COMMIT" > "$M/refs/heads/sandbox/alt"
fetch_fails "alternates into the secret repo" "commit"
absent() { ! git -C "$H" cat-file -e "$1" 2>/dev/null; }
check "secret objects not copied into the host repo" absent "$SECRET_BLOB"
check "secret commit not copied into the host repo" absent "$SECRET_COMMIT"

# ---- a corrupt object -------------------------------------------------------
new_instance corrupt
tip=$(guest_push c1)
f=$M/objects/${tip:0:2}/${tip:2}
if [ -f "$f" ]; then
	chmod u+w "$f"
	printf 'x\234garbage' > "$f"
else
	pk=$(ls "$M"/objects/pack/*.pack | head -1)
	chmod u+w "$pk"
	printf 'garbage' | dd of="$pk" bs=1 seek=40 conv=notrunc 2>/dev/null
fi
fetch_fails "corrupt object" "sandbox branch\|object\|pack\|hash"

# ---- tampered content under the same name (hash mismatch) -------------------
new_instance tamper
tip=$(guest_push t1)
blob=$(git -C "$T/work-tamper" rev-parse HEAD:t1.txt)
f=$M/objects/${blob:0:2}/${blob:2}
if [ -f "$f" ]; then
	chmod u+w "$f"
	printf 'blob 5\0evil\n' | python3 -c 'import sys,zlib; sys.stdout.buffer.write(zlib.compress(sys.stdin.buffer.read()))' > "$f"
	fetch_fails "object with the wrong content for its name" "hash\|object"
fi

# ---- ref names and ref tricks -----------------------------------------------
new_instance refs
seed=$(git -C "$H" rev-parse HEAD)
printf '# pack-refs with: peeled\n%s refs/heads/../../x\n%s ../../x\n' "$seed" "$seed" \
	> "$M/packed-refs"
echo "ref: ../../x" > "$M/refs/heads/sandbox/refs"
fetch_fails "symbolic sandbox ref to ../../x" "symbolic ref"
echo "ref: refs/heads/sandbox/refs" > "$M/refs/heads/sandbox/refs"
fetch_fails "ref loop (sandbox ref pointing at itself)" "symbolic ref"
rm "$M/refs/heads/sandbox/refs"
fetch_fails "only ../../x refs in packed-refs" "has no refs/heads/sandbox/refs"
check "no file x appeared" [ ! -e "$T/x" -a ! -e "$T/state/x" ]
rm -f "$M/packed-refs"
mkfifo "$M/packed-refs"
fetch_fails "packed-refs is a FIFO (no hang)" "not a regular file"
rm -f "$M/packed-refs"
ln -s "$S/.git/refs/heads/main" "$M/refs/heads/sandbox/refs"
fetch_fails "sandbox ref is a symlink to a host ref" "not a regular file"
rm -f "$M/refs/heads/sandbox/refs"
rm -rf "$M/refs/heads/sandbox"
ln -s "$S/.git/refs/heads" "$M/refs/heads/sandbox"
fetch_fails "refs/heads/sandbox is a symlink" "not a directory"
rm -f "$M/refs/heads/sandbox"
mkdir "$M/refs/heads/sandbox"
head -c 1000000 /dev/zero > "$M/refs/heads/sandbox/refs"
fetch_fails "a 1 MB ref file" "larger than"
printf '../../../../etc/passwd\n' > "$M/refs/heads/sandbox/refs"
fetch_fails "a ref file that is not an object id" "not an object id"

# ---- a guest write to an object it received at seeding ---------------------
echo "two" > "$H/a.txt"		# uncommitted: the seed commit lives in the mirror
new_instance seeded
git -C "$H" checkout -q a.txt
rm -rf "$I/mirror.git" "$I/mirror.state"
echo "two" > "$H/a.txt"
"$drv" create "$H" "$I" "$ID" -u >/dev/null
guest_view
git -C "$H" checkout -q a.txt
seedobjs=$(find "$M/objects" -type f -path '*/objects/??/*')
w=$T/work-seeded
git clone -q "$H" "$w"
git -C "$w" fetch -q "$M" sandbox/seeded
git -C "$w" checkout -q FETCH_HEAD
echo s > "$w/s.txt"
git -C "$w" add s.txt
git -C "$w" commit -qm s
git -C "$w" push -q "$M" "HEAD:refs/heads/sandbox/seeded"
before=$(host_state)
sums=$(cd "$H/.git/objects" && find . -type f -exec sha256sum {} + | sort)
for f in $seedobjs; do
	chmod u+w "$f"
	echo overwritten > "$f"
done
check "seeded objects were in the mirror only" [ -n "$seedobjs" ]
check "guest writes to seeded objects leave the host repo's objects as they were" \
	[ "$sums" = "$(cd "$H/.git/objects" && find . -type f -exec sha256sum {} + | sort)" ]
fetch_fails "fetch over the overwritten seed objects" "object\|hash\|zlib\|inflate\|header"
[ "$before" = "$(host_state)" ] && ok "host refs and objects unchanged" || notok "host changed"

echo "1..$n"
[ "$fails" = 0 ]
