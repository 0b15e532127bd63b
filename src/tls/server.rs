//! The server side of a `bind ... ssl` line: its settings as the configuration gives them
//! ([`BindSsl`]) and the rustls configuration they build ([`build`]), checked when the
//! configuration loads.
//!
//! HAProxy's defaults are kept where rustls has the knob: the server's cipher order wins
//! (`prefer-client-ciphers` gives it to the client), TLSv1.2 to TLSv1.3, session tickets on
//! (`no-tls-tickets` turns them off) beside a session cache, no client certificate unless
//! `verify optional|required` with a `ca-file`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::crypto::CryptoProvider;
use rustls::server::ServerSessionMemoryCache;
use rustls::ServerConfig;

use super::cafiles::{Kind, Source};
use super::crtlist::{self, LineSsl};
use super::params::{self, Version};
use super::sni::{CertIndex, CertStore};
use super::verify::ClientVerifier;
use arc_swap::ArcSwap;

/// `verify none|optional|required`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Verify {
    #[default]
    None,
    Optional,
    Required,
}

/// A `crt` or `crt-list` argument, in bind-line order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CrtArg {
    Crt(PathBuf),
    CrtList(PathBuf),
}

/// The TLS settings of one `bind` line.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BindSsl {
    pub crts: Vec<CrtArg>,
    /// `alpn h2,http/1.1`, in preference order.
    pub alpn: Vec<Vec<u8>>,
    pub min_ver: Option<Version>,
    pub max_ver: Option<Version>,
    /// `no-tlsv12`, `no-tlsv13` (and the older ones, which rustls never offers).
    pub disabled: Vec<Version>,
    pub ciphers: Option<String>,
    pub ciphersuites: Option<String>,
    pub curves: Option<String>,
    pub strict_sni: bool,
    pub verify: Verify,
    pub ca_file: Option<PathBuf>,
    /// `ca-verify-file`: CAs that check client certificates without being named in the
    /// request for one (intermediates, typically).
    pub ca_verify_file: Option<PathBuf>,
    pub crl_file: Option<PathBuf>,
    pub no_tls_tickets: bool,
    /// `crt-ignore-err`/`ca-ignore-err`: client certificate errors waived (at depth 0, above).
    pub crt_ignore_err: super::verify::Ignore,
    pub ca_ignore_err: super::verify::Ignore,
    /// `no-ca-names`: the CA names are not sent with a client certificate request.
    pub no_ca_names: bool,
    /// `ca-base`, for the relative `ca-file`/`crl-file` of `crt-list` lines.
    pub ca_base: Option<PathBuf>,
    /// `crt-base`, for the relative certificates of `crt-list` lines.
    pub crt_base: Option<PathBuf>,
    /// `ssl-load-extra-files`/`ssl-load-extra-del-ext`: the files read beside a `crt`.
    pub extra: super::cert::Extra,
    /// `tls-ticket-keys FILE`: tickets sealed with the file's keys (see [`super::tickets`]).
    pub tls_ticket_keys: Option<PathBuf>,
    pub prefer_client_ciphers: bool,
    /// `tune.ssl.cachesize`: sessions kept for resumption without a ticket (0: none).
    pub session_cache: Option<usize>,
    /// `tune.ssl.maxrecord`: the largest record payload sent.
    pub max_record: Option<usize>,
    /// `tune.ssl.capture-buffer-size`: the bytes of each ClientHello list kept for the
    /// `ssl_fc_cipherlist_*` fetches (0: none captured).
    pub capture: usize,
    /// `tune.ssl.keylog on`: each handshake's secrets kept for the `ssl_fc_*_secret` fetches.
    pub keylog: bool,
    /// Where DH parameters come from (`'ssl-dh-param-file FILE'`, `'tune.ssl.default-dh-param
    /// N'`): set, HAProxy would negotiate the DHE suites a cipher list names (see `tls::dh`).
    pub dh: Option<String>,
}

