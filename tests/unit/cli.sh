#!/bin/bash
# The command line as a new user meets it: -h/--help everywhere (exit 0),
# unknown options and words named with the `ksbctl <cmd>:' prefix (exit
# 2), `policy test' deciding as the proxy does (bracketed IPv6 literals),
# a missing ksb.conf said so, `reload' showing the gateway's refusal, and
# `list' falling back to the gateway's LIST when the instance dirs are
# unreadable.  No root needed (the last part runs as nobody under root).
set -u
B=${KSB_BUILDDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
K="$B/ksbctl/ksbctl"
T=$(mktemp -d)
srv=
trap '[ -n "$srv" ] && kill "$srv" 2>/dev/null; rm -rf "$T"' EXIT
chmod 755 "$T"
fails=0 n=0
check() {
	n=$((n + 1))
	if eval "$2"; then echo "ok $n - $1"; else
		echo "not ok $n - $1"; fails=$((fails + 1))
		sed 's/^/#   /' "$T/out" "$T/err" 2>/dev/null
	fi
}
run() { "$@" > "$T/out" 2> "$T/err"; echo $? > "$T/rc"; }
rc() { [ "$(cat "$T/rc")" = "$1" ]; }
export KSB_CONF="$T/none/ksb.conf"

run "$K" --help
check "ksbctl --help: usage, exit 0" 'rc 0 && grep -q "^usage: ksbctl" "$T/out"'
run "$K" --bogus
check "ksbctl --bogus named" "rc 2 && grep -qF \"ksbctl: unknown option \\\`--bogus'\" \"\$T/err\""
run "$K" prompt --key 'a b' x1 hello
check "ksbctl prompt: a bad --key named before anything is sent" \
	"rc 2 && grep -qF \"ksbctl prompt: --key \\\`a b'\" \"\$T/err\""
run "$K" -h
check "usage lists prompt, logs, fetch/audit options" \
	'for w in "prompt ID" "logs ID" --max-pack-size "--timeout SECONDS" \
	    "verify \[--head SEQ:HASH" "--until T\]$" "\[--denied\] \[--json\]"; do
		grep -q -e "$w" "$T/out" || exit 1; done'
# The man page's COMMANDS lists exactly the forms of ksbctl's command
# table (ksbctl help --commands): the leading lowercase words of each
# .TP tag, troff escapes removed.
S=${KSB_SRCDIR:-$B}
"$K" help --commands | cut -f1 | sort > "$T/table"
awk '/^\.SH COMMANDS/ { on = 1; next } /^\.SH/ { on = 0 }
    on && tp { print; tp = 0 } on && /^\.TP/ { tp = 1 }' "$S/man/ksbctl.1" |
    sed -e 's/\\f[BIR]//g' -e 's/\\%//g' -e 's/\\-/-/g' -e 's/^\.B[IR]* //' \
	-e 's/"//g' | awk '{ n = ""; for (i = 1; i <= NF && $i ~ /^[a-z]+$/; i++)
	n = n (n == "" ? "" : " ") $i; print n }' | sort > "$T/man"
check "man/ksbctl.1 lists exactly the commands of the table" \
    '[ -s "$T/table" ] && diff "$T/table" "$T/man" > "$T/out"'
run "$K" help --commands
check "help --commands: name, usage, summary per entry" \
    'rc 0 && ! grep -qv "^[a-z][a-z ]*	[a-z].*	." "$T/out"'
run "$K" --help
check "--help gives each table entry with its usage and summary" \
    '"$K" help --commands | while IFS="	" read -r name use sum; do
	grep -qF -- "$sum" "$T/out" && grep -qF -- "  ${use%% \[*}" "$T/out" || exit 1; done'
for c in list status stop rm attach audit "audit summary" "audit export" \
    "audit verify" reload policy "policy check" "policy show" "policy test" \
    fetch prompt logs; do
	for h in -h --help; do
		run "$K" $c $h
		check "ksbctl $c $h: usage on stdout, exit 0" \
		    'rc 0 && grep -q "^usage: ksbctl" "$T/out" && ! [ -s "$T/err" ]'
	done
done
for c in list "status" "stop x" "rm x" "attach" audit "audit summary" \
    "audit export" "audit verify" reload "logs x" "fetch x" "prompt x y" \
    "policy check" "policy show" "policy test"; do
	run "$K" $c --bogus
	check "ksbctl $c --bogus named, exit 2" \
	    "rc 2 && grep -qF \"ksbctl \${c%% *}\" \"\$T/err\" && grep -qF \"\\\`--bogus'\" \"\$T/err\""
done
for c in stop rm attach logs fetch prompt; do
	run "$K" $c
	check "ksbctl $c without an ID says so, exit 2" \
	    "rc 2 && grep -q \"^ksbctl $c: missing instance ID\" \"\$T/err\" && grep -q '^usage: ksbctl $c' \"\$T/err\""
