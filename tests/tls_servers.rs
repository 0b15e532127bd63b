//! TLS to servers (`server ... ssl`), side by side with Debian's haproxy 2.6 (OpenSSL 3): the
//! same configuration through both, against a TLS server in this process (rustls, with
//! Bascule's own bind configuration builder) that answers each request with what it saw of
//! the connection — the SNI, the ALPN protocol, whether the session was resumed, whether a
//! client certificate came — so that comparing the responses compares what each proxy sent.
//! Verification (right CA, wrong CA: 503 and `SC` in the log), `verify none`, `sni
//! req.hdr(host)`, `alpn`, a client certificate (`crt`, required by the server), `ssl-reuse`
//! against `no-ssl-reuse` (full handshakes counted on the server), `check-ssl` (the server's
//! state through the stats socket), and a megabyte each way.
//!
//! Without haproxy the side-by-side tests print "skipped" (and fail when `CI` is set).
#![allow(clippy::disallowed_methods)]

mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use bascule::tls::server::{BindSsl, CrtArg, Verify};
use support::side::Run;
use support::tls::fixture;
use support::{free_port, have_haproxy, TempDir, BIN, HAPROXY, IO_TIMEOUT};

/// The TLS test server: counts connections and full handshakes.
struct TlsServer {
    port: u16,
    full: Arc<AtomicUsize>,
    conns: Arc<AtomicUsize>,
}

impl TlsServer {
    /// Serves www.example.com (ECDSA, signed by the test CA) with `alpn`; with `client_ca`,
    /// requires a client certificate signed by the test CA.
    fn start(alpn: &[&str], client_ca: bool) -> TlsServer {
        let built = bascule::tls::server::build(&BindSsl {
            crts: vec![CrtArg::Crt(fixture("www-ecdsa.pem"))],
            alpn: alpn.iter().map(|a| a.as_bytes().to_vec()).collect(),
            verify: if client_ca {
                Verify::Required
            } else {
                Verify::None
            },
            ca_file: client_ca.then(|| fixture("ca.pem")),
            ..Default::default()
        })
        .unwrap();
        let config = built.config;
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let full = Arc::new(AtomicUsize::new(0));
        let conns = Arc::new(AtomicUsize::new(0));
        let (f, c) = (full.clone(), conns.clone());
        thread::spawn(move || {
            for sock in listener.incoming() {
                let Ok(sock) = sock else { return };
                let (config, f) = (config.clone(), f.clone());
                c.fetch_add(1, Ordering::SeqCst);
                thread::spawn(move || serve(sock, config, &f));
            }
        });
        TlsServer { port, full, conns }
    }
}

