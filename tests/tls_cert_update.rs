//! Certificates rotated without a reload, side by side with haproxy 2.6: the same `bind ...
//! ssl crt` / `crt-list` configuration, the same `show ssl cert`, `set ssl cert` (PEM payloads
//! through the CLI's `<<` syntax), `commit ssl cert` and `abort ssl cert` lines, compared reply
//! by reply; and after each step, the certificate a new TLS handshake gets for a name.
//!
//! Bascule answers through its binary when it accepts the configuration. While its listeners
//! refuse `ssl` at load ("listeners do not terminate TLS yet"), the same commands go to the
//! library's certificate registry (`tls::cli::Certs`, what the stats socket calls) over stores
//! built from the same bind settings, and the handshake check reads the store rustls resolves
//! through. The CLI's framing of payloads is compared over real sockets in any case, with a
//! configuration without TLS.
#![allow(clippy::disallowed_methods)]

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use support::{eventually, free_port, TempDir, BIN, HAPROXY};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/tls")
        .join(name)
}

fn pem(name: &str) -> String {
    std::fs::read_to_string(fixture(name)).unwrap()
}

/// The certificate blocks of a bundle, and its key block.
fn split_bundle(name: &str) -> (String, String) {
    let p = pem(name);
    let at = p.find("-----BEGIN PRIVATE KEY-----").unwrap();
    (p[..at].to_string(), p[at..].to_string())
}

/// Sends raw bytes to a stats socket then closes the sending side (as `printf ... | socat`
/// does), returns everything it answered before closing.
fn raw(sock: &Path, bytes: &str) -> String {
    let mut s = UnixStream::connect(sock).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(bytes.as_bytes()).unwrap();
    let _ = s.shutdown(std::net::Shutdown::Write);
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out
}

/// One CLI step: a command, and its payload if it takes one.
fn wire(cmd: &str, payload: Option<&str>) -> String {
    match payload {
        Some(p) => format!("{cmd} <<\n{}\n\n", p.trim_end()),
        None => format!("{cmd}\n"),
    }
}

fn spawn_haproxy(cfg: &Path) -> Child {
    Command::new(HAPROXY)
        .arg("-db")
        .arg("-f")
        .arg(cfg)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

struct Kill(Child);

impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn payload_framing_matches_haproxy() {
    if !support::have_haproxy("payload_framing_matches_haproxy") {
        return;
    }
    let dir = TempDir::new("cli-payload");
    let (hport, bport) = (free_port(), free_port());
    let (hsock, bsock) = (dir.path("h.sock"), dir.path("b.sock"));
    let cfg = |port: u16, sock: &Path| {
        format!(
            "global\n    stats socket {} level admin\ndefaults\n    mode http\n    timeout connect 1s\n    timeout client 2s\n    timeout server 2s\nfrontend fe\n    bind 127.0.0.1:{port}\n    http-request return status 200\n",
            sock.display()
        )
    };
    std::fs::write(dir.path("h.cfg"), cfg(hport, &hsock)).unwrap();
    let _h = Kill(spawn_haproxy(&dir.path("h.cfg")));
    let _b = support::Proxy::start(&cfg(bport, &bsock), bport, &[]);
    assert!(eventually(Duration::from_secs(5), || UnixStream::connect(
        &hsock
    )
    .is_ok()));
    let cert = pem("www-rsa.pem");
    let nope = dir.path("nope.pem").display().to_string();
    for bytes in [
        "show ssl cert\n".to_string(),
        format!("set ssl cert {nope} <<\n{cert}\n"),
        // `<<` glued to the file name still opens a payload, but is no payload marker.
        format!("set ssl cert {nope}<<\n{cert}\nabort ssl cert {nope}\n"),
        // A payload the peer cuts is dropped unanswered.
        format!("set ssl cert {nope} <<\n{cert}"),
        // Commands that take no payload ignore one.
        "show ssl cert <<\nignored\n\nshow ssl cert\n".into(),
        "show ssl cert; abort ssl cert x; commit ssl cert\n".into(),
        "set ssl cert\nset ssl cert x\nabort ssl cert\n".into(),
        format!("show ssl cert {nope}\nshow ssl cert *{nope}\n"),
        // Interactive: a `+ ` prompt per line of payload.
        format!("prompt\nset ssl cert {nope} <<\na\nb\n\nquit\n"),
        "prompt\nset ssl cert x <<\n\nquit\n".into(),
    ] {
        assert_eq!(
            raw(&bsock, &bytes),
            raw(&hsock, &bytes),
            "reply to {bytes:?}"
        );
    }
}

/// A TLS client that accepts any certificate: the tests look at which one is served.
#[derive(Debug)]
struct AnyCert(Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for AnyCert {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }
    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }
    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// The SHA-1 of the leaf a new handshake with `name` gets on `port`, or "refused".
fn served(port: u16, name: &str) -> String {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let cfg = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .unwrap()
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AnyCert(provider)))
        .with_no_client_auth();
    let mut conn = rustls::ClientConnection::new(
        Arc::new(cfg),
        ServerName::try_from(name.to_string()).unwrap(),
    )
    .unwrap();
    let mut sock = TcpStream::connect(("127.0.0.1", port)).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    while conn.is_handshaking() {
        if conn.complete_io(&mut sock).is_err() {
            return "refused".into();
        }
    }
    bascule::tls::show::sha1_fingerprint(&conn.peer_certificates().unwrap()[0])
}

