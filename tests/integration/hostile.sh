#!/bin/bash
# hostile.sh: a hostile guest (root in its VM) against a running
# ksb-gatewayd, from a fake guest namespace with a raw-socket client
# (embedded below, written to $T/hostile.py).  Every case checks the answer
# and the audit row.  Besides request smuggling and ClientHello tricks that
# the gateway already refuses (kept as regressions), three defects fixed
# with this test:
#  - a guest holding many lookups of allowed names that resolve slowly
#    filled evdns' 64 in-flight queries and queued every other guest's
#    lookups behind its own (resolve.c: max-inflight follows
#    max-connections);
#  - Azure's WireServer (168.63.129.16), a public address that only the
#    host's own VM reaches, was not screened (screen.c);
#  - a guest whose kernel drops the gateway's segments left an orphan
#    socket (FIN-WAIT-1, minutes) for every connection refused, denied or
#    timed out, at any rate past the caps (proxy.c: conn_close resets
#    whatever never became a tunnel).
set -eu
. "$(dirname "$0")/../lib.sh"

ksb_need_root
ksb_need python3	# raw-socket client
HOLD=$KSB_BUILDDIR/tests/integration/ctlhold
[ -x "$HOLD" ] || ksb_fail "$HOLD not built (make check builds it)"
ksb_env
ksb_origin

PY=$T/hostile.py
cat > "$PY" <<'PYEOF'
# hostile.py: the guest's side (and a tiny DNS server).  A witness, not
# product code.  Every wait is bounded.
import socket, ssl, struct, sys, time

IP, PORT = "10.77.0.1", 3128


def conn():
    s = socket.create_connection((IP, PORT), timeout=10)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def head(s):
    buf = b""
    while b"\r\n\r\n" not in buf:
        try:
            d = s.recv(4096)
        except OSError:
            d = b""
        if not d:
            return None
        buf += d
    return buf.split(b"\r\n\r\n", 1)[0].decode("latin-1")


def answer(h):
    if h is None:
        return "closed"
    deny = "-"
    for l in h.split("\r\n")[1:]:
        if l.lower().startswith("x-ksb-deny:"):
            deny = l.split(":", 1)[1].strip()
    return "%s %s" % (h.split(" ")[1], deny)


def hello(sni):
    ctx = ssl._create_unverified_context()
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = ctx.wrap_bio(inc, out, server_hostname=sni)
    try:
        tls.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return out.read()


def tunnel(host):
    s = conn()
    s.sendall(b"CONNECT %s:443 HTTP/1.1\r\nHost: %s:443\r\n\r\n" %
              (host.encode(), host.encode()))
    h = head(s)
    return s, ("200" if h is not None and h.split(" ")[1] == "200"
               else answer(h))


def after(s):
    """What the tunnel gives back within 5 s: data, closed, timeout, or
    "alert N" for a fatal TLS alert record (the proxy's refusal)."""
    s.settimeout(5)
    d = b""
    try:
        while len(d) < 7:
            r = s.recv(7 - len(d))
            if not r:
                break
            d += r
    except socket.timeout:
        if not d:
            return "timeout"
    except OSError:
        pass
    if len(d) == 7 and d[:6] == b"\x15\x03\x03\x00\x02\x02":
        return "alert %d" % d[6]
    return "data" if d else "closed"


def fetch(host, sni):
    """CONNECT host, TLS with SNI sni, GET /index.txt: 'tls BODY'."""
    s, a = tunnel(host)
    if a != "200":
        return a
    ctx = ssl._create_unverified_context()
    try:
        t = ctx.wrap_socket(s, server_hostname=sni)
        t.sendall(b"GET /index.txt HTTP/1.0\r\n\r\n")
        body = b""
        while True:
            d = t.recv(4096)
            if not d:
                break
            body += d
    except (OSError, ssl.SSLError):
        return "closed"
    return "tls " + body.split(b"\r\n\r\n", 1)[-1].decode().strip()


