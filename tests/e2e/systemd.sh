#!/bin/bash
# e2e: the Debian package under a real systemd (issue 33).  A fresh Debian
# 12 root (debootstrap minbase plus systemd-sysv, dbus and the package's
# Depends, cached in /var/cache/ksb/sysdroot; each run uses a throwaway
# overlay of it) boots with systemd as PID 1 under systemd-nspawn --boot,
# in the test's own network namespace (ns GW of tests/lib.sh, so the TLS
# origin is the usual one in ns OR), with /dev/net/tun (and /dev/kvm when
# the host has one) bound in and CAP_NET_ADMIN kept.  nspawn, not a QEMU
# guest: it gives all the gateway needs (a network namespace of its own,
# the tun device, nftables, the capabilities its unit keeps) without a
# second level of TCG.  The freshly built .deb (contrib/deb-build.sh) is
# installed with dpkg as a user would, then, with the documented command
# (`systemctl enable --now ksb-gatewayd'): the gateway active; `systemctl
# reload' recorded (a policy_versions row); `journalctl -u ksb-gatewayd'
# shows the audit head lines; ksb-run from a shell inside (allowed 200,
# denied 403, rows); ksb-run@NAME from /etc/ksb/instances/NAME.conf, its
# lease resumed after a `kill -9' of the gateway's main process and
# systemd's restart, then `systemctl stop' clean; no seccomp or permission
# denial in the journal or the host's kernel log.  Prints the figures:
# unit start to active and to ready, reload time.  Root; skips (77)
# naming what is missing.
set -eu
. "$(dirname "$0")/../lib.sh"

ksb_need_root
ksb_need systemd-nspawn debootstrap dpkg-buildpackage nsenter git
git -C "$KSB_SRCDIR" rev-parse --git-dir >/dev/null 2>&1 ||
	ksb_skip "not a git checkout (contrib/deb-build.sh packages the tracked files)"
ksb_kernel
[ -d /sys/fs/cgroup/systemd ] || [ -f /sys/fs/cgroup/cgroup.controllers ] ||
	ksb_skip "no cgroup hierarchy systemd can run on under nspawn"
ksb_env
ksb_origin

# ---- the package and the root ------------------------------------------------
deb=$("$KSB_SRCDIR/contrib/deb-build.sh") || ksb_fail "the .deb did not build"
echo "# package: $deb"
cache=/var/cache/ksb/sysdroot
deps=$(dpkg-deb -f "$deb" Depends | tr ',' '\n' | sed 's/(.*//; s/|.*//; s/ //g' |
	grep -v '^$')
