//! Client certificate verification for `bind ... verify optional|required`, done the way
//! OpenSSL does it for HAProxy, because what HAProxy users rely on is OpenSSL's behaviour:
//!
//! - X.509 version 1 certificates (no extensions) are ordinary client certificates, and a
//!   version 1 CRL an ordinary `crl-file`; webpki refuses both.
//! - Each failure has OpenSSL's error code (`X509_V_ERR_*`), which `ssl_c_verify`,
//!   `ssl_c_err`, `ssl_c_ca_err` and `ssl_c_ca_err_depth` return and which `crt-ignore-err`
//!   (the client's own certificate, depth 0) and `ca-ignore-err` (its issuers) may waive: a
//!   connection whose only errors are waived is accepted, its `ssl_c_verify` still says why.
//!
//! The steps and their order are OpenSSL's (`X509_verify_cert`), so that the code a rule reads
//! is the one HAProxy would give: build the chain from the client's certificate up to a
//! self-signed certificate of the `ca-file` (the `ca-file` is searched before what the client
//! sent, and a chain that stops at a certificate of it that is not self-signed is not trusted);
//! check that every issuer is a CA; with a `crl-file`, look every certificate of the chain up
//! in its issuer's CRL (HAProxy asks for `X509_V_FLAG_CRL_CHECK_ALL`: a certificate whose
//! issuer has no CRL there fails with `UNABLE_TO_GET_CRL`); then, from the top down, check
//! each signature and validity period. An error not waived stops the verification there, and
//! the last error met is the result, as `SSL_get_verify_result` reports it.
//!
//! Not done (OpenSSL's defaults that HAProxy does not change, left out for now): the
//! `ssl_client` purpose (extended key usage) and path length constraints.
//!
//! What the verification found for a connection reaches its session through [`take_outcome`]:
//! rustls calls the verifier while processing the client's records, and the caller takes the
//! outcome right after (on the same thread) as it does for the certificate resolver's choice.

use std::cell::Cell;
use std::sync::Arc;

use super::cafiles::Source;

use rustls::client::danger::HandshakeSignatureValid;
use rustls::crypto::WebPkiSupportedAlgorithms;
use rustls::pki_types::{CertificateDer, SubjectPublicKeyInfoDer, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{CertificateError, DigitallySignedStruct, DistinguishedName, SignatureScheme};

use super::der::{self, tlv, Time};

/// OpenSSL's verification error codes (`X509_V_ERR_*`) this verifier reports.
pub mod code {
    pub const OK: u32 = 0;
    pub const UNABLE_TO_GET_ISSUER_CERT: u32 = 2;
    pub const UNABLE_TO_GET_CRL: u32 = 3;
    pub const CERT_SIGNATURE_FAILURE: u32 = 7;
    pub const CRL_SIGNATURE_FAILURE: u32 = 8;
    pub const CERT_NOT_YET_VALID: u32 = 9;
    pub const CERT_HAS_EXPIRED: u32 = 10;
    pub const CRL_NOT_YET_VALID: u32 = 11;
    pub const CRL_HAS_EXPIRED: u32 = 12;
    pub const DEPTH_ZERO_SELF_SIGNED_CERT: u32 = 18;
    pub const SELF_SIGNED_CERT_IN_CHAIN: u32 = 19;
    pub const UNABLE_TO_GET_ISSUER_CERT_LOCALLY: u32 = 20;
    pub const UNABLE_TO_VERIFY_LEAF_SIGNATURE: u32 = 21;
    pub const CERT_CHAIN_TOO_LONG: u32 = 22;
    pub const CERT_REVOKED: u32 = 23;
    pub const INVALID_CA: u32 = 24;
    pub const UNABLE_TO_GET_CRL_ISSUER: u32 = 33;
    /// The largest code `crt-ignore-err`/`ca-ignore-err` take (HAProxy 2.6 with OpenSSL 3.0).
    pub const MAX_IGNORABLE: u32 = 94;
}

/// The longest chain followed, in certificates (a client's chain is a few).
const MAX_CHAIN: usize = 10;

/// `crt-ignore-err` / `ca-ignore-err`: the error codes waived.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Ignore {
    #[default]
    Nothing,
    All,
    Codes(Vec<u32>),
}

impl Ignore {
    /// Parses the argument as HAProxy 2.6 does: `all`, or comma-separated numbers in
    /// 1..=94 (anything else reads as 0, out of range).
    pub fn parse(opt: &str, v: &str) -> Result<Ignore, String> {
        if v == "all" {
            return Ok(Ignore::All);
        }
        let mut codes = Vec::new();
        for token in v.split(',').filter(|t| !t.is_empty()) {
            let digits: String = token.chars().take_while(char::is_ascii_digit).collect();
            let n: u32 = digits.parse().unwrap_or(0);
            if n == 0 || n > code::MAX_IGNORABLE {
                return Err(format!(
                    "'{opt}' : ID '{n}' out of range (1..{}) in error IDs list '{v}'",
                    code::MAX_IGNORABLE
                ));
            }
            codes.push(n);
        }
        Ok(Ignore::Codes(codes))
    }

