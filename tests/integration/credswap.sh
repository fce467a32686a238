#!/bin/bash
# credswap.sh: the credential swap against real shapes of secrets and
# requests (issue 28).  A real ksb-gatewayd in its own namespace, a fake
# guest holding a lease (tests/integration/ctlhold), a TLS origin of its
# own (cred_reflect.py) that records every request and compares the exact
# field it received.  Checks:
#  - the swap matrix: header, bearer and basic forms x real formats of
#    keys and tokens and the lengths 1..8192 (cred_values.py) x
#    placeholders of 46, 49 and 78 bytes: the origin received exactly the
#    field the declared form says, byte for byte;
#  - fronting: on a tunnel terminated for one bound host, a request whose
#    Host or absolute-form authority names anything else (another allowed
#    or bound name, a denied one, addresses, localhost, the metadata
#    address, another port) gets 421 and a misdirected_request row naming
#    it, and the origin's log shows that none arrived; the spellings of
#    the bound host itself (case, trailing dot, :443, absolute-form) pass;
#    a path beginning with "//" (as sent, %2F, %5C, in an absolute-form
#    target) gets 400 and an http_bad_target row, nothing upstream;
#  - nothing real flows back: the origin hands back the value it received
#    (raw, base64 at each alignment, base64url, percent-encoded, JSON
#    escaped; every byte %XX in upper, lower and mixed hex case, some
#    bytes raw and some %XX, every byte \u00XX, \u00XX mixed with raw)
#    in every framing (Content-Length, chunked in 7-byte chunks,
#    until the close, server-sent events, a response field, the reason
#    phrase, a 103 interim response, a byte per write); the guest's
#    client (cred_leakcheck.py) finds none of the value's encodings in
#    the bytes it received, the response still parses, and each request
#    has its credential_reflected row;
#  - HEAD then GET on one tunnel; curl -T not waiting its expect timeout;
#  - a body up to 64 KiB scanned before its head goes: the placeholder
#    later in it, in a later chunk or a trailer gets 403 and the origin's
#    log shows no head (rows: bytes_up 0); trailers 400; over 64 KiB the
#    request is cut mid-body and the row counts what went;
#  - an origin answering 413 while curl still uploads 24 MB (with and
#    without Expect), reading nothing for 3 s: curl gets the 413 at
#    once (under 2 s), the row has it;
#  - the audit never stores a placeholder ([placeholder NAME] instead);
#  - the placeholder percent-encoded (one byte, every byte, mixed hex
#    case) in the path, query, another header or its own, JSON-escaped
#    (\u00XX, mixed with raw) in a body and a chunked body: 403
#    credential_misuse, its row, nothing of a head at the origin.
set -eu
. "$(dirname "$0")/../lib.sh"

ksb_need_root
ksb_need python3
HOLD=$KSB_BUILDDIR/tests/integration/ctlhold
ORIGIN=$KSB_SRCDIR/tests/integration/cred_reflect.py
CLIENT=$KSB_SRCDIR/tests/integration/cred_client.py
LEAK=$KSB_SRCDIR/tests/integration/cred_leakcheck.py
[ -x "$HOLD" ] || ksb_fail "$HOLD not built (make check builds it)"
ksb_env
pass=0 fails=0

openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
	-keyout "$T/pki/swap.key" -out "$T/pki/swap.csr" -subj "/CN=swap.test" \
	>/dev/null 2>&1
printf 'subjectAltName=DNS:*.swap.test\n' > "$T/pki/swap.ext"
openssl x509 -req -in "$T/pki/swap.csr" -CA "$T/pki/ca.pem" \
	-CAkey "$T/pki/ca.key" -CAcreateserial -days 2 \
	-extfile "$T/pki/swap.ext" -out "$T/pki/swap.pem" >/dev/null 2>&1
SEED=${KSB_TEST_SEED:-$RANDOM}
echo "# values from seed $SEED (KSB_TEST_SEED=$SEED to repeat)"
umask 077
python3 "$KSB_SRCDIR/tests/integration/cred_values.py" "$T/c" "$SEED" \
	> "$T/policy.d/creds.policy"
