#!/bin/bash
# `ksbctl logs` shows a hostile guest's pane output without handing any
# terminal control to the operator's terminal: ESC sequences dropped, C0
# and C1 controls (UTF-8 encoded U+0080..U+009F included) and malformed
# UTF-8 shown as \xHH, printable UTF-8 kept, and an unterminated escape
# sequence cannot hide the rest of the log.  No root, no network.
set -eu
B=${KSB_BUILDDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
mkdir -p "$T/instances/t1"
: > "$T/instances/t1/agent.events"
printf 'ok \xc2\x9d52;c;AAAA\xc2\x9c clear\xc2\x9b2J utf8 \xe2\x9c\x93 done \x1b[31mred\x1b[0m bad\xff \xed\xa0\x80 \xc0\xaf \x1b]0;title\x07 end\n\x1b]unterminated' \
	> "$T/instances/t1/agent.log"
head -c 300 /dev/zero | tr '\0' x >> "$T/instances/t1/agent.log"
printf '\nvisible after\n' >> "$T/instances/t1/agent.log"
printf 'state-dir = %s\n' "$T" > "$T/ksb.conf"
"$B/ksbctl/ksbctl" -f "$T/ksb.conf" logs t1 > "$T/out"
fails=0
check() { if eval "$2"; then echo "ok - $1"; else echo "not ok - $1"; fails=$((fails + 1)); fi; }
check "no ESC byte reaches the terminal" '! grep -q $'"'"'\x1b'"'"' "$T/out"'
check "no C1 control (UTF-8 U+0080..U+009F) reaches the terminal" \
	'! LC_ALL=C grep -q $'"'"'\xc2[\x80-\x9f]'"'"' "$T/out"'
check "C1 controls shown escaped" 'grep -qF "ok \xc2\x9d52;c;AAAA\xc2\x9c clear\xc2\x9b2J" "$T/out"'
check "printable UTF-8 kept" 'grep -q "utf8 ✓ done" "$T/out"'
check "malformed UTF-8 (stray byte, surrogate, overlong) escaped" \
	'grep -qF "bad\xff \xed\xa0\x80 \xc0\xaf " "$T/out"'
check "CSI and OSC sequences dropped, their text kept" 'grep -q "done red bad" "$T/out" && ! grep -q title "$T/out"'
check "an unterminated OSC does not hide the rest" 'grep -qx "visible after" "$T/out"'
echo "# $((7 - fails)) passed, $fails failed"
[ "$fails" = 0 ]
