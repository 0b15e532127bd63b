//! `mode tcp` SNI routing without terminating TLS (issue 18, acceptance 3): the classic
//!
//! ```text
//! tcp-request inspect-delay 5s
//! tcp-request content accept if { req.ssl_hello_type 1 }
//! use_backend be_a if { req.ssl_sni -i www.example.com }
//! use_backend be_b if { req.ssl_sni -m end .example.org }
//! default_backend be_default
//! ```
//!
//! run through Bascule and through haproxy 2.6 side by side, with real TLS clients (rustls) and
//! TLS backends (rustls, each with the certificate of its names, each saying its name once the
//! handshake is done). For each scenario the test checks which backend got the connection,
//! that the client's ClientHello reached it byte for byte, that the client's handshake
//! succeeded against that backend's certificate, and the log line (`%[capture.req.hdr(0)]`
//! of `tcp-request content capture req.ssl_sni`, and a variable set from `req.ssl_sni`); then
//! that both proxies gave the same answers. Scenarios: the two SNI routes, an unknown name,
//! a ClientHello split over two TCP segments, a client that speaks HTTP instead of TLS, and a
//! silent client (the inspect delay runs out), plus the other `req.ssl_*` fetches read into a
//! log line.
#![allow(clippy::disallowed_methods)]

mod support;

use std::io::{ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream, UdpSocket};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use support::{free_port, TempDir, BIN, HAPROXY};

fn fixture(name: &str) -> String {
    format!("{}/tests/tls/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// What a TLS backend saw of one connection: every byte received (from the first), and
/// whether the handshake completed.
#[derive(Clone, Debug)]
struct Conn {
    bytes: Vec<u8>,
    handshake: bool,
}

/// A TLS server on its own thread: completes the handshake with `cert`, writes its name, and
/// closes; records what each connection sent.
struct TlsBackend {
    port: u16,
    /// Connections accepted so far.
    accepted: Arc<AtomicUsize>,
    /// Connections finished, in the order they finished.
    conns: Arc<Mutex<Vec<Conn>>>,
}

/// A reader that keeps a copy of what it reads.
struct Recording<'a> {
    s: &'a TcpStream,
    seen: Vec<u8>,
}

impl Read for Recording<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.s.read(buf)?;
        self.seen.extend_from_slice(&buf[..n]);
        Ok(n)
    }
}

impl Write for Recording<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.s.write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl TlsBackend {
    fn start(name: &'static str, cert: &str) -> TlsBackend {
        let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(fixture(cert))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        // The key is in the bundle, or beside it in FILE.key.
        let key = PrivateKeyDer::from_pem_file(fixture(cert))
            .or_else(|_| PrivateKeyDer::from_pem_file(fixture(&format!("{cert}.key"))))
            .unwrap();
        let cfg = Arc::new(
            rustls::ServerConfig::builder()
                .with_no_client_auth()
                .with_single_cert(chain, key)
                .unwrap(),
        );
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let conns = Arc::new(Mutex::new(Vec::new()));
        let accepted = Arc::new(AtomicUsize::new(0));
        let (seen, count) = (conns.clone(), accepted.clone());
        thread::spawn(move || {
            for c in listener.incoming() {
                let Ok(c) = c else { return };
                count.fetch_add(1, Ordering::SeqCst);
                let (cfg, seen) = (cfg.clone(), seen.clone());
                thread::spawn(move || serve_tls(c, name, cfg, &seen));
            }
        });
        TlsBackend {
            port,
            accepted,
            conns,
        }
    }

    fn conns(&self) -> Vec<Conn> {
        self.conns.lock().unwrap().clone()
    }
}

