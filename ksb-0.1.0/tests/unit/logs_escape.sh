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
# A TUI's screen: cursor forward, moves to other rows, DCS and private CSI.
printf 'Welcome\x1b[1Cto\x1b[1CClaude\x1b[3CCode\x1b[5;1Hrow5\x1b[5;9Hsame\x1b[6;1Hrow6\x1b[2Brow8\x1bP>|tmux 3.3a\x1b\\\x1b[?25lend\n' \
	>> "$T/instances/t1/agent.log"
printf '1700000000123 1 queued \n1700000000456 1 done ok\n' > "$T/instances/t1/agent.events"
printf 'state-dir = %s\n' "$T" > "$T/ksb.conf"
"$B/ksbctl/ksbctl" -f "$T/ksb.conf" logs t1 > "$T/out"
TZ=UTC0 "$B/ksbctl/ksbctl" -f "$T/ksb.conf" logs t1 > "$T/out.utc"
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
check "cursor forward shown as spaces" 'grep -q "^Welcome to Claude   Code$" "$T/out"'
check "a move to another row is a newline, on the same row none" \
	'grep -qx "row5same" "$T/out" && grep -qx "row6" "$T/out"'
check "cursor down is a newline; DCS and private CSI dropped" \
	'grep -qx "row8end" "$T/out" && ! grep -q tmux "$T/out"'
check "event times are local ISO 8601 times" \
	'grep -qx "$(TZ=UTC0 date -d @1700000000 "+%F %T").456 1 done ok" "$T/out.utc"'
check "no raw epoch milliseconds" '! grep -q 1700000000 "$T/out.utc"'
echo "# $((12 - fails)) passed, $fails failed"
[ "$fails" = 0 ]