/// The global TLS defaults of bind lines: `ssl-default-bind-ciphers`, `-ciphersuites`,
/// `-curves`, `-options`, and `crt-base`/`ca-base` for relative paths.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BindDefaults {
    pub ciphers: Option<String>,
    pub ciphersuites: Option<String>,
    pub curves: Option<String>,
    /// `ssl-default-bind-options`: the version bounds and flags.
    pub options: BindSsl,
    pub crt_base: Option<PathBuf>,
    pub ca_base: Option<PathBuf>,
}

impl BindDefaults {
    /// A bind line's settings completed by the defaults.
    pub fn apply(&self, bind: &BindSsl) -> BindSsl {
        let mut s = bind.clone();
        s.ciphers = s.ciphers.or_else(|| self.ciphers.clone());
        s.ciphersuites = s.ciphersuites.or_else(|| self.ciphersuites.clone());
        s.curves = s.curves.or_else(|| self.curves.clone());
        s.min_ver = s.min_ver.or(self.options.min_ver);
        s.max_ver = s.max_ver.or(self.options.max_ver);
        for v in &self.options.disabled {
            if !s.disabled.contains(v) {
                s.disabled.push(*v);
            }
        }
        s.no_tls_tickets |= self.options.no_tls_tickets;
        s.session_cache = s.session_cache.or(self.options.session_cache);
        s.max_record = s.max_record.or(self.options.max_record);
        s.capture = self.options.capture;
        s.keylog = self.options.keylog;
        s.dh = self.options.dh.clone();
        s.prefer_client_ciphers |= self.options.prefer_client_ciphers;
        s.extra = self.options.extra;
        s.strict_sni |= self.options.strict_sni;
        let under = |base: &Option<PathBuf>, p: &Path| match base {
            Some(b) if p.is_relative() => b.join(p),
            _ => p.to_path_buf(),
        };
        for c in &mut s.crts {
            match c {
                // As haproxy 2.6 does: a `crt-list` file is not under `crt-base` (its
                // relative certificates are, see `crtlist::read`).
                CrtArg::Crt(p) => *p = under(&self.crt_base, p),
                CrtArg::CrtList(_) => {}
            }
        }
        s.ca_file = s.ca_file.map(|p| {
            if super::ca::is_system(&p) {
                p
            } else {
                under(&self.ca_base, &p)
            }
        });
        s.ca_base = self.ca_base.clone();
        s.crt_base = self.crt_base.clone();
        s.crl_file = s.crl_file.map(|p| under(&self.ca_base, &p));
        s.ca_verify_file = s.ca_verify_file.map(|p| under(&self.ca_base, &p));
        s
    }
}

/// What [`build`] makes: the configuration rustls runs, and warnings about what it narrowed.
pub struct Built {
    /// The bind line's settings.
    pub settings: BindSsl,
    /// The `crt-list` files the bind read, with their lines, for `show`/`add`/`del ssl
    /// crt-list`.
    pub lists: Vec<(PathBuf, Vec<crtlist::CrtListLine>)>,
    pub config: Arc<ServerConfig>,
    /// Its client certificate verifier (`None`: no client certificate asked for), to tell
    /// what a resumed session's certificate is worth.
    pub verifier: Option<Arc<ClientVerifier>>,
    /// The configurations of `crt-list` lines with SSL options of their own (`[alpn h2]`...),
    /// in line order: group `n` of the [`CertStore`] is `lines[n - 1]`. Empty in the common
    /// case, where every handshake uses `config`; `add ssl crt-list` may add some.
    pub lines: ArcSwap<Vec<Arc<LineConfig>>>,
    pub store: Arc<CertStore>,
    /// `tls-ticket-keys`: the keys, for the stats socket.
    pub ticket_keys: Option<Arc<super::tickets::FileTickets>>,
    pub warnings: Vec<String>,
    /// What a configuration built at run time shares with the others.
    session_storage: Arc<dyn rustls::server::StoresServerSessions>,
    ticketer: Option<Arc<dyn rustls::server::ProducesTickets>>,
}