fn serve_tls(c: TcpStream, name: &str, cfg: Arc<rustls::ServerConfig>, seen: &Mutex<Vec<Conn>>) {
    c.set_read_timeout(Some(Duration::from_secs(8))).unwrap();
    let mut io = Recording {
        s: &c,
        seen: Vec::new(),
    };
    let mut tls = rustls::ServerConnection::new(cfg).unwrap();
    let mut handshake = true;
    while tls.is_handshaking() {
        match tls.complete_io(&mut io) {
            Ok((0, 0)) | Err(_) => {
                handshake = false;
                break;
            }
            Ok(_) => {}
        }
    }
    if handshake {
        let _ = tls.writer().write_all(name.as_bytes());
        tls.send_close_notify();
        let _ = tls.complete_io(&mut io);
    } else {
        // Not TLS (or cut short): keep what else the client sends within 200 ms.
        c.set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        let mut rest = Vec::new();
        let _ = (&c).read_to_end(&mut rest);
        io.seen.extend(rest);
    }
    seen.lock().unwrap().push(Conn {
        bytes: io.seen,
        handshake,
    });
}

/// The three backends of the classic configuration.
struct Backends {
    a: TlsBackend,
    b: TlsBackend,
    default: TlsBackend,
}

impl Backends {
    fn start() -> Backends {
        Backends {
            a: TlsBackend::start("be_a", "www-rsa.pem"),
            b: TlsBackend::start("be_b", "wild-ecdsa.pem"),
            default: TlsBackend::start("be_default", "split.pem"),
        }
    }
    fn all(&self) -> [(&'static str, &TlsBackend); 3] {
        [
            ("be_a", &self.a),
            ("be_b", &self.b),
            ("be_default", &self.default),
        ]
    }
    /// Connections finished by each backend so far.
    fn finished(&self) -> [usize; 3] {
        self.all().map(|(_, b)| b.conns.lock().unwrap().len())
    }
    fn accepted(&self) -> usize {
        self.all()
            .iter()
            .map(|(_, b)| b.accepted.load(Ordering::SeqCst))
            .sum()
    }
    /// The backend that finished a connection since `before` (a [`Backends::finished`]),
    /// and what it saw; waits up to 8 s.
    fn next(&self, before: [usize; 3]) -> Option<(&'static str, Conn)> {
        let total = before.iter().sum::<usize>();
        support::eventually(Duration::from_secs(8), || {
            self.finished().iter().sum::<usize>() > total
        });
        let now = self.finished();
        let i = (0..3).find(|&i| now[i] > before[i])?;
        let (name, b) = self.all()[i];
        Some((name, b.conns()[before[i]].clone()))
    }
}

fn config(port: u16, short_port: u16, info_port: u16, b: &Backends, sink: u16) -> String {
    format!(
        "global
    log 127.0.0.1:{sink} format raw local0
defaults
    mode tcp
    log global
    timeout connect 2s
    timeout client 10s
    timeout server 10s
frontend fe
    bind 127.0.0.1:{port}
    log-format \"fe sni=%[capture.req.hdr(0)] var=%[var(sess.sni)] be=%b\"
    tcp-request inspect-delay 5s
    tcp-request content capture req.ssl_sni len 64 if {{ req.ssl_hello_type 1 }}
    tcp-request content set-var(sess.sni) req_ssl_sni if {{ req.ssl_hello_type 1 }}
    tcp-request content accept if {{ req.ssl_hello_type 1 }}
    use_backend be_a if {{ req.ssl_sni -i www.example.com }}
    use_backend be_b if {{ req.ssl_sni -m end .example.org }}
    default_backend be_default
frontend fe_short
    bind 127.0.0.1:{short_port}
    log-format \"short sni=%[capture.req.hdr(0)] be=%b\"
    tcp-request inspect-delay 400ms
    tcp-request content capture req.ssl_sni len 64
    tcp-request content accept if {{ req.ssl_hello_type 1 }}
    use_backend be_a if {{ req.ssl_sni -i www.example.com }}
    default_backend be_default
frontend fe_info
    bind 127.0.0.1:{info_port}
    log-format \"info type=%[var(txn.t)] ver=%[var(txn.v)] ec=%[var(txn.ec)] st=%[var(txn.st)] alpn=%[var(txn.alpn)] h2=%[var(txn.h2)] tls12=%[var(txn.tls12)]\"
    tcp-request inspect-delay 5s
    tcp-request content accept unless {{ req.ssl_hello_type 1 }}
    tcp-request content set-var(txn.t) req.ssl_hello_type
    tcp-request content set-var(txn.v) req.ssl_ver
    tcp-request content set-var(txn.ec) req.ssl_ec_ext
    tcp-request content set-var(txn.st) req.ssl_st_ext
    tcp-request content set-var(txn.alpn) req.ssl_alpn
    tcp-request content set-var(txn.h2) str(yes) if {{ req.ssl_alpn h2 }}
    tcp-request content set-var(txn.tls12) str(yes) if {{ req.ssl_ver 3.3 }}
    default_backend be_default
backend be_a
    server a 127.0.0.1:{}
backend be_b
    server b 127.0.0.1:{}
backend be_default
    server d 127.0.0.1:{}
",
        b.a.port, b.b.port, b.default.port
    )
}

/// A rustls client that trusts the test CA and offers ALPN h2 and http/1.1.
fn client_config() -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_file(fixture("ca.pem")).unwrap())
        .unwrap();
    let mut cfg = rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth();
    cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Arc::new(cfg)
}