/// One TLS connection: HTTP/1.1 keep-alive; `/big` answers 1 MB, anything else describes the
/// connection and the request body's length.
fn serve(sock: TcpStream, config: Arc<rustls::ServerConfig>, full: &AtomicUsize) {
    sock.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    let conn = rustls::ServerConnection::new(config).unwrap();
    let mut s = rustls::StreamOwned::new(conn, sock);
    while s.conn.is_handshaking() {
        if s.conn.complete_io(&mut s.sock).is_err() {
            return;
        }
    }
    let resumed = s.conn.handshake_kind() == Some(rustls::HandshakeKind::Resumed);
    if !resumed {
        full.fetch_add(1, Ordering::SeqCst);
    }
    let facts = format!(
        "sni={} alpn={} resumed={resumed} cert={}",
        s.conn.server_name().unwrap_or("-"),
        s.conn
            .alpn_protocol()
            .map_or("-".into(), |a| String::from_utf8_lossy(a).into_owned()),
        s.conn.peer_certificates().is_some(),
    );
    let mut r = BufReader::new(s);
    loop {
        let mut head = String::new();
        loop {
            let mut line = String::new();
            match r.read_line(&mut line) {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
            if line == "\r\n" {
                break;
            }
            head.push_str(&line);
        }
        let len: usize = head
            .lines()
            .find_map(|l| {
                let (n, v) = l.split_once(':')?;
                n.eq_ignore_ascii_case("content-length")
                    .then(|| v.trim().parse().ok())?
            })
            .unwrap_or(0);
        let mut body = vec![0u8; len];
        if r.read_exact(&mut body).is_err() {
            return;
        }
        let path = head.split(' ').nth(1).unwrap_or("/").to_string();
        let reply = if path == "/big" {
            vec![b'x'; 1 << 20]
        } else {
            format!("{facts} len={len}\n").into_bytes()
        };
        let s = r.get_mut();
        let status = format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n", reply.len());
        if s.write_all(status.as_bytes()).is_err() || s.write_all(&reply).is_err() {
            return;
        }
        let _ = s.flush();
        let first = head.lines().next().unwrap_or("");
        if head.to_ascii_lowercase().contains("connection: close") || first.ends_with("HTTP/1.0") {
            s.conn.send_close_notify();
            let _ = s.flush();
            // Close gracefully: half-close, then drain until the proxy closes too. Dropping
            // the socket at once would answer whatever the proxy still sends (its own
            // close_notify) with a reset, and a reset makes the proxy's kernel throw away
            // response bytes it has not read yet.
            let _ = s.sock.shutdown(std::net::Shutdown::Write);
            let mut sink = [0u8; 4096];
            while matches!(s.sock.read(&mut sink), Ok(n) if n > 0) {}
            return;
        }
    }
}

/// Sends `req` on a new connection to `port` and reads the response to the end (the request
/// says `connection: close`): status and body.
fn get(port: u16, req: &str) -> (u16, String) {
    let mut s = support::connect(port);
    s.write_all(req.as_bytes()).unwrap();
    let raw = support::read_all(&mut s);
    let text = String::from_utf8_lossy(&raw).into_owned();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .map_or(String::new(), |(_, b)| b.to_string());
    (status, body)
}

fn req(host: &str) -> String {
    format!("GET / HTTP/1.1\r\nhost: {host}\r\nconnection: close\r\n\r\n")
}

/// Runs `cfg` (`@P1@`: the server's port, `@P2@`: the proxy's) through haproxy and Bascule
/// with a fresh server each, giving each to `f`; the results must be equal.
fn both(
    test: &str,
    cfg: &str,
    server: impl Fn() -> TlsServer,
    mut f: impl FnMut(&TlsServer, u16, &mut Run) -> Vec<String>,
) {
    if !have_haproxy(test) {
        return;
    }
    let mut results = Vec::new();
    for bin in [HAPROXY, BIN] {
        let srv = server();
        let p2 = free_port();
        let cfg = cfg
            .replace("@P1@", &srv.port.to_string())
            .replace("@P2@", &p2.to_string());
        let mut run = Run::start(bin, &cfg, p2);
        results.push(f(&srv, p2, &mut run));
    }
    eprintln!("{test}: {:?}", results[1]);
    assert_eq!(
        results[0], results[1],
        "{test}: haproxy (left) and Bascule (right) differ"
    );
}

const GLOBAL: &str = "global\n    log 127.0.0.1:@LOG@ format raw local0\n    stats socket @SOCK@ level admin\n\
defaults\n    mode http\n    log global\n    timeout client 2s\n    timeout server 5s\n    timeout connect 2s\n";

const LOG: &str = "    log-format \"%ST %ts %b/%s\"\n";

#[test]
fn verify_required_with_the_right_ca_and_sni_from_the_host_header() {
    let cfg = format!(
        "{GLOBAL}listen fe\n    bind 127.0.0.1:@P2@\n{LOG}    server s1 127.0.0.1:@P1@ ssl verify required ca-file @CRT@/ca.pem sni req.hdr(host) alpn http/1.1\n"
    );
    both(
        "verify_required_right_ca",
        &cfg,
        || TlsServer::start(&["http/1.1"], false),
        |_, port, run| {
            // Each connection's line is waited for before the next one opens: workers flush
            // their lines independently.
            let (mut seen, mut logs) = (Vec::new(), Vec::new());
            for host in ["www.example.com", "example.com"] {
                let (st, body) = get(port, &req(host));
                seen.push(format!("{st} {body}"));
                logs.extend(run.lines_n(1));
            }
            // A name the certificate does not hold fails verification: 503, SC.
            let (st, _) = get(port, &req("other.example.net"));
            seen.push(st.to_string());
            logs.extend(run.lines_n(1));
            seen.extend(logs);
            seen
        },
    );
}

#[test]
fn wrong_ca_is_a_connection_failure_and_verify_none_accepts() {
    // The leaf alone as the "CA": its chain does not lead there.
    let dir = TempDir::new("wrong-ca");
    let pem = std::fs::read_to_string(fixture("wild-ecdsa.pem")).unwrap();
    let end = pem.find("-----END CERTIFICATE-----").unwrap() + 25;
    std::fs::write(dir.path("wrong.pem"), &pem[..end]).unwrap();
    let cfg = format!(
        "{GLOBAL}listen fe\n    bind 127.0.0.1:@P2@\n{LOG}    retries 1\n    server s1 127.0.0.1:@P1@ ssl ca-file {}\n\
listen fe2\n    bind 127.0.0.1:@P3@\n{LOG}    server s2 127.0.0.1:@P1@ ssl verify none\n",
        dir.path("wrong.pem").display()
    );
    let p3 = free_port();
    let cfg = cfg.replace("@P3@", &p3.to_string());
    both(
        "wrong_ca",
        &cfg,
        || TlsServer::start(&[], false),
        |_, port, run| {
            // Each connection's line before the next one opens (workers flush independently).
            let (st, _) = get(port, &req("www.example.com"));
            let mut logs = run.lines_n(1);
            let (st2, body2) = get(p3, &req("www.example.com"));
            logs.extend(run.lines_n(1));
            let mut seen = vec![st.to_string(), format!("{st2} {body2}")];
            seen.extend(logs);
            seen
        },
    );
}

#[test]
fn a_client_certificate_is_shown_when_the_server_requires_one() {
    let cfg = format!(
        "{GLOBAL}listen fe\n    bind 127.0.0.1:@P2@\n{LOG}    server s1 127.0.0.1:@P1@ ssl verify none crt @CRT@/split.pem\n\
listen fe2\n    bind 127.0.0.1:@P3@\n{LOG}    server s2 127.0.0.1:@P1@ ssl verify none\n"
    );
    let p3 = free_port();
    let cfg = cfg.replace("@P3@", &p3.to_string());
    both(
        "client_certificate",
        &cfg,
        || TlsServer::start(&[], true),
        |_, port, run| {
            let (st, body) = get(port, &req("a"));
            // Its line before the next connection opens (workers flush independently).
            let mut logs = run.lines_n(1);
            // Without a certificate the server refuses the handshake.
            let (st2, _) = get(p3, &req("a"));
            logs.extend(run.lines_n(1));
            // In TLS 1.3 the server refuses after the client's handshake is over: whether the
            // proxy sees the alert while connecting (503, SC) or once the request is out (502,
            // SH) is a matter of timing, for haproxy as for Bascule.
            let refused = if matches!(st2, 502 | 503) {
                "refused".to_string()
            } else {
                st2.to_string()
            };
            let mut seen = vec![format!("{st} {body}"), refused];
            seen.extend(logs.into_iter().filter(|l| !l.contains("fe2")));
            seen
        },
    );
}

#[test]
fn sessions_resume_unless_no_ssl_reuse() {
    let cfg = format!(
        "{GLOBAL}listen fe\n    bind 127.0.0.1:@P2@\n    http-reuse never\n    server s1 127.0.0.1:@P1@ ssl verify none\n"
    );
    for (test, opt, want_full) in [("ssl_reuse", "", 2), ("no_ssl_reuse", " no-ssl-reuse", 5)] {
        let cfg = cfg.replace("verify none\n", &format!("verify none{opt}\n"));
        both(
            test,
            &cfg,
            || TlsServer::start(&[], false),
            |srv, port, _| {
                let mut seen = Vec::new();
                for _ in 0..5 {
                    let (st, body) = get(port, &req("a"));
                    // (Which connection first resumes depends on when the ticket arrived.)
                    let body = body.split(" resumed=").next().unwrap_or("").to_string();
                    seen.push(format!("{st} {body}"));
                    // The TLS 1.3 ticket comes after the handshake: let it arrive.
                    thread::sleep(Duration::from_millis(50));
                }
                // Without reuse every connection is a full handshake; with it, the first one
                // (and the second, if the first's TLS 1.3 ticket came after it started).
                let full = srv.full.load(Ordering::SeqCst);
                if want_full == 5 {
                    assert_eq!(full, 5, "{test}: full handshakes");
                } else {
                    assert!((1..=2).contains(&full), "{test}: {full} full handshakes");
                }
                seen.push(format!("conns={}", srv.conns.load(Ordering::SeqCst)));
                seen
            },
        );
    }
}

#[test]
fn check_ssl_marks_a_tls_server_up_and_a_clear_one_down() {
    let clear = TcpListener::bind("127.0.0.1:0").unwrap();
    let clear_port = clear.local_addr().unwrap().port();
    // A clear-text server that answers nothing TLS: the check's handshake fails.
    thread::spawn(move || {
        for s in clear.incoming() {
            let Ok(mut s) = s else { return };
            let _ = s.write_all(b"HTTP/1.0 200 OK\r\n\r\n");
        }
    });
    let cfg = format!(
        "{GLOBAL}backend be\n    option httpchk GET /\n    default-server check inter 200ms rise 1 fall 1 check-ssl verify none\n    server tls 127.0.0.1:@P1@\n    server clear 127.0.0.1:{clear_port}\n\
frontend fe\n    bind 127.0.0.1:@P2@\n    default_backend be\n"
    );
    both(
        "check_ssl",
        &cfg,
        || TlsServer::start(&[], false),
        |_, _, run| {
            // Until both servers' checks have concluded as below (at most 10 s; what is seen
            // then is compared).
            let concluded = |state: &str| {
                let rows: Vec<Vec<&str>> = state
                    .lines()
                    .map(|l| l.split(' ').collect::<Vec<_>>())
                    .filter(|f| f.len() > 10 && f[0] != "#")
                    .map(|f| vec![f[3], f[5], f[10]])
                    .collect();
                rows.contains(&vec!["tls", "2", "15"]) && rows.contains(&vec!["clear", "0", "11"])
            };
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            let mut state = run.cli("show servers state be");
            while !concluded(&state) && std::time::Instant::now() < deadline {
                thread::sleep(Duration::from_millis(50));
                state = run.cli("show servers state be");
            }
            // be_id be_name srv_id srv_name srv_addr srv_op_state ... srv_check_status
            // (10th): the TLS server passed its HTTP check over TLS (2, L7OK: 15), the clear
            // one failed the handshake (0, L6RSP: 11).
            let mut seen: Vec<String> = state
                .lines()
                .map(|l| l.split(' ').collect::<Vec<_>>())
                .filter(|f| f.len() > 10 && f[0] != "#")
                .map(|f| format!("{} {} {}", f[3], f[5], f[10]))
                .collect();
            assert_eq!(seen.len(), 2, "{state}");
            seen.sort();
            seen
        },
    );
}

#[test]
fn a_megabyte_each_way_over_tls_to_the_server() {
    let cfg = format!(
        "{GLOBAL}listen fe\n    bind 127.0.0.1:@P2@\n    server s1 127.0.0.1:@P1@ ssl verify none\n"
    );
    both(
        "megabyte",
        &cfg,
        || TlsServer::start(&[], false),
        |_, port, _| {
            let body = vec![b'y'; 1 << 20];
            let mut s = support::connect(port);
            // A debug build on a loaded machine moves a TLS megabyte slowly: wait longer than
            // the usual 5 s before calling it a hang.
            s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
            s.set_write_timeout(Some(Duration::from_secs(30))).unwrap();
            s.write_all(
                format!(
                    "POST / HTTP/1.1\r\nhost: a\r\ncontent-length: {}\r\n\r\n",
                    body.len()
                )
                .as_bytes(),
            )
            .unwrap();
            s.write_all(&body).unwrap();
            let mut r = BufReader::new(s.try_clone().unwrap());
            let mut seen = Vec::new();
            let mut line = String::new();
            let mut len = 0;
            loop {
                line.clear();
                r.read_line(&mut line).unwrap();
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    len = v.trim().parse().unwrap();
                }
                if line == "\r\n" {
                    break;
                }
            }
            let mut b = vec![0u8; len];
            r.read_exact(&mut b).unwrap();
            seen.push(String::from_utf8_lossy(&b).into_owned());
            // The same connection: a megabyte back.
            s.write_all(b"GET /big HTTP/1.1\r\nhost: a\r\nconnection: close\r\n\r\n")
                .unwrap();
            let mut rest = Vec::new();
            r.read_to_end(&mut rest).unwrap();
            let text = String::from_utf8_lossy(&rest);
            let (_, big) = text.split_once("\r\n\r\n").unwrap();
            seen.push(format!("{} {}", big.len(), big.bytes().all(|c| c == b'x')));
            seen
        },
    );
}

