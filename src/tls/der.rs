//! Just enough DER to read what HAProxy reads from a certificate: the attributes of an X.509
//! `Name` (RFC 5280 §4.1.2.4) as (OID, value) pairs, for the common name that HAProxy indexes
//! beside the DNS names of the subject alternative names; and the fields `show ssl cert FILE`
//! prints (serial, validity, issuer and subject on one line, key algorithm and size, the
//! subject alternative names).
//!
//! webpki gives the subject as the raw content of its `SEQUENCE` and nothing else; this walks
//! the DER without a general ASN.1 library. Malformed input yields fewer attributes or `None`,
//! never a panic.

/// The OID of `commonName` (2.5.4.3), DER-encoded.
pub const OID_CN: &[u8] = &[0x55, 0x04, 0x03];

pub(crate) use crate::base::der::tlv;

/// The attributes of a `Name`'s content (a sequence of SETs of `AttributeTypeAndValue`), in
/// order: (OID bytes, value bytes as encoded: UTF8String, PrintableString...).
pub fn name_attributes(mut name: &[u8]) -> Vec<(&[u8], &[u8])> {
    let mut out = Vec::new();
    while let Some((0x31, mut set, rest)) = tlv(name) {
        while let Some((0x30, atv, more)) = tlv(set) {
            if let Some((0x06, oid, value)) = tlv(atv) {
                if let Some((_, v, _)) = tlv(value) {
                    out.push((oid, v));
                }
            }
            set = more;
        }
        name = rest;
    }
    out
}

/// The subject's common name, when it is text.
pub fn common_name(subject: &[u8]) -> Option<String> {
    name_attributes(subject)
        .into_iter()
        .find(|(oid, _)| *oid == OID_CN)
        .and_then(|(_, v)| std::str::from_utf8(v).ok().map(str::to_string))
}

/// The OID of the subject alternative name extension (2.5.29.17).
const OID_SAN: &[u8] = &[0x55, 0x1d, 0x11];
const OID_RSA: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01];
const OID_EC: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01];
const OID_ED25519: &[u8] = &[0x2b, 0x65, 0x70];
const OID_ED448: &[u8] = &[0x2b, 0x65, 0x71];
const OID_P256: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07];
const OID_P384: &[u8] = &[0x2b, 0x81, 0x04, 0x00, 0x22];
const OID_P521: &[u8] = &[0x2b, 0x81, 0x04, 0x00, 0x23];

/// A certificate's public key, as `show ssl cert` names it (`RSA2048`, `EC256`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyKind {
    Rsa(usize),
    Ec(usize),
    Ed25519,
    Ed448,
    /// Another algorithm, by its dotted OID.
    Other(String),
}

/// One entry of the subject alternative names: a DNS name, or another kind (shown empty, as
/// HAProxy does).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AltName {
    Dns(String),
    Other,
}

/// What `show ssl cert FILE` reads from a certificate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertFields<'a> {
    /// The serial number's magnitude (no sign byte).
    pub serial: &'a [u8],
    pub not_before: Time,
    pub not_after: Time,
    /// The content of the issuer and subject `Name`s.
    pub issuer: &'a [u8],
    pub subject: &'a [u8],
    pub key: KeyKind,
    pub alt_names: Vec<AltName>,
    /// The validity bounds' text as the certificate holds them (`YYMMDDhhmmssZ`).
    pub not_before_text: &'a [u8],
    pub not_after_text: &'a [u8],
    /// The version (1, 2 or 3).
    pub version: u8,
    /// The whole `SubjectPublicKeyInfo` (tag and length included), to match a private key.
    pub spki: &'a [u8],
    /// The OID of the signature algorithm the issuer signed with.
    pub sig_oid: &'a [u8],
    /// The content of the `extensions` field (a `SEQUENCE` of extensions), empty without one.
    pub extensions: &'a [u8],
}