/// What a client got.
#[derive(Debug, PartialEq, Eq, Clone)]
struct Got {
    /// The backend that got the connection.
    backend: Option<&'static str>,
    /// It received exactly what the client sent first (the ClientHello, or the HTTP bytes).
    bytes_intact: bool,
    /// The client's handshake completed and the backend said its name over TLS.
    tls_reply: Option<String>,
    /// The proxy passed the connection on within 1 s (not after `inspect-delay 5s`).
    quick: bool,
}

/// Connects to `port`, sends a ClientHello for `host` (in two segments `gap` apart when
/// `split`), and finishes the handshake through the proxy.
fn tls_client(port: u16, host: &str, split: Option<Duration>) -> (Vec<u8>, Option<String>) {
    let mut tcp = TcpStream::connect(("127.0.0.1", port)).unwrap();
    tcp.set_nodelay(true).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(8))).unwrap();
    let name = ServerName::try_from(host.to_string()).unwrap();
    let mut tls = rustls::ClientConnection::new(client_config(), name).unwrap();
    let mut hello = Vec::new();
    while tls.wants_write() {
        tls.write_tls(&mut hello).unwrap();
    }
    match split {
        Some(gap) => {
            // Cut inside the extensions, before the server_name.
            let cut = hello.len() / 3;
            tcp.write_all(&hello[..cut]).unwrap();
            thread::sleep(gap);
            tcp.write_all(&hello[cut..]).unwrap();
        }
        None => tcp.write_all(&hello).unwrap(),
    }
    let mut reply = Vec::new();
    let mut stream = rustls::Stream::new(&mut tls, &mut tcp);
    let ok = loop {
        let mut buf = [0u8; 256];
        match stream.read(&mut buf) {
            Ok(0) => break true,
            Ok(n) => reply.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == ErrorKind::UnexpectedEof => break !reply.is_empty(),
            Err(_) => break false,
        }
    };
    let reply = ok.then(|| String::from_utf8_lossy(&reply).into_owned());
    (hello, reply)
}

