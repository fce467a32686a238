#!/bin/bash
# e2e: the git handoff with a real guest (issue 8).  A host repo with a
# tracked uncommitted change and a context repo, made with the git CLI (a
# witness); ksb-run --repo --include-uncommitted --context boots a named
# guest that finds its clone in ~/work, commits on sandbox/<id> and pushes
# to the mirror; ksbctl fetch brings refs/remotes/ksb/<id> into the host
# repo with the guest's content, and nothing else of the host repo changes.
# The context is readable and not writable in the guest.  No egress: the
# gateway is there for REGISTER only.
set -eu
. "$(dirname "$0")/../lib.sh"

ksb_need_root
# The guest's git is the host's /usr/bin/git.
ksb_need qemu-system-x86_64 git
ksb_kernel
KSB_TEST_TEMPLATE=default # the default start: from a template under TCG
ksb_env
ksb_gateway

export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=$T/gitconfig \
	GIT_AUTHOR_NAME=host GIT_AUTHOR_EMAIL=host@example.invalid \
	GIT_COMMITTER_NAME=host GIT_COMMITTER_EMAIL=host@example.invalid
git config --global init.defaultBranch main
ID=git-test

ksb_say "host repos"
P=$T/proj
git init -q "$P"
echo "committed line" > "$P/tracked.txt"
echo "readme" > "$P/README"
ln -s README "$P/link"
printf '#!/bin/sh\necho run\n' > "$P/run.sh"
chmod 755 "$P/run.sh"
git -C "$P" add tracked.txt README link run.sh
git -C "$P" commit -qm "host: first"
git -C "$P" branch topic
echo "uncommitted line" > "$P/tracked.txt"	# tracked, not committed
echo "untracked" > "$P/untracked.txt"
C=$T/ctx
git init -q "$C"
echo "context content" > "$C/ctx.txt"
git -C "$C" add ctx.txt
git -C "$C" commit -qm "ctx"
host_refs() { git -C "$P" for-each-ref --format='%(refname) %(objectname)' refs/heads refs/tags; }
host_refs > "$T/refs.before"
git -C "$P" rev-parse HEAD > "$T/head.before"
sha256sum "$P/.git/index" "$P/tracked.txt" > "$T/files.before"
git -C "$P" status --porcelain > "$T/status.before"

cat > "$T/share/git-guest.sh" <<'GUEST'
# Runs in the guest as the agent.  One RESULT line per check.
r() { echo "RESULT $1 $2"; }
id=$KSB_INSTANCE
# Before any git command: .git/index is the host's, shown by the lazy
# tree (no copy in the upper layer, where the clone put only .git).
U=/run/ksb/disk/work-upper
if cmp -s .git/index /ksb/checkout/index && [ ! -e $U/.git/index ] &&
	[ -f $U/.git/HEAD ]; then r index_lower ok; else r index_lower bad; fi
if [ "$(pwd)" = /home/agent/work ]; then r cwd ok; else r cwd "bad: $(pwd)"; fi
# init wrote .git itself (guest/gitdir.c), not libgit2's clone, which
# adds a description and hooks from its template.
if [ -f $U/.git/config ] && [ ! -e $U/.git/description ] && [ ! -e $U/.git/hooks ]
then r fast_clone ok; else r fast_clone bad; fi
b=$(git rev-parse --abbrev-ref HEAD 2>&1)
if [ "$b" = "sandbox/$id" ]; then r branch ok; else r branch "bad: $b"; fi
if grep -qx 'uncommitted line' tracked.txt 2>/dev/null; then r uncommitted ok; else r uncommitted bad; fi
if [ ! -e untracked.txt ]; then r no_untracked ok; else r no_untracked bad; fi
if git rev-parse -q --verify origin/base >/dev/null; then r base ok; else r base bad; fi
# ~/work is the overlay of the host's lazy checkout (an index; the files
# served read-only from the objects by the guest's tree file system), and
# git trusts its index.
if grep -q "^overlay /home/agent/work overlay .*lowerdir=/run/ksb/tree," /proc/mounts &&
	grep -q "^ksb-tree /run/ksb/tree fuse.ksb ro," /proc/mounts; then r overlay ok; else r overlay bad; fi
st=$(git status --porcelain 2>&1)
if [ "$st" = "" ]; then r status_clean ok; else r status_clean "bad: $st"; fi
if (: > /run/ksb/tree/x) 2>/dev/null || (echo x >> /run/ksb/tree/README) 2>/dev/null ||
	(: > /ksb/checkout/index) 2>/dev/null; then r checkout_ro bad; else r checkout_ro ok; fi