done
run "$B/ksb-run" --help
check "ksb-run --help: usage and one line per option, exit 0" \
    'rc 0 && grep -q "^usage: ksb-run" "$T/out" && grep -q "^  --share-ro host" "$T/out" && grep -q "See ksb-run(1)" "$T/out" && ! [ -s "$T/err" ]'
run "$B/ksb-run" --profile
check "ksb-run --profile without a value: named, exit 2" \
    'rc 2 && grep -q "^ksb-run: .--profile. needs a value" "$T/err"'
run "$K" policy bogus
check "policy bogus named" "rc 2 && grep -qF \"ksbctl policy: unknown command \\\`bogus'\" \"\$T/err\""
run "$K" policy check
check "policy check without ksb.conf says it is missing" \
    'rc 1 && grep -q "ksb.conf does not exist" "$T/err"'

# policy test decides as the proxy (policy_decide).
cat > "$T/p.policy" <<'EOF'
profile v6 {
	allow-address [2001:db8::/32]
	allow-address 192.0.2.0/24
	allow example.com
}
EOF
printf 'policy = %s\nstate-dir = %s/state\ncontrol-socket = %s/ctl.sock\n' \
    "$T/p.policy" "$T" "$T" > "$T/ksb.conf"
chmod 644 "$T/ksb.conf" "$T/p.policy"
export KSB_CONF="$T/ksb.conf"
run "$K" policy test v6 '[2001:db8::1]'
check "policy test allows a bracketed IPv6 literal" 'rc 0 && grep -q "^allow \[2001:db8::1\]:443" "$T/out"'
run "$K" policy test v6 '[2001:db9::1]:443'
check "policy test denies an IPv6 literal outside the rule" 'rc 1 && grep -q "^deny: .*ip_literal" "$T/out"'
run "$K" policy test v6 192.0.2.7
check "policy test allows a dotted quad" 'rc 0'
run "$K" policy test v6 3221225991
check "policy test refuses a decimal IPv4 spelling" 'rc 1 && grep -q "only canonical" "$T/out"'
run "$K" policy test v6 example.com:443
check "policy test allows a name" 'rc 0 && grep -q "^allow example.com:443" "$T/out"'
run "$K" policy test v6 192.0.2.7:80
check "policy test: an allowed address on another port names the rule kind" \
    'rc 1 && grep -q "^deny: 192.0.2.7:80: no allow-address rule of profile v6 covers this address and port (ip_literal)" "$T/out"'
run "$K" policy show v6
check "policy show: a profile without limits shows ksb.conf's" \
    'rc 0 && grep -Eq "^    limit connections 256 +# ksb.conf max-connections-per-instance$" "$T/out" &&
    grep -Eq "^    limit rate [0-9]+ +# ksb.conf connection-rate-per-instance$" "$T/out"'

# A stand-in gateway: refuses RELOAD like the real one (no END, idle
# connection kept), answers LIST with one instance.
python3 - "$T/ctl.sock" <<'EOF' &
import os, socket, sys, threading
s = socket.socket(socket.AF_UNIX)
s.bind(sys.argv[1]); os.chmod(sys.argv[1], 0o777); s.listen(8)
def serve(c):
    f = c.makefile("rb")
    for line in f:
        if line == b"RELOAD\n":
            c.sendall(b"ERR permission denied: RELOAD needs root or group "
                      b"`ksb' (you are uid 1000 gid 1000)\n")
        elif line == b"LIST\n":
            c.sendall(b"INSTANCE id=vm1 profile=v6 ip=10.77.0.2/24 "
                      b"mac=52:54:00:00:00:02 tap=ksbt0 since=1700000000000\nEND\n")
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
EOF
srv=$!
# (python's start on a loaded machine: bounded, 60 s.)
for i in $(seq 600); do [ -S "$T/ctl.sock" ] && break; sleep 0.1; done
run timeout 5 "$K" reload
check "reload prints the gateway's refusal at once" \
    'rc 1 && grep -q "ksbctl reload: permission denied: RELOAD needs root" "$T/err"'

mkdir -p "$T/state/instances/vm1" && chmod 700 "$T/state/instances"
as=
if [ "$(id -u)" = 0 ]; then
	command -v setpriv > /dev/null &&
	    as="setpriv --reuid=65534 --regid=65534 --clear-groups"
fi
if [ "$(id -u)" != 0 ] || [ -n "$as" ]; then
	[ "$(id -u)" = 0 ] || chmod 000 "$T/state/instances"
	run $as "$K" list
	check "list without access to the instances falls back to LIST" \
	    'rc 0 && grep -q "^vm1 .*running .*v6 .*10.77.0.2/24" "$T/out" &&
	    grep -q "note: .*Permission denied; showing the instances registered" "$T/err"'
	chmod 700 "$T/state/instances"