fn fingerprint(name: &str) -> String {
    let leaf = CertificateDer::from_pem_file(fixture(name)).unwrap();
    bascule::tls::show::sha1_fingerprint(&leaf)
}

/// Bascule's side: its binary, or its certificate registry in process.
enum Ours {
    Binary {
        _proxy: support::Proxy,
        sock: PathBuf,
        ports: [u16; 2],
    },
    InProcess {
        certs: bascule::tls::cli::Certs,
        stores: [Arc<bascule::tls::CertStore>; 2],
    },
}

impl Ours {
    fn ask(&self, cmd: &str, payload: Option<&str>) -> String {
        match self {
            Ours::Binary { sock, .. } => raw(sock, &wire(cmd, payload)),
            Ours::InProcess { certs, .. } => {
                let words: Vec<&str> = cmd.split_whitespace().collect();
                let arg = words.get(3).copied();
                let text = match words[..3] {
                    ["show", "ssl", "cert"] => certs.show(arg),
                    ["set", "ssl", "cert"] => certs.set(arg, payload),
                    ["commit", "ssl", "cert"] => certs.commit(arg),
                    ["abort", "ssl", "cert"] => certs.abort(arg),
                    _ => panic!("{cmd}"),
                };
                format!("{text}\n")
            }
        }
    }

    /// What a new handshake on bind `i` gets for `name` (the SHA-1 of the leaf, or
    /// "refused").
    fn served(&self, i: usize, name: &str) -> String {
        match self {
            Ours::Binary { ports, .. } => served(ports[i], name),
            Ours::InProcess { stores, .. } => {
                let schemes = [
                    rustls::SignatureScheme::ECDSA_NISTP256_SHA256,
                    rustls::SignatureScheme::ECDSA_NISTP384_SHA384,
                    rustls::SignatureScheme::RSA_PSS_SHA256,
                ];
                stores[i]
                    .select(Some(name), &schemes)
                    .map(|c| bascule::tls::show::sha1_fingerprint(&c.key.cert[0]))
                    .unwrap_or_else(|| "refused".into())
            }
        }
    }
}