    fn covers(&self, c: u32) -> bool {
        match self {
            Ignore::Nothing => false,
            Ignore::All => true,
            Ignore::Codes(v) => v.contains(&c),
        }
    }
}

/// What verifying a client's certificate found: the codes the `ssl_c_*` fetches return.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Outcome {
    /// `ssl_c_verify`: the last error met (0: none).
    pub result: u32,
    /// `ssl_c_err`: the first error about the client's own certificate.
    pub crt_err: u32,
    /// `ssl_c_ca_err` and `ssl_c_ca_err_depth`: the first error about an issuer.
    pub ca_err: u32,
    pub ca_err_depth: u32,
}

thread_local! {
    static OUTCOME: Cell<Option<Outcome>> = const { Cell::new(None) };
}

/// The outcome of the last verification on this thread, if one ran since the last call.
pub fn take_outcome() -> Option<Outcome> {
    OUTCOME.with(Cell::take)
}

/// A certificate, read.
struct X509<'a> {
    der: &'a [u8],
    /// The signed part (`TBSCertificate`, tag and length included), its signature algorithm
    /// (the `AlgorithmIdentifier`'s content) and the signature.
    tbs: &'a [u8],
    sig_alg: &'a [u8],
    signature: &'a [u8],
    f: der::CertFields<'a>,
}

/// A signed DER structure (certificate, CRL): the signed part whole, the algorithm's content,
/// the signature bits.
fn signed(input: &[u8]) -> Option<(&[u8], &[u8], &[u8])> {
    let (0x30, outer, _) = tlv(input)? else {
        return None;
    };
    let (0x30, _, rest) = tlv(outer)? else {
        return None;
    };
    let tbs = &outer[..outer.len() - rest.len()];
    let (0x30, alg, rest) = tlv(rest)? else {
        return None;
    };
    let (0x03, bits, _) = tlv(rest)? else {
        return None;
    };
    let (0, signature) = bits.split_first()? else {
        return None;
    };
    Some((tbs, alg, signature))
}

fn x509(der: &[u8]) -> Option<X509<'_>> {
    let (tbs, sig_alg, signature) = signed(der)?;
    Some(X509 {
        der,
        tbs,
        sig_alg,
        signature,
        f: der::cert_fields(der)?,
    })
}

const OID_BASIC_CONSTRAINTS: &[u8] = &[0x55, 0x1d, 0x13];
const OID_KEY_USAGE: &[u8] = &[0x55, 0x1d, 0x0f];

impl X509<'_> {
    fn self_issued(&self) -> bool {
        self.f.subject == self.f.issuer
    }

    /// An extension's value (the `OCTET STRING`'s content).
    fn extension(&self, oid: &[u8]) -> Option<&[u8]> {
        let (0x30, mut exts, _) = tlv(self.f.extensions)? else {
            return None;
        };
        while let Some((0x30, ext, more)) = tlv(exts) {
            exts = more;
            let Some((0x06, id, mut rest)) = tlv(ext) else {
                continue;
            };
            if id != oid {
                continue;
            }
            if let Some((0x01, _, after)) = tlv(rest) {
                rest = after;
            }
            if let Some((0x04, value, _)) = tlv(rest) {
                return Some(value);
            }
        }
        None
    }

    /// May it issue certificates (OpenSSL's `X509_check_ca`, not strict): basic constraints
    /// say so; without them, a version 1 self-signed certificate or a key usage allowing
    /// certificate signing.
    fn is_ca(&self) -> bool {
        if let Some(bc) = self.extension(OID_BASIC_CONSTRAINTS) {
            return match tlv(bc) {
                Some((0x30, seq, _)) => matches!(tlv(seq), Some((0x01, [v], _)) if *v != 0),
                _ => false,
            };
        }
        if self.f.version == 1 && self.self_issued() {
            return true;
        }
        match self.extension(OID_KEY_USAGE).and_then(tlv) {
            // keyCertSign is bit 5 of the bit string.
            Some((0x03, [_, first, ..], _)) => first & 0x04 != 0,
            _ => false,
        }
    }
}