else
	echo "ok $((n += 1)) - # SKIP list fallback (root without setpriv)"
fi
# ksb-run --print-config: effective values, aligned, KSB_ACCEL named.
R="$B/ksb-run"
cd "$T"
run "$R" --print-config
check "print-config: no disk for an ephemeral instance" \
    'rc 0 && grep -Eq "^disk-size += none +# default" "$T/out"'
check "print-config: the value column is aligned" \
    '[ "$(sed "s/= .*//" "$T/out" | awk "{ print length }" | sort -u | wc -l)" = 1 ]'
run "$R" --name x1 --print-config
check "print-config --name: the 8G default disk" 'rc 0 && grep -Eq "^disk-size += 8G +# default" "$T/out"'
check "print-config: the self-test is on by default" \
    'rc 0 && grep -Eq "^selftest += on +# default" "$T/out"'
printf 'selftest = off\n' > "$T/st-off.conf"
run "$R" -c "$T/st-off.conf" --print-config
check "print-config: selftest = off from the project file" \
    'rc 0 && grep -Eq "^selftest += off +# .*st-off.conf" "$T/out"'
printf 'selftest = maybe\n' > "$T/st-bad.conf"
run "$R" -c "$T/st-bad.conf" --print-config
check "a bad selftest value: file:line, exit 2" \
    'rc 2 && grep -q "st-bad.conf:1" "$T/err"'
KSB_ACCEL=foo run "$R" --print-config
check "a bad KSB_ACCEL is named as the source" 'rc 2 && grep -q "KSB_ACCEL" "$T/err"'
# Batch jobs: what --exit-after-turn and the push options need, and a
# credential that cannot be read, refused before any guest.
run "$R" --exit-after-turn -- true
check "--exit-after-turn without --agent and --prompt: said, exit 2" \
    'rc 2 && grep -q "exit-after-turn needs --agent and --prompt" "$T/err"'
run "$R" --push-credential env:KSBT_NONE -- true
check "--push-credential without --push-to: said, exit 2" \
    'rc 2 && grep -q "need --push-to" "$T/err"'
run "$R" --push-to "$T/r.git" --push-credential file:"$T/nonexistent" -- true
check "--push-credential from a missing file: said before the guest, exit 2" \
    'rc 2 && grep -q "nonexistent" "$T/err"'
printf 'no-colon-token\n' > "$T/cred-bad"
run "$R" --push-to "$T/r.git" --push-credential file:"$T/cred-bad" -- true
check "--push-credential not user:password: said, the value not shown, exit 2" \
    'rc 2 && grep -q "not one line user:password" "$T/err" && ! grep -q no-colon-token "$T/err"'
run "$R" --push-to "$T/r.git" --push-timeout 0 -- true
check "--push-timeout 0: said, exit 2" 'rc 2 && grep -q "push-timeout" "$T/err"'
# ksbctl audit: an option its subcommand does not use is named, not ignored.
run "$K" audit summary --limit 1
check "audit summary --limit: does not apply, exit 2" \
    'rc 2 && grep -q "^ksbctl audit summary: --limit does not apply here" "$T/err"'
run "$K" audit export --jsonl --denied
check "audit export --denied: does not apply, exit 2" \
    'rc 2 && grep -q "^ksbctl audit export: --denied does not apply here" "$T/err"'
run "$K" audit --jsonl
check "audit --jsonl: does not apply, exit 2" \
    'rc 2 && grep -q "^ksbctl audit: --jsonl does not apply here" "$T/err"'
run "$K" audit --since 1h --until 2020-01-01
check "audit --since after --until: said, exit 2" \
    'rc 2 && grep -q "since is later than --until" "$T/err"'

# A share onto one of the guest's own mount points is refused with the
# reason, before any gateway is asked for a lease (none runs here).
printf 'control-socket = %s/no.sock\nstate-dir = %s/srstate\n' "$T" "$T" > "$T/sr.conf"
run "$R" -f "$T/sr.conf" --share-ro "$T:/usr/x" -- true
check "share-ro onto /usr/x: exit 2, reserved, before the gateway" \
    'rc 2 && grep -q "invalid guest path \`/usr/x'"'"': reserved" "$T/err" && ! grep -q "gateway" "$T/err" && [ ! -e "$T/srstate/instances" ]'
# A repo that is no repository is refused before the instance gets
# anything: no lease asked (no gateway runs), no disk made.
mkdir -p "$T/norepo"
run "$R" -f "$T/sr.conf" --name nr --disk 64 --repo "$T/norepo" -- true
check "--repo not a repository: refused before the lease and the disk" \
    'rc 125 && grep -q "repo .$T/norepo. (--repo): not in a git repository" "$T/err" && ! grep -q "gateway" "$T/err" && [ ! -e "$T/srstate/instances/nr/disk.img" ]'
echo "1..$n"
[ "$fails" = 0 ]
