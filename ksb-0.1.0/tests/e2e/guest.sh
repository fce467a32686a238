#!/bin/sh
# Runs inside the ksb guest as the agent user (see tests/e2e/main.sh).
# Prints "RESULT <name> ok|FAIL <detail>" lines; exits with the count of
# failures.  Every network step has a timeout.
fails=0
ok() { echo "RESULT $1 ok"; }
bad() { echo "RESULT $1 FAIL $2"; fails=$((fails + 1)); }
CA=/ksb-test/ca.pem

[ "$(id -u)" = 1000 ] && ok agent_uid || bad agent_uid "uid $(id -u)"
[ -n "$https_proxy" ] && ok proxy_env || bad proxy_env "https_proxy unset"
[ ! -s /etc/resolv.conf ] && ok no_resolver || bad no_resolver "$(cat /etc/resolv.conf)"

# 1. allowed.test through the proxy, certificate verified by the test CA.
body=$(curl -sS --max-time 20 --cacert "$CA" https://allowed.test/index.txt 2>&1)
case "$body" in
"hello from the origin"*) ok allowed ;;
*) bad allowed "$body" ;;
esac

# 2. denied.test: the proxy answers 403.
code=$(curl -sS -o /dev/null --max-time 20 -w '%{http_connect}' --cacert "$CA" \
	https://denied.test/index.txt 2>/dev/null)
[ "$code" = 403 ] && ok denied_403 || bad denied_403 "CONNECT code $code"

# 3. A direct TCP connection to the origin's address fails.
if curl -sS --noproxy '*' --max-time 5 --connect-timeout 4 -k \
	https://10.78.0.2/index.txt >/dev/null 2>&1; then
	bad direct_blocked "direct connection succeeded"
else
	ok direct_blocked
fi
# ... and so does TCP to any other port of the gateway.
if curl -sS --noproxy '*' --max-time 4 --connect-timeout 3 \
	http://10.77.0.1:22/ >/dev/null 2>&1; then
	bad gateway_port_blocked "gateway port 22 answered"
else
	ok gateway_port_blocked
fi

# 4. DNS: no resolver; a query to the gateway's port 53 is dropped (the host
#    side checks that nothing arrived).
if getent hosts allowed.test >/dev/null 2>&1; then
	bad dns_lookup "name resolved inside the guest"
else
	ok dns_lookup
fi
printf 'ksb-dns-probe' > /dev/udp/10.77.0.1/53 2>/dev/null || true
bash -c "printf 'ksb-dns-probe' > /dev/udp/10.77.0.1/53" 2>/dev/null || true
bash -c "printf 'ksb-dns-probe' > /dev/udp/10.78.0.2/53" 2>/dev/null || true

# 5. CONNECT allowed.test, ClientHello with SNI denied.test: refused.
out=$(timeout 20 openssl s_client -proxy 10.77.0.1:3128 -connect allowed.test:443 \
	-servername denied.test -CAfile "$CA" </dev/null 2>&1)
case "$out" in
*"BEGIN CERTIFICATE"*) bad sni_mismatch "handshake completed" ;;
*"no peer certificate"*) ok sni_mismatch ;;
*) bad sni_mismatch "unexpected s_client output" ;;
esac

# 6. The allowed host once more, to show the tunnel still works.
body=$(curl -sS --max-time 20 --cacert "$CA" https://allowed.test/index.txt 2>&1)
case "$body" in
"hello from the origin"*) ok allowed_again ;;
*) bad allowed_again "$body" ;;
esac
exit $fails