/// A CRL, read.
struct Crl<'a> {
    tbs: &'a [u8],
    sig_alg: &'a [u8],
    signature: &'a [u8],
    issuer: &'a [u8],
    this_update: Time,
    next_update: Option<Time>,
    /// The revoked serial numbers' magnitudes.
    revoked: Vec<&'a [u8]>,
    /// The version (1 or 2) and each revocation's date, for `show ssl crl-file`.
    version: u8,
    revoked_on: Vec<Option<Time>>,
}

fn magnitude(serial: &[u8]) -> &[u8] {
    match serial {
        [0, rest @ ..] if !rest.is_empty() => rest,
        s => s,
    }
}

fn crl(input: &[u8]) -> Option<Crl<'_>> {
    let (tbs, sig_alg, signature) = signed(input)?;
    let (0x30, mut body, _) = tlv(tbs)? else {
        return None;
    };
    let mut version = 1;
    if let Some((0x02, v, rest)) = tlv(body) {
        version = v.first().map_or(1, |n| n.saturating_add(1));
        body = rest;
    }
    let (0x30, _, rest) = tlv(body)? else {
        return None;
    };
    let (0x30, issuer, rest) = tlv(rest)? else {
        return None;
    };
    let (tag, v, mut rest) = tlv(rest)?;
    let this_update = der::time(tag, v)?;
    let mut next_update = None;
    if let Some((tag @ (0x17 | 0x18), v, after)) = tlv(rest) {
        next_update = Some(der::time(tag, v)?);
        rest = after;
    }
    let mut revoked = Vec::new();
    let mut revoked_on = Vec::new();
    if let Some((0x30, mut entries, _)) = tlv(rest) {
        while let Some((0x30, entry, more)) = tlv(entries) {
            entries = more;
            if let Some((0x02, serial, after)) = tlv(entry) {
                revoked.push(magnitude(serial));
                revoked_on.push(tlv(after).and_then(|(t, v, _)| der::time(t, v)));
            }
        }
    }
    Some(Crl {
        tbs,
        sig_alg,
        signature,
        issuer,
        this_update,
        next_update,
        revoked,
        version,
        revoked_on,
    })
}

/// A CRL as `show ssl crl-file FILE` prints it (OpenSSL's `openssl crl -text` words).
pub fn crl_details(der_crl: &[u8]) -> Option<String> {
    use std::fmt::Write;
    let c = crl(der_crl)?;
    let oid = match tlv(c.sig_alg) {
        Some((0x06, oid, _)) => oid,
        _ => &[],
    };
    let alg = match der::oid_text(oid).as_str() {
        "1.2.840.113549.1.1.5" => "sha1WithRSAEncryption".to_string(),
        "1.2.840.113549.1.1.11" => "sha256WithRSAEncryption".to_string(),
        "1.2.840.113549.1.1.12" => "sha384WithRSAEncryption".to_string(),
        "1.2.840.113549.1.1.13" => "sha512WithRSAEncryption".to_string(),
        "1.2.840.10045.4.3.2" => "ecdsa-with-SHA256".to_string(),
        "1.2.840.10045.4.3.3" => "ecdsa-with-SHA384".to_string(),
        "1.2.840.10045.4.3.4" => "ecdsa-with-SHA512".to_string(),
        other => other.to_string(),
    };
    let mut out = String::new();
    let _ = writeln!(out, "Version {}", c.version);
    let _ = writeln!(out, "Signature Algorithm: {alg}");
    let _ = writeln!(out, "Issuer: {}", der::name_oneline(c.issuer));
    let _ = writeln!(out, "Last Update: {}", c.this_update);
    let _ = writeln!(
        out,
        "Next Update: {}",
        c.next_update.map_or_else(String::new, |t| t.to_string())
    );
    if c.revoked.is_empty() {
        out.push_str("No Revoked Certificates.\n");
    } else {
        out.push_str("Revoked Certificates:\n");
    }
    for (serial, on) in c.revoked.iter().zip(&c.revoked_on) {
        let hex: String = serial.iter().map(|b| format!("{b:02X}")).collect();
        let _ = writeln!(out, "    Serial Number: {hex}");
        let _ = writeln!(
            out,
            "        Revocation Date: {}",
            on.map_or_else(String::new, |t| t.to_string())
        );
    }
    Some(out)
}

/// A `SubjectPublicKeyInfo`'s algorithm (content) and key bits.
fn spki_parts(spki: &[u8]) -> Option<(&[u8], &[u8])> {
    let (0x30, body, _) = tlv(spki)? else {
        return None;
    };
    let (0x30, alg, rest) = tlv(body)? else {
        return None;
    };
    let (0x03, bits, _) = tlv(rest)? else {
        return None;
    };
    Some((alg, bits.get(1..)?))
}

