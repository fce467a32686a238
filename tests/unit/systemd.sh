#!/bin/bash
# systemd.sh: the systemd units in contrib/ (issue 17): `systemd-analyze
# verify' clean and `systemd-analyze security' at 3.1 or lower for
# ksb-gatewayd.service (3.0 until the run under a real systemd, issue 33,
# found the self-test's canaries need CAP_NET_BIND_SERVICE), at 4.7 or
# lower for ksb-run@.service (7.5 before that run).  Needs systemd-analyze (package systemd), not a
# running systemd: --offline.  Prints the figure.
set -eu
. "$(dirname "$0")/../lib.sh"
ksb_need systemd-analyze man	# man: verify checks Documentation=man:
S=${KSB_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
B=${KSB_BUILDDIR:-$S}
T=$(mktemp -d /tmp/ksbt-systemd.XXXXXX)
trap 'rm -rf "$T"' EXIT
fails=0
n=0
check() {
	n=$((n + 1))
	if eval "$2"; then echo "ok $n - $1"
	else echo "not ok $n - $1"; sed 's/^/#   /' "$T/out"; fails=$((fails + 1)); fi
}
# The units as installed, but with this build's programs and man pages
# (verify runs the ExecStart= checks and `man' for Documentation=).
mkdir -p "$T/man/man8" "$T/units"
for p in "$S"/man/*.[158]; do
	sec=${p##*.}
	mkdir -p "$T/man/man$sec"
	ln -s "$p" "$T/man/man$sec/"
done
for u in "$S"/contrib/*.service; do
	sed -e "s|/usr/sbin/ksb-gatewayd|$B/ksb-gatewayd|g" \
	    -e "s|/usr/bin/ksb-run|$B/ksb-run|g" \
	    -e "s|/usr/bin/ksbctl|$B/ksbctl/ksbctl|g" "$u" > "$T/units/${u##*/}"
done
for u in "$T"/units/*.service; do
	name=${u##*/}
	case $name in *@.service) v=$T/units/${name%@.service}@test.service
		cp "$u" "$v" ;; *) v=$u ;; esac
	MANPATH=$T/man systemd-analyze verify "$v" > "$T/out" 2>&1 && rc=0 || rc=$?
	check "systemd-analyze verify $name: clean" '[ "$rc" = 0 ] && ! [ -s "$T/out" ]'
done
# ksb-run@.service: the instance's file and name from the instance name.
check "ksb-run@.service runs /etc/ksb/instances/%i.conf as --name %i" \
	'grep -qx "ExecStart=$B/ksb-run -c /etc/ksb/instances/%i.conf --name %i" "$T/units/ksb-run@.service" && grep -qx "SuccessExitStatus=143" "$T/units/ksb-run@.service"'
systemd-analyze security --offline=true "$T/units/ksb-run@test.service" \
	> "$T/out" 2>&1 || true
rlevel=$(sed -n 's/.*Overall exposure level for .*: \([0-9.]*\) .*/\1/p' "$T/out")
echo "# systemd-analyze security ksb-run@.service: ${rlevel:-?}"
check "systemd-analyze security ksb-run@.service: $rlevel <= 4.7" \
	'[ -n "$rlevel" ] && awk -v l="$rlevel" "BEGIN { exit !(l <= 4.7) }"'
systemd-analyze security --offline=true "$T/units/ksb-gatewayd.service" \
	> "$T/out" 2>&1 || true
level=$(sed -n 's/.*Overall exposure level for .*: \([0-9.]*\) .*/\1/p' "$T/out")
echo "# systemd-analyze security ksb-gatewayd.service: ${level:-?}"
check "systemd-analyze security ksb-gatewayd.service: $level <= 3.1" \
	'[ -n "$level" ] && awk -v l="$level" "BEGIN { exit !(l <= 3.1) }"'
echo "1..$n"
[ "$fails" = 0 ]
