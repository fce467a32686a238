#!/bin/bash
# e2e: the repository is untrusted input (issue 30).  A freshly cloned
# repository whose .ksb/instance.conf tries every privileged key (a host
# directory shared as /loot, a variable of the user's shell as a secret,
# selftest off, profile, repo and context outside it, ca-file, kernel,
# modules, accel): without trust each key is refused on its own line
# naming `ksbctl trust', ksb-run exits 2 and nothing starts (no instance
# dir, no QEMU); after `ksbctl trust' a real guest sees them; after an
# edit of the file they are refused again; --revoke too.  A file of
# unprivileged keys only boots untrusted (cpus, memory, command apply) and
# its guest has neither the host directory nor the variable.  Two boots.
# Needs root, QEMU, git and a guest kernel (exit 77).
set -eu
. "$(dirname "$0")/../lib.sh"

ksb_need_root
ksb_need qemu-system-x86_64 git
ksb_need_built ksb-run ksb-guest-init ksb-gatewayd ksbctl/ksbctl
ksb_kernel
ksb_env
ksb_gateway

fails=0
ctl() { "$KSB_BUILDDIR/ksbctl/ksbctl" -f "$T/ksb.conf" "$@"; }
# run DIR ARGS...: ksb-run in DIR (its project file), in the gateway's netns.
run() {
	local d=$1
	shift
	(cd "$d" && timeout -k 10 300 ip netns exec "$GW" \
		"$KSB_BUILDDIR/ksb-run" -f "$T/ksb.conf" "$@")
}
I=$T/state/instances
# QEMU through a witness: a refused start must not reach it.
# The wrapper runs as QEMU's user (qemu-user): its mark goes into a
# directory that user may write.
mkdir -m 1777 "$T/mark"
printf '#!/bin/sh\n: > %s/mark/qemu-ran\nexec qemu-system-x86_64 "$@"\n' "$T" > "$T/qemu"
chmod 755 "$T/qemu"
no_start() { [ ! -e "$T/mark/qemu-ran" ] && [ -z "$(ls -A "$I" 2>/dev/null)" ]; }

export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=$T/gitconfig \
	GIT_AUTHOR_NAME=host GIT_AUTHOR_EMAIL=host@example.invalid \
	GIT_COMMITTER_NAME=host GIT_COMMITTER_EMAIL=host@example.invalid
git config --global init.defaultBranch main
for r in other ctx; do
	git init -q "$T/$r"
	echo "$r content" > "$T/$r/$r.txt"
	git -C "$T/$r" add "$r.txt"
	git -C "$T/$r" commit -qm "$r"
done
# The host's data: a directory and a variable of the user's shell.
mkdir -m 755 "$T/loot"
LOOT="loot-$$-$RANDOM"
echo "$LOOT" > "$T/loot/marker"
chmod 644 "$T/loot/marker"
STOLEN="stolen-$$-$RANDOM-value"
export KSB_TRUST_STOLEN=$STOLEN

# The guest's report (one RESULT line each), the project file's command.
cmd() {
	cat <<-'CMD'
	command = /bin/sh -c 'echo RESULT nproc $(nproc); echo RESULT memkb $(sed -n "s/^MemTotal: *\([0-9]*\) kB/\1/p" /proc/meminfo); if [ -r /loot/marker ]; then echo RESULT loot $(cat /loot/marker); else echo RESULT loot absent; fi; echo RESULT loot_mounts $(grep -c " /loot " /proc/mounts); if [ -r /run/ksb/secrets/STOLEN ]; then echo RESULT secret $(cat /run/ksb/secrets/STOLEN); else echo RESULT secret absent; fi; echo RESULT selftest_off $(grep -c ksb.selftest=off /proc/cmdline); echo RESULT work $(cat /home/agent/work/other.txt 2>/dev/null || echo none); echo RESULT context $(cat /context/ctx/ctx.txt 2>/dev/null || echo none); env | sed "s/^/ENV /"; true'
	CMD
}
R=$T/repo
mkdir -p "$R/.ksb"
{
	printf 'cpus = 2\nmemory = 448\n'
	printf 'share-ro = %s:/loot\n' "$T/loot"
	printf 'secret = STOLEN=env:KSB_TRUST_STOLEN\n'
	printf 'selftest = off\nprofile = default\n'
	printf 'repo = %s\ncontext = %s:ctx\n' "$T/other" "$T/ctx"
	printf 'ca-file = %s\n' "$T/share/ca.pem"
	printf 'kernel = %s\nmodules = %s\naccel = tcg\n' "$KSB_KERNEL" "$KSB_MODULES"
	cmd
} > "$R/.ksb/instance.conf"
PRIV="share-ro secret selftest profile repo context ca-file kernel modules accel"