/// One proxy's answers to every scenario, and its log lines.
#[derive(Debug, PartialEq, Eq)]
struct Run {
    routes: Vec<(&'static str, Got)>,
    logs: Vec<String>,
}

fn run(program: &str) -> Run {
    let b = Backends::start();
    let sink = UdpSocket::bind("127.0.0.1:0").unwrap();
    sink.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    let (port, short, info) = (free_port(), free_port(), free_port());
    let dir = TempDir::new("sni");
    let cfg = dir.path("p.cfg");
    let text = config(port, short, info, &b, sink.local_addr().unwrap().port());
    std::fs::write(&cfg, text).unwrap();
    let bin = if program == "haproxy" { HAPROXY } else { BIN };
    let mut child: Child = Command::new(bin)
        .arg("-db")
        .arg("-f")
        .arg(&cfg)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Ready when the last frontend's port is bound (probed with a bind, not a connection,
    // so that no probe reaches a backend).
    let up = support::eventually(Duration::from_secs(5), || {
        TcpListener::bind(("127.0.0.1", info)).is_err()
    });
    assert!(up, "{program} did not start");
    thread::sleep(Duration::from_millis(100));

    let mut routes = Vec::new();
    let mut tls_case = |what: &'static str, port: u16, host: &str, split: Option<Duration>| {
        let before = b.finished();
        let t = Instant::now();
        let (hello, reply) = tls_client(port, host, split);
        let (backend, conn) = b
            .next(before)
            .map_or((None, None), |(n, c)| (Some(n), Some(c)));
        let got = Got {
            backend,
            bytes_intact: conn.as_ref().is_some_and(|c| c.bytes.starts_with(&hello)),
            tls_reply: reply.filter(|_| conn.is_some_and(|c| c.handshake)),
            quick: t.elapsed() < split.unwrap_or_default() + Duration::from_secs(1),
        };
        routes.push((what, got));
    };
    tls_case("sni www.example.com", port, "www.example.com", None);
    tls_case("sni shop.example.org", port, "shop.example.org", None);
    tls_case("unknown sni", port, "split.example.net", None);
    let gap = Some(Duration::from_millis(300));
    tls_case("hello in two segments", port, "shop.example.org", gap);
    // Read the other fetches into a log line (the backend is the default's).
    tls_case("req.ssl_* fetches", info, "split.example.net", None);

    // Not TLS: no hello, so no accept; the rules end at once and the default backend gets it.
    let before = b.finished();
    let t = Instant::now();
    let http = b"GET / HTTP/1.0\r\nHost: www.example.com\r\n\r\n";
    let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
    c.write_all(http).unwrap();
    let (backend, conn) = b
        .next(before)
        .map_or((None, None), |(name, c)| (Some(name), Some(c)));
    let quick = t.elapsed() < Duration::from_secs(1);
    drop(c);
    routes.push((
        "plain HTTP",
        Got {
            backend,
            bytes_intact: conn.is_some_and(|c| c.bytes.starts_with(http)),
            tls_reply: None,
            quick,
        },
    ));

    // A client that sends nothing: after the 400 ms inspect delay the default backend gets
    // the connection; a hello sent later is passed on unread (no SNI route).
    let before = b.finished();
    let accepted = b.accepted();
    let t = Instant::now();
    let (hello, reply, waited) = {
        let mut tcp = TcpStream::connect(("127.0.0.1", short)).unwrap();
        support::eventually(Duration::from_secs(3), || b.accepted() > accepted);
        let waited = t.elapsed();
        tcp.set_read_timeout(Some(Duration::from_secs(8))).unwrap();
        let name = ServerName::try_from("www.example.com").unwrap();
        let mut tls = rustls::ClientConnection::new(client_config(), name).unwrap();
        let mut hello = Vec::new();
        tls.write_tls(&mut hello).unwrap();
        tcp.write_all(&hello).unwrap();
        let mut stream = rustls::Stream::new(&mut tls, &mut tcp);
        let mut reply = String::new();
        let _ = stream.read_to_string(&mut reply);
        (hello, reply, waited)
    };
    let (backend, conn) = b
        .next(before)
        .map_or((None, None), |(name, c)| (Some(name), Some(c)));
    routes.push((
        "silent client",
        Got {
            backend,
            bytes_intact: conn.as_ref().is_some_and(|c| c.bytes.starts_with(&hello)),
            // The default backend's certificate is not www.example.com's: no handshake.
            tls_reply: Some(reply).filter(|r| !r.is_empty()),
            // Here: passed on before the 400 ms inspect delay ended (it must not be).
            quick: waited < Duration::from_millis(350),
        },
    ));

    let mut logs = Vec::new();
    let mut buf = [0u8; 4096];
    while logs.len() < 7 {
        let Ok(len) = sink.recv(&mut buf) else { break };
        logs.push(String::from_utf8_lossy(&buf[..len]).trim_end().to_string());
    }
    logs.sort();
    let _ = child.kill();
    let _ = child.wait();
    Run { routes, logs }
}

