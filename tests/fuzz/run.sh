#!/bin/sh
# run.sh: build each libFuzzer target with clang (ASan + UBSan) straight
# from the sources it needs, and run it for $FUZZ_SECONDS (default 20)
# seconds.  Exits 77 (skip) when clang or its libFuzzer runtime is missing.
# FUZZ_ONLY="name ..." runs only those targets (e.g. FUZZ_ONLY=http_parse
# FUZZ_SECONDS=60 for a longer local run of one).
# Crash inputs are kept in $KSB_BUILDDIR/tests/fuzz/artifacts/.
set -eu

srcdir=${KSB_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
builddir=${KSB_BUILDDIR:-$srcdir}
secs=${FUZZ_SECONDS:-20}
CLANG=${CLANG:-clang}
# Set (by ./configure --enable-fuzzing) when skipping is not acceptable.
skip=77
[ -n "${FUZZ_REQUIRED:-}" ] && skip=1

if ! command -v "$CLANG" >/dev/null 2>&1; then
	echo "SKIP: $CLANG not found (apt-get install clang)"
	exit $skip
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/ksb-fuzz.XXXXXX")
trap 'rm -rf "$work"' EXIT
trap 'exit 130' INT TERM

cat > "$work/probe.c" <<'PROBE'
#include <stddef.h>
#include <stdint.h>
int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);
int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }
PROBE
if ! "$CLANG" -fsanitize=fuzzer,address,undefined "$work/probe.c" \
    -o "$work/probe" >/dev/null 2>&1; then
	echo "SKIP: $CLANG cannot link -fsanitize=fuzzer (libFuzzer runtime missing: install the Debian package libclang-rt-14-dev)"
	exit $skip
fi

crypto=$(pkg-config --cflags --libs libcrypto 2>/dev/null || echo -lcrypto)
# json-c for fuzz_login (common/login.c); harmless for the others.
crypto="$crypto $(pkg-config --cflags --libs json-c 2>/dev/null || echo -ljson-c)"
cflags="-std=gnu11 -g -O1 -Wall -Wextra -Werror -Wno-unused-parameter
	-D_GNU_SOURCE -I$srcdir -fsanitize=fuzzer,address,undefined
	-fno-sanitize-recover=undefined -fno-omit-frame-pointer"
artifacts=$builddir/tests/fuzz/artifacts
mkdir -p "$artifacts"

# Seeds: hex strings, decoded with perl (perl-base is always there).
seed() {
	mkdir -p "$work/corpus_$1"
	perl -e 'print pack("H*", $ARGV[0])' "$3" > "$work/corpus_$1/$2"
}
text_seed() {
	mkdir -p "$work/corpus_$1"
	printf '%b' "$3" > "$work/corpus_$1/$2"
}
text_seed connect_parse ok 'CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\nUser-Agent: x\r\n\r\n'
text_seed connect_parse v6 'CONNECT [2001:db8::1]:8443 HTTP/1.0\r\n\r\n'
text_seed connect_parse get 'GET http://x/ HTTP/1.1\r\nHost: x\r\n\r\n'
# fuzz_http_parse: a control byte (bit 0: response; bits 1-2: the
# request's HTTP_RQ_* flags; the rest: the body's piece size), then bytes.
# Seeds in parts, joined (so each line stays short).
http_seed() {
	n=$1
	shift
	s=
	for p in "$@"; do
		s=$s$p
	done
	text_seed http_parse "$n" "$s"
}
H='Host: api.example.com\r\n'
http_seed post '\0050POST /v1/messages?x=1 HTTP/1.1\r\n' "$H" \
	'Content-Length: 5\r\nConnection: keep-alive\r\n\r\n' \
	'helloGET / HTTP/1.1\r\n'
http_seed chunked '\0020PUT /a/b HTTP/1.1\r\nHost: [::1]:8443\r\n' \
	'Transfer-Encoding: chunked\r\nExpect: 100-continue\r\n\r\n' \
	'5;a=b;c="d"\r\nhello\r\n0\r\nX-T: 1\r\n\r\n'
http_seed ws '\0000GET /ws HTTP/1.1\r\n' "$H" \
	'Connection: Upgrade\r\nUpgrade: websocket\r\n\r\n'
http_seed resp '\0031HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n' \
	'Content-Type: text/event-stream\r\n\r\n' \
	'17\r\ndata: {"type":"ping"}\n\n\r\n0\r\n\r\n'
http_seed resp101 '\0005HTTP/1.1 101 Switching Protocols\r\n' \
	'Upgrade: websocket\r\nConnection: Upgrade\r\n\r\n\0201\0000'
http_seed target '\0000GET /a/%2e.x/b;c/%2F?q={x}&r=%41 HTTP/1.1\r\n' \
	'Host: a.test:8443\r\nConnection: close\r\n' \
	'Expect: 100-continue\r\nContent-Length: 0\r\n\r\n'
http_seed trailer '\0010POST / HTTP/1.1\r\n' "$H" \
	'Transfer-Encoding: chunked\r\n\r\n' \
	'3;x="a\\"b"\r\nabc\r\n0\r\nX: 1\r\nY: 2\r\n\r\n'
