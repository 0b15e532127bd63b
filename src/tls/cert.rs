//! Certificates as `bind ... crt` names them: a PEM file holding the certificate, its chain
//! and its private key (or the key in `FILE.key` beside it, HAProxy's other layout), or a
//! directory whose every file is such a bundle.
//!
//! Everything is checked when the configuration loads, and each problem names the file and
//! what is wrong with it (no certificate, no key, a key that does not match the certificate,
//! a key type rustls cannot sign with), so that a bad file stops `bascule -c` rather than the
//! first handshake.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::sign::CertifiedKey;
use rustls::SignatureAlgorithm;

/// One loaded certificate: the chain and key rustls serves, and the names it answers for.
#[derive(Debug)]
pub struct Cert {
    pub key: Arc<CertifiedKey>,
    /// The DNS names of the subject alternative names, then the common name if it is not
    /// among them; lower case, wildcards (`*.example.org`) as written.
    pub names: Vec<String>,
    /// The file it came from, as configured (for messages and `show ssl cert`).
    pub path: PathBuf,
    /// The leaf's fields for the `ssl_f_*` fetches, read the first time one asks.
    info: std::sync::OnceLock<Option<crate::rules::source::PeerCert>>,
}

impl Cert {
    /// The leaf certificate (DER): `ssl_f_der`.
    pub fn leaf(&self) -> &[u8] {
        self.key.cert[0].as_ref()
    }

    /// The leaf's fields (`ssl_f_*`), parsed once per certificate, on first use.
    pub fn info(&self) -> Option<&crate::rules::source::PeerCert> {
        self.info
            .get_or_init(|| super::der::cert_info(self.leaf()))
            .as_ref()
    }

    /// The key's algorithm (RSA, ECDSA, Ed25519): SNI selection prefers ECDSA when the
    /// client accepts it, as HAProxy does with a name served by both.
    pub fn algorithm(&self) -> SignatureAlgorithm {
        self.key.key.algorithm()
    }
}

/// Files a `crt DIRECTORY` skips: keys and the companions HAProxy reads beside a bundle.
const COMPANIONS: &[&str] = &[".key", ".ocsp", ".issuer", ".sctl"];

/// Loads `crt PATH`: one bundle, or every bundle of a directory in name order.
pub fn load(path: &Path) -> Result<Vec<Cert>, String> {
    let meta = std::fs::metadata(path).map_err(|e| {
        format!(
            "unable to stat SSL certificate from file '{}': {e}",
            path.display()
        )
    })?;
    if !meta.is_dir() {
        return Ok(vec![load_file(path)?]);
    }
    let mut files: Vec<PathBuf> = std::fs::read_dir(path)
        .map_err(|e| format!("unable to scan directory '{}': {e}", path.display()))?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            p.is_file()
                && !name.starts_with('.')
                && !COMPANIONS.iter().any(|ext| name.ends_with(ext))
        })
        .collect();
    files.sort();
    if files.is_empty() {
        return Err(format!(
            "no certificate found in directory '{}'",
            path.display()
        ));
    }
    files.iter().map(|f| load_file(f)).collect()
}

/// Loads one bundle: certificates in file order (the first is the server's), the private key
/// from the same file or from `FILE.key`.
pub fn load_file(path: &Path) -> Result<Cert, String> {
    let shown = path.display();
    let pem = std::fs::read(path)
        .map_err(|e| format!("unable to load SSL certificate from file '{shown}': {e}"))?;
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<_, _>>()
        .map_err(|e| format!("'{shown}': unreadable PEM: {e}"))?;
    if chain.is_empty() {
        return Err(format!(
            "unable to load SSL certificate from file '{shown}': no certificate in it"
        ));
    }
    let key = match PrivateKeyDer::from_pem_slice(&pem) {
        Ok(k) => k,
        Err(rustls::pki_types::pem::Error::NoItemsFound) => {
            let mut key_path = path.as_os_str().to_owned();
            key_path.push(".key");
            let key_path = PathBuf::from(key_path);
            let kp = std::fs::read(&key_path).map_err(|e| {
                format!(
                    "unable to load SSL private key for '{shown}': none in the file, and '{}': {e}",
                    key_path.display()
                )
            })?;
            PrivateKeyDer::from_pem_slice(&kp).map_err(|e| {
                format!(
                    "unable to load SSL private key from file '{}': {e}",
                    key_path.display()
                )
            })?
        }
        Err(e) => {
            return Err(format!(
                "unable to load SSL private key from file '{shown}': {e}"
            ))
        }
    };
    assemble(path, chain, key).map_err(|e| match e {
        Assembly::Mismatch => format!(
            "inconsistencies between private key and certificate loaded from PEM file '{shown}'"
        ),
        Assembly::Other(e) => format!("'{shown}': {e}"),
    })
}

/// Why a chain and a key do not make a [`Cert`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Assembly {
    /// The key is not the certificate's.
    Mismatch,
    /// Anything else: an unusable key, an unreadable certificate.
    Other(String),
}

