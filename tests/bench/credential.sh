#!/bin/bash
# credential.sh: what TLS termination and the placeholder swap cost per
# request (issue 14), in one run: the same origin (cred_origin.py, one
# process, one certificate for both names) reached through ksb-gatewayd as
# plain.test (an ordinary tunnel: SNI check, splice relay) and as api.test
# (bound to a credential: terminated, parsed, swapped, re-encrypted).  A
# keep-alive client (Python http.client over CONNECT) in a fake guest
# sends N requests on one tunnel per case and times each; the proxy
# process's CPU time (utime + stime, /proc/PID/stat) over the run gives
# the CPU per request; then N POSTs, each answered with Connection: close
# (a request with a body ends its tunnel, ksb-policy(5)), so each opens a
# new tunnel.  A terminated request waits for its request_opens
# row's commit before its head goes upstream (issue 29): that wait is in
# the terminated case's latency.  A third case (issue 32) is h2: the same
# requests, one stream at a time on one h2 connection (python3-h2 client
# and tests/integration/h2_origin.py) to h2.test, terminated and swapped
# per stream (skipped without python3-h2).  Root; not part of `make check'.
#
#   tests/bench/credential.sh [N]   (default 2000 requests per case)
#
# Prints p50/p99 latency (ms) and proxy CPU per request (us) for both,
# and the differences.  The origin and client are Python: their own cost
# is in the latency, the same for both cases; the CPU column is the
# gateway's alone.
set -eu
. "$(dirname "$0")/../lib.sh"

N=${1:-2000}
ksb_need_root
command -v python3 >/dev/null || ksb_skip "needs python3"
HOLD=$KSB_BUILDDIR/tests/integration/ctlhold
ORIGIN=$KSB_SRCDIR/tests/integration/cred_origin.py
ksb_env
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
	-keyout "$T/pki/b.key" -out "$T/pki/b.csr" -subj "/CN=api.test" \
	>/dev/null 2>&1
printf 'subjectAltName=DNS:api.test,DNS:plain.test\n' > "$T/pki/b.ext"
openssl x509 -req -in "$T/pki/b.csr" -CA "$T/pki/ca.pem" -CAkey "$T/pki/ca.key" \
	-CAcreateserial -days 2 -extfile "$T/pki/b.ext" -out "$T/pki/b.pem" \
	>/dev/null 2>&1
umask 077
echo "sk-bench-real-$RANDOM$RANDOM" > "$T/key"
umask 022
ip netns exec "$OR" python3 "$ORIGIN" "$ORIGIN_IP" 443 "$T/pki/b.pem" \
	"$T/pki/b.key" "$T/key" /dev/null > "$T/origin.err" 2>&1 &
KSB_PIDS="$KSB_PIDS $!"
ksb_wait_port "$OR" "$ORIGIN_IP" 443
printf '%s api.test\n%s plain.test\n' "$ORIGIN_IP" "$ORIGIN_IP" >> "$T/hosts"
PY=/usr/bin/python3
H2=
if $PY -c 'import h2' 2>/dev/null; then
	H2=1
	openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
		-keyout "$T/pki/h.key" -out "$T/pki/h.csr" -subj "/CN=h2.test" \
		>/dev/null 2>&1
	printf 'subjectAltName=DNS:h2.test\n' > "$T/pki/h.ext"
	openssl x509 -req -in "$T/pki/h.csr" -CA "$T/pki/ca.pem" -CAkey "$T/pki/ca.key" \
		-CAcreateserial -days 2 -extfile "$T/pki/h.ext" -out "$T/pki/h.pem" \
		>/dev/null 2>&1
	ip -n "$OR" addr add 10.78.0.6/24 dev ko1
	ip netns exec "$OR" $PY "$KSB_SRCDIR/tests/integration/h2_origin.py" 10.78.0.6 443 \
		"$T/pki/h.pem" "$T/pki/h.key" "$T/key" /dev/null > "$T/h2origin.err" 2>&1 &
	KSB_PIDS="$KSB_PIDS $!"
	ksb_wait_port "$OR" 10.78.0.6 443
	echo "10.78.0.6 h2.test" >> "$T/hosts"
fi
echo "upstream-ca-file = $T/pki/ca.pem" >> "$T/ksb.conf"
cat > "$T/policy.d/test.policy" <<POL
credential api {
    host api.test
    host h2.test
    header x-api-key
    source file $T/key
    secret API_KEY
}
profile default {
    allow api.test
    allow plain.test
    allow h2.test
    allow-address 10.78.0.0/24
    credential api
}
POL
ksb_gateway
ksb_fake_guest 1 g1
PH=$(sed -n 's|^cred=api/[^/]*/||p' "$T/lease1")
PROXY_PID=$(pgrep -P "$KSB_GATEWAY_PID" | head -n 1)
cpu() { awk '{print $14 + $15}' "/proc/$PROXY_PID/stat"; }
hz=$(getconf CLK_TCK)

