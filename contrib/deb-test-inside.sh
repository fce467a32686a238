#!/bin/bash
# contrib/deb-test-inside.sh: run by contrib/deb-test.sh as /tmp/inside.sh
# in a throwaway Debian 12 root (its own mount, pid and network
# namespaces), with the package at /tmp/ksb.deb.  Prints one line per
# check; exits 1 if any failed.
set -u
fails=0 n=0
check() {
	n=$((n + 1))
	if eval "$2" > /tmp/check.out 2>&1; then echo "ok $n - $1"
	else echo "not ok $n - $1"; sed 's/^/#   /' /tmp/check.out; fails=$((fails + 1)); fi
}
ip link set lo up
# The Debian policy-rc.d convention: no service starts in this root.
printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
chmod 755 /usr/sbin/policy-rc.d

check "dpkg -i installs it, asking nothing" 'dpkg -i /tmp/ksb.deb'
check "binaries are there" 'command -v ksb-gatewayd ksb-run ksbctl ksb-fetch-kernel'
check "man pages are there" '[ -f /usr/share/man/man8/ksb-gatewayd.8.gz ] && [ -f /usr/share/man/man5/ksb.conf.5.gz ]'
check "/etc/ksb files are conffiles" \
	'dpkg-query -W -f="\${Conffiles}\n" ksb | grep -q "/etc/ksb/ksb.conf " && dpkg-query -W -f="\${Conffiles}\n" ksb | grep -q "/etc/ksb/policy.d/default.policy "'
check "the unit is installed" '[ -f /lib/systemd/system/ksb-gatewayd.service ]'
check "system user _ksbproxy, no shell" \
	'[ "$(getent passwd _ksbproxy | cut -d: -f7)" = /usr/sbin/nologin ] && [ "$(id -u _ksbproxy)" -lt 1000 ]'
check "system group ksb" '[ "$(getent group ksb | cut -d: -f3)" -lt 1000 ]'
check "/var/lib/ksb 0750 root:ksb" '[ "$(stat -c "%a %U %G" /var/lib/ksb)" = "750 root ksb" ]'
check "/var/cache/ksb 0755 root:root" '[ "$(stat -c "%a %U %G" /var/cache/ksb)" = "755 root root" ]'
check "/etc/ksb/credentials is root's, 0700" \
	'[ "$(stat -c %a:%U /etc/ksb/credentials)" = 700:root ]'
check "ksb.conf names the control group" 'grep -qx "control-group = ksb" /etc/ksb/ksb.conf'
check "no kernel was downloaded" '! ls /var/cache/ksb/kernel/boot/vmlinuz-* 2>/dev/null'
check "ksb-gatewayd -n" 'ksb-gatewayd -n'
check "ksbctl policy check" 'ksbctl policy check'

# The gateway as an admin would start it without systemd.
mkdir -p /run/ksb
ksb-gatewayd -d > /tmp/gw.log 2>&1 &
gw=$!
for i in $(seq 1 300); do
	grep -q '^ksb-gatewayd: ready: ' /tmp/gw.log && break
	kill -0 "$gw" 2>/dev/null || break
	sleep 0.1
done
check "the gateway starts: bridge ksb0, tables inet ksb and bridge ksb" \
	'grep -q "^ksb-gatewayd: ready: " /tmp/gw.log && ip link show ksb0 && nft list table inet ksb >/dev/null && nft list table bridge ksb >/dev/null'
check "ksbctl list reaches it" 'ksbctl list'
check "dpkg -r removes it" 'dpkg -r ksb'
wait "$gw" 2>/dev/null
check "no ksb process is left" '! pgrep -a ksb'
check "no bridge is left" '! ip link show ksb0 2>/dev/null'
check "no table is left" '[ -z "$(nft list tables 2>&1 | grep ksb)" ]'
check "the conffiles stay after remove" '[ -f /etc/ksb/ksb.conf ]'
check "dpkg --purge purges it" 'dpkg --purge ksb'
check "no state is left" '[ ! -e /var/lib/ksb ] && [ ! -e /var/cache/ksb ] && [ ! -e /etc/ksb ]'
check "user and group are gone" '! getent passwd _ksbproxy && ! getent group ksb'
echo "1..$n"
[ "$fails" = 0 ]
