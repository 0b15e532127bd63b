//! CA and CRL files in memory, as HAProxy keeps them: every `ca-file`, `ca-verify-file` and
//! `crl-file` a bind loaded, by its path, and the stats socket's commands on them (`new`,
//! `set`, `commit`, `abort`, `del`, `show ssl ca-file` and the same for `crl-file`), with
//! HAProxy 2.6's replies.
//!
//! A client certificate verifier reads its CAs and CRLs through [`Source`]s, one per file it
//! was built with, so that `commit ssl ca-file FILE` reaches every verifier using FILE from
//! its next handshake on (the CA names a request for a certificate carries stay those loaded
//! first). A file made with `new ssl ca-file` and committed can be named by a line added with
//! `add ssl crt-list`: HAProxy reads no CA file from disk at run time, and neither does
//! Bascule.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use arc_swap::{ArcSwap, ArcSwapOption};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, CertificateRevocationListDer};

/// CA certificates or CRLs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    Ca,
    Crl,
}

impl Kind {
    /// `CA file` / `CRL file`, as HAProxy's messages say.
    fn what(self) -> &'static str {
        match self {
            Kind::Ca => "CA file",
            Kind::Crl => "CRL file",
        }
    }

    /// The commands' word: `ca-file` / `crl-file`.
    fn word(self) -> &'static str {
        match self {
            Kind::Ca => "ca-file",
            Kind::Crl => "crl-file",
        }
    }
}

/// What one verifier reads of one file: its certificates or CRLs (DER), replaced by commits.
#[derive(Debug)]
pub struct Source {
    pub kind: Kind,
    /// The file's path as configured (after `ca-base`).
    pub path: String,
    content: ArcSwap<Vec<Vec<u8>>>,
}

impl Source {
    pub fn new(kind: Kind, path: &str, content: Vec<Vec<u8>>) -> Arc<Source> {
        Arc::new(Source {
            kind,
            path: path.to_string(),
            content: ArcSwap::from_pointee(content),
        })
    }

    /// Loads `ca-file`/`ca-verify-file` (see `ca::load_certs`) or `crl-file`.
    pub fn load(kind: Kind, path: &Path) -> Result<Arc<Source>, String> {
        let content = match kind {
            Kind::Ca => super::ca::load_certs(path)?
                .into_iter()
                .map(|c| c.as_ref().to_vec())
                .collect(),
            Kind::Crl => super::ca::load_crls(path)?
                .into_iter()
                .map(|c| c.as_ref().to_vec())
                .collect(),
        };
        Ok(Source::new(kind, &path.display().to_string(), content))
    }

    /// The current content.
    pub fn load_content(&self) -> Arc<Vec<Vec<u8>>> {
        self.content.load_full()
    }
}

/// One file in memory: its content (`None`: made by `new` and not committed yet) and the
/// verifiers' sources that read it.
struct Entry {
    content: ArcSwapOption<Vec<Vec<u8>>>,
    sources: ArcSwap<Vec<Arc<Source>>>,
}

/// The open transaction of one kind: the file and its next content.
struct Pending {
    path: String,
    content: Vec<Vec<u8>>,
}

/// The CA and CRL files of the running configuration, and one transaction per kind.
#[derive(Default)]
pub struct CaFiles {
    files: ArcSwap<BTreeMap<(Kind, String), Arc<Entry>>>,
    pending_ca: ArcSwapOption<Pending>,
    pending_crl: ArcSwapOption<Pending>,
}

impl std::fmt::Debug for CaFiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CaFiles")
            .field("files", &self.files.load().keys().collect::<Vec<_>>())
            .finish()
    }
}

/// PEM certificates or CRLs of a payload; `None` when there is none or one is unreadable.
fn parse(kind: Kind, payload: &str) -> Option<Vec<Vec<u8>>> {
    let bytes = payload.as_bytes();
    let items: Vec<Vec<u8>> = match kind {
        Kind::Ca => CertificateDer::pem_slice_iter(bytes)
            .map(|c| c.map(|c| c.as_ref().to_vec()))
            .collect::<Result<_, _>>()
            .ok()?,
        Kind::Crl => CertificateRevocationListDer::pem_slice_iter(bytes)
            .map(|c| c.map(|c| c.as_ref().to_vec()))
            .collect::<Result<_, _>>()
            .ok()?,
    };
    (!items.is_empty()).then_some(items)
}