impl std::fmt::Debug for Built {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Built")
            .field("settings", &self.settings)
            .field("lines", &self.lines.load().len())
            .finish()
    }
}

/// The configuration of a `crt-list` line with SSL options of its own.
#[derive(Debug)]
pub struct LineConfig {
    pub opts: LineSsl,
    pub config: Arc<ServerConfig>,
    pub verifier: Option<Arc<ClientVerifier>>,
}

impl Built {
    /// The configuration for a handshake whose ClientHello is `hello`: that of the line whose
    /// certificate the SNI selection picks (the bind line's unless it has options).
    pub fn config_for(&self, hello: &rustls::server::ClientHello<'_>) -> Arc<ServerConfig> {
        match self
            .store
            .group(hello.server_name(), hello.signature_schemes())
        {
            0 => Arc::clone(&self.config),
            n => self
                .lines
                .load()
                .get(n - 1)
                .map_or_else(|| Arc::clone(&self.config), |l| Arc::clone(&l.config)),
        }
    }

    /// Whether some `crt-list` line has a configuration of its own (then the ClientHello
    /// chooses one, see [`Built::config_for`]).
    pub fn has_lines(&self) -> bool {
        !self.lines.load().is_empty()
    }

    /// The configuration group a line with options `opts` joins: 0 when its handshakes would
    /// be the bind line's, else the first line whose options make the same; `None` when
    /// they need a configuration of their own.
    pub fn group_for(&self, opts: Option<&LineSsl>) -> Option<usize> {
        let Some(opts) = opts else { return Some(0) };
        let wanted = self.settings.overlaid(opts);
        if same_handshake(&wanted, &self.settings) {
            return Some(0);
        }
        self.lines
            .load()
            .iter()
            .position(|l| same_handshake(&self.settings.overlaid(&l.opts), &wanted))
            .map(|i| i + 1)
    }

    /// Builds the configuration of a line added at run time (`add ssl crt-list`), its files
    /// found by `resolve`; its group.
    pub fn add_group(&self, opts: &LineSsl, resolve: &Resolve<'_>) -> Result<usize, String> {
        let shared = Shared {
            store: &self.store,
            session_storage: Arc::clone(&self.session_storage),
            ticketer: self.ticketer.clone(),
        };
        let (config, verifier) = configure(
            &self.settings.overlaid(opts),
            &shared,
            resolve,
            &mut Vec::new(),
        )?;
        let line = Arc::new(LineConfig {
            opts: opts.clone(),
            config,
            verifier,
        });
        let mut group = 0;
        self.lines.rcu(|lines| {
            let mut lines = Vec::clone(lines);
            lines.push(Arc::clone(&line));
            group = lines.len();
            lines
        });
        Ok(group)
    }

    /// The client certificate verifier of `config` (this bind's or one of its lines').
    pub fn verifier_of(&self, config: &Arc<ServerConfig>) -> Option<Arc<ClientVerifier>> {
        if Arc::ptr_eq(&self.config, config) {
            return self.verifier.clone();
        }
        self.lines
            .load()
            .iter()
            .find(|l| Arc::ptr_eq(&l.config, config))?
            .verifier
            .clone()
    }

    /// Every verifier of the bind (its lines' included).
    pub fn verifiers(&self) -> Vec<Arc<ClientVerifier>> {
        self.verifier
            .iter()
            .cloned()
            .chain(self.lines.load().iter().filter_map(|l| l.verifier.clone()))
            .collect()
    }

