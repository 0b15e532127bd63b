//! Which certificate a handshake gets: HAProxy's SNI selection, for rustls.
//!
//! Each `bind` has a [`CertStore`]: the certificates of its `crt` and `crt-list` arguments
//! indexed by name ([`CertIndex`]). The client's server name is looked up exactly first, then
//! as a wildcard (`www.example.org` under `*.example.org`: one label only); a name that several
//! certificates serve (an RSA and an ECDSA certificate side by side) gets the ECDSA one when
//! the client's signature algorithms allow it, else RSA, else any it can use. Without a
//! server name, or with one nothing matches, the bind's default certificate answers (the
//! first loaded), unless `strict-sni` says to fail the handshake. A `crt-list` line's SNI
//! filters replace the certificate's own names; `!name` filters exclude a name, to carve a
//! host out of a wildcard.
//!
//! Certificates rotate at run time (`commit ssl cert` on the stats socket): the store holds
//! its index behind an `ArcSwap`, a handshake reads the current one without a lock, and a
//! commit publishes a whole new index at once ([`CertStore::replace`]), re-indexed since the
//! new certificate may answer other names. A handshake that already picked its certificate
//! keeps it.
//!
//! `ssl_f_*` read the certificate a handshake was served: when a rule uses them, the resolver
//! leaves its choice in a thread-local that the handshake takes at once ([`take_chosen`]).

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use arc_swap::ArcSwap;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls::{SignatureAlgorithm, SignatureScheme};

use super::cert::Cert;

/// One index entry: a certificate, or an exclusion of it (`!name`).
#[derive(Debug, Clone, Copy)]
struct Entry {
    cert: usize,
    negative: bool,
}

/// The certificates of one `bind`, indexed for SNI: one immutable snapshot.
#[derive(Debug, Default)]
pub struct CertIndex {
    certs: Vec<Arc<Cert>>,
    /// The `crt-list` filters each certificate was added with (kept to re-index).
    filters: Vec<Vec<String>>,
    /// The rustls configuration each certificate's handshakes use: 0 for the bind line's, `n`
    /// for the `n`th `crt-list` line with SSL options of its own (see `server::Built`).
    groups: Vec<usize>,
    /// Exact names, lower case.
    exact: HashMap<String, Vec<Entry>>,
    /// Wildcards by the domain under the star: `*.example.org` is under `example.org`.
    wild: HashMap<String, Vec<Entry>>,
    /// `strict-sni`: no default certificate.
    strict_sni: bool,
}

impl CertIndex {
    pub fn new(strict_sni: bool) -> Self {
        CertIndex {
            strict_sni,
            ..Default::default()
        }
    }

    /// Adds a certificate under its own names, or under `filters` when a `crt-list` line
    /// gives some (`!NAME` excludes). The first certificate added is the default.
    pub fn add(&mut self, cert: impl Into<Arc<Cert>>, filters: &[String]) {
        self.add_in(cert, filters, 0)
    }

    /// As [`CertIndex::add`], for a certificate whose handshakes use configuration `group`.
    pub fn add_in(&mut self, cert: impl Into<Arc<Cert>>, filters: &[String], group: usize) {
        let cert = cert.into();
        let idx = self.certs.len();
        let own: Vec<String>;
        let names: &[String] = if filters.iter().any(|f| !f.starts_with('!')) {
            filters
        } else {
            own = cert
                .names
                .iter()
                .cloned()
                .chain(filters.iter().cloned())
                .collect();
            &own
        };
        for name in names {
            let (negative, name) = match name.strip_prefix('!') {
                Some(n) => (true, n),
                None => (false, name.as_str()),
            };
            let name = name.to_ascii_lowercase();
            let entry = Entry {
                cert: idx,
                negative,
            };
            match name.strip_prefix("*.") {
                Some(domain) => self.wild.entry(domain.to_string()).or_default().push(entry),
                None => self.exact.entry(name).or_default().push(entry),
            }
        }
        self.certs.push(cert);
        self.filters.push(filters.to_vec());
        self.groups.push(group);
    }

    pub fn is_empty(&self) -> bool {
        self.certs.is_empty()
    }

    pub fn certs(&self) -> &[Arc<Cert>] {
        &self.certs
    }

    /// How many entries came from the file `path` (a file named twice counts twice).
    pub fn uses(&self, path: &Path) -> usize {
        self.certs.iter().filter(|c| c.path == path).count()
    }