impl CaFiles {
    /// Indexes the sources of the running verifiers by file.
    pub fn new<'a>(sources: impl IntoIterator<Item = &'a Arc<Source>>) -> CaFiles {
        /// A file's first content and the sources reading it.
        type Draft = (Vec<Vec<u8>>, Vec<Arc<Source>>);
        let mut files: BTreeMap<(Kind, String), Draft> = BTreeMap::new();
        for s in sources {
            let e = files
                .entry((s.kind, s.path.clone()))
                .or_insert_with(|| (Vec::clone(&s.load_content()), Vec::new()));
            if !e.1.iter().any(|x| Arc::ptr_eq(x, s)) {
                e.1.push(Arc::clone(s));
            }
        }
        let files = files
            .into_iter()
            .map(|(k, (content, sources))| {
                let e = Entry {
                    content: ArcSwapOption::new(Some(Arc::new(content))),
                    sources: ArcSwap::from_pointee(sources),
                };
                (k, Arc::new(e))
            })
            .collect();
        CaFiles {
            files: ArcSwap::from_pointee(files),
            ..Default::default()
        }
    }

    fn pending(&self, kind: Kind) -> &ArcSwapOption<Pending> {
        match kind {
            Kind::Ca => &self.pending_ca,
            Kind::Crl => &self.pending_crl,
        }
    }

    /// Whether `path` is in memory with some content; HAProxy's error otherwise.
    pub fn check(&self, kind: Kind, opt: &str, path: &Path) -> Result<(), String> {
        let name = path.display().to_string();
        match self.files.load().get(&(kind, name.clone())) {
            Some(e) if e.content.load().is_some() => Ok(()),
            _ => Err(format!("'{opt}' : unable to load {name}")),
        }
    }

    /// A new source reading `path`'s current content, for a line added at run time; HAProxy's
    /// error when the file is not in memory.
    pub fn source(&self, kind: Kind, opt: &str, path: &Path) -> Result<Arc<Source>, String> {
        let name = path.display().to_string();
        let files = self.files.load();
        let Some(e) = files.get(&(kind, name.clone())) else {
            return Err(format!("'{opt}' : unable to load {name}"));
        };
        let Some(content) = e.content.load_full() else {
            return Err(format!("'{opt}' : unable to load {name}"));
        };
        let s = Source::new(kind, &name, Vec::clone(&content));
        e.sources.rcu(|v| {
            let mut v = Vec::clone(v);
            v.push(Arc::clone(&s));
            v
        });
        Ok(s)
    }

    /// A source no longer read (its line was deleted).
    pub fn release(&self, source: &Arc<Source>) {
        if let Some(e) = self.files.load().get(&(source.kind, source.path.clone())) {
            e.sources.rcu(|v| {
                let mut v = Vec::clone(v);
                v.retain(|x| !Arc::ptr_eq(x, source));
                v
            });
        }
    }

    /// `new ssl ca-file|crl-file FILE`.
    pub fn new_file(&self, kind: Kind, arg: Option<&str>) -> String {
        let Some(path) = arg else {
            return format!("'new ssl {}' expects a filename\n", kind.word());
        };
        let key = (kind, path.to_string());
        // CA and CRL files share their names, as in HAProxy.
        if self.files.load().keys().any(|(_, p)| p == path) {
            return format!("{} '{path}' already exists!\n", kind.what());
        }
        self.files.rcu(|files| {
            let mut files = BTreeMap::clone(files);
            files.insert(
                key.clone(),
                Arc::new(Entry {
                    content: ArcSwapOption::empty(),
                    sources: ArcSwap::from_pointee(Vec::new()),
                }),
            );
            files
        });
        format!("New {} created '{path}'!\n", kind.what())
    }

    /// `set ssl ca-file|crl-file FILE <<` with PEM content: opens or updates the transaction.
    pub fn set(&self, kind: Kind, arg: Option<&str>, payload: Option<&str>) -> String {
        let (Some(path), Some(payload)) = (arg, payload) else {
            return match kind {
                Kind::Ca => "'set ssl ca-file expects a filename and CAs as a payload\n".into(),
                Kind::Crl => "'set ssl crl-file expects a filename and CRLs as a payload\n".into(),
            };
        };
        let fail = |e: String| format!("{e}Can't update {path}!\n");
        let pending = self.pending(kind).load_full();
        if let Some(p) = pending.as_deref() {
            if p.path != path {
                return fail(format!(
                    "The ongoing transaction is about '{}' but you are trying to set '{path}'\n",
                    p.path
                ));
            }
        }
        if !self.files.load().contains_key(&(kind, path.to_string())) {
            return fail(format!(
                "Can't replace a {} which is not referenced by the configuration!\n",
                kind.what()
            ));
        }
        let Some(content) = parse(kind, payload) else {
            return fail("Invalid payload\n".into());
        };
        self.pending(kind).store(Some(Arc::new(Pending {
            path: path.to_string(),
            content,
        })));
        let what = match kind {
            Kind::Ca => "CA",
            Kind::Crl => "CRL",
        };
        match pending {
            None => format!("transaction created for {what} {path}!\n"),
            Some(_) => format!("transaction updated for {what} {path}!\n"),
        }
    }

    /// `commit ssl ca-file|crl-file FILE`: every verifier reading FILE reads the new content.
    pub fn commit(&self, kind: Kind, arg: Option<&str>) -> String {
        let Some(path) = arg else {
            return format!("'commit ssl {} expects a filename\n", kind.word());
        };
        let fail = |e: String| format!("{e}Can't commit {path}!\n");
        let Some(p) = self.pending(kind).load_full() else {
            return fail("No ongoing transaction! !\n".into());
        };
        if p.path != path {
            return fail(format!(
                "The ongoing transaction is about '{}' but you are trying to set '{path}'\n",
                p.path
            ));
        }
        let Some(e) = self.files.load().get(&(kind, p.path.clone())).cloned() else {
            return fail(format!(
                "Can't replace a {} which is not referenced by the configuration!\n",
                kind.what()
            ));
        };
        let content = Arc::new(p.content.clone());
        let mut out = format!("Committing {path}");
        for s in e.sources.load().iter() {
            s.content.store(Arc::clone(&content));
            out.push('.');
        }
        e.content.store(Some(content));
        self.pending(kind).store(None);
        out.push_str("\nSuccess!\n");
        out
    }

    /// `abort ssl ca-file|crl-file FILE`.
    pub fn abort(&self, kind: Kind, arg: Option<&str>) -> String {
        let Some(path) = arg else {
            return format!("'abort ssl {}' expects a filename\n", kind.word());
        };
        let Some(p) = self.pending(kind).load_full() else {
            return "No ongoing transaction!\n".into();
        };
        if p.path != path {
            return format!(
                "The ongoing transaction is about '{}' but you are trying to abort a transaction for '{path}'\n",
                p.path
            );
        }
        self.pending(kind).store(None);
        format!("Transaction aborted for certificate '{path}'!\n")
    }

    /// `del ssl ca-file|crl-file FILE`: forgets a file no verifier reads.
    pub fn del(&self, kind: Kind, arg: Option<&str>) -> String {
        let Some(path) = arg else {
            let what = match kind {
                Kind::Ca => "CA",
                Kind::Crl => "CRL",
            };
            return format!("'del ssl {}' expects a {what} file name\n", kind.word());
        };
        let key = (kind, path.to_string());
        let fail = |e: String| format!("Can't remove the {}: {e}\n", kind.what());
        match self.files.load().get(&key) {
            None => return fail(format!("{} '{path}' doesn't exist!\n", kind.what())),
            Some(e) if !e.sources.load().is_empty() => {
                return fail(format!(
                    "{} '{path}' in use, can't be deleted!\n",
                    kind.what()
                ))
            }
            Some(_) => {}
        }
        self.files.rcu(|files| {
            let mut files = BTreeMap::clone(files);
            files.remove(&key);
            files
        });
        format!("{} '{path}' deleted!\n", kind.what())
    }

    /// `show ssl ca-file|crl-file [FILE]` (for CA files, `FILE:N` shows the Nth certificate).
    pub fn show(&self, kind: Kind, arg: Option<&str>) -> String {
        let files = self.files.load();
        let pending = self.pending(kind).load_full();
        let count = |n: usize| match kind {
            Kind::Ca => format!(" - {n} certificate(s)\n"),
            Kind::Crl => String::from("\n"),
        };
        let Some(arg) = arg else {
            let mut out = String::new();
            if let Some(p) = pending.as_deref() {
                out.push_str(&format!(
                    "# transaction\n*{}{}",
                    p.path,
                    count(p.content.len())
                ));
            }
            out.push_str("# filename\n");
            for ((k, path), e) in files.iter() {
                if *k == kind {
                    let n = e.content.load().as_ref().map_or(0, |c| c.len());
                    out.push_str(&format!("{path}{}", count(n)));
                }
            }
            return out;
        };
        let not_found = match kind {
            Kind::Ca => "Can't display the CA file : Not found!\n",
            Kind::Crl => "Can't display the CRL file : Not found!\n",
        };
        let (name, index) = match arg.rsplit_once(':') {
            Some((n, i)) => match i.parse::<usize>() {
                Ok(i) if i > 0 => (n, Some(i)),
                _ if kind == Kind::Ca => return format!("wrong CA index after colons in '{arg}'!"),
                _ => return format!("wrong CRL index after colons in '{arg}'!"),
            },
            None => (arg, None),
        };
        let (shown, content, status) = match name.strip_prefix('*') {
            Some(path) => match pending.as_deref() {
                Some(p) if p.path == path => (name, Some(Arc::new(p.content.clone())), "Unused"),
                _ => return not_found.into(),
            },
            None => match files.get(&(kind, name.to_string())) {
                Some(e) => {
                    let content = e.content.load_full();
                    let status = match (&content, e.sources.load().is_empty()) {
                        (None, _) => "Empty",
                        (Some(_), true) => "Unused",
                        (Some(_), false) => "Used",
                    };
                    (name, content, status)
                }
                None => return not_found.into(),
            },
        };
        let mut out = format!("Filename: {shown}\nStatus: {status}\n");
        for (i, der) in content.iter().flat_map(|c| c.iter()).enumerate() {
            if index.is_some_and(|n| n != i + 1) {
                continue;
            }
            let details = match kind {
                Kind::Ca => {
                    out.push_str(&format!(" \nCertificate #{}:\n", i + 1));
                    super::show::cert_details(&CertificateDer::from(der.as_slice()))
                }
                Kind::Crl => {
                    out.push_str(&format!(" \nCertificate Revocation List #{}:\n", i + 1));
                    super::verify::crl_details(der)
                }
            };
            out.push_str(&details.unwrap_or_default());
        }
        out
    }
}