if [ "$(readlink link)" = README ] && [ "$(./run.sh)" = run ] && [ ! -x README ] &&
	git cat-file blob HEAD:README | cmp -s - README; then r lazy_files ok; else r lazy_files bad; fi
# A file of the lower layer is writable (copied up) and git sees the change.
if echo more >> README && [ "$(git status --porcelain README)" = " M README" ] &&
	git checkout -q README && [ "$(cat README)" = readme ]; then r lower_write ok; else r lower_write bad; fi
echo "from the guest $id" > agent.txt
if git add agent.txt && git commit -qm "agent: add agent.txt"; then r commit ok; else r commit bad; fi
# git's first index write lands in the upper layer; the host's is kept.
if [ -f $U/.git/index ] && ! cmp -s $U/.git/index /ksb/checkout/index &&
	[ "$(git ls-files agent.txt)" = agent.txt ]; then r index_upper ok; else r index_upper bad; fi
if git push -q origin "sandbox/$id"; then r push ok; else r push bad; fi
if [ "$(cat /context/ctx/ctx.txt 2>&1)" = "context content" ]; then r context_read ok; else r context_read bad; fi
if (echo x > /context/ctx/new.txt) 2>/dev/null; then r context_no_create bad; else r context_no_create ok; fi
if (echo x >> /context/ctx/ctx.txt) 2>/dev/null; then r context_no_write bad; else r context_no_write ok; fi
if (: > /ksb/objects/x) 2>/dev/null; then r objects_ro bad; else r objects_ro ok; fi
# Plant a symlink and a mode-4755 file in the mirror: the host must see
# neither (mapped-xattr keeps them in xattrs only).
if ln -s /etc/shadow /ksb/mirror.git/planted-link && : > /ksb/mirror.git/planted-suid &&
	chmod 4755 /ksb/mirror.git/planted-suid; then r plant ok; else r plant bad; fi
exit 0
GUEST
chmod 644 "$T/share/git-guest.sh"

ksb_say "ksb-run: the guest commits and pushes"
start=$(date +%s.%N)
set +e
( cd "$P" && timeout -k 10 120 ip netns exec "$GW" "$KSB_BUILDDIR/ksb-run" -f "$T/ksb.conf" \
	--name "$ID" --state-dir "$T/state" --disk-size 256M \
	--include-uncommitted --context "$C:ctx" \
	--share-ro "$T/share:/ksb-test" \
	-- /bin/sh /ksb-test/git-guest.sh ) > "$T/guest.out" 2> "$T/run.err"
rc=$?
set -e
end=$(date +%s.%N)
cat "$T/guest.out"
cat "$T/run.err" >&2
echo "ksb-run exit status $rc after $(echo "$end - $start" | bc 2>/dev/null || echo "?") s"

fails=0
n=0
check() {
	n=$((n + 1))
	if eval "$2"; then echo "ok $n - $1"; else echo "not ok $n - $1"; fails=$((fails + 1)); fi
}
check "ksb-run exited 0" '[ "$rc" = 0 ]'
for r in index_lower cwd fast_clone branch uncommitted no_untracked base overlay status_clean \
	checkout_ro lazy_files lower_write commit index_upper push context_read context_no_create \
	context_no_write objects_ro plant; do
	check "guest: $r" "grep -qx 'RESULT $r ok' '$T/guest.out'"
done
check "no ERR from the guest's workspace set-up" '! grep -q "guest: workspace" "$T/run.err"'
M="$T/state/instances/$ID/mirror.git"
check "a symlink planted by the guest is a plain file on the host" \
	'[ -f "$M/planted-link" ] && [ ! -L "$M/planted-link" ]'
check "a setuid file planted by the guest has no setuid bit on the host" \
	'[ -f "$M/planted-suid" ] && [ ! -u "$M/planted-suid" ] && [ ! -x "$M/planted-suid" ]'
check "host repo untouched by the run (refs, HEAD, index, work tree)" \
	'host_refs | cmp -s - "$T/refs.before" &&
	 [ "$(git -C "$P" rev-parse HEAD)" = "$(cat "$T/head.before")" ] &&
	 sha256sum -c --quiet "$T/files.before" &&
	 git -C "$P" status --porcelain | cmp -s - "$T/status.before"'