/// Reads one response with a `content-length` body from `r`: the body.
fn read_one(r: &mut BufReader<TcpStream>) -> String {
    let mut line = String::new();
    let mut len = 0;
    loop {
        line.clear();
        r.read_line(&mut line).unwrap();
        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            len = v.trim().parse().unwrap();
        }
        if line == "\r\n" || line.is_empty() {
            break;
        }
    }
    let mut b = vec![0u8; len];
    r.read_exact(&mut b).unwrap();
    String::from_utf8_lossy(&b).into_owned()
}

#[test]
fn a_server_connection_serves_only_requests_for_its_sni() {
    // One client connection, keep-alive, alternating host names: each request reaches the
    // server over a connection made with its own SNI, never over one made for another name.
    let cfg = format!(
        "{GLOBAL}listen fe\n    bind 127.0.0.1:@P2@\n    http-reuse always\n    server s1 127.0.0.1:@P1@ ssl verify none sni req.hdr(host)\n"
    );
    both(
        "sni_reuse",
        &cfg,
        || TlsServer::start(&[], false),
        |srv, port, _| {
            let mut s = support::connect(port);
            let mut r = BufReader::new(s.try_clone().unwrap());
            let mut seen = Vec::new();
            for host in [
                "a.example.com",
                "b.example.com",
                "a.example.com",
                "b.example.com",
            ] {
                s.write_all(format!("GET / HTTP/1.1\r\nhost: {host}\r\n\r\n").as_bytes())
                    .unwrap();
                let body = read_one(&mut r);
                let sni = body.split(' ').next().unwrap_or("").to_string();
                assert_eq!(sni, format!("sni={host}"), "{body}");
                seen.push(sni);
            }
            // At most one connection per name (the pool keeps the other while idle).
            let conns = srv.conns.load(Ordering::SeqCst);
            assert!((2..=4).contains(&conns), "{conns} server connections");
            seen
        },
    );
}

