//! `show ssl cert FILE` as HAProxy 2.6 prints it: the serial, validity, names, key algorithm,
//! SHA-1 fingerprint, subject and issuer of the certificate, then the subject and issuer of
//! each certificate of its chain, read from the DER (`tls::der`), so that scripts which grep
//! these lines (a fingerprint after a rotation, a `notAfter` to plan the next) work unchanged.
//!
//! The `OCSP Response Key:` line ends the block empty, as HAProxy's does for a certificate
//! without an OCSP response: Bascule does not staple.

use std::fmt::Write as _;

use rustls::pki_types::CertificateDer;

use super::der::{self, AltName, KeyKind};

/// Upper-case hex, as HAProxy dumps binary fields.
fn hex(bytes: &[u8]) -> String {
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02X}");
        s
    })
}

/// The SHA-1 of a certificate's DER, in upper-case hex.
pub fn sha1_fingerprint(der: &[u8]) -> String {
    hex(aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA1_FOR_LEGACY_USE_ONLY, der).as_ref())
}

fn algorithm(k: &KeyKind) -> String {
    match k {
        KeyKind::Rsa(bits) => format!("RSA{bits}"),
        KeyKind::Ec(bits) => format!("EC{bits}"),
        KeyKind::Ed25519 => "ED25519".into(),
        KeyKind::Ed448 => "ED448".into(),
        KeyKind::Other(oid) => oid.clone(),
    }
}

/// One certificate's lines as `show ssl ca-file` prints them (no chain, no OCSP key).
pub fn cert_details(cert: &CertificateDer<'_>) -> Option<String> {
    let d = details(std::slice::from_ref(cert))?;
    Some(d.trim_end_matches("OCSP Response Key: \n").to_string())
}

/// The lines after `Filename:` and `Status:` for `chain` (leaf first). `None` if the leaf is
/// not a certificate this can read (loading checked it, so only a bug gets there).
pub fn details(chain: &[CertificateDer<'_>]) -> Option<String> {
    let leaf = der::cert_fields(chain.first()?)?;
    let mut out = String::new();
    let _ = writeln!(out, "Serial: {}", hex(leaf.serial));
    let _ = writeln!(out, "notBefore: {}", leaf.not_before);
    let _ = writeln!(out, "notAfter: {}", leaf.not_after);
    let alt: Vec<String> = leaf
        .alt_names
        .iter()
        .map(|n| match n {
            AltName::Dns(name) => format!("DNS:{name}"),
            AltName::Other => String::new(),
        })
        .collect();
    let _ = writeln!(out, "Subject Alternative Name: {}", alt.join(", "));
    let _ = writeln!(out, "Algorithm: {}", algorithm(&leaf.key));
    let _ = writeln!(out, "SHA1 FingerPrint: {}", sha1_fingerprint(&chain[0]));
    let _ = writeln!(out, "Subject: {}", der::name_oneline(leaf.subject));
    let _ = writeln!(out, "Issuer: {}", der::name_oneline(leaf.issuer));
    for ca in &chain[1..] {
        let Some(f) = der::cert_fields(ca) else {
            continue;
        };
        let _ = writeln!(out, "Chain Subject: {}", der::name_oneline(f.subject));
        let _ = writeln!(out, "Chain Issuer: {}", der::name_oneline(f.issuer));
    }
    out.push_str("OCSP Response Key: \n");
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn chain(name: &str) -> Vec<CertificateDer<'static>> {
        use rustls::pki_types::pem::PemObject;
        CertificateDer::pem_file_iter(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/tls")
                .join(name),
        )
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
    }

    /// What haproxy 2.6 printed for these files (the serial and fingerprint differ per
    /// generation of tests/tls, so they are checked against `openssl`-independent facts).
    #[test]
    fn details_of_a_bundle_with_its_chain() {
        let c = chain("www-rsa.pem");
        let d = details(&c).unwrap();
        let lines: Vec<&str> = d.lines().collect();
        assert!(
            lines[0].starts_with("Serial: ") && lines[0].len() > 10,
            "{d}"
        );
        assert!(lines[1].starts_with("notBefore: ") && lines[1].ends_with(" GMT"));
        assert_eq!(
            lines[3],
            "Subject Alternative Name: DNS:www.example.com, DNS:example.com"
        );
        assert_eq!(lines[4], "Algorithm: RSA2048");
        assert_eq!(lines[5].len(), "SHA1 FingerPrint: ".len() + 40);
        assert_eq!(
            &lines[6..],
            [
                "Subject: /CN=www.example.com",
                "Issuer: /CN=Bascule Test CA",
                "Chain Subject: /CN=Bascule Test CA",
                "Chain Issuer: /CN=Bascule Test CA",
                "OCSP Response Key: ",
            ]
        );
        let d = details(&chain("split.pem")).unwrap();
        assert!(d.contains("\nAlgorithm: EC256\n"), "{d}");
        assert!(!d.contains("Chain Subject"), "{d}");
    }

    #[test]
    fn sha1_is_the_certificates_fingerprint() {
        // SHA-1("abc"), FIPS 180-1's example.
        assert_eq!(
            sha1_fingerprint(b"abc"),
            "A9993E364706816ABA3E25717850C26C9CD0D89D"
        );
    }
}
