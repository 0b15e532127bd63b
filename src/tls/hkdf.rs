//! The TLS 1.3 key schedule's HKDF with one HKDF-Extract per secret, as RFC 5869 defines it.
//!
//! rustls's aws-lc-rs provider extracts with `aws_lc_rs::hkdf::Salt::extract`, whose `Prk`
//! keeps the salt and the secret and runs the whole of `HKDF` (extract, then expand) at every
//! expansion. The TLS 1.3 key schedule expands each secret several times (the handshake secret
//! into both traffic secrets and `derived`, the master secret into four), so each handshake
//! repeated the extract's HMAC — keyed HMAC-SHA-384 with `TLS_AES_256_GCM_SHA384` — about ten
//! times for nothing: a profile of full handshakes (bench/tls.sh T1) showed `HKDF_extract` under
//! every `hkdf_expand_label`. Here the extract runs once (HMAC of the secret keyed by the salt)
//! and the expander keys HMAC with that PRK once ([`Expander`]): each expansion then starts
//! from the keyed hash states instead of hashing the key's pads again. The keys are the same
//! bytes; the unit test compares every step with the provider's.

use std::sync::OnceLock;

use rustls::crypto::tls13::{Hkdf, HkdfExpander, OkmBlock};
use rustls::crypto::CryptoProvider;
use rustls::{SupportedCipherSuite, Tls13CipherSuite};

/// The provider's HKDF with the extract done once.
struct ExtractOnce {
    inner: &'static dyn Hkdf,
    hmac: aws_lc_rs::hmac::Algorithm,
}

impl ExtractOnce {
    fn hash_len(&self) -> usize {
        self.hmac.digest_algorithm().output_len()
    }
}

impl ExtractOnce {
    fn expander(&self, prk: &[u8]) -> Box<dyn HkdfExpander> {
        Box::new(Expander {
            key: aws_lc_rs::hmac::Key::new(self.hmac, prk),
            len: self.hash_len(),
        })
    }
}

/// HKDF-Expand (RFC 5869 §2.3) from a PRK keyed once: `hmac::Key` holds HMAC's inner and
/// outer hash states, so each expansion (a TLS 1.3 secret gives its key, its IV and sometimes
/// a finished key or a ticket's PSK) costs two hash blocks, not the four of keying HMAC anew.
struct Expander {
    key: aws_lc_rs::hmac::Key,
    len: usize,
}

impl Expander {
    fn fill(&self, info: &[&[u8]], out: &mut [u8]) {
        let mut prev: Option<aws_lc_rs::hmac::Tag> = None;
        for (n, chunk) in out.chunks_mut(self.len).enumerate() {
            let mut ctx = aws_lc_rs::hmac::Context::with_key(&self.key);
            if let Some(t) = &prev {
                ctx.update(t.as_ref());
            }
            for part in info {
                ctx.update(part);
            }
            ctx.update(&[(n + 1) as u8]);
            let t = ctx.sign();
            chunk.copy_from_slice(&t.as_ref()[..chunk.len()]);
            prev = Some(t);
        }
    }
}

impl HkdfExpander for Expander {
    fn expand_slice(
        &self,
        info: &[&[u8]],
        output: &mut [u8],
    ) -> Result<(), rustls::crypto::tls13::OutputLengthError> {
        if output.len() > 255 * self.len {
            return Err(rustls::crypto::tls13::OutputLengthError);
        }
        self.fill(info, output);
        Ok(())
    }

    fn expand_block(&self, info: &[&[u8]]) -> OkmBlock {
        let mut block = [0u8; OkmBlock::MAX_LEN];
        self.fill(info, &mut block[..self.len]);
        OkmBlock::new(&block[..self.len])
    }

    fn hash_len(&self) -> usize {
        self.len
    }
}

impl Hkdf for ExtractOnce {
    fn extract_from_zero_ikm(&self, salt: Option<&[u8]>) -> Box<dyn HkdfExpander> {
        let zeroes = [0u8; OkmBlock::MAX_LEN];
        self.extract_from_secret(salt, &zeroes[..self.hash_len()])
    }

    fn extract_from_secret(&self, salt: Option<&[u8]>, secret: &[u8]) -> Box<dyn HkdfExpander> {
        // RFC 5869: an absent salt is HashLen zero bytes; PRK = HMAC-Hash(salt, IKM).
        let zeroes = [0u8; OkmBlock::MAX_LEN];
        let salt = salt.unwrap_or(&zeroes[..self.hash_len()]);
        let prk = aws_lc_rs::hmac::sign(&aws_lc_rs::hmac::Key::new(self.hmac, salt), secret);
        self.expander(prk.as_ref())
    }

