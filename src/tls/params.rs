//! HAProxy's TLS parameter words (OpenSSL's names) mapped to what rustls offers.
//!
//! HAProxy hands `ciphers`, `ciphersuites`, `curves` and the version bounds to OpenSSL; rustls
//! implements a smaller, modern set: TLS 1.2 and 1.3 only, AEAD suites with ECDHE, the
//! X25519, P-256 and P-384 groups (and the X25519MLKEM768 hybrid). The rule here:
//!
//! - a list is a restriction, so a name rustls does not implement but OpenSSL does (a DHE or
//!   CBC suite in the usual Mozilla lists) is left out with a warning that names it, as long
//!   as something of the list remains; a list of which nothing remains is an error (and so are
//!   DHE suites beside DH parameters, which would make haproxy negotiate them: see `tls::dh`);
//! - OpenSSL's cipher-string language works over rustls's suites (`HIGH:!aNULL:!MD5`,
//!   `ECDHE+AESGCM`, `-X`, `+X`, `@STRENGTH`); a word neither OpenSSL nor rustls knows is an
//!   error naming it;
//! - a bound that cannot hold (`ssl-max-ver TLSv1.1`) is an error; a lower bound below 1.2 is
//!   raised to 1.2 with a warning.

use rustls::crypto::aws_lc_rs::{cipher_suite as cs, kx_group};
use rustls::crypto::SupportedKxGroup;
use rustls::SupportedCipherSuite;

/// A protocol version as HAProxy names it (`ssl-min-ver`, `ssl-max-ver`, `no-tlsv1x`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Version {
    Ssl3,
    Tls10,
    Tls11,
    Tls12,
    Tls13,
}

impl Version {
    pub fn parse(word: &str) -> Option<Version> {
        Some(match word {
            "SSLv3" => Version::Ssl3,
            "TLSv1.0" => Version::Tls10,
            "TLSv1.1" => Version::Tls11,
            "TLSv1.2" => Version::Tls12,
            "TLSv1.3" => Version::Tls13,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Version::Ssl3 => "SSLv3",
            Version::Tls10 => "TLSv1.0",
            Version::Tls11 => "TLSv1.1",
            Version::Tls12 => "TLSv1.2",
            Version::Tls13 => "TLSv1.3",
        }
    }
}

/// What a mapping kept, and what it left out (for the warning).
#[derive(Debug)]
pub struct Mapped<T> {
    pub kept: Vec<T>,
    pub left_out: Vec<String>,
}

/// TLS 1.2 suites by OpenSSL name, and those OpenSSL has that rustls does not.
const TLS12: &[(&str, SupportedCipherSuite)] = &[
    (
        "ECDHE-ECDSA-AES128-GCM-SHA256",
        cs::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
    ),
    (
        "ECDHE-RSA-AES128-GCM-SHA256",
        cs::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
    ),
    (
        "ECDHE-ECDSA-AES256-GCM-SHA384",
        cs::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
    ),
    (
        "ECDHE-RSA-AES256-GCM-SHA384",
        cs::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
    ),
    (
        "ECDHE-ECDSA-CHACHA20-POLY1305",
        cs::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
    ),
    (
        "ECDHE-RSA-CHACHA20-POLY1305",
        cs::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
    ),
];

/// OpenSSL's names of TLS ≤ 1.2 suites rustls does not implement (CBC, DHE, RSA key
/// exchange, CCM, ARIA, Camellia...): recognised so that a list holding them is narrowed, not
/// refused. A name is recognised by its shape: the key exchanges and ciphers OpenSSL names.
fn openssl_tls12_name(name: &str) -> bool {
    const KX: &[&str] = &[
        "ECDHE-",
        "DHE-",
        "EDH-",
        "AES",
        "DES-",
        "RC4-",
        "CAMELLIA",
        "SEED-",
        "IDEA-",
        "PSK-",
        "SRP-",
        "ARIA",
        "ADH-",
        "AECDH-",
        "RSA-PSK-",
        "ECDHE-PSK-",
        "DHE-PSK-",
        "NULL-",
        "CHACHA20",
        "DES-CBC3-",
        "GOST",
        "ECDH-",
    ];
    name.bytes()
        .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == b'-')
        && name.contains('-')
        && KX.iter().any(|k| name.starts_with(k))
}