/// Sends `req` on a new connection and returns its `x-bc` response header.
fn x_bc(port: u16, req: &str) -> String {
    let mut s = support::connect(port);
    s.write_all(req.as_bytes()).unwrap();
    let text = String::from_utf8_lossy(&support::read_all(&mut s)).into_owned();
    text.lines()
        .find_map(|l| l.strip_prefix("x-bc: "))
        .unwrap_or("<none>")
        .to_string()
}

#[test]
fn ssl_bc_fetches_in_response_rules_and_logs() {
    let bc = "%[ssl_bc] %[ssl_bc_protocol] %[ssl_bc_cipher] %[ssl_bc_alpn] %[ssl_bc_is_resumed] %[ssl_bc_use_keysize] %[ssl_bc_alg_keysize]";
    let cfg = format!(
        "{GLOBAL}listen fe\n    bind 127.0.0.1:@P2@\n    log-format \"%ST {bc}\"\n    http-response set-header x-bc \"{bc}\"\n    server s1 127.0.0.1:@P1@ ssl verify none alpn http/1.1\n\
listen fe2\n    bind 127.0.0.1:@P3@\n    log-format \"%ST {bc}\"\n    http-response set-header x-bc \"{bc}\"\n    server s2 127.0.0.1:@P4@\n"
    );
    let clear = TcpListener::bind("127.0.0.1:0").unwrap();
    let clear_port = clear.local_addr().unwrap().port();
    thread::spawn(move || {
        for sock in clear.incoming() {
            let Ok(mut sock) = sock else { return };
            thread::spawn(move || {
                let mut buf = [0u8; 4096];
                let _ = sock.read(&mut buf);
                let _ = sock.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok");
            });
        }
    });
    let p3 = free_port();
    let cfg = cfg
        .replace("@P3@", &p3.to_string())
        .replace("@P4@", &clear_port.to_string());
    both(
        "ssl_bc",
        &cfg,
        || TlsServer::start(&["http/1.1"], false),
        |_, port, run| {
            // Each connection's line before the next one opens (workers flush independently).
            let mut seen = vec![x_bc(port, &req("a"))];
            let mut logs = run.lines_n(1);
            seen.push(x_bc(p3, &req("a")));
            logs.extend(run.lines_n(1));
            seen.extend(logs);
            seen
        },
    );
}

