//! Certificates as `bind ... crt` names them: a PEM file holding the certificate, its chain
//! and its private key (or the key in `FILE.key` beside it, HAProxy's other layout), or a
//! directory whose every file is such a bundle.
//!
//! `ssl-load-extra-files` and `ssl-load-extra-del-ext` ([`Extra`]) say which files beside a
//! `crt` are read, as in HAProxy 2.6: by default the key in `FILE.key` (`FILE.key` without the
//! `.crt` under `ssl-load-extra-del-ext`) and, when `FILE` does not exist, the bundle
//! `FILE.rsa`, `FILE.ecdsa`, `FILE.dsa` (each a certificate of its own). `.ocsp`, `.issuer` and
//! `.sctl` files are never read: Bascule staples no OCSP response and sends no SCT.
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

/// Which files beside a `crt` are read (`ssl-load-extra-files`, `ssl-load-extra-del-ext`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Extra {
    /// `key`: the key in `FILE.key` when `FILE` holds none.
    pub key: bool,
    /// `bundle`: `FILE.rsa`, `FILE.ecdsa`, `FILE.dsa` when `FILE` does not exist.
    pub bundle: bool,
    /// `ssl-load-extra-del-ext`: `foo.crt`'s key is `foo.key`.
    pub del_ext: bool,
}

impl Default for Extra {
    /// HAProxy's `all`.
    fn default() -> Self {
        Extra {
            key: true,
            bundle: true,
            del_ext: false,
        }
    }
}

impl Extra {
    /// `ssl-load-extra-files WORD...`.
    pub fn parse_files(&mut self, words: &[&str]) -> Result<(), String> {
        const EXPECTS: &str = "'ssl-load-extra-files' expects one or multiple arguments (none, all, bundle, sctl, ocsp, issuer, key)";
        if words.is_empty() {
            return Err(EXPECTS.into());
        }
        let alone = words.len() == 1;
        self.key = false;
        self.bundle = false;
        for w in words {
            match *w {
                "all" | "none" if !alone => {
                    return Err(
                        "'ssl-load-extra-files' 'none' and 'all' can be only used alone".into(),
                    )
                }
                "all" => {
                    *self = Extra {
                        del_ext: self.del_ext,
                        ..Extra::default()
                    }
                }
                "none" => {}
                "key" => self.key = true,
                "bundle" => self.bundle = true,
                // Read by HAProxy for OCSP stapling and SCTs, which Bascule does not do.
                "sctl" | "ocsp" | "issuer" => {}
                _ => return Err(EXPECTS.into()),
            }
        }
        Ok(())
    }

    /// Where the key of `path` is looked for when the file holds none.
    pub fn key_path(&self, path: &Path) -> PathBuf {
        match path.to_str().and_then(|p| p.strip_suffix(".crt")) {
            Some(stem) if self.del_ext => PathBuf::from(format!("{stem}.key")),
            _ => {
                let mut key_path = path.as_os_str().to_owned();
                key_path.push(".key");
                PathBuf::from(key_path)
            }
        }
    }
}

/// The suffixes of a certificate bundle's files.
const BUNDLE: &[&str] = &[".rsa", ".ecdsa", ".dsa"];

/// Loads `crt PATH`: one bundle, or every bundle of a directory in name order.
pub fn load(path: &Path) -> Result<Vec<Cert>, String> {
    load_with(path, Extra::default())
}

/// As [`load`], reading the files beside it that `extra` allows.
pub fn load_with(path: &Path, extra: Extra) -> Result<Vec<Cert>, String> {
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) => {
            let bundle: Vec<PathBuf> = BUNDLE
                .iter()
                .map(|ext| {
                    let mut p = path.as_os_str().to_owned();
                    p.push(ext);
                    PathBuf::from(p)
                })
                .filter(|p| extra.bundle && p.is_file())
                .collect();
            if bundle.is_empty() {
                return Err(format!(
                    "unable to stat SSL certificate from file '{}': {e}",
                    path.display()
                ));
            }
            return bundle.iter().map(|p| load_file_with(p, extra)).collect();
        }
    };
    if !meta.is_dir() {
        return Ok(vec![load_file_with(path, extra)?]);
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
    files.iter().map(|f| load_file_with(f, extra)).collect()
}

/// Loads one bundle: certificates in file order (the first is the server's), the private key
/// from the same file or from `FILE.key`.
pub fn load_file(path: &Path) -> Result<Cert, String> {
    load_file_with(path, Extra::default())
}

/// As [`load_file`], the key beside it looked for as `extra` says.
pub fn load_file_with(path: &Path, extra: Extra) -> Result<Cert, String> {
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
        Err(rustls::pki_types::pem::Error::NoItemsFound) if !extra.key => {
            return Err(format!(
            "No Private Key found in '{shown}' (and 'ssl-load-extra-files' does not include 'key')"
        ))
        }
        Err(rustls::pki_types::pem::Error::NoItemsFound) => {
            let key_path = extra.key_path(path);
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
        let no_key = Extra {
            key: false,
            ..Extra::default()
        };
        assert!(load_file_with(&fixture("split.pem"), no_key)
            .unwrap_err()
            .contains("No Private Key"));
    }

    #[test]
    fn extra_files_bundles_and_del_ext() {
        let dir = std::env::temp_dir().join(format!("bascule-tls-extra-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::copy(fixture("www-rsa.pem"), dir.join("bun.pem.rsa")).unwrap();
        std::fs::copy(fixture("www-ecdsa.pem"), dir.join("bun.pem.ecdsa")).unwrap();
        std::fs::copy(fixture("split.pem"), dir.join("s.crt")).unwrap();
        std::fs::copy(fixture("split.pem.key"), dir.join("s.key")).unwrap();
        let bundle = load(&dir.join("bun.pem")).unwrap();
        let mut algs: Vec<_> = bundle
            .iter()
            .map(|c| format!("{:?}", c.algorithm()))
            .collect();
        algs.sort();
        assert_eq!(algs, ["ECDSA", "RSA"]);
        let mut e = Extra::default();
        e.parse_files(&["key"]).unwrap();
        assert!(load_with(&dir.join("bun.pem"), e)
            .unwrap_err()
            .contains("unable to stat"));
        assert!(load(&dir.join("s.crt")).unwrap_err().contains("s.crt.key"));
        e.del_ext = true;
        assert_eq!(load_with(&dir.join("s.crt"), e).unwrap().len(), 1);
        assert!(e
            .parse_files(&["all", "none"])
            .unwrap_err()
            .contains("alone"));
        assert!(e.parse_files(&["bogus"]).is_err());
        e.parse_files(&["all"]).unwrap();
        assert!(e.key && e.bundle && e.del_ext);
        std::fs::remove_dir_all(&dir).unwrap();
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