def dns(addr):
    """A -> 10.78.0.2 for fast.test; *.slow.test never answered; else
    NXDOMAIN.  The question is echoed as received (0x20 case)."""
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u.bind((addr, 53))
    end = time.monotonic() + 600
    while time.monotonic() < end:
        d, a = u.recvfrom(2048)
        i, labels = 12, []
        while i < len(d) and d[i]:
            labels.append(d[i + 1:i + 1 + d[i]].decode("latin-1").lower())
            i += 1 + d[i]
        q = d[12:i + 5]
        qtype = struct.unpack(">H", d[i + 1:i + 3])[0]
        name = ".".join(labels)
        if name.endswith(".slow.test"):
            continue
        if name == "fast.test":
            ans = b""
            if qtype == 1:
                ans = (b"\xc0\x0c" + struct.pack(">HHIH", 1, 1, 60, 4) +
                       socket.inet_aton("10.78.0.2"))
            u.sendto(d[:2] + b"\x81\x80" + struct.pack(">HHHH", 1,
                     1 if ans else 0, 0, 0) + q + ans, a)
        else:
            u.sendto(d[:2] + b"\x81\x83" + struct.pack(">HHHH", 1, 0, 0, 0)
                     + q, a)


case, args = sys.argv[1], sys.argv[2:]
if case == "req":
    s = conn()
    s.sendall(args[0].encode("latin-1").decode("unicode_escape")
              .encode("latin-1"))
    print(answer(head(s)))
elif case == "fetch":
    print(fetch(args[0], args[1]))
elif case == "timed":
    # timed HOST SNI: fetch, and how long it took: "... ms=N".
    t0 = time.monotonic()
    r = fetch(args[0], args[1])
    print("%s ms=%d" % (r, (time.monotonic() - t0) * 1000))
elif case == "bytes":
    # bytes HOST KIND: a malformed ClientHello after the 200.
    s, a = tunnel(args[0])
    if a != "200":
        print(a)
        sys.exit(0)
    h = hello(args[0])
    data = {
        "hello": h,
        "zero_record": b"\x16\x03\x01\x00\x00" + h,
        "sslv2": b"\x80\x2e\x01\x00\x02\x00\x15\x00\x00\x00\x10" + b"\0" * 37,
        "second_hello": h + hello("denied.test"),
        "pipelined_connect": b"CONNECT denied.test:443 HTTP/1.1\r\n\r\n",
    }[args[1]]
    s.sendall(data)
    print(after(s))
elif case == "slowdns":
    # slowdns N: N CONNECTs to names whose lookups never complete (the
    # gateway resolves before it answers); "held N" once all are sent and
    # none was answered, then keep them until stdin closes (10 s at most).
    socks = []
    for k in range(int(args[0])):
        s = conn()
        s.sendall(b"CONNECT r%d.slow.test:443 HTTP/1.1\r\n\r\n" % k)
        socks.append(s)
    import select
    r, _, _ = select.select(socks, [], [], 0.5)
    if r:
        print("refused %s" % answer(head(r[0])), flush=True)
        sys.exit(1)
    print("held %d" % len(socks), flush=True)
    import select
    select.select([sys.stdin], [], [], 10)
elif case == "flood":
    # flood N: N connections as fast as they open, each with a request for
    # a denied host, kept open (30 s at most, until stdin closes): "open N".
    import resource, select
    resource.setrlimit(resource.RLIMIT_NOFILE, (4096, 4096))
    socks = []
    for k in range(int(args[0])):
        s = socket.socket()
        s.settimeout(5)
        s.connect((IP, PORT))
        s.sendall(b"CONNECT denied.test:443 HTTP/1.1\r\n\r\n")
        socks.append(s)
    print("open %d" % len(socks), flush=True)
    select.select([sys.stdin], [], [], 30)
    for s in socks:	# reset: no orphan of ours either
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                     struct.pack("ii", 1, 0))
        s.close()
elif case == "dns":
    dns(args[0])
else:
    sys.exit("unknown case " + case)
PYEOF

# The resolver of ksb_env's ksb.conf (127.0.0.1:53 in the gateway's
# namespace): fast.test answers, *.slow.test never does.
ip netns exec "$GW" python3 "$PY" dns 127.0.0.1 > "$T/dns.log" 2>&1 &
KSB_PIDS="$KSB_PIDS $!"
cat >> "$T/hosts" <<'HOSTS'
10.78.0.2 mixed.test
192.168.7.7 mixed.test
168.63.129.16 wire.test
HOSTS
cat > "$T/policy.d/test.policy" <<'POL'
profile default {
    allow allowed.test
    allow fast.test
    allow *.slow.test
    allow mixed.test
    allow wire.test
    allow-address 10.78.0.0/24
}
POL
cat >> "$T/ksb.conf" <<'CONF'
header-timeout = 3
hello-timeout = 3
resolve-timeout = 3
connect-timeout = 2
CONF
ksb_gateway
ksb_fake_guest 1 h1
ksb_fake_guest 2 h2