#[test]
fn ssl_s_fetches_read_the_servers_certificate() {
    let s = "%[ssl_s_s_dn] %[ssl_s_i_dn(CN)] %[ssl_s_serial,hex] %[ssl_s_notbefore] %[ssl_s_notafter] %[ssl_s_version] %[ssl_s_sha1,hex] %[ssl_s_sig_alg] %[ssl_s_key_alg] %[ssl_s_der,hex,length] %[ssl_s_chain_der,hex,length]";
    let cfg = format!(
        "{GLOBAL}listen fe\n    bind 127.0.0.1:@P2@\n    log-format \"%ST %[ssl_s_s_dn(CN)] %[ssl_s_key_alg]\"\n    http-response set-header x-bc \"{s}\"\n    server s1 127.0.0.1:@P1@ ssl verify none\n"
    );
    both(
        "ssl_s",
        &cfg,
        || TlsServer::start(&[], false),
        |_, port, run| {
            let mut seen = vec![x_bc(port, &req("a"))];
            seen.extend(run.lines_n(1));
            seen
        },
    );
}

/// `set server BE/SRV ssl on|off`: a server whose `default-server` said `ssl` but whose own line
/// says `no-ssl` (`srv_use_ssl` -1) can be switched to TLS and back at run time; a server
/// without TLS settings, and a bad argument, get HAProxy's answers. The traffic follows: the
/// TLS server answers only once `ssl on` is set (`http-reuse never`: each request connects
/// anew).
#[test]
fn set_server_ssl_switches_tls_at_run_time() {
    let cfg = format!(
        "{GLOBAL}listen fe\n    bind 127.0.0.1:@P2@\n    http-reuse never\n{LOG}\
         \x20   server plain 127.0.0.1:@P1@ no-ssl disabled\n\
         \x20   default-server ssl verify none\n\
         \x20   server s1 127.0.0.1:@P1@ no-ssl\n"
    );
    both(
        "set_server_ssl",
        &cfg,
        || TlsServer::start(&[], false),
        |_, p2, run| {
            // `srv_use_ssl`, the 21st column of `show servers state`.
            let column = |run: &Run| {
                run.cli("show servers state fe")
                    .lines()
                    .filter(|l| l.contains(" fe "))
                    .map(|l| {
                        let w: Vec<&str> = l.split(' ').collect();
                        format!("{}:{}", w[3], w[20])
                    })
                    .collect::<Vec<_>>()
                    .join(" ")
            };
            let mut seen = vec![column(run)];
            seen.push(get(p2, &req("www.example.com")).0.to_string());
            for cmd in [
                "set server fe/s1 ssl on",
                "set server fe/s1 ssl maybe",
                "set server fe/plain ssl on",
            ] {
                seen.push(run.cli(cmd));
            }
            seen.push(column(run));
            let (status, body) = get(p2, &req("www.example.com"));
            seen.push(format!("{status} {}", body.contains("len=0")));
            seen.push(run.cli("set server fe/s1 ssl off"));
            seen.push(column(run));
            seen.push(get(p2, &req("www.example.com")).0.to_string());
            seen
        },
    );
}
