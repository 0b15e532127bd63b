//! JSON Web Tokens for the `jwt_header_query`, `jwt_payload_query` and `jwt_verify` converters
//! (HAProxy 2.5+): a token in the JWS compact form (`HEADER.PAYLOAD.SIGNATURE`, each part
//! base64url without padding) is split where HAProxy splits it, its parts decoded, and its
//! signature checked with the algorithm the configuration names (never the one the token's
//! header claims: that choice is the attacker's).
//!
//! HMAC secrets are the converter's argument; the public keys of the RSA and ECDSA algorithms
//! are PEM files (`-----BEGIN PUBLIC KEY-----`) read once, at load, so that no rule touches the
//! disk. A key file that cannot be read makes every verification answer `-5` (unknown
//! certificate), as haproxy 2.6 answers, and is not a configuration error there either.

use aws_lc_rs::signature::{self, UnparsedPublicKey, VerificationAlgorithm};

use crate::base::der::tlv;

/// An algorithm of RFC 7518 §3.1, as `jwt_verify` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Alg {
    None,
    Hs(Sha),
    Rs(Sha),
    Es(Sha),
    Ps(Sha),
}

/// The hash of an algorithm.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sha {
    S256,
    S384,
    S512,
}

impl Alg {
    /// The algorithm named `name`, spelled as RFC 7518 spells it (`HS256`, `ES384`, `none`).
    pub fn parse(name: &[u8]) -> Option<Alg> {
        if name == b"none" {
            return Some(Alg::None);
        }
        let [family, b'S', rest @ ..] = name else {
            return None;
        };
        let sha = match rest {
            b"256" => Sha::S256,
            b"384" => Sha::S384,
            b"512" => Sha::S512,
            _ => return None,
        };
        Some(match family {
            b'H' => Alg::Hs(sha),
            b'R' => Alg::Rs(sha),
            b'E' => Alg::Es(sha),
            b'P' => Alg::Ps(sha),
            _ => return None,
        })
    }

    /// Whether the key argument names a public key file (RSA and ECDSA), not a secret.
    pub fn uses_key_file(self) -> bool {
        matches!(self, Alg::Rs(_) | Alg::Es(_) | Alg::Ps(_))
    }
}

/// What `jwt_verify` answers (HAProxy's `enum jwt_vrfy_status`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Ko = 0,
    Ok = 1,
    InvalidToken = -3,
    UnknownCert = -5,
}

/// A public key read from a PEM file at load.
#[derive(Debug)]
pub enum PublicKey {
    /// PKCS#1 `RSAPublicKey` DER.
    Rsa(Vec<u8>),
    /// An uncompressed point on the curve of `Sha`'s size (P-256, P-384, P-521).
    Ec(Sha, Vec<u8>),
    /// The file could not be read or holds no public key: every verification answers
    /// [`Verdict::UnknownCert`].
    Unusable,
}

impl PublicKey {
    /// Reads `path` (a `PUBLIC KEY` PEM block: an X.509 SubjectPublicKeyInfo).
    pub fn load(path: &str) -> PublicKey {
        std::fs::read(path)
            .ok()
            .and_then(|pem| spki_of_pem(&pem))
            .and_then(|der| parse_spki(&der))
            .unwrap_or(PublicKey::Unusable)
    }
}

/// Part `n` of a token (0: header, 1: payload), where HAProxy's `jwt_tokenize` finds it: the
/// header is what comes before the first dot (the whole token without one), the payload what
/// follows it up to the next dot.
pub fn part(token: &[u8], n: usize) -> Option<&[u8]> {
    let mut parts = token.split(|&c| c == b'.');
    let first = parts.next()?;
    match n {
        0 => Some(first),
        _ => parts.nth(n - 1),
    }
}

/// Decodes base64url without padding (RFC 4648 §5) into `out`; false on a byte outside the
/// alphabet or a length no encoding has.
pub fn base64url_decode(data: &[u8], out: &mut Vec<u8>) -> bool {
    if data.len() % 4 == 1 {
        return false;
    }
    let mut acc = 0u32;
    let mut bits = 0;
    for &c in data {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'-' => 62,
            b'_' => 63,
            _ => return false,
        };
        acc = acc << 6 | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    true
}

