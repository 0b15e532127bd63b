//! Certificates that rotate without a reload: `show ssl cert`, `set ssl cert`, `commit ssl
//! cert` and `abort ssl cert` on the stats socket, with HAProxy 2.6's transaction model and
//! replies, so that the scripts (certbot hooks, ACME clients) written for HAProxy work
//! unchanged.
//!
//! Every file a `crt` or `crt-list` loaded is known by its path as configured (after
//! `crt-base`), with the stores of the binds that use it and the servers that show it as
//! their client certificate (`server ... crt`) ([`Certs`]). `set ssl cert FILE` with
//! a PEM payload opens the one transaction there can be (or updates it; `FILE.key` replaces
//! only the key); nothing serves it yet. `commit ssl cert FILE` checks the pair (a key, and
//! the certificate's own) and publishes it to every store and server that uses the file, each
//! store swapping its whole index at once; handshakes under way keep the certificate they
//! picked.
//! A refused commit keeps the transaction and the old certificate serving; `abort` drops it.
//!
//! The commands run on the stats socket's thread, one at a time; the state is swapped, not
//! locked, like the stores the handshakes read.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use arc_swap::{ArcSwap, ArcSwapOption};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use super::cert::{assemble, Assembly, Cert};
use super::client::ClientCertSlot;
use super::sni::CertStore;

/// One configured certificate file: what serves now, the binds that serve it and the
/// servers that show it (`server ... crt`).
struct File {
    /// `None`: an empty store (`new ssl cert`) until its first commit.
    current: ArcSwapOption<Cert>,
    /// Binds (`crt`, `crt-list` and lines added with `add ssl crt-list`).
    stores: ArcSwap<Vec<Arc<CertStore>>>,
    /// Servers (`server ... crt`); `add server` and `del server` change them.
    servers: ArcSwap<Vec<Arc<ClientCertSlot>>>,
}

impl File {
    fn used(&self) -> bool {
        !self.stores.load().is_empty() || !self.servers.load().is_empty()
    }
}

/// The open transaction: a replacement for `path`, not serving yet.
struct Pending {
    path: String,
    chain: Vec<CertificateDer<'static>>,
    /// `None` when the payload had no key (refused at commit, as HAProxy does).
    key: Option<PrivateKeyDer<'static>>,
}

/// The certificate files of the running configuration, and the open transaction.
#[derive(Default)]
pub struct Certs {
    /// By path, in byte order (HAProxy lists them so).
    files: ArcSwap<BTreeMap<String, Arc<File>>>,
    pending: ArcSwapOption<Pending>,
    /// `ssl-load-extra-del-ext`: `set ssl cert foo.key` is about `foo.crt`.
    del_ext: bool,
}

impl std::fmt::Debug for Certs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Certs")
            .field("files", &self.files.load().keys().collect::<Vec<_>>())
            .finish()
    }
}

/// What `set ssl cert` replaces: the whole bundle, or its key (`FILE.key`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Part {
    Bundle,
    Key,
}

const NOT_FOUND: &str =
    "Can't display the certificate: Not found or the certificate is a bundle!\n";