    /// The same index with `cert` in place of every certificate loaded from its path, the
    /// order (hence the default certificate) and the filters kept.
    pub fn with_replaced(&self, cert: &Arc<Cert>) -> CertIndex {
        let mut out = CertIndex::new(self.strict_sni);
        for ((c, filters), group) in self.certs.iter().zip(&self.filters).zip(&self.groups) {
            let c = if c.path == cert.path { cert } else { c };
            out.add_in(Arc::clone(c), filters, *group);
        }
        out
    }

    /// The same index with one more certificate (a line added to a `crt-list`), last.
    pub fn with_added(&self, cert: &Arc<Cert>, filters: &[String], group: usize) -> CertIndex {
        let mut out = self.copied();
        out.add_in(Arc::clone(cert), filters, group);
        out
    }

    /// The same index without the last entry of `path` added with `filters` (a line deleted
    /// from a `crt-list`; equal entries are interchangeable).
    pub fn without(&self, path: &Path, filters: &[String]) -> Option<CertIndex> {
        let at = (0..self.certs.len())
            .rev()
            .find(|&i| self.certs[i].path == path && self.filters[i] == filters)?;
        let mut out = CertIndex::new(self.strict_sni);
        for (i, ((c, f), g)) in self
            .certs
            .iter()
            .zip(&self.filters)
            .zip(&self.groups)
            .enumerate()
        {
            if i != at {
                out.add_in(Arc::clone(c), f, *g);
            }
        }
        Some(out)
    }

    /// A copy, re-indexed.
    fn copied(&self) -> CertIndex {
        let mut out = CertIndex::new(self.strict_sni);
        for ((c, f), g) in self.certs.iter().zip(&self.filters).zip(&self.groups) {
            out.add_in(Arc::clone(c), f, *g);
        }
        out
    }

    /// Whether some certificate uses configuration `group`.
    pub fn uses_group(&self, group: usize) -> bool {
        self.groups.contains(&group)
    }

    /// Whether the default certificate (the first, unless `strict-sni`) came from `path`.
    pub fn default_is(&self, path: &Path) -> bool {
        !self.strict_sni && self.certs.first().is_some_and(|c| c.path == path)
    }

    /// The certificate for a client asking for `server_name` and able to verify
    /// `schemes`; `None` fails the handshake.
    pub fn select(
        &self,
        server_name: Option<&str>,
        schemes: &[SignatureScheme],
    ) -> Option<&Arc<Cert>> {
        self.select_index(server_name, schemes)
            .map(|i| &self.certs[i])
    }

    /// The configuration group of the certificate [`CertIndex::select`] picks (0 when none:
    /// the bind line's configuration then fails the handshake).
    pub fn group(&self, server_name: Option<&str>, schemes: &[SignatureScheme]) -> usize {
        self.select_index(server_name, schemes)
            .map_or(0, |i| self.groups[i])
    }

    fn select_index(
        &self,
        server_name: Option<&str>,
        schemes: &[SignatureScheme],
    ) -> Option<usize> {
        if let Some(name) = server_name {
            let name = name.trim_end_matches('.').to_ascii_lowercase();
            if let Some(c) = self.pick(self.exact.get(&name), &name, schemes) {
                return Some(c);
            }
            if let Some((_, domain)) = name.split_once('.') {
                if let Some(c) = self.pick(self.wild.get(domain), &name, schemes) {
                    return Some(c);
                }
            }
        }
        if self.strict_sni || self.certs.is_empty() {
            return None;
        }
        Some(0)
    }

    /// Among the entries of one name, the certificate the client can use, ECDSA first, then
    /// RSA, then any; skipping certificates excluded from `name` by a negative filter.
    fn pick(
        &self,
        entries: Option<&Vec<Entry>>,
        name: &str,
        schemes: &[SignatureScheme],
    ) -> Option<usize> {
        let entries = entries?;
        let excluded = |cert: usize| {
            self.exact
                .get(name)
                .is_some_and(|v| v.iter().any(|e| e.negative && e.cert == cert))
        };
        let usable: Vec<usize> = entries
            .iter()
            .filter(|e| !e.negative && !excluded(e.cert))
            .map(|e| e.cert)
            .collect();
        let accepts = |&i: &usize| self.certs[i].key.key.choose_scheme(schemes).is_some();
        [SignatureAlgorithm::ECDSA, SignatureAlgorithm::RSA]
            .iter()
            .find_map(|alg| {
                usable
                    .iter()
                    .find(|&&i| self.certs[i].algorithm() == *alg && accepts(&i))
            })
            .or_else(|| usable.iter().find(|i| accepts(i)))
            .or_else(|| usable.first())
            .copied()
    }
}

