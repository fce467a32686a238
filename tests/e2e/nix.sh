#!/bin/bash
# e2e Nix host test (real QEMU guest behind a real ksb-gatewayd, own
# namespaces and temp dir; ksb-run(1), NIX HOSTS): a Nix store the test
# makes with Debian's nix-bin, no network (a path added with nix-store
# --add, derivations from builtins with /bin/sh as the builder), under a
# root of its own (nix-root in ksb.conf: a chroot store, so the machine's
# /nix is never touched).  One named instance, three boots.  In the guest:
# the host's paths are valid (nix-store --verify-path, -q); what the host
# built is not built again; a derivation on host inputs builds only its
# own output, in the guest's upper layer; a registration the host's
# database holds only in its WAL is in the snapshot (no torn copy).
# After a restart the instance finds its build again and the host's
# path added meanwhile, and with ksb.conf's nix-conf naming a signed cache
# (the test origin) substitutes through the gateway, which it cannot by
# default; the host's store and database are byte for byte
# what they were; ksbctl prune removes the instance's Nix state.  Needs
# root, QEMU, nix-bin and a guest kernel (exit 77).
set -eu
. "$(dirname "$0")/../lib.sh"

ksb_need_root
ksb_need qemu-system-x86_64 /usr/sbin/mkfs.ext4 nix-store nix-build nix-instantiate python3 mkfifo
ksb_need_built ksb-run ksb-guest-init ksb-gatewayd ksbctl/ksbctl
ksb_kernel
# A machine without /nix keeps none (every Nix command here has a store
# of the test's own).
[ -e /nix ] && NIX_BEFORE=present || NIX_BEFORE=absent
ksb_env
R=$T/nixroot # the store is $R/nix/store, its database $R/nix/var/nix/db
mkdir -p "$R/nix/store" # a nix-root without its store is refused
printf 'nix-root = %s\nca-file = %s/share/ca.pem\n' "$R" "$T" >> "$T/ksb.conf"
ksb_gateway
ksb_origin

fails=0
run() { timeout 300 ip netns exec "$GW" "$KSB_BUILDDIR/ksb-run" -f "$T/ksb.conf" "$@"; }
ctl() { timeout 120 "$KSB_BUILDDIR/ksbctl/ksbctl" -f "$T/ksb.conf" "$@"; }
# hnix CMD...: the host's Nix on the test's own store only.  A chroot
# store builds in Nix's sandbox (its chroot has no /bin/sh otherwise).
mkdir -p "$T/nixhome" "$T/nixconf" "$T/expr"
hnix() {
	env -u NIX_PATH NIX_REMOTE="$R" HOME="$T/nixhome" \
		NIX_CONF_DIR="$T/nixconf" XDG_CACHE_HOME="$T/nixhome/cache" \
		NIX_CONFIG=$'build-users-group =\nsubstituters =\nsandbox = true\nsandbox-paths = /bin /usr /lib /lib64' \
		"$@"
}
# The store and database, every byte, mode, owner and time, but for the
# database's -wal and -shm (wal_state) and its directory's time: an
# SQLite reader (the snapshot's, SQLITE_OPEN_READONLY) may leave an empty
# -wal and a -shm there, as any reader of a WAL database does.
state_hash() {
	(cd "$R/nix" && find store var/nix/db \( -name db.sqlite-wal -o \
		-name db.sqlite-shm -o -path var/nix/db \) -prune -o \
		-printf '%p %y %m %U %G %s %T@ %l\n' | sort &&
		stat -c '%n %F %a %u %g' var/nix/db &&
		find store var/nix/db -type f ! -name 'db.sqlite-wal' \
			! -name 'db.sqlite-shm' -print0 | sort -z | xargs -0 sha256sum) |
		tee "$T/state.$1" | sha256sum | cut -d' ' -f1
}
# The WAL's bytes (the holder below keeps one), and what a reader may
# leave: the -wal and the -shm with the database's owner and mode
# (SQLite gives them its owner when it runs as root).
wal_state() {
	local d=$R/nix/var/nix/db f
	sha256sum < "$d/db.sqlite-wal"
	for f in "$d/db.sqlite-wal" "$d/db.sqlite-shm"; do
		[ ! -e "$f" ] || [ "$(stat -c %u:%g:%a "$f")" = "$(stat -c %u:%g:%a "$d/db.sqlite")" ] ||
			echo "$f: $(stat -c %u:%g:%a "$f")"
	done
}