    /// The same bind with each configuration passed through `f` (`config::validate` takes
    /// `h2` out of ALPN lists).
    pub fn map_configs(&self, f: impl Fn(&Arc<ServerConfig>) -> Arc<ServerConfig>) -> Built {
        let lines: Vec<Arc<LineConfig>> = self
            .lines
            .load()
            .iter()
            .map(|l| {
                Arc::new(LineConfig {
                    opts: l.opts.clone(),
                    config: f(&l.config),
                    verifier: l.verifier.clone(),
                })
            })
            .collect();
        Built {
            settings: self.settings.clone(),
            lists: self.lists.clone(),
            config: f(&self.config),
            verifier: self.verifier.clone(),
            lines: ArcSwap::from_pointee(lines),
            store: Arc::clone(&self.store),
            ticket_keys: self.ticket_keys.clone(),
            warnings: Vec::new(),
            session_storage: Arc::clone(&self.session_storage),
            ticketer: self.ticketer.clone(),
        }
    }
}

/// Finds the CA or CRL file a configuration names: from disk at load, from memory at run
/// time (`tls::cafiles`).
pub type Resolve<'a> = dyn Fn(Kind, &str, &Path) -> Result<Arc<Source>, String> + 'a;

/// Loads a `ca-file`/`ca-verify-file`/`crl-file` from disk.
pub fn from_disk(kind: Kind, _opt: &str, path: &Path) -> Result<Arc<Source>, String> {
    Source::load(kind, path)
}

/// Whether two settings make the same handshakes: the same versions (rustls's, so that
/// `ssl-min-ver SSLv3` is the default), suites, groups, ALPN and client certificate checks.
fn same_handshake(a: &BindSsl, b: &BindSsl) -> bool {
    let versions = |s: &BindSsl| {
        params::versions(s.min_ver, s.max_ver, &s.disabled)
            .map(|(v, _)| v.iter().map(|v| v.version).collect::<Vec<_>>())
            .ok()
    };
    versions(a) == versions(b)
        && a.alpn == b.alpn
        && a.ciphers == b.ciphers
        && a.ciphersuites == b.ciphersuites
        && a.curves == b.curves
        && a.verify == b.verify
        && (a.verify == Verify::None
            || (a.ca_file == b.ca_file
                && a.ca_verify_file == b.ca_verify_file
                && a.crl_file == b.crl_file))
        && a.no_ca_names == b.no_ca_names
}

/// Two builds are the same only if they are one (a configuration compares its binds).
impl PartialEq for Built {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self, other)
    }
}

impl Eq for Built {}

/// Session cache entries per bind (HAProxy's `tune.ssl.cachesize` default).
const SESSION_CACHE: usize = 20_000;