/// A bind's certificates as rustls asks for them: the current [`CertIndex`], swappable.
#[derive(Debug)]
pub struct CertStore {
    current: ArcSwap<CertIndex>,
}

impl From<CertIndex> for CertStore {
    fn from(index: CertIndex) -> Self {
        CertStore {
            current: ArcSwap::from_pointee(index),
        }
    }
}

impl CertStore {
    /// The current index (a snapshot: later commits do not change it).
    pub fn index(&self) -> Arc<CertIndex> {
        self.current.load_full()
    }

    /// Publishes `cert` in place of the certificate loaded from the same path; returns how
    /// many entries it replaced (none: the index is left as it is).
    pub fn replace(&self, cert: &Arc<Cert>) -> usize {
        let n = self.current.load().uses(&cert.path);
        if n > 0 {
            self.current.rcu(|cur| cur.with_replaced(cert));
        }
        n
    }

    /// Adds a certificate (see [`CertIndex::with_added`]).
    pub fn add(&self, cert: &Arc<Cert>, filters: &[String], group: usize) {
        self.current.rcu(|cur| cur.with_added(cert, filters, group));
    }

    /// Removes an entry (see [`CertIndex::without`]); whether there was one.
    pub fn remove(&self, path: &Path, filters: &[String]) -> bool {
        let Some(next) = self.current.load().without(path, filters) else {
            return false;
        };
        self.current.store(Arc::new(next));
        true
    }

    /// See [`CertIndex::select`], on the current index.
    pub fn select(
        &self,
        server_name: Option<&str>,
        schemes: &[SignatureScheme],
    ) -> Option<Arc<Cert>> {
        self.current
            .load()
            .select(server_name, schemes)
            .map(Arc::clone)
    }
}

impl CertStore {
    /// See [`CertIndex::group`], on the current index.
    pub fn group(&self, server_name: Option<&str>, schemes: &[SignatureScheme]) -> usize {
        self.current.load().group(server_name, schemes)
    }
}

impl ResolvesServerCert for CertStore {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let index = self.current.load();
        let cert = index.select(hello.server_name(), hello.signature_schemes())?;
        if crate::rules::fetch::FRONTEND_CERT_USED.load(std::sync::atomic::Ordering::Relaxed) {
            CHOSEN.set(Some(Arc::clone(cert)));
        }
        Some(Arc::clone(&cert.key))
    }
}

thread_local! {
    /// The certificate the last [`CertStore::resolve`] on this thread chose, when some rule
    /// reads `ssl_f_*` (rustls does not tell which one it served).
    static CHOSEN: std::cell::Cell<Option<Arc<Cert>>> = const { std::cell::Cell::new(None) };
}