umask 022
chmod 755 "$T/c" "$T/c/expect"
chmod 644 "$T/c/expect"/*
NAMES=$(ls "$T/c/v")
ip -n "$OR" addr add 10.78.0.6/24 dev ko1
ip netns exec "$OR" python3 "$ORIGIN" 10.78.0.6 443 "$T/pki/swap.pem" \
	"$T/pki/swap.key" "$T/c/expect" "$T/origin.log" > "$T/origin.err" 2>&1 &
KSB_PIDS="$KSB_PIDS $!"
ksb_wait_port "$OR" 10.78.0.6 443
for n in $NAMES; do echo "10.78.0.6 $n.swap.test"; done >> "$T/hosts"
echo "upstream-ca-file = $T/pki/ca.pem" >> "$T/ksb.conf"
# A lease carries at most 8 placeholders (CTL_LEASE_CREDS_MAX): the
# credentials go 7 to a profile, a fake guest per profile.
set -- $NAMES
np=0
while [ $# -gt 0 ]; do
	np=$((np + 1))
	echo "profile p$np {"
	echo "    allow *.swap.test"
	echo "    allow-address 10.78.0.0/24"
	for i in 1 2 3 4 5 6 7; do
		[ $# -gt 0 ] || break
		echo "    credential $1"
		echo "$1 $np" >> "$T/guest-of"
		shift
	done
	echo "}"
done > "$T/policy.d/test.policy"
ksb_gateway
for i in $(seq "$np"); do ksb_fake_guest "$i" "g$i" "p$i"; done
CA=$T/state/ca/ca.crt
ph() { # NAME GUEST
	sed -n "s|^cred=$1/[^/]*/||p" "$T/lease$2"; }
gcurl() { # GUEST ARGS...
	local g=$1
	shift
	ip netns exec "ksbt-$$-g$g" curl -sS --max-time 20 --proxy http://10.77.0.1:3128 \
		--cacert "$CA" "$@"
}

ksb_say "the swap matrix"
nph=0 bad=
while read -r n g; do
	p=$(ph "$n" "$g")
	[ -n "$p" ] || { bad="$bad $n(no placeholder)"; continue; }
	nph=$((nph + 1))
	case $n in
	header-*) a=(-H "x-api-key: $p") ;;
	bearer-*) a=(-H "Authorization: Bearer $p") ;;
	basic-*) a=(-u "agent:$p") ;;
	esac
	out=$(gcurl "$g" "${a[@]}" "https://$n.swap.test/check/$n" 2>&1) || true
	case $out in
	*'"match": true'*) ;;
	*) bad="$bad $n($(($(wc -c < "$T/c/v/$n") - 1)) bytes, placeholder ${#p}: $out)" ;;
	esac
done < "$T/guest-of"
echo "# $nph credentials tried${bad:+; failed:$bad}"
ksb_check "every form x value x placeholder length: the exact field arrived" \
	'[ -z "$bad" ] && [ "$nph" = "$(echo "$NAMES" | wc -w)" ] && [ "$nph" -ge 42 ]'
ksb_check "each swap has its audit row with the credential" \
	'ksb_sql_is "$nph" "SELECT count(DISTINCT credential) FROM requests WHERE path LIKE \"/check/%\" AND status = 200 AND reason IS NULL"'
ksb_check "the gateway log never shows a real value" \
	'! grep -qF -f <(sed -n "/^.\{8,\}$/p" "$T"/c/v/*) "$T/gatewayd.log"'

ksb_say "every request on a terminated tunnel is for the bound host"
B=header-ghp
BG=$(sed -n "s/^$B //p" "$T/guest-of")
BPH=$(ph "$B" "$BG")
raw() { # HOST REQFILE
	KSB_PH=$BPH ip netns exec "ksbt-$$-g$BG" python3 "$CLIENT" \
		10.77.0.1:3128 "$1" "$CA" http/1.1 "$2"
}
i=0 nfront=0
front() { # WANT LINE HOSTFIELD...: one request on a tunnel to $B
	local want=$1 line=$2 out h
	shift 2
	i=$((i + 1))
	{
		printf '%s HTTP/1.1\r\n' "${line//@N@/$i}"
		for h in "$@"; do printf 'Host: %s\r\n' "$h"; done
		printf 'x-api-key: @PH@\r\nConnection: close\r\n\r\n'
	} > "$T/front.req"
	out=$(raw "$B.swap.test" "$T/front.req")
	case $want in
	421) nfront=$((nfront + 1)) ;;
	esac
	ksb_check "$(printf '%s | %s -> %s' "$line" "$*" "$want")" \
		'echo "$out" | head -1 | grep -q "^HTTP/1.1 $want " &&
		 { [ "$want" != 200 ] || echo "$out" | grep -q "\"match\": true"; }'
}
for h in header-npm.swap.test evil.example.com 10.78.0.6 127.0.0.1 \
	localhost 169.254.169.254 "[::1]" "[fd00::6]" "$B.swap.test:8443" \
	"$B.swap.test:80" "$B.swap.test.evil.example" "x$B.swap.test" \
	"metadata.google.internal"; do
	front 421 "GET /front/@N@" "$h"