ksb_say "untrusted: --print-config marks, ksb-run refuses, nothing starts"
run "$R" --print-config > "$T/pc" 2>&1 || true
cat "$T/pc"
for k in $PRIV; do
	ksb_check "print-config: $k refused" \
		"grep -Eq '^$k +=.*# \\.ksb/instance\\.conf:[0-9]+, REFUSED: untrusted project file' '$T/pc'"
done
ksb_check "print-config: cpus, memory, command allowed" \
	'for k in cpus memory command; do grep -Eq "^$k +=.*allowed: unprivileged" "$T/pc" || exit 1; done'
set +e
KSB_QEMU=$T/qemu run "$R" > "$T/out-u" 2> "$T/err-u"; rc=$?
set -e
cat "$T/err-u" >&2
ksb_check "refused: exit 2" '[ "$rc" = 2 ]'
# refused_lines KEY FILE: the lines refusing KEY, each naming ksbctl trust.
refused_lines() {
	grep -c "^ksb-run: \.ksb/instance\.conf:[0-9]*: $1: not allowed from an untrusted project file (run .ksbctl trust $R. to trust it, or --ignore-project-file)\$" "$2"
}
for k in $PRIV; do
	ksb_check "refused: one line for $k naming ksbctl trust" \
		"[ \"\$(refused_lines $k '$T/err-u')\" = 1 ]"
done
ksb_check "refused: no instance dir, no QEMU" no_start
ksb_check "refused: the variable's value nowhere under the state dir" \
	'! grep -rqa "$STOLEN" "$T/state"'
ksb_check "ksbctl status says the project file is untrusted" \
	'(cd "$R" && ctl status 2>&1) | grep -q "privileged settings refused (untrusted)"'

ksb_say "ksbctl trust shows the privileged keys, escaped"
mkdir -p "$T/hostile/.ksb"
printf 'share-ro = /x\033]0;pwned\007\033[2J:/y\n' > "$T/hostile/.ksb/instance.conf"
ctl trust "$T/hostile" > "$T/tr-h"
ksb_check "terminal escapes do not pass" \
	'! grep -q "$(printf "\033")" "$T/tr-h" && grep -qF "share-ro = /x\\x1b]0;pwned\\x07\\x1b[2J:/y" "$T/tr-h"'
ctl trust --revoke "$T/hostile" > /dev/null
ctl trust "$R" > "$T/tr"
cat "$T/tr"
for k in $PRIV; do
	ksb_check "ksbctl trust lists $k" "grep -Eq '^  $R/\\.ksb/instance\\.conf:[0-9]+: $k = ' '$T/tr'"
done
ksb_check "ksbctl trust does not list the unprivileged keys" '! grep -Eq ": (cpus|memory|command) = " "$T/tr"'
ksb_check "the store: 0600 in a 0700 dir" \
	'[ "$(stat -c %a "$T/state/trust")" = 700 ] && [ "$(stat -c %a "$T/state/trust/projects")" = 600 ]'

ksb_say "trusted: a guest with them (boot 1)"
set +e
run "$R" > "$T/out-t" 2> "$T/err-t"; rc=$?
set -e
grep '^RESULT' "$T/out-t" || true
tail -n 5 "$T/err-t" >&2
ksb_check "trusted: ksb-run exit 0" '[ "$rc" = 0 ]'
ksb_check "trusted: the host directory in the guest" 'grep -aq "^RESULT loot $LOOT" "$T/out-t"'
ksb_check "trusted: the secret in the guest" 'grep -aq "^RESULT secret \[secret STOLEN\]\|^RESULT secret $STOLEN" "$T/out-t"'
ksb_check "trusted: selftest off" 'grep -aq "^RESULT selftest_off 1" "$T/out-t"'
ksb_check "trusted: repo and context outside the repository" \
	'grep -aq "^RESULT work other content" "$T/out-t" && grep -aq "^RESULT context ctx content" "$T/out-t"'