impl Certs {
    /// Indexes the certificates of bind stores (each store once per file it uses).
    pub fn new<'a>(stores: impl IntoIterator<Item = &'a Arc<CertStore>>) -> Certs {
        Certs::with_servers(stores, [])
    }

    /// [`Certs::new`], with the certificates servers show (`server ... crt`).
    pub fn with_servers<'a>(
        stores: impl IntoIterator<Item = &'a Arc<CertStore>>,
        servers: impl IntoIterator<Item = &'a Arc<ClientCertSlot>>,
    ) -> Certs {
        /// A file being indexed: its certificate, binds and servers.
        type Draft = (Arc<Cert>, Vec<Arc<CertStore>>, Vec<Arc<ClientCertSlot>>);
        let mut drafts: BTreeMap<String, Draft> = BTreeMap::new();
        fn entry<'f>(files: &'f mut BTreeMap<String, Draft>, cert: &Arc<Cert>) -> &'f mut Draft {
            files
                .entry(cert.path.display().to_string())
                .or_insert_with(|| (Arc::clone(cert), Vec::new(), Vec::new()))
        }
        for store in stores {
            for cert in store.index().certs() {
                let file = entry(&mut drafts, cert);
                if !file.1.iter().any(|s| Arc::ptr_eq(s, store)) {
                    file.1.push(Arc::clone(store));
                }
            }
        }
        for slot in servers {
            let file = entry(&mut drafts, &slot.current());
            if !file.2.iter().any(|s| Arc::ptr_eq(s, slot)) {
                file.2.push(Arc::clone(slot));
            }
        }
        let files = drafts
            .into_iter()
            .map(|(path, (cert, stores, servers))| {
                let file = File {
                    current: ArcSwapOption::new(Some(cert)),
                    stores: ArcSwap::from_pointee(stores),
                    servers: ArcSwap::from_pointee(servers),
                };
                (path, Arc::new(file))
            })
            .collect();
        Certs {
            files: ArcSwap::from_pointee(files),
            pending: ArcSwapOption::empty(),
            del_ext: false,
        }
    }

    /// Under `ssl-load-extra-del-ext`, `FILE.key` may be the key of `FILE.crt`.
    pub fn with_del_ext(mut self, on: bool) -> Certs {
        self.del_ext = on;
        self
    }

    /// `show ssl cert [FILE|*FILE]`.
    pub fn show(&self, arg: Option<&str>) -> String {
        let pending = self.pending.load();
        let Some(arg) = arg else {
            let mut out = String::new();
            let files = self.files.load();
            if files.is_empty() {
                // HAProxy prints not even the header then.
                return out;
            }
            if let Some(p) = pending.as_deref() {
                out.push_str(&format!("# transaction\n*{}\n", p.path));
            }
            out.push_str("# filename\n");
            for path in files.keys() {
                out.push_str(path);
                out.push('\n');
            }
            return out;
        };
        let (name, status, details) = match arg.strip_prefix('*') {
            Some(path) => match pending.as_deref() {
                Some(p) if p.path == path => (arg, "Unused", super::show::details(&p.chain)),
                _ => return NOT_FOUND.into(),
            },
            None => match self.files.load().get(arg) {
                Some(f) => match f.current.load_full() {
                    Some(c) => (
                        arg,
                        if f.used() { "Used" } else { "Unused" },
                        super::show::details(&c.key.cert),
                    ),
                    None => return NOT_FOUND.into(),
                },
                None => return NOT_FOUND.into(),
            },
        };
        match details {
            Some(d) => format!("Filename: {name}\nStatus: {status}\n{d}"),
            None => NOT_FOUND.into(),
        }
    }

    /// `set ssl cert FILE <<` with `payload`: opens or updates the transaction.
    pub fn set(&self, arg: Option<&str>, payload: Option<&str>) -> String {
        let (Some(arg), Some(payload)) = (arg, payload) else {
            return "'set ssl cert expects a filename and a certificate as a payload\n".into();
        };
        let (path, part) = match self.target(arg) {
            Ok(t) => t,
            Err(e) => return format!("{e}Can't update {arg}!\n"),
        };
        let pending = self.pending.load_full();
        if let Some(p) = pending.as_deref() {
            if p.path != path {
                return format!(
                    "The ongoing transaction is about '{}' but you are trying to set '{path}'\nCan't update {arg}!\n",
                    p.path
                );
            }
        }
        let refuse = |what: &str| {
            format!("unable to load {what} from file '{path}'.\nCan't load the payload\nCan't update {arg}!\n")
        };
        let bytes = payload.as_bytes();
        let next = match part {
            Part::Bundle => {
                let chain: Vec<CertificateDer<'static>> =
                    match CertificateDer::pem_slice_iter(bytes).collect::<Result<_, _>>() {
                        Ok(c) => c,
                        Err(_) => return refuse("certificate"),
                    };
                let readable = chain
                    .first()
                    .is_some_and(|leaf| super::der::cert_fields(leaf).is_some());
                if !readable {
                    return refuse("certificate");
                }
                let key = match PrivateKeyDer::from_pem_slice(bytes) {
                    Ok(k) => Some(k),
                    Err(rustls::pki_types::pem::Error::NoItemsFound) => None,
                    Err(_) => return refuse("private key"),
                };
                Pending {
                    path: path.to_string(),
                    chain,
                    key,
                }
            }
            Part::Key => {
                let Ok(key) = PrivateKeyDer::from_pem_slice(bytes) else {
                    return refuse("private key");
                };
                let current = self
                    .files
                    .load()
                    .get(&path)
                    .and_then(|f| f.current.load_full());
                let chain = match (pending.as_deref(), current) {
                    (Some(p), _) => p.chain.clone(),
                    (None, Some(c)) => c.key.cert.clone(),
                    // An empty store: the key alone, refused at commit as in HAProxy.
                    (None, None) => Vec::new(),
                };
                Pending {
                    path: path.to_string(),
                    chain,
                    key: Some(key),
                }
            }
        };
        self.pending.store(Some(Arc::new(next)));
        match pending {
            None => format!("Transaction created for certificate {path}!\n"),
            Some(_) => format!("Transaction updated for certificate {path}!\n"),
        }
    }

    /// The file `set ssl cert ARG` is about: ARG itself, or ARG without `.key`.
    fn target(&self, arg: &str) -> Result<(String, Part), String> {
        let files = self.files.load();
        if files.contains_key(arg) {
            return Ok((arg.to_string(), Part::Bundle));
        }
        if let Some((base, ext)) = arg.rsplit_once('.') {
            // `foo.key` is `foo.crt`'s under `ssl-load-extra-del-ext` (when no `foo` is
            // configured), as in HAProxy.
            let found = files.get_key_value(base).or_else(|| {
                self.del_ext
                    .then(|| files.get_key_value(&format!("{base}.crt")))
                    .flatten()
            });
            if let Some((path, _)) = found {
                match ext {
                    "key" => return Ok((path.clone(), Part::Key)),
                    "ocsp" | "issuer" | "sctl" => {
                        return Err(format!(
                            "'.{ext}' files are not supported: Bascule does not staple OCSP responses or send SCTs.\n"
                        ))
                    }
                    _ => {}
                }
            }
        }
        Err("Can't replace a certificate which is not referenced by the configuration!\n".into())
    }

    /// `commit ssl cert FILE`: checks the transaction's pair and publishes it to every bind
    /// that uses the file, one dot per entry replaced, as HAProxy counts its instances.
    pub fn commit(&self, arg: Option<&str>) -> String {
        let Some(arg) = arg else {
            return "'commit ssl cert expects a filename\n".into();
        };
        let fail = |e: String| format!("{e}Can't commit {arg}!\n");
        let Some(p) = self.pending.load_full() else {
            return fail("No ongoing transaction! !\n".into());
        };
        if p.path != arg {
            return fail(format!(
                "The ongoing transaction is about '{}' but you are trying to set '{arg}'\n",
                p.path
            ));
        }
        let Some(key) = &p.key else {
            return fail(
                "The transaction must contain at least a certificate and a private key!\n".into(),
            );
        };
        let cert = match assemble(Path::new(&p.path), p.chain.clone(), key.clone_key()) {
            Ok(c) => Arc::new(c),
            Err(Assembly::Mismatch) => {
                return fail(format!(
                    "inconsistencies between private key and certificate loaded '{}'.\n",
                    p.path
                ))
            }
            Err(Assembly::Other(e)) => return fail(format!("'{}': {e}.\n", p.path)),
        };
        let Some(file) = self.files.load().get(&p.path).cloned() else {
            return fail(
                "Can't replace a certificate which is not referenced by the configuration!\n"
                    .into(),
            );
        };
        let mut out = format!("Committing {}", p.path);
        for store in file.stores.load().iter() {
            out.push_str(&".".repeat(store.replace(&cert)));
        }
        for server in file.servers.load().iter() {
            server.replace(Arc::clone(&cert));
            out.push('.');
        }
        file.current.store(Some(cert));
        self.pending.store(None);
        out.push_str("\nSuccess!\n");
        out
    }

    /// A server added at run time (`add server ... crt FILE`) shows the certificate the file
    /// holds now (a committed `set ssl cert` included), as HAProxy's dynamic servers take it
    /// from its store only: a file the configuration did not load is refused with HAProxy's
    /// text.
    pub fn attach_server(&self, slot: &Arc<ClientCertSlot>) -> Result<(), String> {
        let path = slot.current().path.display().to_string();
        let files = self.files.load();
        let Some(cert) = files
            .get(&path)
            .and_then(|f| Some((f, f.current.load_full()?)))
        else {
            return Err(format!("unable to stat SSL certificate '{path}'."));
        };
        let (file, cert) = cert;
        slot.replace(cert);
        file.servers.rcu(|v| {
            let mut v = Vec::clone(v);
            v.push(Arc::clone(slot));
            v
        });
        Ok(())
    }

    /// A server removed at run time (`del server`) no longer uses its certificate file.
    pub fn detach_server(&self, slot: &Arc<ClientCertSlot>) {
        for file in self.files.load().values() {
            file.servers.rcu(|v| {
                v.iter()
                    .filter(|s| !Arc::ptr_eq(s, slot))
                    .cloned()
                    .collect::<Vec<_>>()
            });
        }
    }

    /// `new ssl cert FILE`: an empty store, to fill with `set` and `commit ssl cert` before
    /// `add ssl crt-list` serves it.
    pub fn new_cert(&self, arg: Option<&str>) -> String {
        let Some(path) = arg else {
            return "'new ssl cert' expects a filename\n".into();
        };
        if self.files.load().contains_key(path) {
            return format!("Certificate '{path}' already exists!\n");
        }
        self.files.rcu(|files| {
            let mut files = BTreeMap::clone(files);
            files.insert(
                path.to_string(),
                Arc::new(File {
                    current: ArcSwapOption::empty(),
                    stores: ArcSwap::from_pointee(Vec::new()),
                    servers: ArcSwap::default(),
                }),
            );
            files
        });
        format!("New empty certificate store '{path}'!\n")
    }

    /// `del ssl cert FILE`: forgets a file no bind or server uses.
    pub fn del_cert(&self, arg: Option<&str>) -> String {
        let Some(path) = arg else {
            return "'del ssl cert' expects a certificate name\n".into();
        };
        let fail = |e: String| format!("Can't remove the certificate: {e}\n");
        match self.files.load().get(path) {
            None => return fail(format!("certificate '{path}' doesn't exist!\n")),
            Some(f) if f.used() => {
                return fail(format!("certificate '{path}' in use, can't be deleted!\n"))
            }
            Some(_) => {}
        }
        if self
            .pending
            .load()
            .as_deref()
            .is_some_and(|p| p.path == path)
        {
            self.pending.store(None);
        }
        self.files.rcu(|files| {
            let mut files = BTreeMap::clone(files);
            files.remove(path);
            files
        });
        format!("Certificate '{path}' deleted!\n")
    }

    /// The certificate `path` holds now, for `add ssl crt-list`: its error otherwise, in
    /// HAProxy's words.
    pub fn loaded(&self, path: &str) -> Result<Arc<Cert>, String> {
        match self.files.load().get(path) {
            None => Err(format!("certificate '{path}' does not exist!")),
            Some(f) => f
                .current
                .load_full()
                .ok_or_else(|| format!("certificate '{path}' is empty!")),
        }
    }

    /// `store` serves `path` now (a line added to a `crt-list`), or no longer does.
    pub fn set_served(&self, path: &str, store: &Arc<CertStore>, served: bool) {
        let files = self.files.load();
        let Some(f) = files.get(path) else { return };
        f.stores.rcu(|stores| {
            let mut stores = Vec::clone(stores);
            stores.retain(|s| !Arc::ptr_eq(s, store));
            if served {
                stores.push(Arc::clone(store));
            }
            stores
        });
    }

    /// `abort ssl cert FILE`: drops the transaction.
    pub fn abort(&self, arg: Option<&str>) -> String {
        let Some(arg) = arg else {
            return "'abort ssl cert' expects a filename\n".into();
        };
        let Some(p) = self.pending.load_full() else {
            return "No ongoing transaction!\n".into();
        };
        if p.path != arg {
            return format!(
                "The ongoing transaction is about '{}' but you are trying to abort a transaction for '{arg}'\n",
                p.path
            );
        }
        self.pending.store(None);
        format!("Transaction aborted for certificate '{arg}'!\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tls::server::{build, BindSsl, CrtArg};
    use std::path::PathBuf;

    fn fixture(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/tls")
            .join(name)
    }

    fn pem(name: &str) -> String {
        std::fs::read_to_string(fixture(name)).unwrap()
    }

    /// A scratch copy of the fixtures, so that paths are the test's own.
    struct Dir(PathBuf);

    impl Dir {
        fn new(tag: &str) -> Dir {
            let d = std::env::temp_dir().join(format!("bascule-cli-{tag}-{}", std::process::id()));
            std::fs::create_dir_all(&d).unwrap();
            for f in [
                "www-rsa.pem",
                "wild-ecdsa.pem",
                "split.pem",
                "split.pem.key",
            ] {
                std::fs::copy(fixture(f), d.join(f)).unwrap();
            }
            Dir(d)
        }
        fn path(&self, f: &str) -> String {
            self.0.join(f).display().to_string()
        }
        fn bind(&self, files: &[&str], strict_sni: bool) -> crate::tls::server::Built {
            build(&BindSsl {
                crts: files.iter().map(|f| CrtArg::Crt(self.0.join(f))).collect(),
                strict_sni,
                ..Default::default()
            })
            .unwrap()
        }
    }

    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    /// A TLS 1.3 handshake in memory against `config`: the SHA-1 of the leaf the client got.
    fn handshake(config: &Arc<rustls::ServerConfig>, name: &str) -> Result<String, rustls::Error> {
        use rustls::pki_types::ServerName;
        let mut roots = rustls::RootCertStore::empty();
        roots
            .add(CertificateDer::from_pem_file(fixture("ca.pem")).unwrap())
            .unwrap();
        let client_cfg = rustls::ClientConfig::builder()
            .with_root_certificates(roots)
            .with_no_client_auth();
        let mut client = rustls::ClientConnection::new(
            Arc::new(client_cfg),
            ServerName::try_from(name.to_string()).unwrap(),
        )
        .unwrap();
        let mut server = rustls::ServerConnection::new(Arc::clone(config)).unwrap();
        let mut buf = Vec::new();
        while client.is_handshaking() || server.is_handshaking() {
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
        }
        let leaf = &client.peer_certificates().unwrap()[0];
        Ok(crate::tls::show::sha1_fingerprint(leaf))
    }

    fn fingerprint(name: &str) -> String {
        let chain: Vec<CertificateDer> = CertificateDer::pem_file_iter(fixture(name))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        crate::tls::show::sha1_fingerprint(&chain[0])
    }

    #[test]
    fn a_commit_rotates_every_bind_and_spares_handshakes_under_way() {
        let d = Dir::new("rotate");
        let a = d.bind(&["www-rsa.pem", "wild-ecdsa.pem"], false);
        let b = d.bind(&["split.pem", "www-rsa.pem"], false);
        let certs = Certs::new([&a.store, &b.store]);
        let www = d.path("www-rsa.pem");
        assert_eq!(
            certs.show(None),
            format!(
                "# filename\n{}\n{}\n{www}\n",
                d.path("split.pem"),
                d.path("wild-ecdsa.pem")
            )
        );
        let old = fingerprint("www-rsa.pem");
        let new = fingerprint("next-www.pem");
        assert_eq!(handshake(&a.config, "www.example.com").unwrap(), old);
        // A handshake that picked its certificate before the commit keeps it.
        let picked = a.store.select(Some("www.example.com"), &[]).unwrap();

        let payload = pem("next-www.pem");
        assert_eq!(
            certs.set(Some(&www), Some(&payload)),
            format!("Transaction created for certificate {www}!\n")
        );
        assert!(certs
            .show(None)
            .starts_with(&format!("# transaction\n*{www}\n# filename\n")));
        let shown = certs.show(Some(&format!("*{www}")));
        assert!(
            shown.starts_with(&format!(
                "Filename: *{www}\nStatus: Unused\nSerial: 8F0102030405060708\n"
            )),
            "{shown}"
        );
        assert!(
            shown.contains(&format!("SHA1 FingerPrint: {new}\n")),
            "{shown}"
        );
        // Nothing serves it before the commit.
        assert_eq!(handshake(&a.config, "www.example.com").unwrap(), old);
        assert!(certs
            .show(Some(&www))
            .contains(&format!("SHA1 FingerPrint: {old}\n")));

        assert_eq!(
            certs.commit(Some(&www)),
            format!("Committing {www}..\nSuccess!\n")
        );
        assert_eq!(handshake(&a.config, "www.example.com").unwrap(), new);
        assert_eq!(handshake(&b.config, "example.com").unwrap(), new);
        // wild-ecdsa and split are untouched; www-rsa stays a's default.
        assert_eq!(
            handshake(&a.config, "x.example.org").unwrap(),
            fingerprint("wild-ecdsa.pem")
        );
        let default = |store: &CertStore| {
            let c = store.select(Some("unknown.test"), &[]).unwrap();
            crate::tls::show::sha1_fingerprint(&c.key.cert[0])
        };
        assert_eq!(default(&a.store), new);
        assert_eq!(default(&b.store), fingerprint("split.pem"));
        assert_eq!(crate::tls::show::sha1_fingerprint(&picked.key.cert[0]), old);
        let shown = certs.show(Some(&www));
        assert!(
            shown.starts_with(&format!("Filename: {www}\nStatus: Used\n")),
            "{shown}"
        );
        assert!(
            shown.contains(&format!("SHA1 FingerPrint: {new}\n")),
            "{shown}"
        );
        assert_eq!(certs.show(None).lines().next(), Some("# filename"));
        assert_eq!(
            certs.commit(Some(&www)),
            format!("No ongoing transaction! !\nCan't commit {www}!\n")
        );
    }

    #[test]
    fn new_names_are_indexed_and_old_ones_dropped() {
        let d = Dir::new("names");
        let a = d.bind(&["www-rsa.pem", "wild-ecdsa.pem"], true);
        let certs = Certs::new([&a.store]);
        let www = d.path("www-rsa.pem");
        certs.set(Some(&www), Some(&pem("other-rsa.pem")));
        certs.commit(Some(&www));
        assert_eq!(
            handshake(&a.config, "other.example.net").unwrap(),
            fingerprint("other-rsa.pem")
        );
        // strict-sni: www.example.com has no certificate any more.
        assert!(handshake(&a.config, "www.example.com").is_err());
    }

    #[test]
    fn bad_payloads_are_refused_and_the_old_certificate_serves() {
        let d = Dir::new("bad");
        let a = d.bind(&["www-rsa.pem", "split.pem"], false);
        let certs = Certs::new([&a.store]);
        let www = d.path("www-rsa.pem");
        let old = fingerprint("www-rsa.pem");
        let rsa = pem("www-rsa.pem");
        let cert_only = &rsa[..rsa.find("-----BEGIN PRIVATE KEY-----").unwrap()];
        let ec = pem("www-ecdsa.pem");
        let ec_key = &ec[ec.find("-----BEGIN PRIVATE KEY-----").unwrap()..];

        assert_eq!(
            certs.set(Some(&www), Some("garbage\n")),
            format!("unable to load certificate from file '{www}'.\nCan't load the payload\nCan't update {www}!\n")
        );
        assert_eq!(
            certs.set(Some(&www), Some(ec_key)),
            format!("unable to load certificate from file '{www}'.\nCan't load the payload\nCan't update {www}!\n")
        );
        let not_der = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
        assert!(certs
            .set(Some(&www), Some(not_der))
            .starts_with("unable to load certificate"));
        assert_eq!(
            certs.show(None).lines().next(),
            Some("# filename"),
            "no transaction"
        );

        // No key: accepted, refused at commit; the transaction stays open.
        assert_eq!(
            certs.set(Some(&www), Some(cert_only)),
            format!("Transaction created for certificate {www}!\n")
        );
        assert_eq!(
            certs.commit(Some(&www)),
            format!("The transaction must contain at least a certificate and a private key!\nCan't commit {www}!\n")
        );
        // Another certificate's key.
        assert_eq!(
            certs.set(Some(&www), Some(&format!("{cert_only}{ec_key}"))),
            format!("Transaction updated for certificate {www}!\n")
        );
        assert_eq!(
            certs.commit(Some(&www)),
            format!("inconsistencies between private key and certificate loaded '{www}'.\nCan't commit {www}!\n")
        );
        assert_eq!(handshake(&a.config, "www.example.com").unwrap(), old);
        // FILE.key replaces the key alone; garbage there is refused.
        assert_eq!(
            certs.set(Some(&format!("{www}.key")), Some("junk")),
            format!("unable to load private key from file '{www}'.\nCan't load the payload\nCan't update {www}.key!\n")
        );
        let own_key = &rsa[rsa.find("-----BEGIN PRIVATE KEY-----").unwrap()..];
        assert_eq!(
            certs.set(Some(&format!("{www}.key")), Some(own_key)),
            format!("Transaction updated for certificate {www}!\n")
        );
        assert_eq!(
            certs.commit(Some(&www)),
            format!("Committing {www}.\nSuccess!\n")
        );
        assert_eq!(handshake(&a.config, "www.example.com").unwrap(), old);
    }

    #[test]
    fn one_transaction_at_a_time_with_haproxys_replies() {
        let d = Dir::new("txn");
        let a = d.bind(&["www-rsa.pem", "split.pem"], false);
        let certs = Certs::new([&a.store]);
        let (www, split) = (d.path("www-rsa.pem"), d.path("split.pem"));
        let nope = d.path("nope.pem");
        assert_eq!(
            certs.set(Some(&nope), Some("x")),
            format!("Can't replace a certificate which is not referenced by the configuration!\nCan't update {nope}!\n")
        );
        assert_eq!(
            certs.set(Some(&www), None),
            "'set ssl cert expects a filename and a certificate as a payload\n"
        );
        assert_eq!(certs.set(None, None), certs.set(Some(&www), None));
        assert_eq!(certs.commit(None), "'commit ssl cert expects a filename\n");
        assert_eq!(certs.abort(None), "'abort ssl cert' expects a filename\n");
        assert_eq!(certs.abort(Some(&www)), "No ongoing transaction!\n");
        assert_eq!(certs.show(Some(&nope)), NOT_FOUND);
        assert_eq!(certs.show(Some(&format!("*{www}"))), NOT_FOUND);

        certs.set(Some(&www), Some(&pem("next-www.pem")));
        assert_eq!(
            certs.set(Some(&split), Some(&pem("next-www.pem"))),
            format!("The ongoing transaction is about '{www}' but you are trying to set '{split}'\nCan't update {split}!\n")
        );
        assert_eq!(
            certs.commit(Some(&split)),
            format!("The ongoing transaction is about '{www}' but you are trying to set '{split}'\nCan't commit {split}!\n")
        );
        assert_eq!(
            certs.abort(Some(&split)),
            format!("The ongoing transaction is about '{www}' but you are trying to abort a transaction for '{split}'\n")
        );
        assert!(certs
            .set(Some(&format!("{split}.ocsp")), Some("x"))
            .ends_with(&format!("Can't update {split}.ocsp!\n")));
        assert_eq!(
            certs.abort(Some(&www)),
            format!("Transaction aborted for certificate '{www}'!\n")
        );
        assert_eq!(
            handshake(&a.config, "www.example.com").unwrap(),
            fingerprint("www-rsa.pem")
        );
        assert_eq!(certs.show(None).lines().next(), Some("# filename"));
    }
}