/// The OpenSSL cipher-string keywords each suite of [`TLS12`] answers to (same order).
/// Keywords that name what rustls never offers (`aNULL`, `MD5`, `RC4`, `3DES`, `kRSA`, `DHE`,
/// `CAMELLIA`...) are known too and match no suite, so `!aNULL` changes nothing.
const TAGS: [&[&str]; 6] = [
    &[
        "kECDHE", "kEECDH", "ECDHE", "EECDH", "aECDSA", "ECDSA", "AESGCM", "AES", "AES128",
        "SHA256",
    ],
    &[
        "kECDHE", "kEECDH", "ECDHE", "EECDH", "aRSA", "AESGCM", "AES", "AES128", "SHA256",
    ],
    &[
        "kECDHE", "kEECDH", "ECDHE", "EECDH", "aECDSA", "ECDSA", "AESGCM", "AES", "AES256",
        "SHA384",
    ],
    &[
        "kECDHE", "kEECDH", "ECDHE", "EECDH", "aRSA", "AESGCM", "AES", "AES256", "SHA384",
    ],
    &[
        "kECDHE", "kEECDH", "ECDHE", "EECDH", "aECDSA", "ECDSA", "CHACHA20", "SHA256",
    ],
    &[
        "kECDHE", "kEECDH", "ECDHE", "EECDH", "aRSA", "CHACHA20", "SHA256",
    ],
];

/// Keywords every suite answers to.
const TAGS_ALL: &[&str] = &["ALL", "DEFAULT", "HIGH", "TLSv1.2", "AEAD", "FIPS"];

/// Keywords OpenSSL knows that match none of rustls's suites.
const TAGS_NONE: &[&str] = &[
    "aNULL",
    "eNULL",
    "NULL",
    "COMPLEMENTOFDEFAULT",
    "COMPLEMENTOFALL",
    "MEDIUM",
    "LOW",
    "EXPORT",
    "EXP",
    "MD5",
    "RC4",
    "DES",
    "3DES",
    "IDEA",
    "SEED",
    "CAMELLIA",
    "CAMELLIA128",
    "CAMELLIA256",
    "ARIA",
    "ARIAGCM",
    "PSK",
    "aPSK",
    "kPSK",
    "kECDHEPSK",
    "kDHEPSK",
    "kRSAPSK",
    "SRP",
    "kSRP",
    "aSRP",
    "DSS",
    "aDSS",
    "kRSA",
    "RSA",
    "DH",
    "DHE",
    "EDH",
    "kDHE",
    "kEDH",
    "ADH",
    "AECDH",
    "aECDH",
    "kECDH",
    "ECDH",
    "SHA1",
    "SHA",
    "CBC",
    "AESCCM",
    "AESCCM8",
    "SSLv3",
    "TLSv1",
    "TLSv1.0",
    "SUITEB128",
    "SUITEB128ONLY",
    "SUITEB192",
    "GOST94",
    "GOST89MAC",
    "kGOST",
    "aGOST",
    "aGOST01",
    "CHACHA20POLY1305",
    "CECPQ1",
];

/// The suites (indices into [`TLS12`]) one term selects: a suite name, a keyword, or
/// keywords joined by `+` (all of them). `None`: not a name or keyword OpenSSL knows.
fn select(term: &str) -> Option<Vec<usize>> {
    if let Some(i) = TLS12.iter().position(|(n, _)| *n == term) {
        return Some(vec![i]);
    }
    if openssl_tls12_name(term) && !term.contains('+') {
        return Some(Vec::new());
    }
    let mut set: Vec<usize> = (0..TLS12.len()).collect();
    for word in term.split('+') {
        if TAGS_ALL.contains(&word) {
            continue;
        }
        if TAGS_NONE.contains(&word) {
            set.clear();
            continue;
        }
        if !TAGS.iter().any(|t| t.contains(&word)) {
            return None;
        }
        set.retain(|&i| TAGS[i].contains(&word));
    }
    Some(set)
}

