#!/usr/bin/env bash
# Test-only TLS material (never use it elsewhere: the keys are public): a CA and a certificate
# for localhost and 127.0.0.1 that it signed, valid for a century. Regenerate with ./make.sh.
set -euo pipefail
cd "$(dirname "$0")"
days=36500
openssl ecparam -name prime256v1 -genkey -noout -out ca.key
openssl req -x509 -new -key ca.key -sha256 -days "$days" -subj "/CN=weir test CA" -out ca.crt
openssl ecparam -name prime256v1 -genkey -noout | openssl pkcs8 -topk8 -nocrypt -out server.key
openssl req -new -key server.key -subj "/CN=localhost" -out server.csr
printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature\nextendedKeyUsage=serverAuth\n' > server.ext
openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -sha256 -days "$days" \
  -extfile server.ext -out server.crt
rm -f server.csr server.ext ca.srl ca.key