/// A signature algorithm by OpenSSL's short name (`ssl_*_sig_alg`), else its dotted OID.
pub fn sig_alg_name(oid: &[u8]) -> String {
    const RSA: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01];
    const ECDSA: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03];
    let name = match oid {
        [r @ .., n] if r == RSA => match n {
            4 => "RSA-MD5",
            5 => "RSA-SHA1",
            10 => "RSASSA-PSS",
            11 => "RSA-SHA256",
            12 => "RSA-SHA384",
            13 => "RSA-SHA512",
            14 => "RSA-SHA224",
            _ => "",
        },
        [e @ .., n] if e == ECDSA => match n {
            1 => "ecdsa-with-SHA224",
            2 => "ecdsa-with-SHA256",
            3 => "ecdsa-with-SHA384",
            4 => "ecdsa-with-SHA512",
            _ => "",
        },
        [0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x01] => "ecdsa-with-SHA1",
        [0x2b, 0x65, 0x70] => "ED25519",
        [0x2b, 0x65, 0x71] => "ED448",
        _ => "",
    };
    if name.is_empty() {
        oid_text(oid)
    } else {
        name.to_string()
    }
}

/// A public key's algorithm by OpenSSL's short name (`ssl_*_key_alg`).
pub fn key_alg_name(key: &KeyKind) -> String {
    match key {
        KeyKind::Rsa(_) => "rsaEncryption".to_string(),
        KeyKind::Ec(_) => "id-ecPublicKey".to_string(),
        KeyKind::Ed25519 => "ED25519".to_string(),
        KeyKind::Ed448 => "ED448".to_string(),
        KeyKind::Other(oid) => oid.clone(),
    }
}

/// A UTCTime or GeneralizedTime, to the second.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Time {
    pub year: u32,
    pub month: u8,
    pub day: u8,
    pub hour: u8,
    pub minute: u8,
    pub second: u8,
}

impl std::fmt::Display for Time {
    /// OpenSSL's `ASN1_TIME_print`: `Nov  4 12:23:10 2026 GMT`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        const MONTHS: [&str; 12] = [
            "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
        ];
        let month = MONTHS
            .get(usize::from(self.month).wrapping_sub(1))
            .unwrap_or(&"???");
        write!(
            f,
            "{month} {:2} {:02}:{:02}:{:02} {} GMT",
            self.day, self.hour, self.minute, self.second, self.year
        )
    }
}

/// A UTCTime (tag 0x17) or GeneralizedTime (0x18) value.
pub(crate) fn time(tag: u8, v: &[u8]) -> Option<Time> {
    let digits = |s: &[u8]| -> Option<u32> {
        s.iter().try_fold(0u32, |acc, &b| {
            b.is_ascii_digit().then(|| acc * 10 + u32::from(b - b'0'))
        })
    };
    let (year, rest) = match tag {
        0x17 if v.len() >= 12 => {
            let yy = digits(&v[..2])?;
            (if yy >= 50 { 1900 + yy } else { 2000 + yy }, &v[2..])
        }
        0x18 if v.len() >= 14 => (digits(&v[..4])?, &v[4..]),
        _ => return None,
    };
    let two = |i: usize| digits(&rest[i..i + 2]).and_then(|n| u8::try_from(n).ok());
    Some(Time {
        year,
        month: two(0)?,
        day: two(2)?,
        hour: two(4)?,
        minute: two(6)?,
        second: two(8)?,
    })
}

/// An OID in dotted form (`1.2.840.113549.1.9.1`).
pub fn oid_text(oid: &[u8]) -> String {
    let mut arcs: Vec<u64> = Vec::new();
    let mut acc: u64 = 0;
    for &b in oid {
        acc = (acc << 7) | u64::from(b & 0x7f);
        if b & 0x80 == 0 {
            arcs.push(acc);
            acc = 0;
        }
    }
    let mut out = String::new();
    if let Some(&first) = arcs.first() {
        let (a, b) = match first {
            0..=39 => (0, first),
            40..=79 => (1, first - 40),
            _ => (2, first - 80),
        };
        out = format!("{a}.{b}");
    }
    for arc in arcs.iter().skip(1) {
        out.push_str(&format!(".{arc}"));
    }
    out
}