/// `ciphers LIST` (TLS ≤ 1.2): OpenSSL's cipher string over the suites rustls has. Terms
/// separated by `:` (or `,`, space) are suite names or keywords (`HIGH`, `ECDHE+AESGCM`);
/// `!T` removes for good, `-T` removes, `+T` moves to the end, `@STRENGTH` and
/// `@SECLEVEL=N` are accepted (rustls's suites are all strong). Named suites that rustls does
/// not implement are reported in `left_out`.
pub fn tls12_suites(list: &str) -> Result<Mapped<SupportedCipherSuite>, String> {
    let mut order: Vec<usize> = Vec::new();
    let mut killed: Vec<usize> = Vec::new();
    let mut left_out = Vec::new();
    for term in list.split([':', ',', ' ']).filter(|n| !n.is_empty()) {
        if term.starts_with('@') {
            continue;
        }
        let (op, body) = match term.as_bytes()[0] {
            b'!' | b'-' | b'+' => (term.as_bytes()[0], &term[1..]),
            _ => (b' ', term),
        };
        let Some(set) = select(body) else {
            return Err(format!(
                "'{body}' is neither a cipher suite name nor an OpenSSL cipher-string keyword"
            ));
        };
        if set.is_empty() && op == b' ' && openssl_tls12_name(body) {
            left_out.push(body.to_string());
        }
        match op {
            b'!' => {
                order.retain(|i| !set.contains(i));
                killed.extend(set);
            }
            b'-' => order.retain(|i| !set.contains(i)),
            b'+' => {
                let moved: Vec<usize> = order.iter().copied().filter(|i| set.contains(i)).collect();
                order.retain(|i| !set.contains(i));
                order.extend(moved);
            }
            _ => {
                for i in set {
                    if !order.contains(&i) && !killed.contains(&i) {
                        order.push(i);
                    }
                }
            }
        }
    }
    if order.is_empty() {
        return Err(format!(
            "nothing of '{list}' is implemented by rustls (TLS 1.2 suites: {})",
            TLS12.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(":")
        ));
    }
    Ok(Mapped {
        kept: order.into_iter().map(|i| TLS12[i].1).collect(),
        left_out,
    })
}

/// TLS 1.3 suites by their standard (and OpenSSL) names.
const TLS13: &[(&str, SupportedCipherSuite)] = &[
    ("TLS_AES_128_GCM_SHA256", cs::TLS13_AES_128_GCM_SHA256),
    ("TLS_AES_256_GCM_SHA384", cs::TLS13_AES_256_GCM_SHA384),
    (
        "TLS_CHACHA20_POLY1305_SHA256",
        cs::TLS13_CHACHA20_POLY1305_SHA256,
    ),
];

/// `ciphersuites LIST` (TLS 1.3).
pub fn tls13_suites(list: &str) -> Result<Mapped<SupportedCipherSuite>, String> {
    let mut kept = Vec::new();
    let mut left_out = Vec::new();
    for name in list.split(':').filter(|n| !n.is_empty()) {
        if let Some((_, s)) = TLS13.iter().find(|(n, _)| *n == name) {
            if !kept.contains(s) {
                kept.push(*s);
            }
        } else if matches!(name, "TLS_AES_128_CCM_SHA256" | "TLS_AES_128_CCM_8_SHA256") {
            left_out.push(name.to_string());
        } else {
            return Err(format!("'{name}' is not a TLS 1.3 cipher suite"));
        }
    }
    if kept.is_empty() {
        return Err(format!(
            "none of '{list}' is implemented by rustls (TLS 1.3 suites: {})",
            TLS13.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(":")
        ));
    }
    Ok(Mapped { kept, left_out })
}

/// `curves LIST` / `ecdhe NAME`: key exchange groups by OpenSSL's names.
pub fn groups(list: &str) -> Result<Mapped<&'static dyn SupportedKxGroup>, String> {
    let mut kept: Vec<&'static dyn SupportedKxGroup> = Vec::new();
    let mut left_out = Vec::new();
    for name in list.split(':').filter(|n| !n.is_empty()) {
        let g: &'static dyn SupportedKxGroup = match name {
            "X25519" | "x25519" => kx_group::X25519,
            "P-256" | "prime256v1" | "secp256r1" => kx_group::SECP256R1,
            "P-384" | "secp384r1" => kx_group::SECP384R1,
            "X25519MLKEM768" => kx_group::X25519MLKEM768,
            "P-521" | "secp521r1" | "X448" | "x448" | "ffdhe2048" | "ffdhe3072" | "ffdhe4096"
            | "brainpoolP256r1" | "brainpoolP384r1" | "brainpoolP512r1" => {
                left_out.push(name.to_string());
                continue;
            }
            other => return Err(format!("unknown curve name '{other}'")),
        };
        if !kept.iter().any(|k| k.name() == g.name()) {
            kept.push(g);
        }
    }
    if kept.is_empty() {
        return Err(format!(
            "none of '{list}' is implemented by rustls (groups: X25519, P-256, P-384, X25519MLKEM768)"
        ));
    }
    Ok(Mapped { kept, left_out })
}

/// The versions rustls may negotiate within `[min, max]` (HAProxy's defaults: TLSv1.2 to
/// TLSv1.3), minus the `no-tlsv1x` ones. Returns the versions and a warning when the lower
/// bound was below what rustls offers.
pub fn versions(
    min: Option<Version>,
    max: Option<Version>,
    disabled: &[Version],
) -> Result<
    (
        Vec<&'static rustls::SupportedProtocolVersion>,
        Option<String>,
    ),
    String,
