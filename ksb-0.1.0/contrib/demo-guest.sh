#!/bin/sh
# Runs inside the demo guest as the agent user (contrib/demo.sh).
echo "guest: I am $(id -un) (uid $(id -u)) on $(uname -r); https_proxy=$https_proxy"
echo
echo "guest\$ curl https://allowed.test/index.txt"
curl -sS --max-time 20 --cacert /ksb-test/ca.pem https://allowed.test/index.txt
echo
echo "guest\$ curl -v https://denied.test/index.txt   # the gateway's answer"
curl -sS -v --max-time 20 --cacert /ksb-test/ca.pem https://denied.test/index.txt 2>&1 |
	grep -iE '^< (HTTP|X-Ksb-Deny)|^curl:'
echo "  (the proxy refused the CONNECT: 403, reason in X-Ksb-Deny)"
echo
echo "guest\$ curl --noproxy '*' https://10.78.0.2/   # straight to the origin"
curl -sS --noproxy '*' --max-time 5 -k https://10.78.0.2/index.txt
echo "  (curl exit status $?)"
echo
echo "guest\$ getent hosts allowed.test   # no DNS in the guest"
getent hosts allowed.test || echo "  (no answer: exit status $?)"
exit 0