done
front 421 "GET https://169.254.169.254/front/@N@" "$B.swap.test"
front 421 "GET https://header-npm.swap.test/front/@N@" "$B.swap.test"
front 421 "GET http://localhost:80/front/@N@" "$B.swap.test"
front 421 "GET https://$B.swap.test/front/@N@" "evil.example.com"
front 400 "GET /front/@N@" "$B.swap.test" "evil.example.com"
front 400 "GET /front/@N@" "$B.swap.test" "$B.swap.test"
front 400 "GET https://u@$B.swap.test/front/@N@" "$B.swap.test"
# a network-path reference ("//host/p", RFC 3986 §4.2) as the path, as
# sent, percent-encoded, with a backslash (raw: the parser refuses it, no
# path in its row), inside an absolute-form target
for l in "//evil.example.com/front/@N@" "/%2Fevil.example.com/front/@N@" \
	"/%5cevil.example.com/front/@N@" "/\\evil.example.com/front/@N@" \
	"https://$B.swap.test//evil.example.com/front/@N@"; do
	front 400 "GET $l" "$B.swap.test"
done
ksb_check "each // path has its http_bad_target row; the guest is told why" \
	'ksb_sql_is 4 "SELECT count(*) FROM requests WHERE status = 400 AND reason = \"http_bad_target\" AND path LIKE \"%evil.example.com/front/%\"" &&
	 printf "GET //evil.example.com/x HTTP/1.1\r\nHost: $B.swap.test\r\n\r\n" > "$T/np.req" &&
	 raw "$B.swap.test" "$T/np.req" | grep -q "^X-Ksb-Deny: http_bad_target"'
for h in "$B.swap.test" "$(echo "$B.swap.test" | tr a-z A-Z)" \
	"$B.swap.test." "$B.swap.test:443" "$B.swap.test.:443"; do
	front 200 "GET /check/$B?pass=@N@" "$h"
done
front 200 "GET https://$B.swap.test/check/$B?pass=@N@" "$B.swap.test"
front 200 "GET https://$(echo "$B" | tr a-z A-Z).SWAP.test.:443/check/$B?pass=@N@" "$B.swap.test."
ksb_check "the seven spellings of the bound host reached the origin" \
	'[ "$(grep -c "/check/$B?pass=" "$T/origin.log")" = 7 ]'
ksb_check "the origin's log: no refused request arrived" \
	'! grep -q "/front/" "$T/origin.log"'
ksb_check "each 421 has its misdirected_request row" \
	'ksb_sql_is "$nfront" "SELECT count(*) FROM requests WHERE status = 421 AND reason = \"misdirected_request\" AND path LIKE \"https://%/front/%\""'
ksb_check "the rows name the host asked for (metadata address, port)" \
	'ksb_sql_is 1 "SELECT count(*) FROM requests WHERE path = \"https://169.254.169.254/front/6\"" &&
	 ksb_sql_is 1 "SELECT count(*) FROM requests WHERE path = \"https://$B.swap.test:8443/front/9\"" &&
	 ksb_sql_is 1 "SELECT count(*) FROM requests WHERE path = \"https://[::1]/front/7\"" &&
	 ksb_sql_is 1 "SELECT count(*) FROM requests WHERE path = \"https://evil.example.com/front/17\""'
ksb_check "the guest is told why in one line" \
	'printf "GET /x HTTP/1.1\r\nHost: evil.example.com\r\n\r\n" > "$T/front.req" &&
	 ip netns exec "ksbt-$$-g$BG" python3 -c "