fails=0
pass=0
in_g() { local n=$1; shift; ip netns exec "ksbt-$$-g$n" timeout 30 "$@"; }
hp() { local n=$1; shift; in_g "$n" python3 "$PY" "$@" 2>/dev/null; }
I="instance = 'h1'"
# expect WHAT WANT ROW-WHERE CMD...: CMD prints WANT, and (ROW-WHERE not
# empty) it added exactly one audit row of h1 matching ROW-WHERE.
expect() {
	local what=$1 want=$2 where=$3 got n0=0
	shift 3
	[ -z "$where" ] || n0=$(ksb_rows "$I AND $where")
	got=$("$@" 2>&1) || true
	ksb_check "$what: '$got'" '[ "$got" = "$want" ]'
	[ -z "$where" ] || ksb_check "$what: audit row" 'ksb_row_is $((n0 + 1)) "$I AND $where"'
}

ksb_say "request targets two parsers could read differently"
expect "host:port:port -> 400" "400 bad_request" "" \
	hp 1 req 'CONNECT allowed.test:443:80 HTTP/1.1\r\n\r\n'
expect "port 0 -> 400" "400 bad_request" "" \
	hp 1 req 'CONNECT allowed.test:0 HTTP/1.1\r\n\r\n'
expect "port 65536 -> 400" "400 bad_request" "" \
	hp 1 req 'CONNECT allowed.test:65536 HTTP/1.1\r\n\r\n'
expect "port 443abc -> 400" "400 bad_request" "" \
	hp 1 req 'CONNECT allowed.test:443abc HTTP/1.1\r\n\r\n'
expect "userinfo -> 400" "400 bad_request" "" \
	hp 1 req 'CONNECT x@allowed.test:443 HTTP/1.1\r\n\r\n'
expect "absolute-form -> 400" "400 bad_request" "" \
	hp 1 req 'CONNECT http://allowed.test:443/ HTTP/1.1\r\n\r\n'
expect "LF-only lines -> 400" "400 bad_request" "" \
	hp 1 req 'CONNECT allowed.test:443 HTTP/1.1\n\n'
ksb_check "seven 400 bad_request rows" \
	'ksb_row_is 7 "$I AND reason = '"'bad_request'"' AND host IS NULL"'
expect "percent-encoded NUL -> 400 bad_host" "400 bad_host" \
	"host = 'allowed.test%00' AND reason = 'bad_host'" \
	hp 1 req 'CONNECT allowed.test%00:443 HTTP/1.1\r\n\r\n'
expect "[::ffff:127.0.0.1] -> 403 ip_literal" "403 ip_literal" \
	"host = '[::ffff:127.0.0.1]' AND reason = 'ip_literal'" \
	hp 1 req 'CONNECT [::ffff:127.0.0.1]:443 HTTP/1.1\r\n\r\n'
expect "a CONNECT for a denied host after an allowed one's 200: not TLS" \
	"alert 50" "host = 'allowed.test' AND reason = 'not_tls'" \
	hp 1 bytes allowed.test pipelined_connect
ksb_check "no row for the pipelined request's host" \
	'[ "$(ksb_rows "$I AND host = '"'denied.test'"'")" = 0 ]'

ksb_say "ClientHello tricks"
expect "zero-length record" "alert 50" "reason = 'bad_hello'" \
	hp 1 bytes allowed.test zero_record
expect "SSLv2-style hello" "alert 50" "reason = 'not_tls'" \
	hp 1 bytes allowed.test sslv2
expect "SNI with a trailing dot and capitals is the CONNECT host" \
	"tls $ORIGIN_BODY" "sni = 'allowed.test' AND decision = 'allow' AND bytes_down > 0" \
	hp 1 fetch ALLOWED.test. Allowed.Test.
# The first hello is the one checked; a second one is the guest's own TLS
# session with the allowed host's address, whose server refuses it.
expect "a second hello (other SNI) goes to the allowed upstream only" "data" \
	"sni = 'allowed.test' AND decision = 'allow' AND upstream_addr = '10.78.0.2' AND bytes_up > 600" \
	hp 1 bytes allowed.test second_hello