/// OpenSSL's short names of the usual `Name` attributes (what `X509_NAME_oneline`-style
/// output prints); others print as their dotted OID.
fn attribute_name(oid: &[u8]) -> String {
    let short = match oid {
        [0x55, 0x04, n] => match n {
            3 => "CN",
            4 => "SN",
            5 => "serialNumber",
            6 => "C",
            7 => "L",
            8 => "ST",
            9 => "street",
            10 => "O",
            11 => "OU",
            12 => "title",
            13 => "description",
            15 => "businessCategory",
            17 => "postalCode",
            41 => "name",
            42 => "GN",
            43 => "initials",
            44 => "generationQualifier",
            46 => "dnQualifier",
            65 => "pseudonym",
            97 => "organizationIdentifier",
            _ => "",
        },
        [0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x09, 0x01] => "emailAddress",
        [0x09, 0x92, 0x26, 0x89, 0x93, 0xf2, 0x2c, 0x64, 0x01, 0x19] => "DC",
        [0x09, 0x92, 0x26, 0x89, 0x93, 0xf2, 0x2c, 0x64, 0x01, 0x01] => "UID",
        _ => "",
    };
    if short.is_empty() {
        oid_text(oid)
    } else {
        short.to_string()
    }
}

/// A `Name`'s attributes in order, by OpenSSL's short names, values as text.
pub fn name_pairs(name: &[u8]) -> Vec<(String, String)> {
    name_attributes(name)
        .into_iter()
        .map(|(oid, v)| (attribute_name(oid), String::from_utf8_lossy(v).into_owned()))
        .collect()
}

/// A `Name` on one line as HAProxy shows it: `/C=FR/O=Example/CN=www.example.com`.
pub fn name_oneline(name: &[u8]) -> String {
    name_attributes(name)
        .into_iter()
        .map(|(oid, v)| format!("/{}={}", attribute_name(oid), String::from_utf8_lossy(v)))
        .collect()
}

/// The bits of an unsigned big-endian integer.
fn bit_len(n: &[u8]) -> usize {
    let n = &n[n.iter().position(|&b| b != 0).unwrap_or(n.len())..];
    match n.first() {
        None => 0,
        Some(&b) => (n.len() - 1) * 8 + (8 - b.leading_zeros() as usize),
    }
}

fn key_kind(spki: &[u8]) -> Option<KeyKind> {
    let (0x30, alg, rest) = tlv(spki)? else {
        return None;
    };
    let (0x06, oid, params) = tlv(alg)? else {
        return None;
    };
    let (0x03, bits, _) = tlv(rest)? else {
        return None;
    };
    let key = bits.get(1..)?;
    Some(match oid {
        OID_RSA => {
            let (0x30, seq, _) = tlv(key)? else {
                return None;
            };
            let (0x02, modulus, _) = tlv(seq)? else {
                return None;
            };
            KeyKind::Rsa(bit_len(modulus))
        }
        OID_EC => KeyKind::Ec(match tlv(params) {
            Some((0x06, OID_P256, _)) => 256,
            Some((0x06, OID_P384, _)) => 384,
            Some((0x06, OID_P521, _)) => 521,
            // An uncompressed point: 04 || X || Y.
            _ => key.len().saturating_sub(1) / 2 * 8,
        }),
        OID_ED25519 => KeyKind::Ed25519,
        OID_ED448 => KeyKind::Ed448,
        other => KeyKind::Other(oid_text(other)),
    })
}