    fn expander_for_okm(&self, okm: &OkmBlock) -> Box<dyn HkdfExpander> {
        self.expander(okm.as_ref())
    }

    fn hmac_sign(&self, key: &OkmBlock, message: &[u8]) -> rustls::crypto::hmac::Tag {
        self.inner.hmac_sign(key, message)
    }

    fn fips(&self) -> bool {
        self.inner.fips()
    }
}

/// The provider's TLS 1.3 suites with [`ExtractOnce`], built once for the process (rustls
/// wants `'static` suites).
fn suites() -> &'static [SupportedCipherSuite] {
    static SUITES: OnceLock<Vec<SupportedCipherSuite>> = OnceLock::new();
    SUITES.get_or_init(|| {
        rustls::crypto::aws_lc_rs::ALL_CIPHER_SUITES
            .iter()
            .filter_map(|s| s.tls13())
            .filter_map(|s| {
                let hmac = match s.common.hash_provider.algorithm() {
                    rustls::crypto::hash::HashAlgorithm::SHA256 => aws_lc_rs::hmac::HMAC_SHA256,
                    rustls::crypto::hash::HashAlgorithm::SHA384 => aws_lc_rs::hmac::HMAC_SHA384,
                    _ => return None,
                };
                let hkdf: &'static ExtractOnce = Box::leak(Box::new(ExtractOnce {
                    inner: s.hkdf_provider,
                    hmac,
                }));
                let suite: &'static Tls13CipherSuite = Box::leak(Box::new(Tls13CipherSuite {
                    common: rustls::CipherSuiteCommon {
                        suite: s.common.suite,
                        hash_provider: s.common.hash_provider,
                        confidentiality_limit: s.common.confidentiality_limit,
                    },
                    hkdf_provider: hkdf,
                    aead_alg: s.aead_alg,
                    quic: s.quic,
                }));
                Some(SupportedCipherSuite::Tls13(suite))
            })
            .collect()
    })
}

/// Puts [`ExtractOnce`] under the TLS 1.3 suites of `provider` (same suites, same order).
pub fn extract_once(provider: &mut CryptoProvider) {
    for s in &mut provider.cipher_suites {
        if let Some(faster) = suites().iter().find(|f| f.suite() == s.suite()) {
            *s = *faster;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_keys_as_the_providers_hkdf() {
        let infos: [&[&[u8]]; 3] = [&[b"tls13 ", b"c hs traffic"], &[b"derived", &[0; 48]], &[]];
        for (theirs, ours) in rustls::crypto::aws_lc_rs::ALL_CIPHER_SUITES
            .iter()
            .filter_map(|s| s.tls13())
            .map(|t| {
                let f = suites()
                    .iter()
                    .find(|f| f.suite() == t.common.suite)
                    .unwrap();
                (t.hkdf_provider, f.tls13().unwrap().hkdf_provider)
            })
        {
            for salt in [None, Some(&b"salt"[..]), Some(&[7u8; 48][..])] {
                for secret in [&b""[..], b"a shared secret", &[1u8; 100]] {
                    let a = theirs.extract_from_secret(salt, secret);
                    let b = ours.extract_from_secret(salt, secret);
                    for info in infos {
                        assert_eq!(a.expand_block(info).as_ref(), b.expand_block(info).as_ref());
                        let (mut x, mut y) = ([0u8; 80], [0u8; 80]);
                        a.expand_slice(info, &mut x).unwrap();
                        b.expand_slice(info, &mut y).unwrap();
                        assert_eq!(x, y);
                    }
                }
                let a = theirs.extract_from_zero_ikm(salt);
                let b = ours.extract_from_zero_ikm(salt);
                assert_eq!(
                    a.expand_block(&[b"x"]).as_ref(),
                    b.expand_block(&[b"x"]).as_ref()
                );
            }
        }
    }

    #[test]
    fn every_tls13_suite_is_replaced_in_place() {
        let mut p = rustls::crypto::aws_lc_rs::default_provider();
        let before: Vec<_> = p.cipher_suites.iter().map(|s| s.suite()).collect();
        extract_once(&mut p);
        let after: Vec<_> = p.cipher_suites.iter().map(|s| s.suite()).collect();
        assert_eq!(before, after);
        for s in p.cipher_suites.iter().filter_map(|s| s.tls13()) {
            assert!(suites().iter().any(|f| std::ptr::eq(f.tls13().unwrap(), s)));
        }
    }
}