> {
    let min_v = min.unwrap_or(Version::Tls12);
    let max_v = max.unwrap_or(Version::Tls13);
    if min_v > max_v {
        return Err(format!(
            "ssl-min-ver {} is above ssl-max-ver {}",
            min_v.name(),
            max_v.name()
        ));
    }
    if max_v < Version::Tls12 {
        return Err(format!(
            "ssl-max-ver {}: rustls implements TLSv1.2 and TLSv1.3 only",
            max_v.name()
        ));
    }
    let warning = (min_v < Version::Tls12).then(|| {
        format!(
            "ssl-min-ver {}: rustls implements TLSv1.2 and TLSv1.3 only; the minimum is TLSv1.2",
            min_v.name()
        )
    });
    let mut out = Vec::new();
    for (v, proto) in [
        (Version::Tls13, &rustls::version::TLS13),
        (Version::Tls12, &rustls::version::TLS12),
    ] {
        if v >= min_v && v <= max_v && !disabled.contains(&v) {
            out.push(proto);
        }
    }
    if out.is_empty() {
        return Err("no protocol version is left (TLSv1.2 and TLSv1.3 both disabled)".into());
    }
    Ok((out, warning))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOZILLA_INTERMEDIATE: &str = "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305:DHE-RSA-AES128-GCM-SHA256:DHE-RSA-AES256-GCM-SHA384";

    #[test]
    fn the_usual_lists_map_and_say_what_is_left_out() {
        let m = tls12_suites(MOZILLA_INTERMEDIATE).unwrap();
        assert_eq!(m.kept.len(), 6);
        assert_eq!(
            m.left_out,
            ["DHE-RSA-AES128-GCM-SHA256", "DHE-RSA-AES256-GCM-SHA384"]
        );
        let m = tls13_suites(
            "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256",
        )
        .unwrap();
        assert_eq!(m.kept.len(), 3);
        assert!(m.left_out.is_empty());
        let m = groups("X25519:P-256:P-521").unwrap();
        assert_eq!(m.kept.len(), 2);
        assert_eq!(m.left_out, ["P-521"]);
    }

    #[test]
    fn what_cannot_be_honoured_is_an_error_naming_it() {
        let e = tls12_suites("HIGH:!aNULL:NOPE").unwrap_err();
        assert!(e.contains("'NOPE'"), "{e}");
        let e = tls12_suites("DHE-RSA-AES128-GCM-SHA256").unwrap_err();
        assert!(e.contains("nothing of"), "{e}");
        assert!(tls12_suites("MEDIUM:!HIGH").is_err());
        assert!(tls13_suites("TLS_FOO").unwrap_err().contains("TLS_FOO"));
        assert!(groups("curve9").unwrap_err().contains("curve9"));
        assert!(groups("P-521").unwrap_err().contains("none of"));
    }

    #[test]
    fn openssl_cipher_strings() {
        let names = |l: &str| -> Vec<String> {
            tls12_suites(l)
                .unwrap()
                .kept
                .iter()
                .map(|s| format!("{:?}", s.suite()))
                .collect()
        };
        assert_eq!(names("HIGH:!aNULL:!MD5").len(), 6);
        assert_eq!(names("ECDHE+AESGCM").len(), 4);
        assert_eq!(
            names("ECDHE+AESGCM:!aRSA:@STRENGTH"),
            [
                "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
                "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"
            ]
        );
        // -X removes, a later term adds back; !X removes for good; +X moves to the end.
        assert_eq!(names("ALL:-CHACHA20:CHACHA20").len(), 6);
        assert_eq!(names("ALL:!CHACHA20:CHACHA20").len(), 4);
        assert_eq!(
            names("ECDHE-RSA-CHACHA20-POLY1305:ECDHE-RSA-AES128-GCM-SHA256:+CHACHA20")[1],
            "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256"
        );
    }

    #[test]
    fn version_bounds() {
        let (v, w) = versions(None, None, &[]).unwrap();
        assert_eq!(v.len(), 2);
        assert!(w.is_none());
        let (v, w) = versions(Some(Version::Tls10), None, &[Version::Tls13]).unwrap();
        assert_eq!(v.len(), 1);
        assert_eq!(v[0].version, rustls::ProtocolVersion::TLSv1_2);
        assert!(w.unwrap().contains("minimum is TLSv1.2"));
        assert!(versions(None, Some(Version::Tls11), &[]).is_err());
        assert!(versions(Some(Version::Tls13), Some(Version::Tls12), &[]).is_err());
        assert!(versions(None, None, &[Version::Tls12, Version::Tls13]).is_err());
        let (v, _) = versions(Some(Version::Tls13), None, &[]).unwrap();
        assert_eq!(v[0].version, rustls::ProtocolVersion::TLSv1_3);
    }
}