/// Checks `token`'s signature with `alg` and `secret` (HMAC) or `key` (RSA, ECDSA), as
/// haproxy 2.6's `jwt_verify`: a token needs its three parts (two and an empty signature for
/// `none`), a signature that decodes, and the signed bytes are `HEADER.PAYLOAD` as sent.
/// `scratch` holds the decoded signature.
pub fn verify(
    token: &[u8],
    alg: Alg,
    secret: &[u8],
    key: Option<&PublicKey>,
    scratch: &mut Vec<u8>,
) -> Verdict {
    let mut dots = token.iter().enumerate().filter(|(_, &c)| c == b'.');
    let (first, second) = (dots.next(), dots.next().map(|d| d.0));
    if first.is_none() || dots.next().is_some() {
        return Verdict::InvalidToken;
    }
    let Some(second) = second else {
        // Two parts: only an unsigned token (`none`) may have them.
        return if alg == Alg::None {
            Verdict::Ok
        } else {
            Verdict::InvalidToken
        };
    };
    let (signed, sig) = (&token[..second], &token[second + 1..]);
    if alg == Alg::None {
        return if sig.is_empty() {
            Verdict::Ok
        } else {
            Verdict::Ko
        };
    }
    if sig.is_empty() {
        return Verdict::InvalidToken;
    }
    scratch.clear();
    if !base64url_decode(sig, scratch) {
        return Verdict::InvalidToken;
    }
    let sig = &scratch[..];
    let ok = match alg {
        Alg::None => unreachable!("answered above"),
        Alg::Hs(sha) => {
            let algo = match sha {
                Sha::S256 => aws_lc_rs::hmac::HMAC_SHA256,
                Sha::S384 => aws_lc_rs::hmac::HMAC_SHA384,
                Sha::S512 => aws_lc_rs::hmac::HMAC_SHA512,
            };
            let k = aws_lc_rs::hmac::Key::new(algo, secret);
            aws_lc_rs::hmac::verify(&k, signed, sig).is_ok()
        }
        Alg::Rs(_) | Alg::Ps(_) | Alg::Es(_) => {
            let (der, algo): (&[u8], &'static dyn VerificationAlgorithm) = match (alg, key) {
                (_, None | Some(PublicKey::Unusable)) => return Verdict::UnknownCert,
                (Alg::Rs(sha), Some(PublicKey::Rsa(der))) => (der, rsa_pkcs1(sha)),
                (Alg::Ps(sha), Some(PublicKey::Rsa(der))) => (der, rsa_pss(sha)),
                (Alg::Es(sha), Some(PublicKey::Ec(curve, point))) if sha == *curve => {
                    if sig.len() % 2 != 0 {
                        return Verdict::InvalidToken;
                    }
                    (point, ecdsa_fixed(sha))
                }
                // The key is not of the algorithm's kind (or curve): it cannot verify.
                _ => return Verdict::Ko,
            };
            UnparsedPublicKey::new(algo, der)
                .verify(signed, sig)
                .is_ok()
        }
    };
    if ok {
        Verdict::Ok
    } else {
        Verdict::Ko
    }
}

fn rsa_pkcs1(sha: Sha) -> &'static dyn VerificationAlgorithm {
    match sha {
        Sha::S256 => &signature::RSA_PKCS1_2048_8192_SHA256,
        Sha::S384 => &signature::RSA_PKCS1_2048_8192_SHA384,
        Sha::S512 => &signature::RSA_PKCS1_2048_8192_SHA512,
    }
}

fn rsa_pss(sha: Sha) -> &'static dyn VerificationAlgorithm {
    match sha {
        Sha::S256 => &signature::RSA_PSS_2048_8192_SHA256,
        Sha::S384 => &signature::RSA_PSS_2048_8192_SHA384,
        Sha::S512 => &signature::RSA_PSS_2048_8192_SHA512,
    }
}

fn ecdsa_fixed(sha: Sha) -> &'static dyn VerificationAlgorithm {
    match sha {
        Sha::S256 => &signature::ECDSA_P256_SHA256_FIXED,
        Sha::S384 => &signature::ECDSA_P384_SHA384_FIXED,
        Sha::S512 => &signature::ECDSA_P521_SHA512_FIXED,
    }
}

/// The DER of the first `PUBLIC KEY` block of a PEM file.
fn spki_of_pem(pem: &[u8]) -> Option<Vec<u8>> {
    let text = std::str::from_utf8(pem).ok()?;
    let start = text.find("-----BEGIN PUBLIC KEY-----")? + "-----BEGIN PUBLIC KEY-----".len();
    let end = start + text[start..].find("-----END PUBLIC KEY-----")?;
    let b64: Vec<u8> = text[start..end]
        .bytes()
        .filter(|c| !c.is_ascii_whitespace())
        .collect();
    let mut der = Vec::new();
    super::hash::base64_decode(&b64, &mut der).then_some(der)
}

/// The object identifiers a SubjectPublicKeyInfo names (DER contents, without tag and
/// length).
const RSA_ENCRYPTION: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01];
const EC_PUBLIC_KEY: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01];
const P256: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07];
const P384: &[u8] = &[0x2b, 0x81, 0x04, 0x00, 0x22];
const P521: &[u8] = &[0x2b, 0x81, 0x04, 0x00, 0x23];