ksb_say "a binary cache the guest may reach through the gateway only"
# A path of another store, signed into a file cache the test origin
# serves (https://allowed.test/cache): not in the host's store.
CR=$T/cacheroot
echo "from the cache $$" > "$T/e.txt"
E=$(env NIX_REMOTE="$CR" HOME="$T/nixhome" NIX_CONF_DIR="$T/nixconf" \
	NIX_CONFIG=$'build-users-group =\nsubstituters =' nix-store --add "$T/e.txt")
# (nix-store opens its store first, whatever the operation: never /nix.)
env NIX_REMOTE="$CR" HOME="$T/nixhome" NIX_CONF_DIR="$T/nixconf" \
	nix-store --generate-binary-cache-key ksbt-cache-1 "$T/cache.sk" "$T/cache.pk"
env NIX_REMOTE="$CR" HOME="$T/nixhome" NIX_CONF_DIR="$T/nixconf" \
	NIX_CONFIG=$'build-users-group =\nsubstituters =\nexperimental-features = nix-command' \
	nix copy --to "file://$T/www/cache?secret-key=$T/cache.sk" "$E" 2>/dev/null
chmod -R go+rX "$T/www"
ksb_check "the cache has it" '[ -f "$T/www/cache/$(basename "$E" | cut -d- -f1).narinfo" ]'
printf 'substituters = https://allowed.test/cache\ntrusted-public-keys = %s\n' \
	"$(cat "$T/cache.pk")" > "$T/nix-extra.conf"

ksb_say "the host's store: a path added, a derivation built"
echo "host input $$" > "$T/a.txt"
A=$(hnix nix-store --add "$T/a.txt")
cat > "$T/expr/d1.nix" <<-'NIX'
	let a = builtins.storePath "@A@"; in
	builtins.derivation {
	  name = "ksbt-host-built";
	  system = builtins.currentSystem;
	  builder = "/bin/sh";
	  args = [ "-c" "read x < ${a}; echo \"$x, host-built from ${a}\" > $out" ];
	}
NIX
cat > "$T/expr/d2.nix" <<-'NIX'
	let d1 = import ./d1.nix; a = builtins.storePath "@A@"; in
	builtins.derivation {
	  name = "ksbt-guest-built";
	  system = builtins.currentSystem;
	  builder = "/bin/sh";
	  # The builder's PATH is unset: shell builtins only.
	  args = [ "-c" "{ read x < ${d1}; echo \"$x\"; read y < ${a}; echo \"$y\"; echo guest-built; } > $out" ];
	}
NIX
sed -i "s|@A@|$A|" "$T/expr/d1.nix" "$T/expr/d2.nix"
D1=$(hnix nix-build --no-out-link "$T/expr/d1.nix" 2>"$T/hb1")
ksb_check "the host built its derivation" '[ -n "$D1" ] && [ -f "$R$D1" ]' ||
	cat "$T/hb1" >&2
D2DRV=$(hnix nix-instantiate --readonly-mode "$T/expr/d2.nix" 2>/dev/null)
ksb_check "the guest's derivation is not in the host's store" '[ ! -e "$R$D2DRV" ]'
chmod -R go+rX "$T/expr"
HASH_A=$(hnix nix-store -q --hash "$A")