/// Loads the certificates and builds the rustls configuration of a bind line (and of its
/// `crt-list` lines with options).
pub fn build(ssl: &BindSsl) -> Result<Built, String> {
    let mut warnings = Vec::new();
    let mut store = CertIndex::new(ssl.strict_sni);
    let mut line_opts = Vec::new();
    let mut lists = Vec::new();
    for arg in &ssl.crts {
        match arg {
            CrtArg::Crt(path) => {
                for cert in super::cert::load_with(path, ssl.extra)? {
                    store.add(cert, &[]);
                }
            }
            CrtArg::CrtList(path) => {
                let read = crtlist::read(path, ssl.crt_base.as_deref())?;
                for line in &read {
                    let group = match &line.ssl {
                        Some(opts) => {
                            line_opts.push((opts.clone(), line.at.clone()));
                            line_opts.len()
                        }
                        None => 0,
                    };
                    warnings.extend(line.warnings.iter().cloned());
                    for cert in super::cert::load_with(&line.crt, ssl.extra)? {
                        store.add_in(cert, &line.filters, group);
                    }
                }
                lists.push((path.clone(), read));
            }
        }
    }
    if store.is_empty() {
        return Err("'ssl' needs at least one certificate ('crt FILE' or 'crt-list FILE')".into());
    }
    let store = Arc::new(CertStore::from(store));
    // One ticket sealer and one session cache for all the configurations of the bind: a
    // session resumes whichever line's configuration the resuming hello selects.
    let session_storage: Arc<dyn rustls::server::StoresServerSessions> =
        match ssl.session_cache.unwrap_or(SESSION_CACHE) {
            0 => Arc::new(rustls::server::NoServerSessionStorage {}),
            n => ServerSessionMemoryCache::new(n),
        };
    let mut ticket_keys = None;
    let ticketer: Option<Arc<dyn rustls::server::ProducesTickets>> =
        match (&ssl.tls_ticket_keys, ssl.no_tls_tickets) {
            (Some(path), false) => {
                let keys = Arc::new(super::tickets::FileTickets::load(path)?);
                ticket_keys = Some(keys.clone());
                Some(keys)
            }
            (Some(path), true) => {
                warnings.push(format!(
                    "'tls-ticket-keys {}' has no effect with 'no-tls-tickets'",
                    path.display()
                ));
                None
            }
            (None, false) => Some(
                rustls::crypto::aws_lc_rs::Ticketer::new()
                    .map_err(|e| format!("TLS session tickets: {e}"))?,
            ),
            (None, true) => None,
        };
    let shared = Shared {
        store: &store,
        session_storage,
        ticketer,
    };
    let (config, verifier) = configure(ssl, &shared, &from_disk, &mut warnings)?;
    let mut lines = Vec::new();
    for (opts, at) in line_opts {
        let mut line_warnings = Vec::new();
        let (c, v) = configure(
            &ssl.overlaid(&opts),
            &shared,
            &from_disk,
            &mut line_warnings,
        )
        .map_err(|e| format!("{at}: {e}"))?;
        warnings.extend(line_warnings.into_iter().map(|w| format!("{at}: {w}")));
        lines.push(Arc::new(LineConfig {
            opts,
            config: c,
            verifier: v,
        }));
    }
    let Shared {
        session_storage,
        ticketer,
        ..
    } = shared;
    Ok(Built {
        settings: ssl.clone(),
        lists,
        config,
        verifier,
        lines: ArcSwap::from_pointee(lines),
        store,
        ticket_keys,
        warnings,
        session_storage,
        ticketer,
    })
}

/// What the configurations of one bind share.
struct Shared<'a> {
    store: &'a Arc<CertStore>,
    session_storage: Arc<dyn rustls::server::StoresServerSessions>,
    ticketer: Option<Arc<dyn rustls::server::ProducesTickets>>,
}

impl BindSsl {
    /// The settings of a `crt-list` line with options: the line's where it gives them, the
    /// bind line's elsewhere (a relative `ca-file`/`crl-file` under `ca-base`).
    pub fn overlaid(&self, line: &LineSsl) -> BindSsl {
        let mut s = self.clone();
        let under = |p: &PathBuf| match &self.ca_base {
            Some(b) if p.is_relative() && !super::ca::is_system(p) => b.join(p),
            _ => p.clone(),
        };
        if let Some(a) = &line.alpn {
            s.alpn = a.clone();
        }
        s.min_ver = line.min_ver.or(s.min_ver);
        s.max_ver = line.max_ver.or(s.max_ver);
        s.ciphers = line.ciphers.clone().or(s.ciphers);
        s.ciphersuites = line.ciphersuites.clone().or(s.ciphersuites);
        s.curves = line.curves.clone().or(s.curves);
        s.verify = line.verify.unwrap_or(s.verify);
        s.ca_file = line.ca_file.as_ref().map(under).or(s.ca_file);
        s.ca_verify_file = line.ca_verify_file.as_ref().map(under).or(s.ca_verify_file);
        s.crl_file = line.crl_file.as_ref().map(under).or(s.crl_file);
        s.no_ca_names |= line.no_ca_names;
        s
    }
}