/// sha1WithRSAEncryption with its NULL parameters, and rsaEncryption's.
const ALG_SHA1_RSA: &[u8] = &[
    0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x05, 0x05, 0x00,
];
const ALG_RSA: &[u8] = &[
    0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01, 0x05, 0x00,
];

/// Whether `signature` over `message` was made with the key of `issuer_spki`. SHA-1 RSA
/// signatures count only when `sha1` (CRLs: OpenSSL's security level refuses them on
/// certificates, not on CRLs).
fn signed_by(
    algs: &WebPkiSupportedAlgorithms,
    issuer_spki: &[u8],
    sig_alg: &[u8],
    message: &[u8],
    signature: &[u8],
    sha1: bool,
) -> bool {
    let Some((key_alg, key)) = spki_parts(issuer_spki) else {
        return false;
    };
    if let Some(a) = algs.all.iter().find(|a| {
        a.signature_alg_id().as_ref() == sig_alg && a.public_key_alg_id().as_ref() == key_alg
    }) {
        return a.verify_signature(key, message, signature).is_ok();
    }
    if sha1 && sig_alg == ALG_SHA1_RSA && key_alg == ALG_RSA {
        return aws_lc_rs::signature::UnparsedPublicKey::new(
            &aws_lc_rs::signature::RSA_PKCS1_1024_8192_SHA1_FOR_LEGACY_USE_ONLY,
            key,
        )
        .verify(message, signature)
        .is_ok();
    }
    false
}

/// Seconds since the epoch of a certificate time.
fn epoch(t: &Time) -> i64 {
    // Days from civil (Howard Hinnant's algorithm).
    let (m, d) = (i64::from(t.month), i64::from(t.day));
    let y = i64::from(t.year) - i64::from(m <= 2);
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (m + if m > 2 { -3 } else { 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    days * 86_400 + i64::from(t.hour) * 3600 + i64::from(t.minute) * 60 + i64::from(t.second)
}

/// The CAs and CRLs a bind checks client certificates against, and the errors it waives.
#[derive(Debug)]
pub struct ClientVerifier {
    /// `ca-file`, then `ca-verify-file`.
    cas: Vec<Arc<Source>>,
    crls: Option<Arc<Source>>,
    hints: Vec<DistinguishedName>,
    mandatory: bool,
    ignore_crt: Ignore,
    ignore_ca: Ignore,
    algs: WebPkiSupportedAlgorithms,
}

/// The errors met so far, as HAProxy's verify callback records them.
struct Report<'a> {
    out: Outcome,
    ignore_crt: &'a Ignore,
    ignore_ca: &'a Ignore,
}

impl Report<'_> {
    /// Records an error at `depth`; whether verification goes on (the error is waived).
    fn error(&mut self, depth: usize, c: u32) -> bool {
        self.out.result = c;
        if depth > 0 {
            if self.out.ca_err == 0 {
                self.out.ca_err = c;
                self.out.ca_err_depth = u32::try_from(depth).unwrap_or(u32::MAX);
            }
            self.ignore_ca.covers(c)
        } else {
            if self.out.crt_err == 0 {
                self.out.crt_err = c;
            }
            self.ignore_crt.covers(c)
        }
    }
}

impl ClientVerifier {
    /// `ca`: the `ca-file`'s certificates, named in the request for a certificate unless
    /// `send_ca_names` is off; `verify_only`: `ca-verify-file`'s, never named; `crls`: the
    /// `crl-file`'s CRLs. Each is checked to be readable here so that a bad file fails the
    /// load, not the handshakes.
    pub fn new(
        ca: Option<Arc<Source>>,
        verify_only: Option<Arc<Source>>,
        crls: Option<Arc<Source>>,
        mandatory: bool,
        ignore_crt: Ignore,
        ignore_ca: Ignore,
        send_ca_names: bool,
    ) -> Result<ClientVerifier, String> {
        let mut hints = Vec::new();
        for (named, src) in [(true, &ca), (false, &verify_only)] {
            let Some(src) = src else { continue };
            for (i, c) in src.load_content().iter().enumerate() {
                let c = x509(c).ok_or_else(|| format!("certificate {} is unreadable", i + 1))?;
                if named && send_ca_names {
                    hints.push(DistinguishedName::in_sequence(c.f.subject));
                }
            }
        }
        if let Some(crls) = &crls {
            for (i, c) in crls.load_content().iter().enumerate() {
                crl(c).ok_or_else(|| format!("CRL {} is unreadable", i + 1))?;
            }
        }
        Ok(ClientVerifier {
            cas: ca.into_iter().chain(verify_only).collect(),
            crls,
            hints,
            mandatory,
            ignore_crt,
            ignore_ca,
            algs: rustls::crypto::aws_lc_rs::default_provider().signature_verification_algorithms,
        })
    }