ksb_say "a path whose registration is still in the database's WAL"
# A connection held open, as a Nix daemon holds it, with no checkpoint
# of its own: the next registration stays in db.sqlite-wal, and a copy of
# db.sqlite alone (a torn copy) would not have it.
DB=$R/nix/var/nix/db/db.sqlite
mkfifo "$T/hold"
python3 -c 'import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
c.execute("PRAGMA wal_autocheckpoint = 0")
c.execute("SELECT count(*) FROM ValidPaths").fetchall()
print("open", flush=True)
sys.stdin.read()' "$DB" < "$T/hold" > "$T/holder.out" &
HOLDER=$!
KSB_PIDS="$KSB_PIDS $HOLDER"
exec {hold}>"$T/hold"
holder_open() { grep -qx open "$T/holder.out"; }
ksb_until 20 holder_open || ksb_fail "the database's holder did not start"
echo "in the WAL only $$" > "$T/b.txt"
B=$(hnix nix-store --add "$T/b.txt")
cp "$DB" "$T/torn.sqlite"
ksb_check "db.sqlite alone lacks it (it is in the WAL)" \
	'[ -s "$DB-wal" ] && [ "$(sqlite3 "$T/torn.sqlite" "SELECT count(*) FROM ValidPaths WHERE path = '"'$B'"'")" = 0 ]'
H0=$(state_hash 0)
W0=$(wal_state)

# The guest's part; $U is the store's upper layer on the instance disk.
GUEST1='U=/run/ksb/disk/nix/store-upper
nix-store --verify-path '"$A"' && echo verify-a-ok
nix-store --verify-path '"$D1"' && echo verify-d1-ok
nix-store --verify-path '"$B"' && echo verify-b-ok
nix-store -q --references '"$D1"' | sed "s/^/refs-d1 /"
nix-store -q --hash '"$A"' | sed "s/^/hash-a /"
o1=$(nix-build --no-out-link /ksbtest/d1.nix 2>b1); echo "out1 $o1"
grep -q "will be built" b1 && echo d1-rebuilt
o2=$(nix-build --no-out-link /ksbtest/d2.nix 2>b2); echo "out2 $o2"
sed "s/^/b2 /" b2; sed "s/^/content2 /" "$o2"
[ -e "$U/${o2#/nix/store/}" ] && echo out2-in-upper
[ -e "$U/${o1#/nix/store/}" ] || echo out1-not-in-upper
[ -w /nix/var/nix/db/db.sqlite ] && echo db-writable
grep -q "^substituters =$" /etc/nix/nix.conf && echo conf-no-substituters
touch '"$A"' 2>/dev/null; [ -w '"$A"' ] || echo host-path-read-only
nix-store -r '"$E"' >/dev/null 2>&1 || echo no-substituter-no-path
echo guest1-done'

ksb_say "first boot: the host's paths, one build"
run --name nx --disk-size 1G --share-ro "$T/expr:/ksbtest" -- /bin/sh -c "$GUEST1" \
	</dev/null >"$T/out1" 2>"$T/err1" || true
cat "$T/out1"; cat "$T/err1" >&2
O2=$(sed -n 's/^out2 //p' "$T/out1")
ksb_check "the guest ran to its end" 'grep -qx guest1-done "$T/out1"'
ksb_check "nix-store --verify-path: the host's added path is valid" 'grep -qx verify-a-ok "$T/out1"'
ksb_check "nix-store --verify-path: the host's build is valid" 'grep -qx verify-d1-ok "$T/out1"'
ksb_check "the snapshot has the registration still in the WAL" 'grep -qx verify-b-ok "$T/out1"'
ksb_check "nix-store -q: the host's references and hash" \
	'grep -qx "refs-d1 $A" "$T/out1" && grep -qx "hash-a $HASH_A" "$T/out1"'
ksb_check "the host's build is not built again" \
	'grep -qx "out1 $D1" "$T/out1" && ! grep -qx d1-rebuilt "$T/out1" && grep -qx out1-not-in-upper "$T/out1"'
ksb_check "only the new derivation is built" \
	'grep -q "^b2 .*will be built" "$T/out1" && [ "$(grep -c "^b2   /nix/store/.*\.drv$" "$T/out1")" = 1 ] &&
	 grep -q "^b2   $D2DRV$" "$T/out1"'