#[test]
fn certificates_rotate_like_haproxys() {
    if !support::have_haproxy("certificates_rotate_like_haproxys") {
        return;
    }
    let dir = TempDir::new("cert-update");
    for f in [
        "www-rsa.pem",
        "wild-ecdsa.pem",
        "split.pem",
        "split.pem.key",
    ] {
        std::fs::copy(fixture(f), dir.path(f)).unwrap();
    }
    let base = dir.0.display().to_string();
    let list = dir.path("list.txt");
    std::fs::write(&list, format!("{base}/www-rsa.pem\n{base}/split.pem\n")).unwrap();
    let cfg = |ports: [u16; 2], sock: &Path| {
        format!(
            "global\n    stats socket {} level admin\n    crt-base {base}\ndefaults\n    mode http\n    timeout connect 1s\n    timeout client 2s\n    timeout server 2s\nfrontend fe\n    bind 127.0.0.1:{} ssl crt www-rsa.pem crt wild-ecdsa.pem\n    bind 127.0.0.1:{} ssl strict-sni crt-list {}\n    http-request return status 200\n",
            sock.display(),
            ports[0],
            ports[1],
            list.display()
        )
    };
    let hports = [free_port(), free_port()];
    let hsock = dir.path("h.sock");
    std::fs::write(dir.path("h.cfg"), cfg(hports, &hsock)).unwrap();
    let _h = Kill(spawn_haproxy(&dir.path("h.cfg")));
    assert!(eventually(Duration::from_secs(5), || {
        UnixStream::connect(&hsock).is_ok() && TcpStream::connect(("127.0.0.1", hports[1])).is_ok()
    }));

    let bports = [free_port(), free_port()];
    let bsock = dir.path("b.sock");
    let bcfg = dir.path("b.cfg");
    std::fs::write(&bcfg, cfg(bports, &bsock)).unwrap();
    let check = Command::new(BIN)
        .arg("-c")
        .arg("-f")
        .arg(&bcfg)
        .output()
        .unwrap();
    let refused =
        String::from_utf8_lossy(&check.stderr).contains("listeners do not terminate TLS yet");
    let ours = if refused {
        use bascule::tls::server::{build, BindSsl, CrtArg};
        let a = build(&BindSsl {
            crts: vec![
                CrtArg::Crt(dir.path("www-rsa.pem")),
                CrtArg::Crt(dir.path("wild-ecdsa.pem")),
            ],
            ..Default::default()
        })
        .unwrap();
        let b = build(&BindSsl {
            crts: vec![CrtArg::CrtList(list.clone())],
            strict_sni: true,
            ..Default::default()
        })
        .unwrap();
        Ours::InProcess {
            certs: bascule::tls::cli::Certs::new([&a.store, &b.store]),
            stores: [a.store.clone(), b.store.clone()],
        }
    } else {
        assert!(
            check.status.success(),
            "{}",
            String::from_utf8_lossy(&check.stderr)
        );
        let proxy = support::Proxy::start(&std::fs::read_to_string(&bcfg).unwrap(), bports[1], &[]);
        Ours::Binary {
            _proxy: proxy,
            sock: bsock,
            ports: bports,
        }
    };
    let haproxy = |cmd: &str, payload: Option<&str>| raw(&hsock, &wire(cmd, payload));
    let same = |cmd: &str, payload: Option<&str>| {
        let theirs = haproxy(cmd, payload);
        assert_eq!(ours.ask(cmd, payload), theirs, "reply to '{cmd}'");
        theirs
    };
    // Which certificate new handshakes get, on haproxy and on Bascule: (bind, name, file).
    let serves = |expect: &[(usize, &str, &str)]| {
        for &(i, name, file) in expect {
            let want = if file == "refused" {
                file.to_string()
            } else {
                fingerprint(file)
            };
            assert_eq!(served(hports[i], name), want, "haproxy, bind {i}, {name}");
            assert_eq!(ours.served(i, name), want, "bascule, bind {i}, {name}");
        }
    };

    let www = format!("{base}/www-rsa.pem");
    let split = format!("{base}/split.pem");
    let (rsa_cert, rsa_key) = split_bundle("www-rsa.pem");
    let (_, ec_key) = split_bundle("www-ecdsa.pem");
    let (_, next_key) = split_bundle("next-www.pem");
    let listing = same("show ssl cert", None);
    assert!(listing.starts_with("# filename\n"), "{listing}");
    same(&format!("show ssl cert {www}"), None);
    same(&format!("show ssl cert {split}"), None);
    serves(&[
        (0, "www.example.com", "www-rsa.pem"),
        (0, "a.example.org", "wild-ecdsa.pem"),
        (1, "www.example.com", "www-rsa.pem"),
        (1, "split.example.net", "split.pem"),
        (1, "other.example.net", "refused"),
    ]);

    // Refused payloads: nothing changes.
    same(&format!("set ssl cert {www}"), Some("garbage"));
    same(&format!("set ssl cert {split}.key"), Some("garbage"));
    same(&format!("set ssl cert {base}/nope.pem"), Some(&rsa_cert));
    same(&format!("set ssl cert {www}"), Some(&rsa_cert));
    same("show ssl cert", None);
    same(&format!("show ssl cert *{www}"), None);
    same(&format!("commit ssl cert {www}"), None);
    same(
        &format!("set ssl cert {www}"),
        Some(&format!("{rsa_cert}{ec_key}")),
    );
    same(&format!("commit ssl cert {www}"), None);
    same(&format!("abort ssl cert {split}"), None);
    serves(&[(0, "www.example.com", "www-rsa.pem")]);

    // A rotation: every bind that uses the file serves the new certificate.
    same(&format!("set ssl cert {www}"), Some(&pem("next-www.pem")));
    same(&format!("show ssl cert *{www}"), None);
    serves(&[(0, "www.example.com", "www-rsa.pem")]);
    same(&format!("commit ssl cert {split}"), None);
    let done = same(&format!("commit ssl cert {www}"), None);
    assert_eq!(done, format!("Committing {www}..\nSuccess!\n\n"));
    same(&format!("show ssl cert {www}"), None);
    same("show ssl cert", None);
    serves(&[
        (0, "www.example.com", "next-www.pem"),
        (0, "a.example.org", "wild-ecdsa.pem"),
        (1, "example.com", "next-www.pem"),
        (1, "split.example.net", "split.pem"),
    ]);

    // FILE.key: the key alone, checked against the certificate at commit.
    same(&format!("set ssl cert {www}.key"), Some(&rsa_key));
    same(&format!("commit ssl cert {www}"), None);
    same(&format!("set ssl cert {www}.key"), Some(&next_key));
    same(&format!("commit ssl cert {www}"), None);

    // Names change with the certificate: the SNI index follows.
    same(&format!("set ssl cert {www}"), Some(&pem("other-rsa.pem")));
    same(&format!("commit ssl cert {www}"), None);
    serves(&[
        (1, "other.example.net", "other-rsa.pem"),
        (1, "www.example.com", "refused"),
        (0, "www.example.com", "other-rsa.pem"),
    ]);
    same(&format!("abort ssl cert {www}"), None);
    same(&format!("show ssl cert {www}"), None);
}