    /// The files it reads (for the registry of `commit ssl ca-file`/`crl-file`).
    pub fn sources(&self) -> impl Iterator<Item = &Arc<Source>> {
        self.cas.iter().chain(&self.crls)
    }

    /// Verifies a client's chain at `now` (seconds since the epoch): what it found, and
    /// whether the connection is accepted (no error, or only waived ones).
    pub fn check(&self, leaf: &[u8], sent: &[&[u8]], now: i64) -> (Outcome, bool) {
        let mut r = Report {
            out: Outcome::default(),
            ignore_crt: &self.ignore_crt,
            ignore_ca: &self.ignore_ca,
        };
        let go_on = self.steps(leaf, sent, now, &mut r);
        (r.out, go_on)
    }

    /// What a resumed session's client chain (leaf first) is worth now: OpenSSL keeps the
    /// result in the session, rustls does not, so it is worked out again.
    pub fn resumed(&self, chain: &[Vec<u8>]) -> Outcome {
        let Some((leaf, sent)) = chain.split_first() else {
            return Outcome::default();
        };
        let sent: Vec<&[u8]> = sent.iter().map(Vec::as_slice).collect();
        let now = UnixTime::now().as_secs();
        self.check(leaf, &sent, i64::try_from(now).unwrap_or(i64::MAX))
            .0
    }

    fn steps(&self, leaf: &[u8], sent: &[&[u8]], now: i64, r: &mut Report<'_>) -> bool {
        let Some(leaf) = x509(leaf) else {
            r.out.result = code::CERT_SIGNATURE_FAILURE;
            r.out.crt_err = code::CERT_SIGNATURE_FAILURE;
            return false;
        };
        let loaded: Vec<Arc<Vec<Vec<u8>>>> = self.cas.iter().map(|s| s.load_content()).collect();
        let cas: Vec<X509<'_>> = loaded
            .iter()
            .flat_map(|v| v.iter())
            .filter_map(|c| x509(c))
            .collect();
        let sent: Vec<X509<'_>> = sent.iter().filter_map(|c| x509(c)).collect();
        // 1. The chain, the CAs searched first; `first_trusted`: where the CAs' part starts.
        let mut chain: Vec<&X509<'_>> = vec![&leaf];
        // The client's own certificate is trusted as such only if self-signed (OpenSSL trusts
        // a certificate of its store that is not only with `X509_V_FLAG_PARTIAL_CHAIN`).
        let mut first_trusted =
            (leaf.self_issued() && cas.iter().any(|c| c.der == leaf.der)).then_some(0);
        loop {
            let cur = chain[chain.len() - 1];
            if cur.self_issued() || chain.len() > MAX_CHAIN {
                break;
            }
            if let Some(i) = pick(&cas, cur, &self.algs) {
                first_trusted.get_or_insert(chain.len());
                chain.push(&cas[i]);
                continue;
            }
            if first_trusted.is_none() {
                if let Some(i) = pick(&sent, cur, &self.algs) {
                    if !chain.iter().any(|c| c.der == sent[i].der) {
                        chain.push(&sent[i]);
                        continue;
                    }
                }
            }
            break;
        }
        let num = chain.len();
        let top = chain[num - 1];
        let trusted = first_trusted.is_some() && top.self_issued();
        if !trusted {
            let c = if top.self_issued() && num == 1 {
                code::DEPTH_ZERO_SELF_SIGNED_CERT
            } else if top.self_issued() {
                code::SELF_SIGNED_CERT_IN_CHAIN
            } else if num > MAX_CHAIN {
                code::CERT_CHAIN_TOO_LONG
            } else if first_trusted.is_some() {
                code::UNABLE_TO_GET_ISSUER_CERT
            } else {
                code::UNABLE_TO_GET_ISSUER_CERT_LOCALLY
            };
            if !r.error(num - 1, c) {
                return false;
            }
        }
        // 2. Every issuer is a CA.
        for (depth, c) in chain.iter().enumerate().skip(1) {
            if !c.is_ca() && !r.error(depth, code::INVALID_CA) {
                return false;
            }
        }
        // 3. Revocation, every certificate of the chain.
        if let Some(crls) = &self.crls {
            let crls = crls.load_content();
            let crls: Vec<Crl<'_>> = crls.iter().filter_map(|c| crl(c)).collect();
            for (depth, c) in chain.iter().enumerate() {
                if !self.revocation(&chain, depth, c, &crls, now, r) {
                    return false;
                }
            }
        }
        // 4. Signatures and validity, from the top down.
        let mut n = num - 1;
        let mut xi = n;
        let mut xs = n;
        if !top.self_issued() {
            if n == 0 {
                if !r.error(0, code::UNABLE_TO_VERIFY_LEAF_SIGNATURE) {
                    return false;
                }
            } else {
                n -= 1;
                xs = n;
            }
        }
        loop {
            if xs != xi {
                let (issuer, subject) = (chain[xi], chain[xs]);
                let ok = signed_by(
                    &self.algs,
                    issuer.f.spki,
                    subject.sig_alg,
                    subject.tbs,
                    subject.signature,
                    false,
                );
                if !ok && !r.error(xs, code::CERT_SIGNATURE_FAILURE) {
                    return false;
                }
            }
            let c = chain[xs];
            if now < epoch(&c.f.not_before) && !r.error(xs, code::CERT_NOT_YET_VALID) {
                return false;
            }
            if now > epoch(&c.f.not_after) && !r.error(xs, code::CERT_HAS_EXPIRED) {
                return false;
            }
            if n == 0 {
                break;
            }
            n -= 1;
            xi = xs;
            xs = n;
        }
        true
    }

