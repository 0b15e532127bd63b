//! The CA certificates and CRLs that `ca-file` and `crl-file` name, for checking client
//! certificates (`bind ... verify`) and servers' (`server ... verify required`).
//!
//! As in HAProxy, `ca-file` is a PEM file, or a directory whose `.pem`, `.crt` and `.cer`
//! files are all loaded (names starting with a dot skipped), or `@system-ca`: the system's
//! trusted CAs, Debian's bundle `/etc/ssl/certs/ca-certificates.crt` (OpenSSL's default
//! directory holds the same certificates). HAProxy 2.6.12 does not read `SSL_CERT_DIR` for it
//! (its documentation says it may; the binary does not), and neither does Bascule. Errors name
//! the file and what is wrong with it.

use std::path::{Path, PathBuf};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, CertificateRevocationListDer};

/// The word that stands for the system's CAs.
pub const SYSTEM_CA: &str = "@system-ca";
/// Where the system's CAs are.
const SYSTEM_BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";
/// The files of a CA directory that hold certificates.
const CA_EXTENSIONS: &[&str] = &["pem", "crt", "cer"];

/// `@system-ca` (never put under `ca-base`).
pub fn is_system(path: &Path) -> bool {
    path.as_os_str() == SYSTEM_CA
}

/// The files `ca-file PATH` reads: PATH, the CA files of a directory, or the system's.
fn ca_files(path: &Path) -> Result<Vec<PathBuf>, String> {
    if is_system(path) {
        return Ok(vec![PathBuf::from(SYSTEM_BUNDLE)]);
    }
    if !path.is_dir() {
        return Ok(vec![path.to_path_buf()]);
    }
    let mut files: Vec<PathBuf> = std::fs::read_dir(path)
        .map_err(|e| format!("unable to scan CA directory '{}': {e}", path.display()))?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            let ext = p.extension().and_then(|e| e.to_str()).unwrap_or("");
            !name.starts_with('.') && p.is_file() && CA_EXTENSIONS.contains(&ext)
        })
        .collect();
    files.sort();
    if files.is_empty() {
        return Err(format!(
            "unable to load CA directory '{}': no .pem, .crt or .cer file in it",
            path.display()
        ));
    }
    Ok(files)
}

/// The certificates of `ca-file PATH`, as they are (client certificates are checked against
/// them by `verify`, which takes the version 1 CA certificates webpki refuses).
pub fn load_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let mut all = Vec::new();
    for file in ca_files(path)? {
        let shown = file.display();
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&file)
            .map_err(|e| format!("unable to load CA file '{shown}': {e}"))?
            .collect::<Result<_, _>>()
            .map_err(|e| format!("unable to load CA file '{shown}': {e}"))?;
        if certs.is_empty() {
            return Err(format!(
                "unable to load CA file '{shown}': no certificate in it"
            ));
        }
        all.extend(certs);
    }
    Ok(all)
}

/// Loads `ca-file PATH` into a root store.
pub fn load_roots(path: &Path) -> Result<rustls::RootCertStore, String> {
    let mut roots = rustls::RootCertStore::empty();
    for file in ca_files(path)? {
        let shown = file.display();
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&file)
            .map_err(|e| format!("unable to load CA file '{shown}': {e}"))?
            .collect::<Result<_, _>>()
            .map_err(|e| format!("unable to load CA file '{shown}': {e}"))?;
        if certs.is_empty() {
            return Err(format!(
                "unable to load CA file '{shown}': no certificate in it"
            ));
        }
        if is_system(path) {
            // A system bundle may hold a certificate webpki cannot use as a root: it is
            // left out rather than refusing the whole bundle, as OpenSSL loads what it can.
            roots.add_parsable_certificates(certs);
        } else {
            for c in certs {
                roots
                    .add(c)
                    .map_err(|e| format!("CA file '{shown}': {e}"))?;
            }
        }
    }
    if roots.is_empty() {
        return Err(format!(
            "unable to load CA file '{}': no usable certificate in it",
            path.display()
        ));
    }
    Ok(roots)
}

/// A verifier that would not build, worded about the file at fault: a CRL rustls-webpki cannot
/// read (a version 1 CRL, which OpenSSL takes) is the `crl-file`'s.
pub fn verifier_error(
    e: rustls::server::VerifierBuilderError,
    ca: &Path,
    crl: Option<&Path>,
) -> String {
    match (e, crl) {
        (rustls::server::VerifierBuilderError::InvalidCrl(c), Some(crl)) => format!(
            "unable to load CRL file '{}': rustls-webpki cannot read it ({c:?}; it reads X.509 version 2 CRLs only)",
            crl.display()
        ),
        (e, _) => format!("'ca-file {}': {e}", ca.display()),
    }
}

/// Loads `crl-file PATH`.
pub fn load_crls(path: &Path) -> Result<Vec<CertificateRevocationListDer<'static>>, String> {
    let shown = path.display();
    let crls: Vec<_> = CertificateRevocationListDer::pem_file_iter(path)
        .map_err(|e| format!("unable to load CRL file '{shown}': {e}"))?
        .collect::<Result<_, _>>()
        .map_err(|e| format!("unable to load CRL file '{shown}': {e}"))?;
    if crls.is_empty() {
        return Err(format!("unable to load CRL file '{shown}': no CRL in it"));
    }
    Ok(crls)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/tls")
            .join(name)
    }

    #[test]
    fn a_file_a_directory_or_the_system_s() {
        assert_eq!(load_roots(&fixture("ca.pem")).unwrap().len(), 1);
        let dir = std::env::temp_dir().join(format!("bascule-cadir-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        assert!(load_roots(&dir).unwrap_err().contains("no .pem"));
        std::fs::copy(fixture("ca.pem"), dir.join("a.crt")).unwrap();
        std::fs::copy(fixture("ca.pem"), dir.join(".hidden.pem")).unwrap();
        std::fs::write(dir.join("notes.txt"), "not a CA").unwrap();
        assert_eq!(load_roots(&dir).unwrap().len(), 1);
        std::fs::write(dir.join("b.pem"), "garbage").unwrap();
        assert!(load_roots(&dir).unwrap_err().contains("b.pem"));
        std::fs::remove_dir_all(&dir).unwrap();
        if Path::new(SYSTEM_BUNDLE).exists() {
            assert!(load_roots(Path::new(SYSTEM_CA)).unwrap().len() > 10);
        }
        assert!(load_roots(&fixture("nope.pem"))
            .unwrap_err()
            .contains("nope.pem"));
    }
}
