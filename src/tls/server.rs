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
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, CertificateRevocationListDer};
use rustls::server::{ServerSessionMemoryCache, WebPkiClientVerifier};
use rustls::ServerConfig;

use super::params::{self, Version};
use super::sni::{CertIndex, CertStore};

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
    pub crl_file: Option<PathBuf>,
    pub no_tls_tickets: bool,
    /// `tls-ticket-keys FILE`: tickets sealed with the file's keys (see [`super::tickets`]).
    pub tls_ticket_keys: Option<PathBuf>,
    pub prefer_client_ciphers: bool,
    /// `tune.ssl.cachesize`: sessions kept for resumption without a ticket (0: none).
    pub session_cache: Option<usize>,
    /// `tune.ssl.maxrecord`: the largest record payload sent.
    pub max_record: Option<usize>,
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
        s.prefer_client_ciphers |= self.options.prefer_client_ciphers;
        s.strict_sni |= self.options.strict_sni;
        let under = |base: &Option<PathBuf>, p: &Path| match base {
            Some(b) if p.is_relative() => b.join(p),
            _ => p.to_path_buf(),
        };
        for c in &mut s.crts {
            match c {
                CrtArg::Crt(p) | CrtArg::CrtList(p) => *p = under(&self.crt_base, p),
            }
        }
        s.ca_file = s.ca_file.map(|p| under(&self.ca_base, &p));
        s.crl_file = s.crl_file.map(|p| under(&self.ca_base, &p));
        s
    }
}

/// What [`build`] makes: the configuration rustls runs, and warnings about what it narrowed.
#[derive(Debug)]
pub struct Built {
    pub config: Arc<ServerConfig>,
    pub store: Arc<CertStore>,
    pub warnings: Vec<String>,
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

/// Loads the certificates and builds the rustls configuration of a bind line.
pub fn build(ssl: &BindSsl) -> Result<Built, String> {
    let mut warnings = Vec::new();
    let mut store = CertIndex::new(ssl.strict_sni);
    for arg in &ssl.crts {
        match arg {
            CrtArg::Crt(path) => {
                for cert in super::cert::load(path)? {
                    store.add(cert, &[]);
                }
            }
            CrtArg::CrtList(path) => {
                for line in read_crt_list(path)? {
                    for cert in super::cert::load(&line.crt)? {
                        store.add(cert, &line.filters);
                    }
                }
            }
        }
    }
    if store.is_empty() {
        return Err("'ssl' needs at least one certificate ('crt FILE' or 'crt-list FILE')".into());
    }
    let mut provider = rustls::crypto::aws_lc_rs::default_provider();
    narrow(&mut provider, ssl, &mut warnings)?;
    let (versions, warning) = params::versions(ssl.min_ver, ssl.max_ver, &ssl.disabled)?;
    warnings.extend(warning);
    let builder = ServerConfig::builder_with_provider(Arc::new(provider))
        .with_protocol_versions(&versions)
        .map_err(|e| format!("TLS settings: {e}"))?;
    let builder = match (ssl.verify, &ssl.ca_file) {
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
            let roots = load_roots(ca)?;
            let mut v = WebPkiClientVerifier::builder(Arc::new(roots));
            if let Some(crl) = &ssl.crl_file {
                v = v.with_crls(load_crls(crl)?);
            }
            if verify == Verify::Optional {
                v = v.allow_unauthenticated();
            }
            builder.with_client_cert_verifier(
                v.build()
                    .map_err(|e| format!("'ca-file {}': {e}", ca.display()))?,
            )
        }
    };
    let store = Arc::new(CertStore::from(store));
    let mut config = builder.with_cert_resolver(store.clone());
    config.alpn_protocols = ssl.alpn.clone();
    config.ignore_client_order = !ssl.prefer_client_ciphers;
    config.session_storage = match ssl.session_cache.unwrap_or(SESSION_CACHE) {
        0 => Arc::new(rustls::server::NoServerSessionStorage {}),
        n => ServerSessionMemoryCache::new(n),
    };
    config.max_fragment_size = ssl.max_record;
    match (&ssl.tls_ticket_keys, ssl.no_tls_tickets) {
        (Some(path), false) => {
            config.ticketer = Arc::new(super::tickets::FileTickets::load(path)?);
        }
        (Some(path), true) => warnings.push(format!(
            "'tls-ticket-keys {}' has no effect with 'no-tls-tickets'",
            path.display()
        )),
        (None, false) => {
            config.ticketer = rustls::crypto::aws_lc_rs::Ticketer::new()
                .map_err(|e| format!("TLS session tickets: {e}"))?;
        }
        (None, true) => {}
    }
    Ok(Built {
        config: Arc::new(config),
        store,
        warnings,
    })
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

pub(crate) fn load_roots(path: &Path) -> Result<rustls::RootCertStore, String> {
    let shown = path.display();
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
        .map_err(|e| format!("unable to load CA file '{shown}': {e}"))?
        .collect::<Result<_, _>>()
        .map_err(|e| format!("unable to load CA file '{shown}': {e}"))?;
    if certs.is_empty() {
        return Err(format!(
            "unable to load CA file '{shown}': no certificate in it"
        ));
    }
    let mut roots = rustls::RootCertStore::empty();
    for c in certs {
        roots
            .add(c)
            .map_err(|e| format!("CA file '{shown}': {e}"))?;
    }
    Ok(roots)
}

pub(crate) fn load_crls(path: &Path) -> Result<Vec<CertificateRevocationListDer<'static>>, String> {
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

/// One line of a `crt-list` file: `CRTFILE [[OPTIONS]] [[!]SNIFILTER...]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CrtListLine {
    pub crt: PathBuf,
    pub filters: Vec<String>,
}