/// The key of a SubjectPublicKeyInfo: `SEQUENCE { SEQUENCE { OID, params }, BIT STRING }`.
fn parse_spki(der: &[u8]) -> Option<PublicKey> {
    let (0x30, spki, _) = tlv(der)? else {
        return None;
    };
    let (0x30, alg_id, rest) = tlv(spki)? else {
        return None;
    };
    let (0x03, bits, _) = tlv(rest)? else {
        return None;
    };
    // The BIT STRING's first byte counts its unused bits: none in a key.
    let (&0, key) = bits.split_first()? else {
        return None;
    };
    let (0x06, oid, params) = tlv(alg_id)? else {
        return None;
    };
    match oid {
        RSA_ENCRYPTION => Some(PublicKey::Rsa(key.to_vec())),
        EC_PUBLIC_KEY => {
            let (0x06, curve, _) = tlv(params)? else {
                return None;
            };
            let sha = match curve {
                P256 => Sha::S256,
                P384 => Sha::S384,
                P521 => Sha::S512,
                _ => return None,
            };
            Some(PublicKey::Ec(sha, key.to_vec()))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn algorithms_are_named_as_rfc_7518_spells_them() {
        assert_eq!(Alg::parse(b"HS256"), Some(Alg::Hs(Sha::S256)));
        assert_eq!(Alg::parse(b"ES512"), Some(Alg::Es(Sha::S512)));
        assert_eq!(Alg::parse(b"PS384"), Some(Alg::Ps(Sha::S384)));
        assert_eq!(Alg::parse(b"none"), Some(Alg::None));
        for bad in [&b"hs256"[..], b"HS2567", b"XS256", b"HS", b"None", b""] {
            assert_eq!(Alg::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn parts_are_split_where_haproxy_splits_them() {
        assert_eq!(part(b"aa.bb.cc", 0), Some(&b"aa"[..]));
        assert_eq!(part(b"aa.bb.cc", 1), Some(&b"bb"[..]));
        assert_eq!(part(b"aa", 0), Some(&b"aa"[..]));
        assert_eq!(part(b"aa", 1), None);
        assert_eq!(part(b"aa.bb", 1), Some(&b"bb"[..]));
    }

    #[test]
    fn base64url_without_padding() {
        let mut out = Vec::new();
        assert!(base64url_decode(b"eyJhbGciOiJIUzI1NiJ9", &mut out));
        assert_eq!(out, br#"{"alg":"HS256"}"#);
        out.clear();
        assert!(base64url_decode(b"-_8", &mut out));
        assert_eq!(out, [0xfb, 0xff]);
        assert!(!base64url_decode(b"a", &mut Vec::new()));
        assert!(!base64url_decode(b"ab+/", &mut Vec::new()));
        assert!(!base64url_decode(b"YQ==", &mut Vec::new()));
    }

    #[test]
    fn hmac_tokens_verify_and_broken_ones_say_why() {
        // RFC 7515 appendix A.1's key and token.
        let mut key = Vec::new();
        assert!(base64url_decode(
            b"AyM1SysPpbyDfgZld3umj1qzKObwVMkoqQ-EstJQLr_T-1qS0gZH75aKtMN3Yj0iPS4hcgUuTwjAzZr1Z9CAow",
            &mut key
        ));
        let token = b"eyJ0eXAiOiJKV1QiLA0KICJhbGciOiJIUzI1NiJ9.eyJpc3MiOiJqb2UiLA0KICJleHAiOjEzMDA4MTkzODAsDQogImh0dHA6Ly9leGFtcGxlLmNvbS9pc19yb290Ijp0cnVlfQ.dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";
        let hs256 = Alg::Hs(Sha::S256);
        let mut s = Vec::new();
        assert_eq!(verify(token, hs256, &key, None, &mut s), Verdict::Ok);
        assert_eq!(verify(token, hs256, b"other", None, &mut s), Verdict::Ko);
        assert_eq!(
            verify(token, Alg::Hs(Sha::S512), &key, None, &mut s),
            Verdict::Ko
        );
        assert_eq!(
            verify(b"a.b", hs256, &key, None, &mut s),
            Verdict::InvalidToken
        );
        assert_eq!(
            verify(b"a.b.", hs256, &key, None, &mut s),
            Verdict::InvalidToken
        );
        assert_eq!(
            verify(b"a.b.c.d", hs256, &key, None, &mut s),
            Verdict::InvalidToken
        );
        assert_eq!(
            verify(b"a.b.c!", hs256, &key, None, &mut s),
            Verdict::InvalidToken
        );
        assert_eq!(verify(b"a.b.", Alg::None, b"", None, &mut s), Verdict::Ok);
        assert_eq!(verify(b"a.b", Alg::None, b"", None, &mut s), Verdict::Ok);
        assert_eq!(verify(b"a.b.c", Alg::None, b"", None, &mut s), Verdict::Ko);
        let rs = Alg::Rs(Sha::S256);
        assert_eq!(
            verify(b"a.b.cc", rs, b"", None, &mut s),
            Verdict::UnknownCert
        );
        let unusable = PublicKey::load("/nonexistent/key.pem");
        assert!(matches!(unusable, PublicKey::Unusable));
        assert_eq!(
            verify(b"a.b.cc", rs, b"", Some(&unusable), &mut s),
            Verdict::UnknownCert
        );
    }
}