#[test]
fn sni_routing_matches_haproxy() {
    let ours = run("bascule");
    let want = |name: &'static str, tls: bool| Got {
        backend: Some(name),
        bytes_intact: true,
        tls_reply: tls.then(|| name.to_string()),
        quick: true,
    };
    let expected = [
        ("sni www.example.com", want("be_a", true)),
        ("sni shop.example.org", want("be_b", true)),
        ("unknown sni", want("be_default", true)),
        ("hello in two segments", want("be_b", true)),
        ("req.ssl_* fetches", want("be_default", true)),
        ("plain HTTP", want("be_default", false)),
        (
            "silent client",
            Got {
                quick: false,
                ..want("be_default", false)
            },
        ),
    ];
    assert_eq!(ours.routes, expected, "bascule's routes");
    let logs = [
        "fe sni=- var=- be=be_default",
        "fe sni=shop.example.org var=shop.example.org be=be_b",
        "fe sni=shop.example.org var=shop.example.org be=be_b",
        "fe sni=split.example.net var=split.example.net be=be_default",
        "fe sni=www.example.com var=www.example.com be=be_a",
        "info type=1 ver=196611 ec=1 st=1 alpn=h2 h2=yes tls12=yes",
        "short sni=- be=be_default",
    ];
    assert_eq!(ours.logs, logs, "bascule's log lines");
    if !support::have_haproxy("sni_routing_matches_haproxy") {
        return;
    }
    let theirs = run("haproxy");
    assert_eq!(ours, theirs, "bascule (left) and haproxy (right)");
}

/// The load-time words: `%[req.ssl_sni]` in a log format is an error (the request buffer is
/// gone at log time), and in an HTTP proxy the `req.ssl_*` fetches only earn a warning.
#[test]
fn load_time_diagnostics() {
    let dir = TempDir::new("sni-check");
    let cfg = dir.path("c.cfg");
    let text = "defaults
    timeout connect 1s
    timeout client 1s
    timeout server 1s
frontend logs_sni
    mode tcp
    bind 127.0.0.1:P1
    log-format \"%[req.ssl_sni]\"
    default_backend be_tcp
frontend fh
    mode http
    bind 127.0.0.1:P2
    tcp-request inspect-delay 5s
    tcp-request content accept if { req.ssl_hello_type 1 }
    http-request deny if { req_ssl_sni -i a.example.com }
    use_backend be_http if { req.ssl_ver 3.1:3.3 }
    default_backend be_http
backend be_tcp
    mode tcp
    server s 127.0.0.1:1
backend be_http
    mode http
    server s 127.0.0.1:1
";
    let text = text
        .replace("P1", &free_port().to_string())
        .replace("P2", &free_port().to_string());
    std::fs::write(&cfg, text).unwrap();
    let ours = Command::new(BIN)
        .arg("-c")
        .arg("-f")
        .arg(&cfg)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&ours.stderr);
    assert!(!ours.status.success(), "{err}");
    let lines: Vec<&str> = err.lines().collect();
    let has = |line: u32, what: &str| {
        lines
            .iter()
            .any(|l| l.contains(&format!("c.cfg:{line}:")) && l.contains(what))
    };
    assert!(has(8, "sample fetch <req.ssl_sni> may not be reliably used here because it needs 'request buffer' which is not available here"), "{err}");
    for line in [14, 15, 16] {
        assert!(
            has(line, "L6 sample fetches ignored on HTTP proxies"),
            "line {line}: {err}"
        );
    }
    if !support::have_haproxy("load_time_diagnostics") {
        return;
    }
    let theirs = Command::new(HAPROXY)
        .arg("-c")
        .arg("-f")
        .arg(&cfg)
        .output()
        .unwrap();
    let herr = String::from_utf8_lossy(&theirs.stderr);
    assert!(!theirs.status.success(), "{herr}");
    assert!(
        herr.contains("c.cfg:8]: failed to parse log-format : sample fetch <req.ssl_sni]> may not be reliably used here because it needs 'request buffer' which is not available here"),
        "{herr}"
    );
    for line in [14, 15, 16] {
        assert!(
            herr.contains(&format!(
                "Proxy 'fh': L6 sample fetches ignored on HTTP proxies (declared at {}:{line})",
                cfg.display()
            )),
            "line {line}: {herr}"
        );
    }
}