extra="systemd-sysv dbus iproute2 nftables curl sqlite3"
root_ok() {
	local p
	[ -x "$cache/lib/systemd/systemd" ] || return 1
	[ -z "$(find "$cache/.ksb-ready" -mtime +7 2>/dev/null)" ] || return 1
	[ -f "$cache/.ksb-ready" ] || return 1
	for p in $deps $extra; do
		dpkg-query --admindir="$cache/var/lib/dpkg" -W -f='${Status}\n' "$p" \
			2>/dev/null | grep -q ' installed$' || return 1
	done
}
exec {lk}> /var/cache/ksb/.sysdroot.lock
flock "$lk"
if ! root_ok; then
	mirror=$(sed -n 's/^URIs: *\(http[^ ]*\/debian\)$/\1/p
		s/^deb \(\[[^]]*\] \)\{0,1\}\(http[^ ]*\/debian\) .*/\2/p' \
		/etc/apt/sources.list /etc/apt/sources.list.d/* 2>/dev/null | head -n 1 || true)
	echo "# debootstrap bookworm into $cache (${mirror:=http://deb.debian.org/debian})"
	rm -rf --one-file-system "$cache.tmp"
	debootstrap --variant=minbase --include="$(echo $deps $extra | tr ' ' ,)" \
		bookworm "$cache.tmp" "$mirror" > "$T/debootstrap.log" 2>&1 ||
		{ tail -n 20 "$T/debootstrap.log"; ksb_fail "debootstrap failed"; }
	rm -rf "$cache.tmp"/var/cache/apt/archives/*.deb
	touch "$cache.tmp/.ksb-ready"
	rm -rf --one-file-system "$cache"
	mv "$cache.tmp" "$cache"
fi
R=$T/root
mkdir -p "$T/upper" "$T/work" "$R"
mount -t overlay overlay -o "lowerdir=$cache,upperdir=$T/upper,workdir=$T/work" "$R"
exec {lk}>&-	# the overlay holds the lower layer's files open, not the lock
umount_root() { mountpoint -q "$R" && umount -l "$R"; }
cp "$deb" "$R/root/ksb.deb"

# ---- boot ------------------------------------------------------------------------
# A host without systemd (this project's machines) has no bus to make
# the container's scope: --keep-unit; under systemd nspawn makes its own
# scope, delegated (that case was not run here).
reg=(--register=no --keep-unit)
[ -d /run/systemd/system ] && reg=(--register=no)
devs=(--bind=/dev/net/tun)
[ -c /dev/kvm ] && devs+=(--bind=/dev/kvm)
systemd-nspawn --boot "${reg[@]}" --quiet -D "$R" -M "ksbt-$$" \
	--network-namespace-path="/run/netns/$GW" "${devs[@]}" \
	--capability=CAP_NET_ADMIN \
	--bind-ro="$KSB_KERNEL:/opt/ksbt/vmlinuz" \
	--bind-ro="$KSB_MODULES:/opt/ksbt/modules" \
	--bind-ro="$T/share:/opt/ksbt/share" \
	--console=read-only < /dev/null > "$T/console.log" 2>&1 &
NSPAWN=$!
KSB_PIDS="$KSB_PIDS $NSPAWN"
stop_container() {
	# SIGRTMIN+4 to PID 1: systemd's poweroff; nspawn exits with it.
	[ -n "${L:-}" ] && kill -s RTMIN+4 "$L" 2>/dev/null
	ksb_wait_dead "$NSPAWN" 30 || kill -9 "$NSPAWN" 2>/dev/null
	umount_root
}
trap 'stop_container; ksb_cleanup' EXIT
leader() { L=$(pgrep -P "$NSPAWN" -x systemd | head -n 1); [ -n "$L" ]; }
ksb_until 60 leader || { cat "$T/console.log"; ksb_fail "no systemd in the container"; }
# A command in the container: its namespaces (not its cgroup or
# capabilities: those are the units' business, checked below).
CT=(nsenter -t "$L" -m -u -i -n -p -- env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin)
ct() { "${CT[@]}" "$@"; }
booted() { ct systemctl is-system-running 2>/dev/null | grep -Eqx 'running|degraded'; }
ksb_until 120 booted || { tail -n 30 "$T/console.log"; ksb_fail "the container did not boot"; }
ksb_check "systemd is PID 1 and the system is running (not degraded)" \
	'[ "$(ct systemctl is-system-running)" = running ]'

# ---- install as a user would -----------------------------------------------------
ct dpkg -i /root/ksb.deb > "$T/dpkg.log" 2>&1 || { cat "$T/dpkg.log"; ksb_fail "dpkg -i failed"; }
ksb_check "installed, not enabled, not started (README.Debian)" \
	'[ "$(ct systemctl is-enabled ksb-gatewayd)" = disabled ] && ! ct systemctl -q is-active ksb-gatewayd'
# The test's site: its hosts file, no resolver, the kernel bound in, a
# profile for the origin (an RFC 1918 address, screened otherwise).
cat >> "$R/etc/ksb/ksb.conf" <<-CONF
hosts-file = /etc/ksb/hosts
resolver = 127.0.0.1:53
kernel = /opt/ksbt/vmlinuz
modules-dir = /opt/ksbt/modules
template = off
CONF
cp "$T/hosts" "$R/etc/ksb/hosts"
cat > "$R/etc/ksb/policy.d/test.policy" <<-POL
profile test {
    allow allowed.test
    allow-address 10.78.0.0/24
}
POL
db=/var/lib/ksb/audit.db
sql() { ct sqlite3 -bail -cmd '.timeout 10000' "$db" "$1"; }
t0=$(date +%s%N)
ct systemctl enable --now ksb-gatewayd > "$T/enable.log" 2>&1 || cat "$T/enable.log"
t1=$(date +%s%N)
ready() { ct journalctl -u ksb-gatewayd -o cat | grep -q '^ksb-gatewayd: ready: '; }
ksb_until 60 ready || true
t2=$(date +%s%N)
echo "# systemctl enable --now to active: $(((t1 - t0) / 1000000)) ms, to ready: $(((t2 - t0) / 1000000)) ms"
ksb_check "systemctl enable --now: active and enabled" \
	'ct systemctl -q is-active ksb-gatewayd && [ "$(ct systemctl is-enabled ksb-gatewayd)" = enabled ]'
ksb_check "the gateway says ready (journal)" ready
ksb_check "its bridge and tables are in the container's namespace" \
	'ip -n "$GW" link show ksb0 >/dev/null && ip netns exec "$GW" nft list table inet ksb >/dev/null'

# ---- reload -------------------------------------------------------------------------
n0=$(sql "SELECT count(*) FROM policy_versions")
echo "    allow reload.test" > "$T/x" && sed -i "/allow allowed.test/r $T/x" "$R/etc/ksb/policy.d/test.policy"
t0=$(date +%s%N)
reload_rc=0
ct systemctl reload ksb-gatewayd > "$T/reload.log" 2>&1 || reload_rc=$?
[ "$reload_rc" = 0 ] || ct journalctl -u ksb-gatewayd -o short-monotonic -n 30 >> "$T/reload.log" 2>&1
reloaded() { [ "$(sql "SELECT count(*) FROM policy_versions")" -gt "$n0" ]; }
ksb_until 30 reloaded || true
t1=$(date +%s%N)
echo "# systemctl reload to the policy_versions row: $(((t1 - t0) / 1000000)) ms"
ksb_check "systemctl reload: exit 0" '[ "$reload_rc" = 0 ] || { cat "$T/reload.log"; false; }'
ksb_check "systemctl reload: a policy_versions row, ok" \
	'[ "$(sql "SELECT ok FROM policy_versions ORDER BY id DESC LIMIT 1")" = 1 ] && reloaded'

# ---- ksb-run from a shell inside ------------------------------------------------------
CURL='curl -sS -o /dev/null --max-time 30 --cacert /ksb-test/ca.pem'
set +e
timeout 240 "${CT[@]}" ksb-run --profile test --share-ro /opt/ksbt/share:/ksb-test -- /bin/sh -c \
	"$CURL -w %{http_code} https://allowed.test/index.txt; echo; $CURL -w %{http_connect} https://denied.test/index.txt; echo" \
	> "$T/run.out" 2> "$T/run.err"
rc=$?
set -e
cat "$T/run.out"
ksb_check "ksb-run inside: exit 0 ($rc)" '[ "$rc" = 0 ] || { cat "$T/run.err"; false; }'
ksb_check "allowed.test: 200" '[ "$(sed -n 1p "$T/run.out")" = 200 ]'
ksb_check "denied.test: the gateway's 403" '[ "$(tail -n 1 "$T/run.out")" = 403 ]'
ksb_check "audit rows: an allow for allowed.test, a deny for denied.test" \
	'[ "$(sql "SELECT count(*) FROM connections WHERE host = '"'allowed.test'"' AND decision = '"'allow'"'")" -ge 1 ] &&
	 [ "$(sql "SELECT count(*) FROM connections WHERE host = '"'denied.test'"' AND decision = '"'deny'"'")" -ge 1 ]'

# ---- ksb-run@NAME, the gateway killed, stop ----------------------------------------------
mkdir -p "$R/etc/ksb/instances"
# No repo: the mirror's file system is a loop device, and nspawn gives
# the container none (the mirror under a unit is not run here).
cat > "$R/etc/ksb/instances/svc1.conf" <<-CONF
profile = test
command = /bin/sleep 600
CONF
ct systemctl start ksb-run@svc1 || true
started() { ct journalctl -u ksb-run@svc1 -o cat | grep -q 'instance svc1: command started'; }
ksb_until 240 started || true
ksb_check "ksb-run@svc1: active, the command started" 'ct systemctl -q is-active ksb-run@svc1 && started'
gw1=$(ct systemctl show -P MainPID ksb-gatewayd)
ct /bin/sh -c "kill -9 $gw1"
restarted() {
	local p
	p=$(ct systemctl show -P MainPID ksb-gatewayd)
	[ "$p" != 0 ] && [ "$p" != "$gw1" ] && ct systemctl -q is-active ksb-gatewayd
}
resumed() { ct journalctl -u ksb-run@svc1 -o cat | grep -q 'instance svc1: lease resumed with ksb-gatewayd'; }
ksb_until 60 restarted || true
ksb_check "kill -9 of the gateway: systemd restarted it (NRestarts $(ct systemctl show -P NRestarts ksb-gatewayd))" \
	'restarted && [ "$(ct systemctl show -P NRestarts ksb-gatewayd)" -ge 1 ]'
ksb_until 60 resumed || true
ksb_check "ksb-run@svc1 resumed its lease" resumed
qemu_up() { pgrep -f "ksb.id=svc1( |,|$)" > /dev/null; }
ksb_check "its QEMU runs" qemu_up
t0=$(date +%s%N)
ct systemctl stop ksb-run@svc1
t1=$(date +%s%N)
echo "# systemctl stop ksb-run@svc1: $(((t1 - t0) / 1000000)) ms"
ksb_check "systemctl stop: inactive, result success (exit 143 is success)" \
	'[ "$(ct systemctl show -P ActiveState ksb-run@svc1)" = inactive ] && [ "$(ct systemctl show -P Result ksb-run@svc1)" = success ]'
ksb_check "no QEMU left" '! qemu_up'
ksb_check "the lease is gone, the tap too" \
	'! ct ksbctl list 2>/dev/null | grep -q "svc1.*running" && [ -z "$(ip -n "$GW" -o link show type tun 2>/dev/null)" ]'

# ---- nothing was refused by a unit's sandbox ------------------------------------------------
ct journalctl -b -o short > "$T/journal.txt" 2>&1 || true
# The ksb units' own lines and systemd's about them (the root's other
# services, dbus-daemon's fd limit in a container, are not ksb's).
ct journalctl -b -o short -u ksb-gatewayd -u 'ksb-run@*' > "$T/units.txt" 2>&1 || true
ksb_check "journalctl -u ksb-gatewayd shows the audit head lines" \
	'grep -Eq "ksb-gatewayd: audit head [0-9]+:[0-9a-f]{64}$" "$T/units.txt"'
ksb_check "the ksb units' journal has no seccomp or permission denial" \
	'! grep -Ei "seccomp|SIGSYS|bad system call|permission denied|operation not permitted|audit.*denied|status=(31|218|226|228|237)/" "$T/units.txt"'
ksb_check "the host kernel logged no seccomp kill for the container" \
	'! dmesg 2>/dev/null | grep -E "type=1326|audit: .*seccomp" | grep -q "ksb\|qemu"'
ct systemd-analyze security ksb-run@svc1.service > "$T/security.txt" 2>&1 || true
echo "# systemd-analyze security ksb-run@svc1 (running system):" \
	"$(sed -n 's/.*Overall exposure level for .*: \([0-9.]*\) .*/\1/p' "$T/security.txt")"
ct systemd-analyze security ksb-gatewayd.service > "$T/security.txt" 2>&1 || true
echo "# systemd-analyze security ksb-gatewayd (running system):" \
	"$(sed -n 's/.*Overall exposure level for .*: \([0-9.]*\) .*/\1/p' "$T/security.txt")"
if [ "${fails:-0}" != 0 ]; then
	echo "--- journal (tail)"; tail -n 60 "$T/journal.txt"
fi
[ "${fails:-0}" = 0 ]