import socket, ssl, sys
s = socket.create_connection((\"10.77.0.1\", 3128), timeout=10)
s.sendall(b\"CONNECT $B.swap.test:443 HTTP/1.1\\r\\nHost: $B.swap.test:443\\r\\n\\r\\n\")
h = b\"\"
while b\"\\r\\n\\r\\n\" not in h: h += s.recv(1)
t = ssl.create_default_context(cafile=\"$CA\").wrap_socket(s, server_hostname=\"$B.swap.test\")
t.sendall(open(\"$T/front.req\", \"rb\").read())
b = b\"\"
while True:
    x = t.recv(4096)
    if not x: break
    b += x
sys.stdout.write(b.decode())" | tail -1 | grep -qx "ksb: this tunnel is for $B.swap.test only, the request names another host"'

ksb_say "nothing real flows towards the guest"
nref=0 bad=
for n in header-anthropic bearer-openai basic-github-pat; do
	g=$(sed -n "s/^$n //p" "$T/guest-of")
	p=$(ph "$n" "$g")
	case $n in
	header-*) a="x-api-key: $p" ;;
	bearer-*) a="Authorization: Bearer $p" ;;
	basic-*) a="Authorization: Basic $(printf 'agent:%s' "$p" | base64 -w0)" ;;
	esac
	for enc in raw b64 b64a1 b64a2 b64url pct pctlower json jsonslash \
		pctall pctallower pctmix pctsome jsonu jsonumix; do
		for fr in length chunked eof sse header status interim dribble; do
			printf 'GET /reflect/%s/%s HTTP/1.1\r\nHost: %s.swap.test\r\n%s\r\n\r\n' \
				"$enc" "$fr" "$n" "$a" > "$T/refl.req"
			out=$(ip netns exec "ksbt-$$-g$g" python3 "$LEAK" \
				10.77.0.1:3128 "$n.swap.test" "$CA" "$T/c/v/$n" \
				"$T/refl.req" 2>&1) || true
			nref=$((nref + 1))
			case $out in
			"status=200 parse=ok leaks=none masked=yes len="*) ;;
			*) bad="$bad $n/$enc/$fr($out)" ;;
			esac
		done
	done
done
echo "# $nref reflections tried${bad:+; failed:$bad}"
ksb_check "no encoding of a real value reached the guest, framing intact" \
	'[ -z "$bad" ] && [ "$nref" = 360 ]'
# A body that ends in all of a value but its last byte: the held tail goes
# at the end, as '*' (before: as it came, the value less one byte shown).
tailbad=
for n in header-anthropic bearer-openai; do
	g=$(sed -n "s/^$n //p" "$T/guest-of")
	p=$(ph "$n" "$g")
	case $n in
	header-*) a="x-api-key: $p" ;;
	bearer-*) a="Authorization: Bearer $p" ;;
	esac
	for fr in raw/tail raw/eofcut raw/short b64mime/length b64mime/chunked \
		b64mime/eof b64pem/length b64pem/dribble b64pem/sse; do
		printf 'GET /reflect/%s HTTP/1.1\r\nHost: %s.swap.test\r\n%s\r\n\r\n' \
			"$fr" "$n" "$a" > "$T/refl.req"
		out=$(ip netns exec "ksbt-$$-g$g" python3 "$LEAK" \
			10.77.0.1:3128 "$n.swap.test" "$CA" "$T/c/v/$n" \
			"$T/refl.req" 2>&1) || true
		echo "# tail $n: $out"
		nref=$((nref + 1)) # its row counts below
		case $out in
		"status=200 parse="*" leaks=none masked=yes len="*) ;;
		*) tailbad="$tailbad $n($out)" ;;
		esac
	done
done
ksb_check "a value less its last byte, a body cut by the close, base64 in lines: masked" \
	'[ -z "$tailbad" ]'
n=header-anthropic
g=$(sed -n "s/^$n //p" "$T/guest-of")
printf 'GET /reflect/raw/gzip HTTP/1.1\r\nHost: %s.swap.test\r\nx-api-key: %s\r\nAccept-Encoding: gzip, deflate, br\r\n\r\n' \
	"$n" "$(ph "$n" "$g")" > "$T/refl.req"
out=$(ip netns exec "ksbt-$$-g$g" python3 "$LEAK" 10.77.0.1:3128 \
	"$n.swap.test" "$CA" "$T/c/v/$n" "$T/refl.req" 2>&1) || true
echo "# gzip: $out"
ksb_check "Accept-Encoding: gzip becomes identity: the body is searched, masked" \
	'case $out in "status=200 parse=ok leaks=none masked=yes len="*) true ;; *) false ;; esac'