ksb_check "its output, on host inputs, in the upper layer" \
	'[ -n "$O2" ] && grep -qx out2-in-upper "$T/out1" &&
	 [ "$(sed -n "s/^content2 //p" "$T/out1")" = "$(printf "host input %s, host-built from %s\nhost input %s\nguest-built" $$ "$A" $$)" ]'
ksb_check "the database is the agent's; nix.conf has no substituter" \
	'grep -qx db-writable "$T/out1" && grep -qx conf-no-substituters "$T/out1"'
ksb_check "a host path stays read-only" 'grep -qx host-path-read-only "$T/out1"'
ksb_check "no substituter by default: the cache's path cannot be had" \
	'grep -qx no-substituter-no-path "$T/out1" && ksb_row_is 0 "host = '"'allowed.test'"'"'
ksb_check "the host's store and database are as they were" '[ "$(state_hash 1)" = "$H0" ]'
diff "$T/state.0" "$T/state.1" || true
ksb_check "the WAL as it was, the -wal and -shm the database's" '[ "$(wal_state)" = "$W0" ]'
ksb_check "nothing of the guest's in the host's store" '[ ! -e "$R$O2" ] && [ ! -e "$R$D2DRV" ]'

ksb_say "restart: the instance finds its own build, and the host's new path"
echo "added after the first boot $$" > "$T/c.txt"
C=$(hnix nix-store --add "$T/c.txt")
cat > "$T/expr/d3.nix" <<-'NIX'
	let c = builtins.storePath "@C@"; in
	builtins.derivation {
	  name = "ksbt-host-later";
	  system = builtins.currentSystem;
	  builder = "/bin/sh";
	  args = [ "-c" "read x < ${c}; echo \"$x, from ${c}\" > $out" ];
	}
NIX
sed -i "s|@C@|$C|" "$T/expr/d3.nix"
chmod go+r "$T/expr/d3.nix"
D3=$(hnix nix-build --no-out-link "$T/expr/d3.nix" 2>"$T/hb3")
D3DRV=$(hnix nix-store -q --deriver "$D3")
printf 'nix-conf = %s/nix-extra.conf\n' "$T" >> "$T/ksb.conf"
H1=$(state_hash 1b)
W1=$(wal_state)
GUEST2='nix-store --verify-path '"$O2"' && echo verify-o2-ok
nix-store --verify-path '"$C"' && echo verify-c-ok
nix-store --verify-path '"$A"' && echo verify-a-ok
nix-store --verify-path '"$D3"' && echo verify-d3-ok
nix-store -q --references '"$D3"' | sed "s/^/refs-d3 /"
nix-store -q --deriver '"$D3"' | sed "s/^/deriver-d3 /"
o3=$(nix-build --no-out-link /ksbtest/d3.nix 2>b3); echo "out3 $o3"
nix-store -r '"$E"' >/dev/null 2>e && read x < '"$E"' && echo "substituted $x"
sed "s/^/subst-err /" e
grep -q "will be built" b3 && echo d3-rebuilt
o2=$(nix-build --no-out-link /ksbtest/d2.nix 2>b2); echo "again $o2"
grep -q "will be built" b2 && echo d2-rebuilt
mv /nix/var/nix/db /nix/var/nix/db.old && ln -s /etc /nix/var/nix/db &&
	ln -s / /nix/var/nix/gcroots-link && echo planted
echo guest2-done'
run --name nx --share-ro "$T/expr:/ksbtest" -- /bin/sh -c "$GUEST2" \
	</dev/null >"$T/out2" 2>"$T/err2" || true
cat "$T/out2"; cat "$T/err2" >&2
ksb_check "its own build is valid after the restart" \
	'grep -qx guest2-done "$T/out2" && grep -qx verify-o2-ok "$T/out2"'
ksb_check "and not built again" 'grep -qx "again $O2" "$T/out2" && ! grep -qx d2-rebuilt "$T/out2"'
# new-paths' paths: each record is path, hash, size, deriver, N, N refs.
new_paths() {
	awk 's == 0 { print; s = 1; next } s < 4 { s++; next }
	     s == 4 { n = $0 + 0; s = n > 0 ? 5 : 0; next }
	     s == 5 { if (--n == 0) s = 0 }' "$T/state/instances/nx/nix-host/new-paths" | sort
}
ksb_check "the snapshot's new paths: the ones the host made since the first boot" \
	'[ "$(new_paths)" = "$(printf "%s\n" "$C" "$D3" "$D3DRV" | sort)" ]'
ksb_check "the host's paths since are valid in the kept database" \
	'grep -qx verify-c-ok "$T/out2" && grep -qx verify-a-ok "$T/out2" && grep -qx verify-d3-ok "$T/out2"'
ksb_check "... with their references and deriver, not built again" \
	'grep -qx "refs-d3 $C" "$T/out2" && grep -qx "deriver-d3 $D3DRV" "$T/out2" &&
	 grep -qx "out3 $D3" "$T/out2" && ! grep -qx d3-rebuilt "$T/out2"'
ksb_check "nix-conf's cache: the path substituted through the gateway" \
	'grep -qx "substituted from the cache $$" "$T/out2" &&
	 ksb_rows_ge 1 "instance = '"'nx'"' AND host = '"'allowed.test'"' AND decision = '"'allow'"'"'
ksb_check "the host's store and database are still as they were" \
	'[ "$(state_hash 2)" = "$H1" ] && [ "$(wal_state)" = "$W1" ]'
diff "$T/state.1b" "$T/state.2" || true
exec {hold}>&-
ksb_wait_dead "$HOLDER" 20

ksb_say "the agent's own /nix/var at the next boot: a symlink is never followed"
# The agent (uid 1000) owns /nix/var on its disk; init, as root, must not
# follow what it left there (audit F1: its db directory a link to /etc
# gave /etc to the agent at the next start).
ksb_check "the agent planted /nix/var/nix/db -> /etc" 'grep -qx planted "$T/out2"'
GUEST3='stat -c "etc %u %a" /etc; stat -c "root %u" /
[ -e /etc/db.sqlite ] && echo etc-has-db; [ -e /etc/schema ] && echo etc-has-schema
getent passwd agent | cut -d: -f3 | sed "s/^/agent-uid /"; id -u | sed "s/^/id /"
echo guest3-done'
run --name nx -- /bin/sh -c "$GUEST3" </dev/null >"$T/out3" 2>"$T/err3" || true
cat "$T/out3"; cat "$T/err3" >&2
ksb_check "the command still ran" 'grep -qx guest3-done "$T/out3"'
ksb_check "/ and /etc are root's, as they were" \
	'grep -qx "etc 0 755" "$T/out3" && grep -qx "root 0" "$T/out3"'
ksb_check "nothing written into /etc through the link" \
	'! grep -q "^etc-has" "$T/out3"'
ksb_check "the agent is still uid 1000" \
	'grep -qx "agent-uid 1000" "$T/out3" && grep -qx "id 1000" "$T/out3"'
ksb_check "the refusal is said (a read-only store this boot)" \
	'grep -q "nix: " "$T/err3"'

ksb_say "ksbctl prune removes the instance's Nix state"
ksb_check "its snapshot and disk were there" \
	'[ -f "$T/state/instances/nx/nix-host/db.sqlite" ] && [ -f "$T/state/instances/nx/disk.img" ]'
ctl prune > "$T/prune" 2>&1 || true
cat "$T/prune"
ksb_check "gone with the instance" '[ ! -e "$T/state/instances/nx" ]'

ksb_say "nix-root: a bad value is an error naming it"
printf 'nix-root = relative/dir\n' >> "$T/ksb.conf"
ksb_check "ksb-run refuses it, file:line" \
	'! "$KSB_BUILDDIR/ksb-run" -f "$T/ksb.conf" --print-config > /dev/null 2> "$T/e" &&
	 grep -q "ksb.conf:[0-9]*: nix-root: .relative/dir. is neither none nor an absolute path" "$T/e"'

[ "$NIX_BEFORE" = present ] ||
	ksb_check "the machine still has no /nix" '[ ! -e /nix ]'

[ "$fails" = 0 ] || ksb_fail "$fails check(s) failed"
echo "PASS: nix host store in the guest"