ksb_check "trusted: cpus from the file" 'grep -aq "^RESULT nproc 2" "$T/out-t"'

ksb_say "an edit makes it untrusted again"
echo "# an edit" >> "$R/.ksb/instance.conf"
rm -f "$T/mark/qemu-ran"
set +e
KSB_QEMU=$T/qemu run "$R" > /dev/null 2> "$T/err-e"; rc=$?
set -e
cat "$T/err-e" >&2
ksb_check "edited: exit 2, every key refused again" \
	'[ "$rc" = 2 ] && [ "$(grep -c "not allowed from an untrusted project file, changed since it was trusted" "$T/err-e")" = 10 ]'
ksb_check "edited: no instance dir, no QEMU" no_start
ksb_check "--list: changed" 'ctl trust --list | grep -q "changed: untrusted  $R/.ksb/instance.conf"'
ctl trust "$R" > /dev/null
ksb_check "re-trusted: print-config allows" \
	'run "$R" --print-config | grep -Eq "^share-ro +=.*allowed: trusted project file"'
ctl trust --revoke "$R" > /dev/null
mkdir -m 700 "$T/state2"
ctl trust --state-dir "$T/state2" "$R" > /dev/null
ksb_check "trust --state-dir: pinned where ksb-run --state-dir looks" \
	'run "$R" --state-dir "$T/state2" --print-config | grep -Eq "^share-ro +=.*allowed: trusted project file" &&
	 run "$R" --print-config | grep -Eq "^share-ro +=.*REFUSED: untrusted project file" &&
	 ctl trust --state-dir "$T/state2" --list | grep -q "trusted  *$R/.ksb/instance.conf"'
ksb_check "trust --state-dir: a relative directory is refused" \
	'! ctl trust --state-dir state2 "$R" 2>&1 | grep -q "trusted for"'
ksb_check "revoked: refused again" \
	'! KSB_QEMU=$T/qemu run "$R" > /dev/null 2>&1 && no_start'
ksb_check "--ignore-project-file: the file is not read" \
	'run "$R" --ignore-project-file --print-config | grep -Eq "^cpus += 1 +# default"'

ksb_say "unprivileged keys only: untrusted, they apply (boot 2)"
U=$T/plain
mkdir -p "$U/.ksb"
{ printf 'cpus = 2\nmemory = 448\n'; cmd; } > "$U/.ksb/instance.conf"
set +e
run "$U" > "$T/out-p" 2> "$T/err-p"; rc=$?
set -e
grep '^RESULT' "$T/out-p" || true
tail -n 5 "$T/err-p" >&2
ksb_check "unprivileged: ksb-run exit 0" '[ "$rc" = 0 ]'
ksb_check "unprivileged: cpus and command from the file" 'grep -aq "^RESULT nproc 2" "$T/out-p"'
ksb_check "unprivileged: memory from the file (448 MiB)" \
	'kb=$(sed -n "s/^RESULT memkb //p" "$T/out-p"); [ "$kb" -gt 300000 ] && [ "$kb" -le 458752 ]'
ksb_check "unprivileged: no host directory in the guest" \
	'grep -aq "^RESULT loot absent" "$T/out-p" && grep -aq "^RESULT loot_mounts 0" "$T/out-p"'
ksb_check "unprivileged: no secret in the guest" 'grep -aq "^RESULT secret absent" "$T/out-p"'
ksb_check "unprivileged: the variable in no guest environment" \
	'grep -aq "^ENV " "$T/out-p" && ! grep -aq "$STOLEN\|KSB_TRUST_STOLEN" "$T/out-p"'
ksb_check "unprivileged: the self-test ran" 'grep -aq "^RESULT selftest_off 0" "$T/out-p"'
ksb_check "no trace of the variable or the loot under the state dir" \
	'! grep -rqa -e "$STOLEN" -e "$LOOT" "$T/state"'

echo "# $((${pass:-0})) passed, $fails failed"
[ "$fails" = 0 ]