nref=$((nref + 1))
ksb_check "each reflection has its credential_reflected row" \
	'ksb_sql_is "$nref" "SELECT count(*) FROM requests WHERE path LIKE \"/reflect/%\" AND reason = \"credential_reflected\" AND status = 200"'

ksb_say "HTTP features real clients use"
printf 'HEAD /head HTTP/1.1\r\nHost: %s.swap.test\r\nx-api-key: @PH@\r\n\r\nGET /check/%s HTTP/1.1\r\nHost: %s.swap.test\r\nx-api-key: @PH@\r\nConnection: close\r\n\r\n' \
	"$B" "$B" "$B" > "$T/head.req"
out=$(raw "$B.swap.test" "$T/head.req")
ksb_check "HEAD (no body) then GET on one tunnel: both answered at once" \
	'[ "$(echo "$out" | grep -c "^HTTP/1.1 200")" = 2 ] && echo "$out" | grep -q "\"match\": true"'
head -c 200000 /dev/urandom | base64 -w0 > "$T/upload.bin"
g=$BG
for expect in with without; do
	if [ $expect = with ]; then e=(); else e=(-H "Expect:"); fi
	tt=$(gcurl "$g" -o "$T/put-$expect.out" -w '%{time_total}' "${e[@]}" \
		-H "x-api-key: $BPH" -T "$T/upload.bin" \
		"https://$B.swap.test/put-$expect") || true
	eval "t_$expect=\$tt"
done
echo "# curl -T 266 KB: ${t_with}s with Expect: 100-continue, ${t_without}s without"
ksb_check "curl -T: the 100 Continue is relayed at once (no 1 s expect wait)" \
	'grep -q "\"len\": $(stat -c %s "$T/upload.bin")" "$T/put-with.out" &&
	 awk -v a="$t_with" "BEGIN { exit !(a < 0.8) }"'