/// Takes the certificate the resolver chose during the call that just returned on this thread
/// (a handshake step runs to its end on one thread, so it is that handshake's): the caller
/// takes it right after feeding rustls the client's hello.
pub fn take_chosen() -> Option<Arc<Cert>> {
    CHOSEN.take()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn cert(name: &str) -> Cert {
        super::super::cert::load_file(
            &Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/tls")
                .join(name),
        )
        .unwrap()
    }

    const ECDSA_AND_RSA: &[SignatureScheme] = &[
        SignatureScheme::ECDSA_NISTP256_SHA256,
        SignatureScheme::RSA_PSS_SHA256,
        SignatureScheme::RSA_PKCS1_SHA256,
    ];
    const RSA_ONLY: &[SignatureScheme] = &[
        SignatureScheme::RSA_PSS_SHA256,
        SignatureScheme::RSA_PKCS1_SHA256,
    ];

    fn file(c: Option<&Arc<Cert>>) -> String {
        c.map(|c| c.path.file_name().unwrap().to_string_lossy().into_owned())
            .unwrap_or_else(|| "none".into())
    }

    #[test]
    fn exact_then_wildcard_then_default() {
        let mut s = CertIndex::new(false);
        s.add(cert("split.pem"), &[]);
        s.add(cert("www-rsa.pem"), &[]);
        s.add(cert("wild-ecdsa.pem"), &[]);
        assert_eq!(
            file(s.select(Some("WWW.Example.com"), RSA_ONLY)),
            "www-rsa.pem"
        );
        assert_eq!(
            file(s.select(Some("example.com."), RSA_ONLY)),
            "www-rsa.pem"
        );
        assert_eq!(
            file(s.select(Some("a.example.org"), ECDSA_AND_RSA)),
            "wild-ecdsa.pem"
        );
        // One label only under a wildcard.
        assert_eq!(
            file(s.select(Some("a.b.example.org"), ECDSA_AND_RSA)),
            "split.pem"
        );
        assert_eq!(
            file(s.select(Some("example.org"), ECDSA_AND_RSA)),
            "split.pem"
        );
        assert_eq!(file(s.select(None, ECDSA_AND_RSA)), "split.pem");
        let mut strict = CertIndex::new(true);
        strict.add(cert("www-rsa.pem"), &[]);
        assert_eq!(file(strict.select(Some("other.test"), RSA_ONLY)), "none");
        assert_eq!(file(strict.select(None, RSA_ONLY)), "none");
        assert_eq!(
            file(strict.select(Some("www.example.com"), RSA_ONLY)),
            "www-rsa.pem"
        );
    }

    #[test]
    fn ecdsa_and_rsa_side_by_side_by_what_the_client_accepts() {
        let mut s = CertIndex::new(false);
        s.add(cert("www-rsa.pem"), &[]);
        s.add(cert("www-ecdsa.pem"), &[]);
        assert_eq!(
            file(s.select(Some("www.example.com"), ECDSA_AND_RSA)),
            "www-ecdsa.pem"
        );
        assert_eq!(
            file(s.select(Some("www.example.com"), RSA_ONLY)),
            "www-rsa.pem"
        );
    }

    #[test]
    fn filters_replace_names_and_negative_ones_carve_out() {
        let mut s = CertIndex::new(true);
        s.add(cert("wild-ecdsa.pem"), &["!secure.example.org".to_string()]);
        s.add(cert("www-rsa.pem"), &["secure.example.org".to_string()]);
        assert_eq!(
            file(s.select(Some("a.example.org"), ECDSA_AND_RSA)),
            "wild-ecdsa.pem"
        );
        assert_eq!(
            file(s.select(Some("secure.example.org"), ECDSA_AND_RSA)),
            "www-rsa.pem"
        );
        // The filter replaced www-rsa's own names.
        assert_eq!(file(s.select(Some("www.example.com"), RSA_ONLY)), "none");
    }

    /// A real handshake in memory: rustls asks the store, the client verifies the chain
    /// against the test CA and sees the certificate of the name it asked for.
    fn handshake(store: Arc<CertStore>, name: &str) -> Result<Vec<String>, rustls::Error> {
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::{CertificateDer, ServerName};
        let ca = CertificateDer::from_pem_file(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/tls/ca.pem"),
        )
        .unwrap();
        let mut roots = rustls::RootCertStore::empty();
        roots.add(ca).unwrap();
        let client_cfg = rustls::ClientConfig::builder()
            .with_root_certificates(roots)
            .with_no_client_auth();
        let server_cfg = rustls::ServerConfig::builder()
            .with_no_client_auth()
            .with_cert_resolver(store);
        let mut client = rustls::ClientConnection::new(
            Arc::new(client_cfg),
            ServerName::try_from(name.to_string()).unwrap(),
        )
        .unwrap();
        let mut server = rustls::ServerConnection::new(Arc::new(server_cfg)).unwrap();
        let mut buf = Vec::new();
        for _ in 0..10 {
            buf.clear();
            client.write_tls(&mut buf).unwrap();
            let mut rd = &buf[..];
            while !rd.is_empty() {
                server.read_tls(&mut rd).unwrap();
            }
            server.process_new_packets()?;
            buf.clear();
            server.write_tls(&mut buf).unwrap();
            let mut rd = &buf[..];
            while !rd.is_empty() {
                client.read_tls(&mut rd).unwrap();
            }
            client.process_new_packets()?;
            if !client.is_handshaking() && !server.is_handshaking() {
                break;
            }
        }
        let leaf = &client.peer_certificates().unwrap()[0];
        let ee = webpki::EndEntityCert::try_from(leaf).unwrap();
        Ok(ee.valid_dns_names().map(str::to_string).collect())
    }

    #[test]
    fn rustls_handshakes_pick_through_the_store() {
        let mut s = CertIndex::new(true);
        s.add(cert("www-rsa.pem"), &[]);
        s.add(cert("wild-ecdsa.pem"), &[]);
        let s = Arc::new(CertStore::from(s));
        assert_eq!(
            handshake(s.clone(), "www.example.com").unwrap(),
            ["www.example.com", "example.com"]
        );
        assert_eq!(
            handshake(s.clone(), "x.example.org").unwrap(),
            ["*.example.org"]
        );
        // strict-sni: no certificate for another name, the handshake fails.
        assert!(handshake(s, "other.test").is_err());
    }
}