# a response quoting fuzz_http_parse.c's fixed value, raw and in base64
http_seed reflect '\0011HTTP/1.1 200 OK\r\nX-Echo: sk-ant-api03-Zx9/' \
	'Qw+e_r-tyUiopAsdfGhjkLzxcvbnm0123456789AA\r\nContent-Length: 28\r\n' \
	'\r\n{"k": "c2stYW50LWFwaTAzLVp4"}'
http_seed resp10 '\0041HTTP/1.0 404 Not Found\r\nContent-Length: 3\r\n\r\nabc'
# fuzz_wsframe: a control byte (bit 0: a client's frames; the rest: the
# piece size), then frames: a masked fragmented text with a ping between,
# a 16-bit binary, a close; a server's unmasked text.
seed wsframe client '0b0184010203046964688980000000008081000000006f880000000000'
seed wsframe client16 '07827e0100a1a2a3a4'
seed wsframe server '1081056865796f6b'
# fuzz_h2: a piece-size byte, then the guest's frames after the preface:
# SETTINGS, a GET with a placeholder, a gRPC POST with DATA, a PING, the
# mark in DATA, RST_STREAM, WINDOW_UPDATE.
seed h2 frames '10000000040000000000000022010500000001828741861d665d25427f448460a49cff4087f2b0eb32dd4beb884755baa23ae788000000200104000000038387c0448362daff5f8b1d75d0620d263d4c4d65644082497f864d833505b11f00000a000000000003000000000568656c6c6f00000806000000000031323334353637380000070001000000036b736270685f780000040300000000010000000800000408000000000000000010'
seed tls_peek openssl12 '16030100cc010000c80303f0e4f6aa0534607c7b821a0683f610f484f8116b8b94d2bbbf01e821edee2628000038c02cc030009fcca9cca8ccaac02bc02f009ec024c028006bc023c0270067c00ac0140039c009c0130033009d009c003d003c0035002f00ff0100006700000011000f00000c4578616d706c652e4f52472e000b000403000102000a000c000a001d0017001e00190018002300000016000000170000000d002a0028040305030603080708080809080a080b080408050806040105010601030303010302040205020602'
text_seed hostname name 'WWW.Example.COM.'
text_seed hostname v4 '0x7f.0.0.1'
text_seed hostname v6 '[::ffff:127.0.0.1]'
text_seed policy base 'profile base {\n  allow github.com\n  allow *.example.com:443,8000-8100\n  allow-address 10.0.0.0/8:22\n  allow-address [2001:db8::/32]\n}\nprofile dev extends base, other { # c\n}\nprofile other {}\n'
text_seed settings ok 's = a # c\np = rel/x\nh = a b\nh = c\nn = -3\nbad\nq = 1\ns = x\n'
text_seed policy path '/repos/./org//x%2e%7E%2f/..;/%252e/a\\b'
text_seed policy cred 'credential t { host t.example\n header x\n source env T\n secret T\n allow-request GET /repos/org\n allow-request * /v1/ }\nprofile p { allow t.example\n credential t }\n'
text_seed policy extend 'extend profile dev {\n  allow new.example.com:8443\n  allow github.com\n}\nprofile dev { allow github.com }\nextend profile dev { allow-address 192.0.2.0/24 }\n'
# fuzz_msg: a flag byte (bit 0: a descriptor came), then header (u16 type,
# u16 len, u32 id, host order) and a payload of zeros but for its text.
msg_seed() {
	mkdir -p "$work/corpus_msg"
	perl -e 'my ($t, $l, $id, $x) = @ARGV;
	    print pack("CSSL", 0, $t, $l, $id), substr($x . "\0" x $l, 0, $l)' \
	    "$2" "$3" "$4" "${5:-}" > "$work/corpus_msg/$1"
}
msg_seed row_deny 64 836 0
msg_seed close 65 80 1 reason
msg_seed done 66 4 0
msg_seed fatal 67 240 0 "proxy: hosts-file: cannot read"
msg_seed instance 1 124 0 g1
# fuzz_fwd: a CREDIT frame then a 2x1 32-bit XWD (header, 4-byte name).
seed fwd credit_xwd '06000000000000010000000400001000000000680000000700000002000000180000000200000001000000000000000000000020000000000000002000000020000000080000000400ff00000000ff00000000ff00000008000000000000000000000002000000010000000000000000000000006b7362000000ff0000ff0000'
# fuzz_ctl_selftest: a boot and a reload report, a RELOADED notice.
text_seed ctl_selftest boot 'SELFTEST boot-term boot 0 ok 7 812 -'
text_seed ctl_selftest reload 'SELFTEST e-1a2b3c4d reload 3 fail 0 - tcp-gateway'
text_seed ctl_selftest reloaded 'RELOADED 12'
text_seed ctlfwd close 'FORWARD live close 127.0.0.1 8080 80 7 82 104857807 5004 done'
text_seed agentcmd full 'idle=600\ncwd=/home/me/src\narg=--share\narg=/home/me/src\nclaude --print'
text_seed agentcmd bare 'idle=5\nsh -c x'
text_seed ctlfwd refused 'FORWARD live refused ::1 8080 80 ::ffff:10.0.0.1 limit'
# fuzz_login: a selector byte (0, 1: an agent's login file, claude,
# codex; 2, 3: a token endpoint's answer; 4: an outcome line).
text_seed login claude '\0000{"claudeAiOauth": {"accessToken": "sk-ant-oat01-a", "refreshToken": "sk-ant-ort01-r", "expiresAt": 1700000040000, "scopes": ["user:inference"]}}'
text_seed login codex '\0001{"tokens": {"id_token": "eyJhbGciOiJub25lIn0.eyJleHAiOjE3MDAwMDAwNDB9.sig", "access_token": "eyJhbGciOiJub25lIn0.eyJleHAiOjE3MDAwMDAwNDB9.s", "refresh_token": "rt_x", "account_id": "acct"}, "last_refresh": "2026-12-02T10:00:00Z"}'
text_seed login answer '\0002{"access_token": "sk-ant-oat01-b", "refresh_token": "sk-ant-ort01-s", "expires_in": 28800, "token_type": "Bearer"}'
text_seed login outcome '\0004ksb-login-outcome 1 1700000000123 failed refused 0 17 HTTP 400 invalid_grant\n'
# fuzz_cmdline: a context byte (bit 0: INSTANCE), then the keys.
text_seed cmdline boot '\0000console=ttyS0 quiet ksb.id=e-1a2b ksb.ip=10.77.0.2/24 ksb.gw=10.77.0.1 ksb.port=3128 ksb.disk=1 ksb.selftest=off ksb.display=320x240 ksb.share=s0:/home/agent/proj ksb.share=s1:/ksb/mirror.git:rw'
text_seed cmdline template '\0000console=ttyS0 ksb.template=1'
text_seed cmdline instance '\0001ksb.id=e-1 ksb.ip=10.77.0.2/24 ksb.gw=10.77.0.1 ksb.port=3128 ksb.mac=52:54:00:12:34:56 ksb.time=1700000000.000000005 ksb.fwcfg=1 ksb.seed=000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f'

