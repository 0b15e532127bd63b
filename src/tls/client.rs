//! The client side, for `server ... ssl`: a server line's TLS settings ([`ServerSsl`]) and the
//! rustls configuration they build ([`build`]).
//!
//! HAProxy's verification rules are kept: `verify required` is the default (global
//! `ssl-server-verify` changes it) and then needs a `ca-file`, or the load fails with HAProxy's
//! advice; the certificate's name is checked against the SNI sent (`sni`), else against
//! `verifyhost`, and not at all when neither gives a name — the chain is still checked.
//! `verify none` accepts any certificate (handshake signatures are still verified, so the peer
//! must hold the key of the certificate it shows).
//!
//! A connection's name is its SNI, else `verifyhost`, else the server's IP address, which
//! stands for "no name": rustls sends no SNI for an address, and the verifier does not check
//! an address against the certificate (HAProxy never does).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arc_swap::ArcSwap;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, SignatureScheme};

use super::params::{self, Version};

/// `verify none|required` on a server line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerVerify {
    None,
    Required,
}

/// The TLS settings of one `server` line (or `default-server`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServerSsl {
    /// `None`: the global `ssl-server-verify` (HAProxy's default: required).
    pub verify: Option<ServerVerify>,
    pub ca_file: Option<PathBuf>,
    pub crl_file: Option<PathBuf>,
    /// `verifyhost NAME`: the name the certificate must hold.
    pub verifyhost: Option<String>,
    /// `sni EXPR` is set: the name sent is checked when no `verifyhost` is given.
    pub sends_sni: bool,
    pub alpn: Vec<Vec<u8>>,
    /// `crt FILE`: a client certificate (and key) shown to the server.
    pub crt: Option<PathBuf>,
    /// `no-ssl-reuse`: a full handshake every time.
    pub no_ssl_reuse: bool,
    pub min_ver: Option<Version>,
    pub max_ver: Option<Version>,
    pub disabled: Vec<Version>,
    pub ciphers: Option<String>,
    pub ciphersuites: Option<String>,
    pub curves: Option<String>,
    /// `no-tls-tickets`: TLS 1.2 resumes by session id only.
    pub no_tls_tickets: bool,
    /// `ssl-load-extra-files`/`ssl-load-extra-del-ext`: where the `crt`'s key may be.
    pub extra: super::cert::Extra,
}

/// The global defaults every `server ... ssl` starts from: `ssl-default-server-ciphers`,
/// `-ciphersuites`, `-options` (version bounds and `no-tls-tickets`) and `ssl-server-verify`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServerDefaults {
    pub ciphers: Option<String>,
    pub ciphersuites: Option<String>,
    /// `ssl-default-server-options`.
    pub options: ServerSsl,
    /// `ssl-server-verify` (`None`: required, HAProxy's default).
    pub verify: Option<ServerVerify>,
}

impl ServerDefaults {
    /// A server line's settings completed by the defaults; relative `ca-file`/`crl-file`
    /// paths are taken under `ca_base`, a relative `crt` under `crt_base`, as HAProxy does.
    pub fn apply(
        &self,
        server: &ServerSsl,
        ca_base: Option<&Path>,
        crt_base: Option<&Path>,
    ) -> ServerSsl {
        let mut s = server.clone();
        s.ciphers = s.ciphers.or_else(|| self.ciphers.clone());
        s.ciphersuites = s.ciphersuites.or_else(|| self.ciphersuites.clone());
        s.min_ver = s.min_ver.or(self.options.min_ver);
        s.max_ver = s.max_ver.or(self.options.max_ver);
        for v in &self.options.disabled {
            if !s.disabled.contains(v) {
                s.disabled.push(*v);
            }
        }
        s.no_tls_tickets |= self.options.no_tls_tickets;
        s.extra = self.options.extra;
        s.verify = s.verify.or(self.verify);
        let under = |base: Option<&Path>, p: PathBuf| match base {
            Some(b) if p.is_relative() && p.as_os_str() != "@system-ca" => b.join(p),
            _ => p,
        };
        s.ca_file = s.ca_file.map(|p| under(ca_base, p));
        s.crl_file = s.crl_file.map(|p| under(ca_base, p));
        s.crt = s.crt.map(|p| under(crt_base, p));
        s
    }
}