fn alt_names(extensions: &[u8]) -> Vec<AltName> {
    let mut out = Vec::new();
    let Some((0x30, mut exts, _)) = tlv(extensions) else {
        return out;
    };
    while let Some((0x30, ext, more)) = tlv(exts) {
        exts = more;
        let Some((0x06, OID_SAN, mut rest)) = tlv(ext) else {
            continue;
        };
        if let Some((0x01, _, after)) = tlv(rest) {
            rest = after;
        }
        let Some((0x04, value, _)) = tlv(rest) else {
            continue;
        };
        let Some((0x30, mut names, _)) = tlv(value) else {
            continue;
        };
        while let Some((tag, v, more)) = tlv(names) {
            out.push(match tag {
                0x82 => AltName::Dns(String::from_utf8_lossy(v).into_owned()),
                _ => AltName::Other,
            });
            names = more;
        }
    }
    out
}

/// Reads the fields `show ssl cert` prints from a DER certificate; `None` if it is not one.
pub fn cert_fields(der: &[u8]) -> Option<CertFields<'_>> {
    let (0x30, cert, _) = tlv(der)? else {
        return None;
    };
    let (0x30, mut tbs, after_tbs) = tlv(cert)? else {
        return None;
    };
    let mut version = 1;
    if let Some((0xa0, v, rest)) = tlv(tbs) {
        if let Some((0x02, &[n], _)) = tlv(v) {
            version = n.saturating_add(1);
        }
        tbs = rest;
    }
    let (0x02, serial, rest) = tlv(tbs)? else {
        return None;
    };
    let serial = match serial {
        [0, rest @ ..] if !rest.is_empty() => rest,
        s => s,
    };
    let (0x30, _, rest) = tlv(rest)? else {
        return None;
    };
    let (0x30, issuer, rest) = tlv(rest)? else {
        return None;
    };
    let (0x30, validity, rest) = tlv(rest)? else {
        return None;
    };
    let (0x30, subject, rest) = tlv(rest)? else {
        return None;
    };
    let (0x30, spki, after_spki) = tlv(rest)? else {
        return None;
    };
    let spki_der = &rest[..rest.len() - after_spki.len()];
    let key = key_kind(spki)?;
    let (t1, v1, rest_v) = tlv(validity)?;
    let (t2, v2, _) = tlv(rest_v)?;
    let mut alt = Vec::new();
    let mut extensions: &[u8] = &[];
    let mut tail = after_spki;
    while let Some((tag, v, more)) = tlv(tail) {
        if tag == 0xa3 {
            alt = alt_names(v);
            extensions = v;
        }
        tail = more;
    }
    Some(CertFields {
        serial,
        not_before: time(t1, v1)?,
        not_after: time(t2, v2)?,
        issuer,
        subject,
        key,
        alt_names: alt,
        not_before_text: v1,
        not_after_text: v2,
        version,
        spki: spki_der,
        extensions,
        sig_oid: match tlv(after_tbs) {
            Some((0x30, alg, _)) => match tlv(alg) {
                Some((0x06, oid, _)) => oid,
                _ => &[],
            },
            _ => &[],
        },
    })
}

/// A validity bound as HAProxy returns it: a UTCTime as is (`YYMMDDhhmmssZ`), a GeneralizedTime
/// of this century without its first two digits, and nothing for another century.
fn asn1_time(text: &[u8]) -> Option<String> {
    let text = match text {
        t if t.len() == 13 => t,
        [b'2', b'0', rest @ ..] if rest.len() >= 10 => rest,
        _ => return None,
    };
    Some(String::from_utf8_lossy(text).into_owned())
}