    /// The CRL checks of the certificate at `depth`: a CRL from its issuer, signed by it,
    /// current, that does not list it.
    fn revocation(
        &self,
        chain: &[&X509<'_>],
        depth: usize,
        c: &X509<'_>,
        crls: &[Crl<'_>],
        now: i64,
        r: &mut Report<'_>,
    ) -> bool {
        let Some(list) = crls.iter().find(|l| l.issuer == c.f.issuer) else {
            return r.error(depth, code::UNABLE_TO_GET_CRL);
        };
        let issuer = match chain.get(depth + 1) {
            Some(i) => i,
            None if c.self_issued() => c,
            None => return r.error(depth, code::UNABLE_TO_GET_CRL_ISSUER),
        };
        let signed = signed_by(
            &self.algs,
            issuer.f.spki,
            list.sig_alg,
            list.tbs,
            list.signature,
            true,
        );
        if !signed && !r.error(depth, code::CRL_SIGNATURE_FAILURE) {
            return false;
        }
        if now < epoch(&list.this_update) && !r.error(depth, code::CRL_NOT_YET_VALID) {
            return false;
        }
        if list.next_update.is_some_and(|t| now > epoch(&t))
            && !r.error(depth, code::CRL_HAS_EXPIRED)
        {
            return false;
        }
        if list.revoked.contains(&c.f.serial) && !r.error(depth, code::CERT_REVOKED) {
            return false;
        }
        true
    }
}

/// The certificate of `pool` that issued `cur`: one named as its issuer whose key signed it,
/// else the first one named so (its signature then fails in the last step, as in OpenSSL).
fn pick(pool: &[X509<'_>], cur: &X509<'_>, algs: &WebPkiSupportedAlgorithms) -> Option<usize> {
    let named = || (0..pool.len()).filter(|&i| pool[i].f.subject == cur.f.issuer);
    named()
        .find(|&i| {
            signed_by(
                algs,
                pool[i].f.spki,
                cur.sig_alg,
                cur.tbs,
                cur.signature,
                false,
            )
        })
        .or_else(|| named().next())
}

/// Whether a server's certificate answers for `host`, as HAProxy checks it
/// (`ssl_sock_srv_hostcheck`): its DNS alternative names, or its common name when it has
/// none; a `*` stands for the whole leftmost label only.
pub fn answers_for(cert: &[u8], host: &str) -> bool {
    let Some(f) = der::cert_fields(cert) else {
        return false;
    };
    let host = host.to_ascii_lowercase();
    let matches = |pattern: &str| {
        let pattern = pattern.to_ascii_lowercase();
        if pattern == host {
            return true;
        }
        match (pattern.strip_prefix("*."), host.split_once('.')) {
            (Some(domain), Some((label, rest))) => !label.is_empty() && rest == domain,
            _ => false,
        }
    };
    let dns: Vec<&str> = f
        .alt_names
        .iter()
        .filter_map(|n| match n {
            der::AltName::Dns(d) => Some(d.as_str()),
            der::AltName::Other => None,
        })
        .collect();
    if dns.is_empty() {
        der::common_name(f.subject).is_some_and(|cn| matches(&cn))
    } else {
        dns.into_iter().any(matches)
    }
}

/// The rustls error a refused certificate ends the handshake with (its alert).
pub fn refusal(c: u32) -> rustls::Error {
    rustls::Error::InvalidCertificate(match c {
        code::CERT_HAS_EXPIRED => CertificateError::Expired,
        code::CERT_NOT_YET_VALID => CertificateError::NotValidYet,
        code::CERT_REVOKED => CertificateError::Revoked,
        code::CERT_SIGNATURE_FAILURE => CertificateError::BadSignature,
        code::UNABLE_TO_GET_ISSUER_CERT
        | code::UNABLE_TO_GET_ISSUER_CERT_LOCALLY
        | code::UNABLE_TO_VERIFY_LEAF_SIGNATURE
        | code::DEPTH_ZERO_SELF_SIGNED_CERT
        | code::SELF_SIGNED_CERT_IN_CHAIN => CertificateError::UnknownIssuer,
        _ => CertificateError::ApplicationVerificationFailure,
    })
}

impl ClientCertVerifier for ClientVerifier {
    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &self.hints
    }

    fn client_auth_mandatory(&self) -> bool {
        self.mandatory
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        let sent: Vec<&[u8]> = intermediates.iter().map(|c| c.as_ref()).collect();
        let now = i64::try_from(now.as_secs()).unwrap_or(i64::MAX);
        let (outcome, accepted) = self.check(end_entity.as_ref(), &sent, now);
        OUTCOME.with(|o| o.set(Some(outcome)));
        if accepted {
            Ok(ClientCertVerified::assertion())
        } else {
            Err(refusal(outcome.result))
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        tls12_signature(&self.algs, message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        tls13_signature(&self.algs, message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algs.supported_schemes()
    }
}

/// Checks a TLS 1.2 handshake signature made with the key of `cert`, read without webpki
/// (rustls's own check parses the certificate with webpki, which refuses version 1
/// certificates: a peer showing one could never complete a handshake).
pub fn tls12_signature(
    algs: &WebPkiSupportedAlgorithms,
    message: &[u8],
    cert: &CertificateDer<'_>,
    dss: &DigitallySignedStruct,
) -> Result<HandshakeSignatureValid, rustls::Error> {
    let spki = leaf_key(cert)?;
    let key = webpki::RawPublicKeyEntity::try_from(&spki)
        .map_err(|_| rustls::Error::InvalidCertificate(CertificateError::BadEncoding))?;
    let candidates = algs
        .mapping
        .iter()
        .find(|(s, _)| *s == dss.scheme)
        .map(|(_, a)| *a)
        .ok_or(rustls::Error::PeerMisbehaved(
            rustls::PeerMisbehaved::SignedHandshakeWithUnadvertisedSigScheme,
        ))?;
    // TLS 1.2 does not tie an ECDSA scheme to a curve: any algorithm of the scheme may do.
    if candidates
        .iter()
        .any(|a| key.verify_signature(*a, message, dss.signature()).is_ok())
    {
        Ok(HandshakeSignatureValid::assertion())
    } else {
        Err(rustls::Error::InvalidCertificate(
            CertificateError::BadSignature,
        ))
    }
}

/// [`tls12_signature`] for TLS 1.3 (one algorithm per scheme).
pub fn tls13_signature(
    algs: &WebPkiSupportedAlgorithms,
    message: &[u8],
    cert: &CertificateDer<'_>,
    dss: &DigitallySignedStruct,
) -> Result<HandshakeSignatureValid, rustls::Error> {
    let spki = leaf_key(cert)?;
    rustls::crypto::verify_tls13_signature_with_raw_key(message, &spki, dss, algs)
}

/// A certificate's public key, read without webpki (which refuses version 1 certificates).
fn leaf_key(cert: &CertificateDer<'_>) -> Result<SubjectPublicKeyInfoDer<'static>, rustls::Error> {
    let f = der::cert_fields(cert.as_ref()).ok_or(rustls::Error::InvalidCertificate(
        CertificateError::BadEncoding,
    ))?;
    Ok(SubjectPublicKeyInfoDer::from(f.spki.to_vec()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tls::cafiles::Kind;

    fn pem(name: &str) -> Vec<Vec<u8>> {
        use rustls::pki_types::pem::PemObject;
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/tls")
            .join(name);
        if name.starts_with("crl") {
            return rustls::pki_types::CertificateRevocationListDer::pem_file_iter(path)
                .unwrap()
                .map(|c| c.unwrap().as_ref().to_vec())
                .collect();
        }
        CertificateDer::pem_file_iter(path)
            .unwrap()
            .map(|c| c.unwrap().as_ref().to_vec())
            .collect()
    }

    fn verifier(crl: bool, ignore: Ignore) -> ClientVerifier {
        let crls = crl.then(|| Source::new(Kind::Crl, "crl.pem", pem("crl.pem")));
        ClientVerifier::new(
            Some(Source::new(Kind::Ca, "ca.pem", pem("ca.pem"))),
            None,
            crls,
            true,
            ignore,
            Ignore::Nothing,
            true,
        )
        .unwrap()
    }

    /// January 2027, after the fixtures were made (November 2026; the expired one ended in
    /// 2021).
    const NOW: i64 = 1_800_000_000;

    #[test]
    fn codes_of_the_fixtures() {
        let v = verifier(true, Ignore::Nothing);
        let leaf = |n: &str| pem(n).remove(0);
        let ok = Outcome::default();
        assert_eq!(v.check(&leaf("client-v1.pem"), &[], NOW), (ok, true));
        let (o, accepted) = v.check(&leaf("client-expired.pem"), &[], NOW);
        assert_eq!(
            (o.result, o.crt_err, accepted),
            (code::CERT_HAS_EXPIRED, 10, false)
        );
        let (o, _) = v.check(&leaf("client-revoked.pem"), &[], NOW);
        assert_eq!(o.result, code::CERT_REVOKED);
        // Self-signed: refused at once without waivers.
        let (o, _) = v.check(&leaf("client-stranger.pem"), &[], NOW);
        assert_eq!(o.result, code::DEPTH_ZERO_SELF_SIGNED_CERT);
        // Without a CRL the revoked one passes; waived, the expired one passes with its code.
        let v = verifier(false, Ignore::Codes(vec![10]));
        assert!(v.check(&leaf("client-revoked.pem"), &[], NOW).1);
        let (o, accepted) = v.check(&leaf("client-expired.pem"), &[], NOW);
        assert_eq!((o.result, accepted), (code::CERT_HAS_EXPIRED, true));
        // A CA certificate used as a client's: self-signed and trusted, accepted.
        assert!(v.check(&leaf("ca.pem"), &[], NOW).1);
    }

    #[test]
    fn a_forged_signature_or_a_leaf_as_issuer_fails() {
        let v = verifier(false, Ignore::All);
        let mut forged = pem("client-v1.pem").remove(0);
        let last = forged.len() - 2;
        forged[last] ^= 1;
        let (o, accepted) = v.check(&forged, &[], NOW);
        assert_eq!((o.result, accepted), (code::CERT_SIGNATURE_FAILURE, true));
        let v = verifier(false, Ignore::Nothing);
        assert!(!v.check(&forged, &[], NOW).1);
        // Only a certificate that is not self-signed in the `ca-file`: no chain ends at a
        // trusted root, whether the client's certificate is that one or another.
        let www = pem("www-ecdsa.pem").remove(0);
        let v = ClientVerifier::new(
            Some(Source::new(Kind::Ca, "www", vec![www.clone()])),
            None,
            None,
            true,
            Ignore::Nothing,
            Ignore::Nothing,
            true,
        )
        .unwrap();
        let (o, accepted) = v.check(&www, &[], NOW);
        assert!(!accepted);
        assert_eq!(o.result, code::UNABLE_TO_GET_ISSUER_CERT_LOCALLY);
        let (o, _) = v.check(&pem("client-v1.pem").remove(0), &[], NOW);
        assert_eq!(o.result, code::UNABLE_TO_GET_ISSUER_CERT_LOCALLY);
    }

    #[test]
    fn server_names_as_haproxy_checks_them() {
        let v1 = pem("server-v1.pem").remove(0);
        assert!(answers_for(&v1, "server-v1") && answers_for(&v1, "SERVER-V1"));
        assert!(!answers_for(&v1, "other"));
        let wild = pem("wild-ecdsa.pem").remove(0);
        assert!(answers_for(&wild, "a.example.org"));
        assert!(!answers_for(&wild, "example.org") && !answers_for(&wild, "a.b.example.org"));
    }

    #[test]
    fn epoch_of_known_dates() {
        let t = |year, month, day, hour| Time {
            year,
            month,
            day,
            hour,
            minute: 0,
            second: 0,
        };
        assert_eq!(epoch(&t(1970, 1, 1, 0)), 0);
        assert_eq!(epoch(&t(2000, 3, 1, 1)), 951_872_400);
        assert_eq!(epoch(&t(2050, 4, 21, 0)), 2_534_112_000);
    }

    #[test]
    fn ignore_lists_as_haproxy_2_6_reads_them() {
        assert_eq!(Ignore::parse("crt-ignore-err", "all"), Ok(Ignore::All));
        assert_eq!(
            Ignore::parse("crt-ignore-err", "10,23"),
            Ok(Ignore::Codes(vec![10, 23]))
        );
        let e = Ignore::parse("crt-ignore-err", "10,X509_V_ERR_CERT_REVOKED").unwrap_err();
        assert_eq!(
            e,
            "'crt-ignore-err' : ID '0' out of range (1..94) in error IDs list '10,X509_V_ERR_CERT_REVOKED'"
        );
        assert!(Ignore::parse("ca-ignore-err", "95").is_err());
    }
}