/// One rustls configuration from a bind line's settings (or a `crt-list` line's overlay).
fn configure(
    ssl: &BindSsl,
    shared: &Shared<'_>,
    resolve: &Resolve<'_>,
    warnings: &mut Vec<String>,
) -> Result<(Arc<ServerConfig>, Option<Arc<ClientVerifier>>), String> {
    let mut provider = rustls::crypto::aws_lc_rs::default_provider();
    narrow(&mut provider, ssl, warnings)?;
    super::hkdf::extract_once(&mut provider);
    let (versions, warning) = params::versions(ssl.min_ver, ssl.max_ver, &ssl.disabled)?;
    let rsa = shared
        .store
        .index()
        .certs()
        .iter()
        .any(|c| c.algorithm() == rustls::SignatureAlgorithm::RSA);
    if let Some(w) = dhe_left_out(ssl, versions.contains(&&rustls::version::TLS12), rsa) {
        warnings.push(w);
    }
    warnings.extend(warning);
    let builder = ServerConfig::builder_with_provider(Arc::new(provider))
        .with_protocol_versions(&versions)
        .map_err(|e| format!("TLS settings: {e}"))?;
    let mut verifier = None;
    let builder = match (
        ssl.verify,
        ssl.ca_file.as_ref().or(ssl.ca_verify_file.as_ref()),
    ) {
        (Verify::None, _) => builder.with_no_client_auth(),
        (_, None) => {
            return Err(format!(
                "'verify {}' needs a 'ca-file' to check client certificates against",
                if ssl.verify == Verify::Optional {
                    "optional"
                } else {
                    "required"
                }
            ))
        }
        (verify, Some(ca)) => {
            let load = |kind, opt, f: &Option<PathBuf>| {
                f.as_deref().map(|f| resolve(kind, opt, f)).transpose()
            };
            let cas = load(Kind::Ca, "ca-file", &ssl.ca_file)?;
            let verify_only = load(Kind::Ca, "ca-verify-file", &ssl.ca_verify_file)?;
            let crls = load(Kind::Crl, "crl-file", &ssl.crl_file)?;
            let v = ClientVerifier::new(
                cas,
                verify_only,
                crls,
                verify == Verify::Required,
                ssl.crt_ignore_err.clone(),
                ssl.ca_ignore_err.clone(),
                !ssl.no_ca_names,
            )
            .map_err(|e| match &ssl.crl_file {
                Some(crl) if e.starts_with("CRL") => {
                    format!("unable to load CRL file '{}': {e}", crl.display())
                }
                _ => format!("unable to load CA file '{}': {e}", ca.display()),
            })?;
            let v = Arc::new(v);
            verifier = Some(Arc::clone(&v));
            builder.with_client_cert_verifier(v)
        }
    };
    let mut config = builder.with_cert_resolver(shared.store.clone());
    config.alpn_protocols = ssl.alpn.clone();
    config.ignore_client_order = !ssl.prefer_client_ciphers;
    config.session_storage = shared.session_storage.clone();
    config.max_fragment_size = ssl.max_record;
    if ssl.keylog {
        config.key_log = Arc::new(super::keylog::Stash);
    }
    if let Some(t) = &shared.ticketer {
        config.ticketer = t.clone();
    }
    Ok((Arc::new(config), verifier))
}

/// What DH parameters cannot make Bascule do (see `tls::dh`): with parameters configured,
/// TLS 1.2 on and an RSA certificate, HAProxy negotiates the DHE-RSA suites a `ciphers` list
/// names (with an ECDHE-capable client it picks ECDHE first; without, DHE); rustls has no DHE
/// suite. The bind runs with the ECDHE suites of its list (Mozilla's "intermediate"
/// configuration serves every current client with them) and a warning saying who is refused
/// (a list with no suite rustls implements is refused when the list is read).
fn dhe_left_out(ssl: &BindSsl, tls12: bool, rsa: bool) -> Option<String> {
    let (Some(dh), Some(list), true, true) = (&ssl.dh, &ssl.ciphers, tls12, rsa) else {
        return None;
    };
    let Ok(m) = params::tls12_suites(list) else {
        return None;
    };
    let dhe: Vec<&str> = m
        .left_out
        .iter()
        .map(String::as_str)
        .filter(|n| n.starts_with("DHE-RSA-") || n.starts_with("EDH-RSA-"))
        .collect();
    if dhe.is_empty() {
        return None;
    }
    Some(format!(
        "'ciphers' names {} and {dh} gives DH parameters: rustls implements no finite-field \
         Diffie-Hellman, so these DHE suites are not offered; a TLS 1.2 client that supports \
         none of the ECDHE suites of the list is refused (haproxy would negotiate DHE with it)",
        dhe.join(", ")
    ))
}

