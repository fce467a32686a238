#!/bin/sh
# fakeapi_certs.sh OUTDIR: a throwaway test CA and a server certificate for
# the fake model API (tests/e2e/fakeapi.py), valid for api.anthropic.com,
# platform.claude.com, api.openai.com, auth.openai.com (the token endpoint),
# localhost and 127.0.0.1.
# Writes OUTDIR/ca.pem (give it to the agents: NODE_EXTRA_CA_CERTS for Claude
# Code, SSL_CERT_FILE for Codex), OUTDIR/ca.key, OUTDIR/server.pem (leaf then
# CA) and OUTDIR/server.key.  Idempotent: keeps existing files that are valid
# for at least another day.  Needs openssl.
set -eu
[ $# = 1 ] || { echo "usage: $0 OUTDIR" >&2; exit 2; }
out=$1
command -v openssl >/dev/null 2>&1 || { echo "$0: openssl not found" >&2; exit 1; }
mkdir -p "$out"

if [ -f "$out/ca.pem" ] && [ -f "$out/server.key" ] && [ -f "$out/server.pem" ] &&
	openssl x509 -in "$out/server.pem" -noout -checkend 86400 >/dev/null 2>&1; then
	exit 0
fi

tmp=$(mktemp -d "$out/.certs.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM
q() { "$@" >"$tmp/log" 2>&1 || { cat "$tmp/log" >&2; exit 1; }; }

q openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
	-keyout "$tmp/ca.key" -out "$tmp/ca.pem" -days 30 -subj "/CN=ksb fake API test CA" \
	-addext "basicConstraints=critical,CA:TRUE" \
	-addext "keyUsage=critical,keyCertSign,cRLSign" \
	-addext "subjectKeyIdentifier=hash"
q openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
	-keyout "$tmp/server.key" -out "$tmp/server.csr" -subj "/CN=api.anthropic.com"
cat > "$tmp/ext" <<'EOF'
basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectKeyIdentifier=hash
authorityKeyIdentifier=keyid
subjectAltName=DNS:api.anthropic.com,DNS:platform.claude.com,DNS:api.openai.com,DNS:auth.openai.com,DNS:localhost,IP:127.0.0.1
EOF
q openssl x509 -req -in "$tmp/server.csr" -CA "$tmp/ca.pem" -CAkey "$tmp/ca.key" \
	-CAcreateserial -days 29 -extfile "$tmp/ext" -out "$tmp/leaf.pem"
cat "$tmp/leaf.pem" "$tmp/ca.pem" > "$tmp/server.pem"
chmod 600 "$tmp/ca.key" "$tmp/server.key"
chmod 644 "$tmp/ca.pem" "$tmp/server.pem"
for f in ca.key ca.pem server.key server.pem; do
	mv -f "$tmp/$f" "$out/$f"
done