CO=$(ls -d "$T"/state/checkouts/[0-9a-f]*)
check "the host's checkout cache is lazy: an index of the seed, no file, none of the guest's writes" \
	'[ "$(ls "$CO" | tr "\n" " ")" = "index source " ] &&
	 [ "$(GIT_INDEX_FILE="$CO/index" git -C "$P" ls-files | tr "\n" " ")" = "README link run.sh tracked.txt " ]'
check "no remote-tracking ref before the fetch" \
	'! git -C "$P" rev-parse -q --verify "refs/remotes/ksb/$ID" >/dev/null'

ksb_say "ksbctl fetch"
KSBCTL() { timeout 120 "$KSB_BUILDDIR/ksbctl/ksbctl" -f "$T/ksb.conf" "$@"; }
set +e
KSBCTL fetch "$ID" --repo "$P" > "$T/fetch.out" 2>&1
frc=$?
set -e
cat "$T/fetch.out"
check "ksbctl fetch exited 0" '[ "$frc" = 0 ]'
check "fetch reports refs/remotes/ksb/$ID" 'grep -q "^refs/remotes/ksb/$ID -> " "$T/fetch.out"'
check "the guest's commit arrived (git CLI)" \
	'[ "$(git -C "$P" log -1 --format=%s "refs/remotes/ksb/$ID")" = "agent: add agent.txt" ] &&
	 [ "$(git -C "$P" show "refs/remotes/ksb/$ID:agent.txt")" = "from the guest $ID" ]'
check "its parent is the seed with the uncommitted change, on host HEAD" \
	'[ "$(git -C "$P" show "refs/remotes/ksb/$ID~1:tracked.txt")" = "uncommitted line" ] &&
	 [ "$(git -C "$P" rev-parse "refs/remotes/ksb/$ID~2")" = "$(cat "$T/head.before")" ]'
check "git fsck of the host repo is clean" 'git -C "$P" fsck --no-progress --no-dangling 2>&1 | tee "$T/fsck" | ( ! grep -q . )'
check "host branches, HEAD, index and work tree untouched by the fetch" \
	'host_refs | cmp -s - "$T/refs.before" &&
	 [ "$(git -C "$P" rev-parse HEAD)" = "$(cat "$T/head.before")" ] &&
	 sha256sum -c --quiet "$T/files.before" &&
	 git -C "$P" status --porcelain | cmp -s - "$T/status.before"'
check "the only new ref is refs/remotes/ksb/$ID" \
	'[ "$(git -C "$P" for-each-ref --format="%(refname)" | grep -v "^refs/heads/" )" = "refs/remotes/ksb/$ID" ]'
KSBCTL fetch "$ID" --repo "$P" > "$T/fetch2.out" 2>&1 || true
check "a second fetch says nothing new" 'grep -q "^nothing new" "$T/fetch2.out"'
check "context repo untouched" '[ -z "$(git -C "$C" status --porcelain)" ]'

ksb_say "ksbctl fetch --branch: create, fast-forward, refuse"
tip=$(git -C "$P" rev-parse "refs/remotes/ksb/$ID")
set +e
KSBCTL fetch "$ID" --repo "$P" --branch agent-work > "$T/br1.out" 2>&1; br1=$?
git -C "$P" branch ff-me HEAD		# an ancestor of the tip
KSBCTL fetch "$ID" --repo "$P" --branch ff-me > "$T/br2.out" 2>&1; br2=$?
# A branch with a commit of its own (made without touching the work tree).
dc=$(git -C "$P" commit-tree -p HEAD -m "host: diverged" "HEAD^{tree}")
git -C "$P" branch diverged "$dc"
KSBCTL fetch "$ID" --repo "$P" --branch diverged > "$T/br3.out" 2>&1; br3=$?
KSBCTL fetch "$ID" --repo "$P" --branch main > "$T/br4.out" 2>&1; br4=$?
KSBCTL fetch "$ID" --repo "$P" --branch agent-work > "$T/br5.out" 2>&1; br5=$?
KSBCTL fetch "$ID" --repo "$P" --branch 'bad..name' > "$T/br6.out" 2>&1; br6=$?
set -e
cat "$T"/br[1-6].out
check "--branch NAME creates the branch at the fetched tip" \
	'[ "$br1" = 0 ] && grep -q "^branch agent-work created at ${tip:0:12}" "$T/br1.out" &&
	 [ "$(git -C "$P" rev-parse agent-work)" = "$tip" ]'
check "--branch fast-forwards a branch that is an ancestor of the tip" \
	'[ "$br2" = 0 ] && grep -q "^branch ff-me fast-forwarded" "$T/br2.out" &&
	 [ "$(git -C "$P" rev-parse ff-me)" = "$tip" ]'
