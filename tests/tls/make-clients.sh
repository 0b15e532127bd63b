#!/usr/bin/env bash
# Generates the client certificates of tests/tls/ (checked in) from the test CA (ca.pem,
# ca.key; see make.sh): X.509 version 1 certificates as HAProxy's own tests use (no
# extensions), one valid for 100 years, one expired, one revoked, a self-signed one nobody trusts,
# a server certificate of version 1 too (CN server-v1), and a version 1 CRL of the test CA
# that lists the revoked one. Run after make.sh.
# Usage: bash tests/tls/make-clients.sh (from anywhere).
set -euo pipefail
cd "$(dirname "$0")"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
touch "$work/index.txt"
echo 1001 > "$work/serial"
cat > "$work/ca.cnf" <<CNF
[ca]
default_ca = test
[test]
database = $work/index.txt
serial = $work/serial
new_certs_dir = $work
certificate = ca.pem
private_key = ca.key
default_md = sha256
policy = any
default_crl_days = 36500
[any]
commonName = supplied
CNF
client() { # NAME START END (serials 0x1001, 0x1002... in order)
  openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$1" \
    -keyout "$work/$1.key" -out "$work/$1.csr" 2>/dev/null
  openssl ca -batch -config "$work/ca.cnf" -in "$work/$1.csr" -startdate "$2" -enddate "$3" \
    -notext -out "$work/$1.crt" 2>/dev/null
  cat "$work/$1.crt" "$work/$1.key" > "$1.pem"
}
client client-v1 20240101000000Z 21240101000000Z
client client-expired 20200101000000Z 20210101000000Z
client client-revoked 20240101000000Z 21240101000000Z
# A server's version 1 certificate (HAProxy's tests serve some).
client server-v1 20240101000000Z 21240101000000Z
openssl ca -batch -config "$work/ca.cnf" -revoke "$work/client-revoked.crt" 2>/dev/null
openssl ca -batch -config "$work/ca.cnf" -gencrl -out crl.pem 2>/dev/null
# A certificate signed by nobody the tests trust (self-signed).
openssl req -x509 -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 36500 \
  -subj "/CN=stranger" -keyout "$work/stranger.key" -out "$work/stranger.crt" 2>/dev/null
cat "$work/stranger.crt" "$work/stranger.key" > client-stranger.pem