# target, sources, max input length
set -- \
	"connect_parse|gateway/parse/connect_parse.c|9000" \
	"http_parse|gateway/parse/http_parse.c gateway/parse/reflect.c common/util.c common/log.c|20000" \
	"tls_peek|gateway/parse/tls_peek.c|20000" \
	"wsframe|gateway/parse/wsframe.c|70000" \
	"hostname|policy/hostname.c|300" \
	"policy|policy/policy.c policy/lex.c policy/index.c policy/file.c policy/rule.c policy/profile.c policy/parse.c policy/resolve.c policy/match.c policy/credential.c policy/hostname.c policy/urlpath.c common/util.c common/log.c|4096" \
	"settings|common/settings.c common/util.c common/log.c|4096" \
	"msg|gateway/msg.c common/log.c|4200" \
	"fwd|proto/fwd.c proto/xwd.c|70000" \
	"ctl_selftest|proto/ctl_selftest.c common/util.c common/log.c|300" \
	"ctlfwd|proto/ctlfwd.c proto/fwd.c common/util.c common/log.c|4200" \
	"cmdline|proto/cmdline.c proto/guestctl.c|4200" \
	"agentcmd|proto/agentcmd.c|70000" \
	"h2|gateway/proxy/h2.c gateway/parse/http_parse.c gateway/parse/reflect.c common/util.c common/log.c common/reason.c|70000" \
	"login|common/login.c common/util.c common/log.c|70000"
fail=0
for t in "$@"; do
	name=${t%%|*}
	rest=${t#*|}
	srcs=${rest%|*}
	maxlen=${rest##*|}
	case " ${FUZZ_ONLY:-$name} " in
	*" $name "*) ;;
	*) continue ;;
	esac
	files=""
	for s in $srcs; do
		files="$files $srcdir/$s"
	done
	libs=$crypto
	case $name in # h2.c drives libevent bufferevents and nghttp2
	h2) libs=$(pkg-config --cflags --libs libevent libnghttp2 libcrypto) ;;
	esac
	echo "== fuzz_$name: build"
	# shellcheck disable=SC2086
	if ! "$CLANG" $cflags -o "$work/fuzz_$name" \
	    "$srcdir/tests/fuzz/fuzz_$name.c" $files $libs; then
		echo "FAIL: fuzz_$name does not build"
		fail=1
		continue
	fi
	mkdir -p "$work/corpus_$name"
	echo "== fuzz_$name: ${secs}s"
	if ! "$work/fuzz_$name" -max_total_time="$secs" -max_len="$maxlen" \
	    -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
	    -artifact_prefix="$artifacts/$name-" \
	    "$work/corpus_$name" >"$work/$name.log" 2>&1; then
		tail -n 60 "$work/$name.log"
		echo "FAIL: fuzz_$name (input saved under $artifacts)"
		fail=1
		continue
	fi
	grep -E '^stat::number_of_executed_units|^Done' "$work/$name.log" || true
done
exit $fail
