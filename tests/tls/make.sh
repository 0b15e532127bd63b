#!/usr/bin/env bash
# Regenerates the test certificates of tests/tls/ (checked in, valid for 100 years, so tests need
# no openssl): a CA, then RSA-2048 and ECDSA P-256 leaves signed by it, each written as a bundle
# (leaf, CA, key) as `bind ... crt FILE` takes it, plus a leaf whose key sits in FILE.key.
# Usage: bash tests/tls/make.sh (from anywhere).
set -euo pipefail
cd "$(dirname "$0")"
days=36500
openssl req -x509 -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days $days \
  -subj "/CN=Bascule Test CA" -keyout ca.key -out ca.pem 2>/dev/null
leaf() { # NAME KEYSPEC CN SANS
  local name=$1 keyspec=$2 cn=$3 sans=$4
  openssl req -new -newkey "$keyspec" ${5:+-pkeyopt "$5"} -nodes -subj "/CN=$cn" \
    -keyout "$name.key" -out "$name.csr" 2>/dev/null
  printf 'subjectAltName=%s\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth,clientAuth\n' "$sans" > "$name.ext"
  openssl x509 -req -in "$name.csr" -CA ca.pem -CAkey ca.key -CAcreateserial -days $days \
    -extfile "$name.ext" -out "$name.crt" 2>/dev/null
  rm -f "$name.csr" "$name.ext"
}
leaf www-rsa rsa:2048 www.example.com "DNS:www.example.com,DNS:example.com"
leaf www-ecdsa ec www.example.com "DNS:www.example.com,DNS:example.com" ec_paramgen_curve:P-256
leaf wild-ecdsa ec "*.example.org" "DNS:*.example.org" ec_paramgen_curve:P-256
leaf split ec split.example.net "DNS:split.example.net" ec_paramgen_curve:P-256
for n in www-rsa www-ecdsa wild-ecdsa; do cat "$n.crt" ca.pem "$n.key" > "$n.pem"; rm -f "$n.crt" "$n.key"; done
# The key beside the certificate, in FILE.key (HAProxy's other layout).
mv split.crt split.pem && mv split.key split.pem.key
# Replacements for `set ssl cert` (tests/tls_cert_update.rs): one for the same names with a
# richer subject, a serial whose top bit is set and an IP among its alternative names; one
# that answers another name.
rotation() { # NAME KEYSPEC SUBJECT SANS SERIAL [PKEYOPT]
  local name=$1 keyspec=$2 subj=$3 sans=$4 serial=$5
  openssl req -new -newkey "$keyspec" ${6:+-pkeyopt "$6"} -nodes -subj "$subj" \
    -keyout "$name.key" -out "$name.csr" 2>/dev/null
  printf 'subjectAltName=%s\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n' "$sans" > "$name.ext"
  openssl x509 -req -in "$name.csr" -CA ca.pem -CAkey ca.key -set_serial "$serial" -days $days \
    -extfile "$name.ext" -out "$name.crt" 2>/dev/null
  cat "$name.crt" ca.pem "$name.key" > "$name.pem"
  rm -f "$name.csr" "$name.ext" "$name.crt" "$name.key"
}
rotation next-www ec "/C=FR/O=Bascule Tests/CN=www.example.com" \
  "DNS:www.example.com,IP:127.0.0.1,DNS:example.com" 0x8f0102030405060708 ec_paramgen_curve:P-384
rotation other-rsa rsa:2048 "/CN=other.example.net" "DNS:other.example.net" 0x0a0b0c
rm -f ca.srl