/// Applies `ciphers`, `ciphersuites` and `curves` to the provider.
fn narrow(
    provider: &mut CryptoProvider,
    ssl: &BindSsl,
    warnings: &mut Vec<String>,
) -> Result<(), String> {
    let is13 = |s: &rustls::SupportedCipherSuite| s.tls13().is_some();
    if let Some(list) = &ssl.ciphers {
        let m = params::tls12_suites(list).map_err(|e| format!("'ciphers': {e}"))?;
        if !m.left_out.is_empty() {
            warnings.push(format!(
                "'ciphers': rustls does not implement {}: left out",
                m.left_out.join(", ")
            ));
        }
        provider.cipher_suites.retain(is13);
        provider.cipher_suites.extend(m.kept);
    }
    if let Some(list) = &ssl.ciphersuites {
        let m = params::tls13_suites(list).map_err(|e| format!("'ciphersuites': {e}"))?;
        if !m.left_out.is_empty() {
            warnings.push(format!(
                "'ciphersuites': rustls does not implement {}: left out",
                m.left_out.join(", ")
            ));
        }
        provider.cipher_suites.retain(|s| !is13(s));
        let mut suites = m.kept;
        suites.append(&mut provider.cipher_suites);
        provider.cipher_suites = suites;
    }
    if let Some(list) = &ssl.curves {
        let m = params::groups(list).map_err(|e| format!("'curves': {e}"))?;
        if !m.left_out.is_empty() {
            warnings.push(format!(
                "'curves': rustls does not implement {}: left out",
                m.left_out.join(", ")
            ));
        }
        provider.kx_groups = m.kept;
    }
    Ok(())
}