check "--branch refuses a branch with commits not in the tip, and leaves it" \
	'[ "$br3" = 1 ] && grep -q "branch diverged not moved: it has 1 commit that sandbox/$ID" "$T/br3.out" &&
	 [ "$(git -C "$P" rev-parse diverged)" = "$dc" ]'
check "--branch refuses the checked-out branch (HEAD, index, files kept)" \
	'[ "$br4" = 1 ] && grep -q "branch main not moved: it is checked out" "$T/br4.out" &&
	 [ "$(git -C "$P" rev-parse main)" = "$(cat "$T/head.before")" ] &&
	 sha256sum -c --quiet "$T/files.before" &&
	 git -C "$P" status --porcelain | cmp -s - "$T/status.before"'
check "--branch on a branch already at the tip says so" \
	'[ "$br5" = 0 ] && grep -q "^branch agent-work already at" "$T/br5.out"'
check "--branch with an invalid name is refused" \
	'[ "$br6" = 1 ] && grep -q "invalid branch name" "$T/br6.out"'

ksb_say "resume: the branch stays, base follows the host's HEAD"
echo "more" >> "$P/README"
# Attributes: this commit's cache is a full checkout (the ephemeral run).
echo "*.sh -text" > "$P/.gitattributes"
git -C "$P" add .gitattributes
git -C "$P" commit -qm "host: second" README .gitattributes
cat > "$T/share/git-resume.sh" <<'GUEST'
r() { echo "RESULT $1 $2"; }
if [ "$(pwd)" = /home/agent/work ] && [ -f agent.txt ]; then r kept ok; else r kept bad; fi
if grep -q "^overlay /home/agent/work overlay" /proc/mounts && [ -z "$(git status --porcelain)" ]; then r overlay_again ok; else r overlay_again bad; fi
git fetch -q origin
s=$(git log -1 --format=%s origin/base 2>&1)
if [ "$s" = "host: second" ]; then r new_base ok; else r new_base "bad: $s"; fi
if [ "$(cat /context/ctx/ctx.txt 2>&1)" = "context content" ]; then r context_again ok; else r context_again bad; fi
exit 0
GUEST
set +e
( cd "$P" && timeout -k 10 120 ip netns exec "$GW" "$KSB_BUILDDIR/ksb-run" -f "$T/ksb.conf" \
	--name "$ID" --state-dir "$T/state" --context "$C:ctx" \
	--share-ro "$T/share:/ksb-test" \
	-- /bin/sh /ksb-test/git-resume.sh ) > "$T/resume.out" 2> "$T/resume.err"
rc=$?
set -e
cat "$T/resume.out" "$T/resume.err"
check "resumed ksb-run exited 0" '[ "$rc" = 0 ]'
for r in kept overlay_again new_base context_again; do
	check "guest: $r" "grep -qx 'RESULT $r ok' '$T/resume.out'"
done

ksb_say "ephemeral: the mirror goes with the instance"
set +e
timeout -k 10 120 ip netns exec "$GW" "$KSB_BUILDDIR/ksb-run" -f "$T/ksb.conf" \
	--state-dir "$T/state" --repo "$P" \
	-- /bin/sh -c 'git --no-pager log -1 --format="RESULT ephemeral %s"
		grep -q "^overlay /home/agent/work overlay .*lowerdir=/ksb/checkout/tree," /proc/mounts &&
		[ -z "$(git status --porcelain)" ] && [ "$(readlink link)" = README ] &&
		echo "RESULT full_tree ok"' > "$T/eph.out" 2> "$T/eph.err"