/// The fields of a certificate the `ssl_c_*` (the client's) and `ssl_f_*` (the one a `bind`
/// presented) fetches read (`None`: not a certificate Bascule can read; the handshake
/// verified it all the same).
pub fn cert_info(der: &[u8]) -> Option<crate::rules::source::PeerCert> {
    let f = cert_fields(der)?;
    Some(crate::rules::source::PeerCert {
        subject: name_pairs(f.subject),
        issuer: name_pairs(f.issuer),
        serial: f.serial.to_vec(),
        not_before: asn1_time(f.not_before_text),
        not_after: asn1_time(f.not_after_text),
        version: i64::from(f.version),
        sig_alg: sig_alg_name(f.sig_oid),
        key_alg: key_alg_name(&f.key),
        sha1: aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA1_FOR_LEGACY_USE_ONLY, der)
            .as_ref()
            .to_vec(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `SET { SEQUENCE { OID 2.5.4.3, UTF8String "a.test" } }` then `O=x`.
    const SUBJECT: &[u8] = &[
        0x31, 0x0f, 0x30, 0x0d, 0x06, 0x03, 0x55, 0x04, 0x03, 0x0c, 0x06, b'a', b'.', b't', b'e',
        b's', b't', 0x31, 0x0a, 0x30, 0x08, 0x06, 0x03, 0x55, 0x04, 0x0a, 0x0c, 0x01, b'x',
    ];

    #[test]
    fn reads_the_common_name() {
        assert_eq!(common_name(SUBJECT).as_deref(), Some("a.test"));
        let attrs = name_attributes(SUBJECT);
        assert_eq!(attrs.len(), 2);
        assert_eq!(attrs[1], (&[0x55, 0x04, 0x0a][..], &b"x"[..]));
    }

    #[test]
    fn truncated_input_yields_what_is_whole() {
        for cut in 0..SUBJECT.len() {
            let attrs = name_attributes(&SUBJECT[..cut]);
            assert!(attrs.len() <= 1, "cut at {cut}");
        }
        assert_eq!(common_name(&[0x31, 0x85, 0xff]), None);
    }

    #[test]
    fn times_print_as_openssl_does() {
        let t = time(0x17, b"260104090807Z").unwrap();
        assert_eq!(t.to_string(), "Jan  4 09:08:07 2026 GMT");
        let t = time(0x18, b"21261031122310Z").unwrap();
        assert_eq!(t.to_string(), "Oct 31 12:23:10 2126 GMT");
        assert_eq!(time(0x17, b"9912312359").map(|t| t.year), None);
        assert_eq!(time(0x17, b"991231235959Z").map(|t| t.year), Some(1999));
    }

    #[test]
    fn names_and_oids_on_one_line() {
        assert_eq!(name_oneline(SUBJECT), "/CN=a.test/O=x");
        assert_eq!(
            oid_text(&[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x09, 0x01]),
            "1.2.840.113549.1.9.1"
        );
        assert_eq!(oid_text(&[0x55, 0x04, 0x03]), "2.5.4.3");
        assert_eq!(bit_len(&[0x00, 0x80, 0x00]), 16);
        assert_eq!(bit_len(&[0x01, 0xff]), 9);
    }

    #[test]
    fn certificate_fields_of_the_fixtures() {
        use rustls::pki_types::pem::PemObject;
        let der = |name: &str| {
            rustls::pki_types::CertificateDer::from_pem_file(
                std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                    .join("tests/tls")
                    .join(name),
            )
            .unwrap()
        };
        let next = der("next-www.pem");
        let f = cert_fields(&next).unwrap();
        // 0x8F... is encoded with a leading zero byte; the magnitude is shown.
        assert_eq!(f.serial, [0x8f, 1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(f.key, KeyKind::Ec(384));
        assert_eq!(
            f.alt_names,
            [
                AltName::Dns("www.example.com".into()),
                AltName::Other,
                AltName::Dns("example.com".into())
            ]
        );
        assert_eq!(
            name_oneline(f.subject),
            "/C=FR/O=Bascule Tests/CN=www.example.com"
        );
        assert_eq!(name_oneline(f.issuer), "/CN=Bascule Test CA");
        assert_eq!(f.not_after.year - f.not_before.year, 100);
        let rsa = der("other-rsa.pem");
        let f = cert_fields(&rsa).unwrap();
        assert_eq!(f.key, KeyKind::Rsa(2048));
        assert_eq!(f.serial, [0x0a, 0x0b, 0x0c]);
        for cut in [0, 10, 100, rsa.len() - 1] {
            assert!(cert_fields(&rsa[..cut]).is_none(), "cut at {cut}");
        }
    }
}