run() { # HOST KEY [POST] -> "p50 p99" in ms
	ip netns exec "ksbt-$$-g1" python3 - "$1" "$2" "$N" "$T/pki/ca.pem" \
		"$T/state/ca/ca.crt" "${3:-GET}" <<'PY'
import http.client, ssl, sys, time
host, key, n, ca1, ca2, m = sys.argv[1], sys.argv[2], int(sys.argv[3]), \
    sys.argv[4], sys.argv[5], sys.argv[6]
ctx = ssl.create_default_context(cafile=ca1)
ctx.load_verify_locations(ca2)
c = http.client.HTTPSConnection("10.77.0.1", 3128, context=ctx, timeout=30)
c.set_tunnel(host, 443)
lat = []
for i in range(n + 20):
    t0 = time.perf_counter()
    if m == "POST":  # a body: its answer ends the tunnel (CL.0), and
        # http.client opens a new one (CONNECT, TLS) for the next
        c.request("POST", "/upload", body=b'{"n": 1}',
                  headers={"x-api-key": key})
    else:
        c.request("GET", "/echo", headers={"x-api-key": key})
    r = c.getresponse()
    r.read()
    if r.status != 200:
        sys.exit("status %d" % r.status)
    if i >= 20:  # the first requests (handshakes) are not counted
        lat.append(time.perf_counter() - t0)
lat.sort()
print("%.3f %.3f" % (lat[len(lat) // 2] * 1e3, lat[int(len(lat) * 0.99)] * 1e3))
PY
}
runh2() { # HOST KEY -> "p50 p99" in ms: one stream at a time, one connection
	ip netns exec "ksbt-$$-g1" $PY - "$1" "$2" "$N" "$T/state/ca/ca.crt" <<'PY'
import socket, ssl, sys, time
import h2.connection, h2.events
host, key, n, ca = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
s = socket.create_connection(("10.77.0.1", 3128))
s.sendall(("CONNECT %s:443 HTTP/1.1\r\nHost: %s:443\r\n\r\n" % (host, host)).encode())
b = b""
while b"\r\n\r\n" not in b:
    b += s.recv(4096)
ctx = ssl.create_default_context(cafile=ca)
ctx.set_alpn_protocols(["h2"])
t = ctx.wrap_socket(s, server_hostname=host)
assert t.selected_alpn_protocol() == "h2"
c = h2.connection.H2Connection()
c.initiate_connection()
t.sendall(c.data_to_send())
lat = []
for i in range(n + 20):
    t0 = time.perf_counter()
    sid = c.get_next_available_stream_id()
    c.send_headers(sid, [(":method", "GET"), (":scheme", "https"),
                         (":authority", host), (":path", "/echo"),
                         ("x-api-key", key)], end_stream=True)
    t.sendall(c.data_to_send())
    done = False
    while not done:
        for ev in c.receive_data(t.recv(65536)):
            if isinstance(ev, h2.events.DataReceived):
                c.acknowledge_received_data(ev.flow_controlled_length, sid)
            if isinstance(ev, h2.events.StreamEnded) and ev.stream_id == sid:
                done = True
        t.sendall(c.data_to_send())
    if i >= 20:
        lat.append(time.perf_counter() - t0)
lat.sort()
print("%.3f %.3f" % (lat[len(lat) // 2] * 1e3, lat[int(len(lat) * 0.99)] * 1e3))
PY
}
c0=$(cpu); plain=$(run plain.test "$PH"); c1=$(cpu)
term=$(run api.test "$PH"); c2=$(cpu)
post=$(run api.test "$PH" POST); c3=$(cpu)
pcpu=$(echo "($c1 - $c0) * 1000000 / $hz / ($N + 20)" | bc)
tcpu=$(echo "($c2 - $c1) * 1000000 / $hz / ($N + 20)" | bc)
ocpu=$(echo "($c3 - $c2) * 1000000 / $hz / ($N + 20)" | bc)
set -- $plain $term $post
printf '%-34s %10s %10s %16s\n' "case ($N keep-alive requests)" "p50 ms" "p99 ms" "proxy CPU us/req"
printf '%-34s %10s %10s %16s\n' "plain tunnel (splice)" "$1" "$2" "$pcpu"
printf '%-34s %10s %10s %16s\n' "terminated + swap" "$3" "$4" "$tcpu"
printf '%-34s %10s %10s %16s\n' "added by termination" \
	"$(echo "$3 - $1" | bc)" "$(echo "$4 - $2" | bc)" "$((tcpu - pcpu))"
printf '%-34s %10s %10s %16s\n' "terminated POST (a tunnel each)" "$5" "$6" "$ocpu"
if [ -n "$H2" ]; then
	c5=$(cpu); h2r=$(runh2 h2.test "$PH"); c6=$(cpu)
	hcpu=$(echo "($c6 - $c5) * 1000000 / $hz / ($N + 20)" | bc)
	set -- $term $h2r
	printf '%-34s %10s %10s %16s\n' "terminated + swap, h2 (per stream)" "$3" "$4" "$hcpu"
	printf '%-34s %10s %10s %16s\n' "h2 against HTTP/1.1" \
		"$(echo "$3 - $1" | bc)" "$(echo "$4 - $2" | bc)" "$((hcpu - tcpu))"
fi
ksb_check "every terminated request carried the real value" \
	'ksb_sql_is 1 "SELECT count(*) >= $N * (1 + ${H2:-0}) FROM requests WHERE credential = \"api\" AND status = 200"'
ksb_check "every terminated request had its request_opens row" \
	'ksb_sql_is 1 "SELECT (SELECT count(*) FROM request_opens WHERE credential = \"api\") = (SELECT count(*) FROM requests WHERE credential = \"api\")"'