pub(crate) use super::ca::{load_crls, load_roots};

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/tls")
            .join(name)
    }

    #[test]
    fn builds_with_the_defaults_and_with_narrowed_lists() {
        let mut ssl = BindSsl {
            crts: vec![CrtArg::Crt(fixture("www-rsa.pem"))],
            alpn: vec![b"h2".to_vec(), b"http/1.1".to_vec()],
            ..Default::default()
        };
        let b = build(&ssl).unwrap();
        assert!(b.warnings.is_empty());
        assert!(b.config.ignore_client_order);
        assert_eq!(b.config.alpn_protocols.len(), 2);
        ssl.ciphers = Some("ECDHE-RSA-AES128-GCM-SHA256:DHE-RSA-AES128-GCM-SHA256".into());
        ssl.curves = Some("X25519:P-256".into());
        let b = build(&ssl).unwrap();
        assert_eq!(b.warnings.len(), 1, "{:?}", b.warnings);
        assert!(b.warnings[0].contains("DHE-RSA-AES128-GCM-SHA256"));
        ssl.ciphers = Some("FAST".into());
        assert!(build(&ssl).unwrap_err().contains("'ciphers'"));
    }

    #[test]
    fn client_certificates_need_a_ca_file() {
        let mut ssl = BindSsl {
            crts: vec![CrtArg::Crt(fixture("www-ecdsa.pem"))],
            verify: Verify::Required,
            ..Default::default()
        };
        assert!(build(&ssl).unwrap_err().contains("ca-file"));
        ssl.ca_file = Some(fixture("ca.pem"));
        build(&ssl).unwrap();
        ssl.ca_file = Some(fixture("nope.pem"));
        assert!(build(&ssl).unwrap_err().contains("nope.pem"));
    }

    #[test]
    fn crt_lists_with_filters() {
        let dir = std::env::temp_dir().join(format!("bascule-crtlist-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for f in ["www-rsa.pem", "wild-ecdsa.pem"] {
            std::fs::copy(fixture(f), dir.join(f)).unwrap();
        }
        let list = dir.join("list.txt");
        std::fs::write(
            &list,
            "# comment\n\nwww-rsa.pem\nwild-ecdsa.pem [] *.example.org !secure.example.org\n",
        )
        .unwrap();
        let lines = crtlist::read(&list, None).unwrap();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0].crt, dir.join("www-rsa.pem"));
        // Under `crt-base` when there is one, as haproxy reads them.
        let based = crtlist::read(&list, Some(Path::new("/base"))).unwrap();
        assert_eq!(based[0].crt, Path::new("/base/www-rsa.pem"));
        assert_eq!(lines[1].filters, ["*.example.org", "!secure.example.org"]);
        let b = build(&BindSsl {
            crts: vec![CrtArg::CrtList(list.clone())],
            ..Default::default()
        })
        .unwrap();
        assert_eq!(b.store.index().certs().len(), 2);
        assert!(b.lines.load().is_empty());
        // A line with options gets a configuration of its own; the others share the bind's.
        std::fs::write(
            &list,
            "www-rsa.pem\nwild-ecdsa.pem [alpn h2 ssl-min-ver TLSv1.3] *.example.org\n",
        )
        .unwrap();
        let b = build(&BindSsl {
            crts: vec![CrtArg::CrtList(list.clone())],
            alpn: vec![b"http/1.1".to_vec()],
            ..Default::default()
        })
        .unwrap();
        assert_eq!(b.lines.load().len(), 1);
        assert_eq!(b.lines.load()[0].config.alpn_protocols, [b"h2".to_vec()]);
        assert_eq!(b.config.alpn_protocols, [b"http/1.1".to_vec()]);
        let schemes = [rustls::SignatureScheme::ECDSA_NISTP256_SHA256];
        assert_eq!(b.store.group(Some("a.example.org"), &schemes), 1);
        assert_eq!(b.store.group(Some("www.example.com"), &schemes), 0);
        assert_eq!(b.store.group(None, &schemes), 0);
        std::fs::write(&list, "www-rsa.pem\nwww-rsa.pem [ciphers NOPE]\n").unwrap();
        let e = build(&BindSsl {
            crts: vec![CrtArg::CrtList(list.clone())],
            ..Default::default()
        })
        .unwrap_err();
        assert!(e.contains("line 2") && e.contains("'ciphers'"), "{e}");
        std::fs::write(&list, "www-rsa.pem [ocsp-update on]\n").unwrap();
        let e = crtlist::read(&list, None).unwrap_err();
        assert!(e.contains("line 1") && e.contains("OCSP"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn defaults_fill_what_the_line_leaves_out() {
        let d = BindDefaults {
            ciphers: Some("ECDHE-RSA-AES128-GCM-SHA256".into()),
            options: BindSsl {
                min_ver: Some(Version::Tls12),
                disabled: vec![Version::Tls10],
                no_tls_tickets: true,
                ..Default::default()
            },
            crt_base: Some(PathBuf::from("/etc/certs")),
            ..Default::default()
        };
        let line = BindSsl {
            crts: vec![
                CrtArg::Crt("site.pem".into()),
                CrtArg::Crt("/abs.pem".into()),
                CrtArg::CrtList("list.txt".into()),
            ],
            min_ver: Some(Version::Tls13),
            disabled: vec![Version::Tls11],
            ciphersuites: Some("TLS_AES_128_GCM_SHA256".into()),
            ..Default::default()
        };
        let s = d.apply(&line);
        assert_eq!(s.ciphers.as_deref(), Some("ECDHE-RSA-AES128-GCM-SHA256"));
        assert_eq!(s.min_ver, Some(Version::Tls13));
        assert_eq!(s.disabled, [Version::Tls11, Version::Tls10]);
        assert!(s.no_tls_tickets);
        assert_eq!(
            s.crts,
            [
                CrtArg::Crt("/etc/certs/site.pem".into()),
                CrtArg::Crt("/abs.pem".into()),
                CrtArg::CrtList("list.txt".into())
            ]
        );
    }
}