rc=$?
set -e
cat "$T/eph.out" "$T/eph.err"
check "ephemeral guest cloned the host's HEAD" '[ "$rc" = 0 ] && grep -qx "RESULT ephemeral host: second" "$T/eph.out"'
CO=$(ls -d "$T"/state/checkouts/*/tree)
check "a tree with .gitattributes: the full checkout, the overlay on it clean" \
	'grep -qx "RESULT full_tree ok" "$T/eph.out" &&
	 [ "$(cat "$CO/README")" = "readme
more" ] && [ "$(stat -c %u "$CO/README")" = 1000 ] && [ ! -e "$CO/agent.txt" ]'
check "a dirty work tree without --include-uncommitted is named, with the option" \
	'grep -q "uncommitted changes to tracked files.*--include-uncommitted" "$T/eph.err"'
check "no such warning when the option was given" \
	'! grep -q "uncommitted changes" "$T/run.err"'
( cd "$P" && "$KSB_BUILDDIR/ksb-run" -f "$T/ksb.conf" --state-dir "$T/state" \
	--print-config ) > "$T/pc1.out" 2>&1 || true
( cd "$P" && "$KSB_BUILDDIR/ksb-run" -f "$T/ksb.conf" --state-dir "$T/state" \
	--name "$ID" --print-config ) > "$T/pc2.out" 2>&1 || true
( cd "$T" && "$KSB_BUILDDIR/ksb-run" -f "$T/ksb.conf" --state-dir "$T/state" \
	--print-config ) > "$T/pc3.out" 2>&1 || true
grep '^repo ' "$T"/pc[123].out
check "--print-config in a repo shows it and why" \
	'grep -Eq "^repo +=  *$P/.git +# the git repository holding the current directory" "$T/pc1.out"'
check "--print-config of a named instance shows the repo its mirror keeps" \
	'grep -Eq "^repo +=  *$P/.git +# instance $ID keeps its mirror of it" "$T/pc2.out"'
check "--print-config outside a repo says there is no mirror" \
	'grep -Eq "^repo +=  *\(none\) +# the current directory is in no git repository" "$T/pc3.out"'
check "only the named instance is left in the state dir" \
	'[ "$(ls "$T/state/instances")" = "$ID" ]'

ksb_say "a lazy tree that cannot be mounted: a plain clone, no .git left in the upper dir"
# The clone into the overlay's upper dir runs while the tree's server
# starts; when the server then refuses the index (here a cache whose
# index is not one), init removes what the clone wrote and clones
# ~/work plainly.
B=$T/badtree
git init -q "$B"
echo y > "$B/y"
git -C "$B" add y
git -C "$B" commit -qm y
BC=$T/state/checkouts/$(git -C "$B" rev-parse HEAD)
mkdir -p "$BC"
echo "not a git index" > "$BC/index"
printf '%s\n' "$B/.git" > "$BC/source"
chmod 755 "$BC"
chmod 644 "$BC/index" "$BC/source"
set +e
timeout -k 10 120 ip netns exec "$GW" "$KSB_BUILDDIR/ksb-run" -f "$T/ksb.conf" \
	--state-dir "$T/state" --repo "$B" \
	-- /bin/sh -c 'echo "RESULT cwd $(pwd)"
		[ "$(cat y)" = y ] && [ -z "$(git status --porcelain)" ] &&
			echo "RESULT plain ok"
		grep -q " /home/agent/work overlay " /proc/mounts || echo "RESULT no_overlay ok"
		[ ! -e /run/ksb/usr/work-upper ] && echo "RESULT no_upper ok"' \
	> "$T/bt.out" 2> "$T/bt.err"
rc=$?
set -e
grep RESULT "$T/bt.out" || true
check "a tree that fails to mount: the command ran in a plain clone of ~/work" \
	'[ "$rc" = 0 ] && grep -qx "RESULT cwd /home/agent/work" "$T/bt.out" &&
	 grep -qx "RESULT plain ok" "$T/bt.out" && grep -qx "RESULT no_overlay ok" "$T/bt.out"'
check "... the upper dir the clone wrote into removed" 'grep -qx "RESULT no_upper ok" "$T/bt.out"'
check "... the failed mount reported" \
	'grep -q "guest: workspace: the tree of /ksb/checkout/index could not be mounted" "$T/bt.err"'

ksb_say "a failed clone is reported and the command still runs"
Q=$T/priv
git init -q "$Q"
echo x > "$Q/x"
git -C "$Q" add x
git -C "$Q" commit -qm x
chmod -R go-rwx "$Q/.git/objects"	# the agent (uid 1000) cannot read them
set +e
timeout -k 10 120 ip netns exec "$GW" "$KSB_BUILDDIR/ksb-run" -f "$T/ksb.conf" \
	--state-dir "$T/state" --repo "$Q" \
	-- /bin/sh -c 'echo "RESULT ran in $(pwd)"' > "$T/neg.out" 2> "$T/neg.err"
rc=$?
set -e
tail -n 3 "$T/neg.out"
cat "$T/neg.err"
check "the command ran, in the agent's home, exit 0" \
	'[ "$rc" = 0 ] && grep -qx "RESULT ran in /home/agent" "$T/neg.out"'
check "ksb-run reported the guest's failed clone" \
	'grep -q "guest: workspace: git clone of /ksb/mirror.git failed" "$T/neg.err"'

ksb_check_template
echo "# $((n - fails)) passed, $fails failed"
[ "$fails" = 0 ]