/// Reads a `crt-list` file. Per-line SSL options (`[alpn h2 ...]`) are refused for now: one
/// rustls configuration serves a bind line.
pub fn read_crt_list(path: &Path) -> Result<Vec<CrtListLine>, String> {
    let shown = path.display();
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("unable to load crt-list '{shown}': {e}"))?;
    let mut out = Vec::new();
    for (n, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let at = format!("crt-list '{shown}' line {}", n + 1);
        let mut words = line.split_whitespace();
        let crt = words.next().unwrap_or_default();
        let rest: Vec<&str> = words.collect();
        if rest.first().is_some_and(|w| w.starts_with('[')) {
            let opts = line[line.find('[').unwrap_or(0)..]
                .split(']')
                .next()
                .unwrap_or("")
                .trim_start_matches('[')
                .trim();
            if !opts.is_empty() {
                return Err(format!(
                    "{at}: per-certificate SSL options '[{opts}]' are not supported yet (set them on the bind line)"
                ));
            }
        }
        let filters = match line.find(']') {
            Some(i) if line.contains('[') => line[i + 1..].split_whitespace().collect(),
            _ => rest,
        };
        let crt_path = Path::new(crt);
        let crt = if crt_path.is_relative() && !crt_path.exists() {
            path.parent().unwrap_or(Path::new(".")).join(crt_path)
        } else {
            crt_path.to_path_buf()
        };
        out.push(CrtListLine {
            crt,
            filters: filters.into_iter().map(str::to_string).collect(),
        });
    }
    if out.is_empty() {
        return Err(format!("crt-list '{shown}' holds no certificate"));
    }
    Ok(out)
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
        let lines = read_crt_list(&list).unwrap();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0].crt, dir.join("www-rsa.pem"));
        assert_eq!(lines[1].filters, ["*.example.org", "!secure.example.org"]);
        let b = build(&BindSsl {
            crts: vec![CrtArg::CrtList(list.clone())],
            ..Default::default()
        })
        .unwrap();
        assert_eq!(b.store.index().certs().len(), 2);
        std::fs::write(&list, "www-rsa.pem [alpn h2] www.example.com\n").unwrap();
        let e = read_crt_list(&list).unwrap_err();
        assert!(e.contains("line 1") && e.contains("alpn h2"), "{e}");
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
                CrtArg::Crt("/abs.pem".into())
            ]
        );
    }
}