ksb_say "a refusal for a small body sends nothing upstream"
nhold=0
hold() { # WANT WHAT REQFILE: WANT status, and the row
	local out want=$1
	nhold=$((nhold + 1))
	out=$(raw "$B.swap.test" "$3")
	ksb_check "$2: $1" 'echo "$out" | head -1 | grep -q "^HTTP/1.1 $want "'
}
printf 'POST /hold/cl HTTP/1.1\r\nHost: %s.swap.test\r\nx-api-key: @PH@\r\nContent-Length: %d\r\n\r\nhello-first-part@PAUSE@@PH@' \
	"$B" $((16 + ${#BPH})) > "$T/hold.req"
hold 403 "Content-Length body, the placeholder 0.5 s after the head" "$T/hold.req"
printf 'POST /hold/tr HTTP/1.1\r\nHost: %s.swap.test\r\nx-api-key: @PH@\r\nTransfer-Encoding: chunked\r\n\r\n1\r\na\r\n@PAUSE@0\r\nX-T: @PH@\r\n\r\n' \
	"$B" > "$T/hold.req"
hold 403 "the placeholder in a chunked trailer" "$T/hold.req"
printf 'POST /hold/ch HTTP/1.1\r\nHost: %s.swap.test\r\nx-api-key: @PH@\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n@PAUSE@%x\r\n%s\r\n0\r\n\r\n' \
	"$B" "${#BPH}" "$BPH" > "$T/hold.req"
hold 403 "the placeholder in a later chunk" "$T/hold.req"
printf 'POST /hold/t2 HTTP/1.1\r\nHost: %s.swap.test\r\nx-api-key: @PH@\r\nTransfer-Encoding: chunked\r\n\r\n1\r\na\r\n0\r\nHost: evil.example.com\r\n\r\n' \
	"$B" > "$T/hold.req"
hold 400 "any trailer field in a request" "$T/hold.req"
ksb_check "the origin's log: none of their heads arrived (the real value stayed)" \
	'! grep -q "/hold/" "$T/origin.log"'
ksb_check "their rows: 0 bytes went upstream" \
	'ksb_sql_is "$nhold" "SELECT count(*) FROM requests WHERE path LIKE \"/hold/%\" AND bytes_up = 0 AND reason IN (\"credential_misuse\", \"http_trailer_refused\")"'
{
	printf 'PUT /big/cl HTTP/1.1\r\nHost: %s.swap.test\r\nx-api-key: @PH@\r\nContent-Length: %d\r\n\r\n' \
		"$B" $((200000 + ${#BPH}))
	head -c 200000 /dev/zero | tr '\0' a
	printf '@PAUSE@@PH@'
} > "$T/hold.req"
out=$(raw "$B.swap.test" "$T/hold.req")
ksb_check "a body over 64 KiB: refused mid-body, the row says how much went" \
	'echo "$out" | head -1 | grep -q "^HTTP/1.1 403 " &&
	 grep -q "/big/cl" "$T/origin.log" &&
	 ksb_sql_is 1 "SELECT count(*) FROM requests WHERE path = \"/big/cl\" AND reason = \"credential_misuse\" AND bytes_up > 200000"'
head -c 30000 /dev/urandom | base64 -w0 > "$T/small.bin"
tt=$(gcurl "$BG" -o "$T/put-small.out" -w '%{time_total}' \
	-H "Expect: 100-continue" -H "x-api-key: $BPH" -T "$T/small.bin" \
	"https://$B.swap.test/put-small") || true
echo "# curl -T 40 KB held for its scan: ${tt}s"
ksb_check "a small body held for its scan still goes, Expect answered at once" \
	'grep -q "\"len\": $(stat -c %s "$T/small.bin")" "$T/put-small.out" &&
	 awk -v a="$tt" "BEGIN { exit !(a < 0.8) }"'

ksb_say "a response before the request body's end is relayed"
head -c 24000000 /dev/zero > "$T/big.bin"
for expect in with without; do
	if [ $expect = with ]; then e=(); else e=(-H "Expect:"); fi
	out=$(gcurl "$BG" -o "$T/early-$expect.out" -w '%{http_code} %{time_total}' \
		"${e[@]}" -H "x-api-key: $BPH" -T "$T/big.bin" \
		"https://$B.swap.test/early/$expect" 2>&1) || true
	echo "# curl -T 24 MB, $expect Expect, origin answers 413 at once: $out"
	ksb_check "413 while uploading ($expect Expect): the guest gets it, at once" \
		'echo "$out" | awk "{ exit !(\$1 == 413 && \$2 < 2) }" &&
		 grep -qx "too large" "$T/early-$expect.out"'
done
ksb_check "their rows: status 413, no upstream_error" \
	'ksb_sql_is 2 "SELECT count(*) FROM requests WHERE path LIKE \"/early/%\" AND status = 413 AND reason IS NULL"'

ksb_say "no placeholder is ever stored in the audit"
printf 'GET /repo/@PH@/x HTTP/1.1\r\nHost: %s.swap.test\r\n\r\n' "$B" > "$T/ph.req"
out=$(raw "$B.swap.test" "$T/ph.req")
ksb_check "a placeholder in the path: 403, the row says [placeholder $B]" \
	'echo "$out" | grep -q "^HTTP/1.1 403" &&
	 ksb_sql_is 1 "SELECT count(*) FROM requests WHERE path = \"/repo/[placeholder $B]/x\" AND reason = \"credential_misuse\""'
printf 'GET /x/ksbph_0123456789abcdef0123456789abcdef01234567/y HTTP/1.1\r\nHost: %s.swap.test\r\n\r\n' "$B" > "$T/ph.req"
raw "$B.swap.test" "$T/ph.req" > /dev/null
ksb_check "a mark that is no placeholder of the instance: [placeholder]" \
	'ksb_sql_is 1 "SELECT count(*) FROM requests WHERE path = \"/x/[placeholder]/y\""'
n2=header-anthropic-oauth
g2=$(sed -n "s/^$n2 //p" "$T/guest-of")
p2=$(ph "$n2" "$g2")
printf 'GET /f/%s HTTP/1.1\r\nHost: evil.example.com\r\n\r\n' "$p2" > "$T/ph.req"
KSB_PH=$p2 ip netns exec "ksbt-$$-g$g2" python3 "$CLIENT" 10.77.0.1:3128 \
	"$n2.swap.test" "$CA" http/1.1 "$T/ph.req" > /dev/null
ksb_check "a prefixed placeholder in a misdirected path: its name, no prefix" \
	'ksb_sql_is 1 "SELECT count(*) FROM requests WHERE path = \"https://evil.example.com/f/[placeholder $n2]\" AND status = 421"'
ksb_say "the placeholder escaped in any of its bytes is refused the same"
phenc() { # MODE PLACEHOLDER: the placeholder percent- or JSON-escaped
	python3 -c '
import sys
m, p = sys.argv[1], sys.argv[2]
def mix(i, c):
    return "".join(x.upper() if (i + k) % 2 else x
                   for k, x in enumerate("%02x" % ord(c)))
print({"p": p.replace("ph_", "%70h_"),
       "all": "".join("%%%02X" % ord(c) for c in p),
       "mix": "".join("%" + mix(i, c) for i, c in enumerate(p)),
       "u": "".join("\\u%04x" % ord(c) for c in p),
       "umix": "".join(c if i % 3 else "\\u%04X" % ord(c)
                       for i, c in enumerate(p))}[m], end="")' "$1" "$2"; }
nenc=0
encref() { # WHAT REQFILE: 403 credential_misuse
	local out
	nenc=$((nenc + 1))
	out=$(raw "$B.swap.test" "$2")
	ksb_check "$1: 403 credential_misuse" \
		'echo "$out" | head -1 | grep -q "^HTTP/1.1 403 " &&
		 echo "$out" | grep -qi "^X-Ksb-Deny: credential_misuse"'
}
for m in p all mix; do
	printf 'GET /enc/%s/%s HTTP/1.1\r\nHost: %s.swap.test\r\n\r\n' \
		"$m" "$(phenc "$m" "$BPH")" "$B" > "$T/enc.req"
	encref "in the path, escaped ($m)" "$T/enc.req"
	printf 'GET /enc/q%s?k=%s HTTP/1.1\r\nHost: %s.swap.test\r\n\r\n' \
		"$m" "$(phenc "$m" "$BPH")" "$B" > "$T/enc.req"
	encref "in the query, escaped ($m)" "$T/enc.req"
	printf 'GET /enc/h%s HTTP/1.1\r\nHost: %s.swap.test\r\nx-other: %s\r\n\r\n' \
		"$m" "$B" "$(phenc "$m" "$BPH")" > "$T/enc.req"
	encref "in another header, escaped ($m)" "$T/enc.req"
done
printf 'GET /enc/declared HTTP/1.1\r\nHost: %s.swap.test\r\nx-api-key: %s\r\n\r\n' \
	"$B" "$(phenc p "$BPH")" > "$T/enc.req"
encref "escaped in its declared header (no swap)" "$T/enc.req"
for m in u umix; do
	b=$(printf '{"k": "%s"}' "$(phenc "$m" "$BPH")")
	printf 'POST /enc/b%s HTTP/1.1\r\nHost: %s.swap.test\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s' \
		"$m" "$B" "${#b}" "$b" > "$T/enc.req"
	encref "JSON-escaped in a body ($m)" "$T/enc.req"
	printf 'POST /enc/c%s HTTP/1.1\r\nHost: %s.swap.test\r\nTransfer-Encoding: chunked\r\n\r\n' \
		"$m" "$B" > "$T/enc.req"
	python3 -c 'import sys
b = sys.argv[1].encode()
sys.stdout.buffer.write(b"".join(
    b"%x\r\n%s\r\n" % (len(b[i:i + 5]), b[i:i + 5])
    for i in range(0, len(b), 5)) + b"0\r\n\r\n")' "$b" >> "$T/enc.req"
	encref "JSON-escaped in a chunked body, split across chunks ($m)" "$T/enc.req"
done
ksb_check "no escaped placeholder in a head reached the origin" \
	'! grep -q "/enc/[pamhdq]" "$T/origin.log"'
ksb_check "each has its credential_misuse row, the path's placeholder named" \
	'ksb_sql_is "$nenc" "SELECT count(*) FROM requests WHERE path LIKE \"/enc/%\" AND status = 403 AND reason = \"credential_misuse\"" &&
	 ksb_sql_is 3 "SELECT count(*) FROM requests WHERE path IN (\"/enc/p/[placeholder $B]\", \"/enc/all/[placeholder $B]\", \"/enc/mix/[placeholder $B]\")"'
ksb_check "no row holds an escaped placeholder" \
	'ksb_sql_is 0 "SELECT count(*) FROM requests WHERE instr(lower(path), \"%6b%73\") > 0 OR instr(path, \"%70h_\") > 0 OR instr(path, \"\\u\") > 0"'
ksb_check "no row of the audit holds a placeholder" \
	'ksb_sql_is 0 "SELECT count(*) FROM requests WHERE path LIKE \"%ksbph%\" OR method LIKE \"%ksbph%\""'

[ "$fails" = 0 ]