/// What a `server ... ssl` (or `check-ssl`) line built at load: the rustls configuration of
/// its connections and of its checks, and how each connection finds its name.
#[derive(Debug, Clone)]
pub struct ServerTls {
    /// `ssl`: traffic goes over TLS (`None`: only the checks do, `check-ssl`).
    pub config: Option<Arc<ClientConfig>>,
    /// Checks go over TLS with this (`check-ssl`, or `ssl` without another `port`/`addr`);
    /// `check-alpn` and `check-sni` apply to it.
    pub check: Option<Arc<ClientConfig>>,
    /// `sni EXPR`, as written; its compiled form is the backend's `sni_exprs[sni_slot]`.
    pub sni: Option<String>,
    pub sni_slot: Option<usize>,
    /// `check-sni NAME`.
    pub check_sni: Option<String>,
    /// `verifyhost NAME`: the name checked when no SNI is sent.
    pub verifyhost: Option<String>,
    /// `crt FILE`: the certificate shown, replaceable with `set`/`commit ssl cert FILE`.
    pub crt: Option<Arc<ClientCertSlot>>,
}

/// Two builds are the same only if they are one (a configuration compares its servers).
impl PartialEq for ServerTls {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self, other)
    }
}

impl Eq for ServerTls {}

impl ServerTls {
    /// The name of a connection: its SNI (`sni` evaluated for it), else `verifyhost`, else
    /// the server's address (no SNI sent, no name checked).
    pub fn name(&self, sni: Option<&str>, addr: std::net::IpAddr) -> ServerName<'static> {
        server_name(sni.or(self.verifyhost.as_deref()), addr)
    }

    /// The name of a check connection: `check-sni`, else `verifyhost`, else the address.
    pub fn check_name(&self, addr: std::net::IpAddr) -> ServerName<'static> {
        server_name(
            self.check_sni.as_deref().or(self.verifyhost.as_deref()),
            addr,
        )
    }
}

/// Checks the chain, and the name only when the connection has one (an address stands for
/// none).
#[derive(Debug)]
struct ChainVerifier {
    inner: Arc<WebPkiServerVerifier>,
    algs: rustls::crypto::WebPkiSupportedAlgorithms,
    /// For X.509 version 1 server certificates, which webpki refuses: the chain checked as
    /// OpenSSL checks it (`tls::verify`), the name as HAProxy does. `None` when some CA of
    /// the file is one `tls::verify` cannot read (such a server fails as before).
    legacy: Option<super::verify::ClientVerifier>,
}

