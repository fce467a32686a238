#!/bin/bash
# `ksb-gatewayd -n' refuses what the daemon could not run with, naming the
# file and line: an unreadable hosts-file, a proxy-user with uid or gid 0,
# a duplicate setting.  No root needed, no network.
set -eu
B=${KSB_BUILDDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
mkdir -p "$T/policy.d"
printf 'profile a {\n    allow x.example.com\n}\n' > "$T/policy.d/a.policy"
fails=0 n=0
check() { n=$((n + 1)); if eval "$2"; then echo "ok $n - $1"; else echo "not ok $n - $1"; fails=$((fails + 1)); fi; }
printf 'policy = policy.d/*.policy\n' > "$T/good.conf"
check "a good configuration is OK" '"$B/ksb-gatewayd" -n -f "$T/good.conf" | grep -qx "configuration OK"'
printf 'policy = policy.d/*.policy\nhosts-file = %s/missing-hosts\nproxy-user = root\n' "$T" > "$T/bad.conf"
set +e
out=$("$B/ksb-gatewayd" -n -f "$T/bad.conf" 2>&1); rc=$?
set -e
echo "$out" | sed 's/^/# /'
check "exit status 1" '[ "$rc" = 1 ]'
check "missing hosts-file named with file:line" 'echo "$out" | grep -q "bad.conf:2: hosts-file: .*missing-hosts.*No such file"'
check "root proxy-user refused with file:line" 'echo "$out" | grep -q "bad.conf:3: proxy-user: .root. has uid or gid 0"'
echo "# $((n - fails)) passed, $fails failed"
[ "$fails" = 0 ]