/// A [`Cert`] from its parts, known as `path`: what a file load and `commit ssl cert` share.
pub fn assemble(
    path: &Path,
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
) -> Result<Cert, Assembly> {
    let provider = rustls::crypto::aws_lc_rs::default_provider();
    // The key and the certificate are matched here rather than by `CertifiedKey::from_der`,
    // whose check parses the certificate with webpki and so refuses X.509 v1 certificates.
    let signing = provider
        .key_provider
        .load_private_key(key)
        .map_err(|e| Assembly::Other(e.to_string()))?;
    let leaf = chain
        .first()
        .and_then(|c| super::der::cert_fields(c))
        .ok_or_else(|| Assembly::Other("unreadable certificate".to_string()))?;
    if let Some(public) = signing.public_key() {
        if public.as_ref() != leaf.spki {
            return Err(Assembly::Mismatch);
        }
    }
    let key = CertifiedKey::new(chain, signing);
    let names = names_of(&key.cert[0])
        .ok_or_else(|| Assembly::Other("unreadable certificate".to_string()))?;
    Ok(Cert {
        key: Arc::new(key),
        names,
        path: path.to_path_buf(),
        info: Default::default(),
    })
}

/// The names a certificate answers for: SAN DNS names, then the CN if not already there. Read
/// with `der` rather than webpki, which refuses the X.509 v1 certificates HAProxy serves
/// (a CN and no extensions).
fn names_of(cert: &CertificateDer<'_>) -> Option<Vec<String>> {
    let f = super::der::cert_fields(cert)?;
    let mut names: Vec<String> = f
        .alt_names
        .iter()
        .filter_map(|n| match n {
            super::der::AltName::Dns(d) => Some(d.to_ascii_lowercase()),
            super::der::AltName::Other => None,
        })
        .collect();
    if let Some(cn) = super::der::common_name(f.subject) {
        let cn = cn.to_ascii_lowercase();
        if !names.contains(&cn) {
            names.push(cn);
        }
    }
    Some(names)
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
    fn bundles_load_with_their_names_and_chain() {
        let c = load_file(&fixture("www-rsa.pem")).unwrap();
        assert_eq!(c.names, ["www.example.com", "example.com"]);
        assert_eq!(c.key.cert.len(), 2, "leaf and CA");
        assert_eq!(c.algorithm(), SignatureAlgorithm::RSA);
        let c = load_file(&fixture("wild-ecdsa.pem")).unwrap();
        assert_eq!(c.names, ["*.example.org"]);
        assert_eq!(c.algorithm(), SignatureAlgorithm::ECDSA);
    }

    #[test]
    fn the_key_may_sit_in_file_dot_key() {
        let c = load_file(&fixture("split.pem")).unwrap();
        assert_eq!(c.names, ["split.example.net"]);
    }

    #[test]
    fn a_directory_loads_every_bundle_and_skips_keys() {
        let dir = std::env::temp_dir().join(format!("bascule-tls-dir-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for f in [
            "www-rsa.pem",
            "wild-ecdsa.pem",
            "split.pem",
            "split.pem.key",
        ] {
            std::fs::copy(fixture(f), dir.join(f)).unwrap();
        }
        let certs = load(&dir).unwrap();
        let names: Vec<&str> = certs.iter().map(|c| c.names[0].as_str()).collect();
        assert_eq!(
            names,
            ["split.example.net", "*.example.org", "www.example.com"]
        );
        std::fs::write(dir.join("notes.txt"), "not a certificate").unwrap();
        let e = load(&dir).unwrap_err();
        assert!(e.contains("notes.txt"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn errors_name_the_file_and_the_problem() {
        let e = load_file(&fixture("nope.pem")).unwrap_err();
        assert!(e.contains("nope.pem"), "{e}");
        let dir = std::env::temp_dir().join(format!("bascule-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // A certificate with another certificate's key.
        let rsa = std::fs::read_to_string(fixture("www-rsa.pem")).unwrap();
        let ec = std::fs::read_to_string(fixture("www-ecdsa.pem")).unwrap();
        let key_start = ec.find("-----BEGIN PRIVATE KEY-----").unwrap();
        let cert_end = rsa.find("-----BEGIN PRIVATE KEY-----").unwrap();
        let mixed = dir.join("mixed.pem");
        std::fs::write(&mixed, format!("{}{}", &rsa[..cert_end], &ec[key_start..])).unwrap();
        let e = load_file(&mixed).unwrap_err();
        assert!(
            e.contains("inconsistencies") && e.contains("mixed.pem"),
            "{e}"
        );
        // No key anywhere.
        let nokey = dir.join("nokey.pem");
        std::fs::write(&nokey, &rsa[..cert_end]).unwrap();
        let e = load_file(&nokey).unwrap_err();
        assert!(
            e.contains("private key") && e.contains("nokey.pem.key"),
            "{e}"
        );
        // No certificate.
        let nocert = dir.join("nocert.pem");
        std::fs::write(&nocert, &ec[key_start..]).unwrap();
        let e = load_file(&nocert).unwrap_err();
        assert!(e.contains("no certificate"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