impl ServerCertVerifier for ChainVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let v1 = super::der::cert_fields(end_entity).is_some_and(|f| f.version == 1);
        if let (true, Some(legacy)) = (v1, &self.legacy) {
            let sent: Vec<&[u8]> = intermediates.iter().map(|c| c.as_ref()).collect();
            let now = i64::try_from(now.as_secs()).unwrap_or(i64::MAX);
            let (outcome, ok) = legacy.check(end_entity.as_ref(), &sent, now);
            if !ok {
                return Err(super::verify::refusal(outcome.result));
            }
            return match server_name {
                ServerName::DnsName(n) if !super::verify::answers_for(end_entity, n.as_ref()) => {
                    Err(rustls::Error::InvalidCertificate(
                        CertificateError::NotValidForName,
                    ))
                }
                _ => Ok(ServerCertVerified::assertion()),
            };
        }
        match self
            .inner
            .verify_server_cert(end_entity, intermediates, server_name, ocsp, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) if matches!(server_name, ServerName::IpAddress(_)) => {
                Ok(ServerCertVerified::assertion())
            }
            r => r,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        super::verify::tls12_signature(&self.algs, message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        super::verify::tls13_signature(&self.algs, message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

/// `verify none`: any certificate, but a handshake signed by its key.
#[derive(Debug)]
struct AnyCert(Arc<CryptoProvider>);

impl ServerCertVerifier for AnyCert {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        super::verify::tls12_signature(
            &self.0.signature_verification_algorithms,
            message,
            cert,
            dss,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        super::verify::tls13_signature(
            &self.0.signature_verification_algorithms,
            message,
            cert,
            dss,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// Builds the rustls client configuration of a server line. `default_verify` is the global
/// `ssl-server-verify` (HAProxy: required).
pub fn build(
    ssl: &ServerSsl,
    default_verify: ServerVerify,
) -> Result<(Arc<ClientConfig>, Vec<String>), String> {
    build_with(ssl, default_verify, None)
}

/// [`build`], the `crt` already loaded into `slot` (a server's traffic and checks share it).
pub fn build_with(
    ssl: &ServerSsl,
    default_verify: ServerVerify,
    slot: Option<Arc<ClientCertSlot>>,
) -> Result<(Arc<ClientConfig>, Vec<String>), String> {
    let mut warnings = Vec::new();
    let mut provider = rustls::crypto::aws_lc_rs::default_provider();
    if let Some(list) = &ssl.ciphers {
        let m = params::tls12_suites(list).map_err(|e| format!("'ciphers': {e}"))?;
        if !m.left_out.is_empty() {
            warnings.push(format!(
                "'ciphers': rustls does not implement {}: left out",
                m.left_out.join(", ")
            ));
        }
        provider.cipher_suites.retain(|s| s.tls13().is_some());
        provider.cipher_suites.extend(m.kept);
    }
    if let Some(list) = &ssl.ciphersuites {
        let m = params::tls13_suites(list).map_err(|e| format!("'ciphersuites': {e}"))?;
        provider.cipher_suites.retain(|s| s.tls13().is_none());
        let mut suites = m.kept;
        suites.append(&mut provider.cipher_suites);
        provider.cipher_suites = suites;
    }
    if let Some(list) = &ssl.curves {
        provider.kx_groups = params::groups(list)
            .map_err(|e| format!("'curves': {e}"))?
            .kept;
    }
    super::hkdf::extract_once(&mut provider);
    let provider = Arc::new(provider);
    let (versions, warning) = params::versions(ssl.min_ver, ssl.max_ver, &ssl.disabled)?;
    warnings.extend(warning);
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&versions)
        .map_err(|e| format!("TLS settings: {e}"))?;
    let verifier: Arc<dyn ServerCertVerifier> = match ssl.verify.unwrap_or(default_verify) {
        ServerVerify::None => Arc::new(AnyCert(provider.clone())),
        ServerVerify::Required => {
            let Some(ca) = &ssl.ca_file else {
                return Err("verify is enabled by default but no CA file specified. If you're running on a LAN where you're certain to trust the server's certificate, please set an explicit 'verify none' statement on the 'server' line, or use 'ssl-server-verify none' in the global section to disable server-side verifications by default.".into());
            };
            let roots = super::server::load_roots(ca)?;
            let mut v =
                WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone());
            if let Some(crl) = &ssl.crl_file {
                v = v.with_crls(super::server::load_crls(crl)?);
            }
            use super::cafiles::{Kind, Source};
            let crls = ssl
                .crl_file
                .as_deref()
                .map(|f| Source::load(Kind::Crl, f))
                .transpose()?;
            let legacy = super::verify::ClientVerifier::new(
                Some(Source::load(Kind::Ca, ca)?),
                None,
                crls,
                true,
                super::verify::Ignore::Nothing,
                super::verify::Ignore::Nothing,
                false,
            )
            .ok();
            Arc::new(ChainVerifier {
                legacy,
                algs: provider.signature_verification_algorithms,
                inner: v
                    .build()
                    .map_err(|e| super::ca::verifier_error(e, ca, ssl.crl_file.as_deref()))?,
            })
        }
    };
    let builder = builder
        .dangerous()
        .with_custom_certificate_verifier(verifier);
    let slot = match (&ssl.crt, slot) {
        (_, Some(slot)) => Some(slot),
        (None, None) => None,
        (Some(path), None) => Some(ClientCertSlot::new(super::cert::load_file_with(
            path, ssl.extra,
        )?)),
    };
    let mut config = match &slot {
        None => builder.with_no_client_auth(),
        Some(slot) => builder.with_client_cert_resolver(Arc::new(ClientCert(Arc::clone(slot)))),
    };
    config.alpn_protocols = ssl.alpn.clone();
    if let Some(slot) = &slot {
        config.resumption =
            rustls::client::Resumption::store(Arc::new(SlotSessions(Arc::clone(slot))));
    }
    if ssl.no_ssl_reuse {
        config.resumption = rustls::client::Resumption::disabled();
    } else if ssl.no_tls_tickets {
        config.resumption = std::mem::take(&mut config.resumption)
            .tls12_resumption(rustls::client::Tls12Resumption::SessionIdOnly);
    }
    config.enable_sni = ssl.sends_sni;
    Ok((Arc::new(config), warnings))
}

/// The certificate a `server ... crt` line shows when the server asks for one (loaded, and its
/// key matched, by `cert::load_file`, which reads the X.509 v1 certificates rustls's own
/// loader refuses), replaceable at run time (`set`/`commit ssl cert` on its file).
///
/// The sessions the server's connections resume are kept here too: a commit drops them, as
/// HAProxy does when it rebuilds the server's context, so that the next connection makes a
/// full handshake and shows the new certificate.
#[derive(Debug)]
pub struct ClientCertSlot {
    current: ArcSwap<super::cert::Cert>,
    sessions: ArcSwap<rustls::client::ClientSessionMemoryCache>,
}

/// How many server sessions a slot keeps (rustls's default).
const SLOT_SESSIONS: usize = 256;

impl ClientCertSlot {
    pub fn new(cert: super::cert::Cert) -> Arc<ClientCertSlot> {
        Arc::new(ClientCertSlot {
            current: ArcSwap::from_pointee(cert),
            sessions: ArcSwap::from_pointee(rustls::client::ClientSessionMemoryCache::new(
                SLOT_SESSIONS,
            )),
        })
    }

    /// The certificate shown now.
    pub fn current(&self) -> Arc<super::cert::Cert> {
        self.current.load_full()
    }

    /// Shows `cert` from the next handshake on; sessions made with the old one are dropped.
    pub fn replace(&self, cert: Arc<super::cert::Cert>) {
        self.current.store(cert);
        self.sessions
            .store(Arc::new(rustls::client::ClientSessionMemoryCache::new(
                SLOT_SESSIONS,
            )));
    }
}

#[derive(Debug)]
struct ClientCert(Arc<ClientCertSlot>);

impl rustls::client::ResolvesClientCert for ClientCert {
    fn resolve(
        &self,
        _root_hint_subjects: &[&[u8]],
        sigschemes: &[SignatureScheme],
    ) -> Option<Arc<rustls::sign::CertifiedKey>> {
        // A key that cannot sign with any scheme the server accepts is not offered.
        let cert = self.0.current.load();
        cert.key
            .key
            .choose_scheme(sigschemes)
            .is_some()
            .then(|| Arc::clone(&cert.key))
    }

    fn has_certs(&self) -> bool {
        true
    }
}

/// The sessions of a slot, for rustls: whichever cache the slot holds now.
#[derive(Debug)]
struct SlotSessions(Arc<ClientCertSlot>);

impl rustls::client::ClientSessionStore for SlotSessions {
    fn set_kx_hint(&self, server_name: ServerName<'static>, group: rustls::NamedGroup) {
        self.0.sessions.load().set_kx_hint(server_name, group)
    }
    fn kx_hint(&self, server_name: &ServerName<'_>) -> Option<rustls::NamedGroup> {
        self.0.sessions.load().kx_hint(server_name)
    }
    fn set_tls12_session(
        &self,
        server_name: ServerName<'static>,
        value: rustls::client::Tls12ClientSessionValue,
    ) {
        self.0.sessions.load().set_tls12_session(server_name, value)
    }
    fn tls12_session(
        &self,
        server_name: &ServerName<'_>,
    ) -> Option<rustls::client::Tls12ClientSessionValue> {
        self.0.sessions.load().tls12_session(server_name)
    }
    fn remove_tls12_session(&self, server_name: &ServerName<'static>) {
        self.0.sessions.load().remove_tls12_session(server_name)
    }
    fn insert_tls13_ticket(
        &self,
        server_name: ServerName<'static>,
        value: rustls::client::Tls13ClientSessionValue,
    ) {
        self.0
            .sessions
            .load()
            .insert_tls13_ticket(server_name, value)
    }
    fn take_tls13_ticket(
        &self,
        server_name: &ServerName<'static>,
    ) -> Option<rustls::client::Tls13ClientSessionValue> {
        self.0.sessions.load().take_tls13_ticket(server_name)
    }
}

/// The name a connection presents: the SNI when one is sent, else the server's address
/// (rustls needs a name; no SNI goes out for an address).
pub fn server_name(sni: Option<&str>, addr: std::net::IpAddr) -> ServerName<'static> {
    sni.and_then(|s| ServerName::try_from(s.to_string()).ok())
        .unwrap_or(ServerName::IpAddress(addr.into()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tls::server::{BindSsl, CrtArg};
    use std::path::Path;

    fn fixture(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/tls")
            .join(name)
    }

    /// A handshake in memory between `client` and a bind serving www-ecdsa.pem.
    fn handshake(
        client: Arc<ClientConfig>,
        name: ServerName<'static>,
    ) -> Result<(), rustls::Error> {
        let server = crate::tls::server::build(&BindSsl {
            crts: vec![CrtArg::Crt(fixture("www-ecdsa.pem"))],
            ..Default::default()
        })
        .unwrap();
        let mut c = rustls::ClientConnection::new(client, name).unwrap();
        let mut s = rustls::ServerConnection::new(server.config).unwrap();
        for _ in 0..10 {
            let mut buf = Vec::new();
            c.write_tls(&mut buf).unwrap();
            s.read_tls(&mut &buf[..]).unwrap();
            s.process_new_packets()?;
            buf.clear();
            s.write_tls(&mut buf).unwrap();
            c.read_tls(&mut &buf[..]).unwrap();
            c.process_new_packets()?;
            if !c.is_handshaking() && !s.is_handshaking() {
                return Ok(());
            }
        }
        Err(rustls::Error::General("no end".into()))
    }

    fn ip() -> ServerName<'static> {
        server_name(None, "127.0.0.1".parse().unwrap())
    }

    #[test]
    fn verify_required_needs_a_ca_and_checks_the_chain() {
        let ssl = ServerSsl::default();
        let e = build(&ssl, ServerVerify::Required).unwrap_err();
        assert!(e.contains("verify none"), "{e}");
        // A CA: the chain checks out; no SNI and no verifyhost: the name is not checked.
        let ssl = ServerSsl {
            ca_file: Some(fixture("ca.pem")),
            ..Default::default()
        };
        let (c, _) = build(&ssl, ServerVerify::Required).unwrap();
        handshake(c, ip()).unwrap();
        // With a name to check, the wrong one fails, the right one passes.
        let ssl = ServerSsl {
            ca_file: Some(fixture("ca.pem")),
            sends_sni: true,
            ..Default::default()
        };
        let (c, _) = build(&ssl, ServerVerify::Required).unwrap();
        assert!(handshake(
            c.clone(),
            server_name(Some("other.test"), [127, 0, 0, 1].into())
        )
        .is_err());
        handshake(
            c,
            server_name(Some("www.example.com"), [127, 0, 0, 1].into()),
        )
        .unwrap();
    }

    #[test]
    fn verify_none_takes_any_certificate_and_a_wrong_ca_fails() {
        let (c, _) = build(&ServerSsl::default(), ServerVerify::None).unwrap();
        handshake(c, ip()).unwrap();
        let dir = std::env::temp_dir().join(format!("bascule-client-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // The leaf as the only "CA": the chain does not lead to it.
        let pem = std::fs::read_to_string(fixture("www-rsa.pem")).unwrap();
        let end = pem.find("-----END CERTIFICATE-----").unwrap() + 25;
        std::fs::write(dir.join("wrong.pem"), &pem[..end]).unwrap();
        let ssl = ServerSsl {
            ca_file: Some(dir.join("wrong.pem")),
            ..Default::default()
        };
        let (c, _) = build(&ssl, ServerVerify::Required).unwrap();
        assert!(handshake(c, ip()).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_client_certificate_loads() {
        let ssl = ServerSsl {
            crt: Some(fixture("split.pem")),
            verify: Some(ServerVerify::None),
            no_ssl_reuse: true,
            alpn: vec![b"http/1.1".to_vec()],
            ..Default::default()
        };
        let (c, _) = build(&ssl, ServerVerify::Required).unwrap();
        assert!(c.client_auth_cert_resolver.has_certs());
        handshake(c, ip()).unwrap();
    }
}