ksb_say "screening"
expect "a public address among screened ones is used" "tls $ORIGIN_BODY" \
	"host = 'mixed.test' AND decision = 'allow' AND upstream_addr = '10.78.0.2'" \
	hp 1 fetch mixed.test mixed.test
expect "Azure WireServer address screened" "403 address_screened" \
	"host = 'wire.test' AND reason = 'address_screened' AND upstream_addr = '168.63.129.16'" \
	hp 1 bytes wire.test hello

ksb_say "lookups: one guest's slow names do not queue another guest's"
mkfifo "$T/slowdns"
hp 1 slowdns 100 < "$T/slowdns" > "$T/slowdns.out" &
SP=$!
exec {SFD}>"$T/slowdns"
ksb_until 20 grep -q '^held\|^refused' "$T/slowdns.out" || true
ksb_check "h1 holds 100 lookups (200 queries): $(cat "$T/slowdns.out")" \
	'grep -q "^held 100$" "$T/slowdns.out"'
got=$(hp 2 timed fast.test fast.test) || true
ms=${got##*ms=}
ksb_check "h2's lookup is answered meanwhile: '$got'" \
	'[ "${got% ms=*}" = "tls $ORIGIN_BODY" ] && [ "$ms" -lt 1500 ]'
exec {SFD}>&-
wait "$SP" || true
ksb_check "h2's row" 'ksb_row_is 1 "instance = '"'h2'"' AND host = '"'fast.test'"' AND decision = '"'allow'"'"'
ksb_check "h1's slow lookups end as resolve_failed" \
	'ksb_rows_ge 100 "$I AND host LIKE '"'r%.slow.test'"' AND reason = '"'resolve_failed'"'"'

ksb_say "a guest that drops the gateway's segments leaves no orphans"
# h3's kernel drops everything from the proxy but its SYN-ACKs: our
# answers and FINs are never acknowledged.  1000 connections: 200 pass the
# rate cap (408 at the header deadline), 512 get a lingering 429, the rest
# are closed at once.  Each close must reset, not leave a FIN-WAIT-1
# orphan retransmitting for minutes.
ksb_fake_guest 3 h3
ip netns exec "ksbt-$$-g3" nft -f - <<'NFT'
table inet hostile {
	chain in {
		type filter hook input priority 0;
		tcp sport 3128 tcp flags & syn != syn drop
	}
}
NFT
H3=$(sed -n 's/^ip=\([^/ ]*\).*/\1/p' "$T/lease3")
mkfifo "$T/flood"
hp 3 flood 1000 < "$T/flood" > "$T/flood.out" &
FP=$!
exec {FFD}>"$T/flood"
ksb_until 20 grep -q '^open' "$T/flood.out" || true
ksb_check "h3 opened 1000 connections: $(cat "$T/flood.out")" \
	'grep -q "^open 1000$" "$T/flood.out"'
h3_socks() {	# the proxy's sockets with h3, in any state
	ip netns exec "$GW" ss -Htan "( sport = :3128 and dst $H3 )" | wc -l
}
h3_gone() { [ "$(h3_socks)" = 0 ]; }
# Header deadline 3 s, then LINGER_MS 2 s: all gone well within 12 s
# (h3 holds its ends for 30 s), unless closed ones stay behind as orphans
# (FIN-WAIT-1, for minutes).
ksb_check "the proxy ends them all, no orphan left behind" 'ksb_until 12 h3_gone'
ip netns exec "$GW" ss -Htan "( sport = :3128 and dst $H3 )" |
	awk '{ n[$1]++ } END { for (s in n) printf "# left: %d %s\n", n[s], s }'
exec {FFD}>&-
wait "$FP" || true

ksb_say "the gateway afterwards"
ksb_check "gateway alive" 'kill -0 "$KSB_GATEWAY_PID"'
got=$(hp 2 fetch allowed.test allowed.test) || true
ksb_check "h2 still served: '$got'" '[ "$got" = "tls $ORIGIN_BODY" ]'
ksb_check "the log holds no control bytes" \
	'! LC_ALL=C grep -q "[[:cntrl:]]" "$T/gatewayd.log"'

echo "# $pass passed, $fails failed"
[ "$fails" = 0 ]
