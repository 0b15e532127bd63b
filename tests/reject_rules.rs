//! `tcp-request connection|session|content reject`, side by side with Debian's haproxy 2.6, in
//! TCP and HTTP mode: how the client's connection ends (a reset for a connection rule, a FIN
//! otherwise), the log line (none for connection and session rules; `PR` with the usual
//! `tcplog`/`httplog` fields for content rules, whose backend is the frontend when the
//! frontend's rules reject, and whose request is `<BADREQ>` then), and the frontend's `dcon`,
//! `dses` and `dreq` counters in `show stat` after the same traffic. A session rejected after
//! a handshake (TLS, a PROXY header) was embryonic: HAProxy logs its end in the words of a
//! failed handshake (`fe/bind: Success`), unless `option dontlognull`, which also keeps back
//! the line of any TCP session whose client sent nothing.
//!
//! Without haproxy the test prints "skipped" (and fails when `CI` is set).
#![allow(clippy::disallowed_methods)]

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use support::side::{both, mask_timers};
use support::tls as client;
use support::{free_port, Backend};

/// The frontends, each on a port of its own (`@Pname@`). `ready` (`@P2@`) takes the harness's
/// readiness probe: it logs nothing and rejects nothing, and its server (`@LIVE@`) answers at
/// once, so that the probe's session is over before the test's traffic (the others' servers,
/// `@DEAD@`, are never reached).
const CFG: &str = "global
    stats socket @SOCK@ level admin
defaults
    timeout client 5s
    timeout server 5s
    timeout connect 2s
    retries 0
frontend ready
    mode tcp
    bind 127.0.0.1:@P2@
    default_backend live
frontend tcp_conn
    mode tcp
    log 127.0.0.1:@LOG@ format raw local0
    option tcplog
    bind 127.0.0.1:@Ptcp_conn@
    tcp-request connection reject
    default_backend tcp_be
frontend tcp_conn_late
    mode tcp
    log 127.0.0.1:@LOG@ format raw local0
    option tcplog
    bind 127.0.0.1:@Ptcp_conn_late@
    tcp-request connection set-var(sess.seen) int(1)
    tcp-request connection reject if { var(sess.seen) -m int 1 }
    default_backend tcp_be
frontend tcp_sess
    mode tcp
    log 127.0.0.1:@LOG@ format raw local0
    option tcplog
    bind 127.0.0.1:@Ptcp_sess@
    tcp-request session reject
    default_backend tcp_be
frontend tcp_sess_tls
    mode tcp
    log 127.0.0.1:@LOG@ format raw local0
    option tcplog
    bind 127.0.0.1:@Ptcp_sess_tls@ ssl crt @CRT@/www-ecdsa.pem name tls
    tcp-request session reject
    default_backend tcp_be
frontend tcp_content
    mode tcp
    log 127.0.0.1:@LOG@ format raw local0
    option tcplog
    bind 127.0.0.1:@Ptcp_content@
    tcp-request content reject
    default_backend tcp_be
frontend tcp_inspect
    mode tcp
    log 127.0.0.1:@LOG@ format raw local0
    option tcplog
    bind 127.0.0.1:@Ptcp_inspect@
    tcp-request inspect-delay 2s
    tcp-request content reject if { req.payload(0,3) -m str bad }
    tcp-request content accept if { req.len ge 3 }
    default_backend tcp_be
frontend tcp_quiet
    mode tcp
    log 127.0.0.1:@LOG@ format raw local0
    option tcplog
    option dontlognull
    bind 127.0.0.1:@Ptcp_quiet@
    tcp-request inspect-delay 500ms
    tcp-request content reject if { req.len ge 3 }
    default_backend tcp_be
frontend tcp_backend
    mode tcp
    log 127.0.0.1:@LOG@ format raw local0
    option tcplog
    bind 127.0.0.1:@Ptcp_backend@
    default_backend tcp_be_reject
frontend http_conn
    mode http
    log 127.0.0.1:@LOG@ format raw local0
    option httplog
    bind 127.0.0.1:@Phttp_conn@
    tcp-request connection reject
    default_backend http_be
frontend http_sess
    mode http
    log 127.0.0.1:@LOG@ format raw local0
    option httplog
    bind 127.0.0.1:@Phttp_sess@
    tcp-request session set-var(sess.seen) int(1)
    tcp-request session reject if { var(sess.seen) -m int 1 }
    default_backend http_be
frontend http_sess_proxy
    mode http
    log 127.0.0.1:@LOG@ format raw local0
    option httplog
    bind 127.0.0.1:@Phttp_sess_proxy@ accept-proxy
    tcp-request session reject
    default_backend http_be
frontend http_sess_quiet
    mode http
    log 127.0.0.1:@LOG@ format raw local0
    option httplog
    option dontlognull
    bind 127.0.0.1:@Phttp_sess_quiet@ accept-proxy
    tcp-request session reject
    default_backend http_be
frontend http_content
    mode http
    log 127.0.0.1:@LOG@ format raw local0
    option httplog
    bind 127.0.0.1:@Phttp_content@
    tcp-request content reject if { path /reject }
    http-request deny if { path /deny }
    http-request return status 200 if { path /ok }
    default_backend http_be_reject
backend live
    mode tcp
    server s 127.0.0.1:@LIVE@
backend tcp_be
    mode tcp
    server s 127.0.0.1:@DEAD@
backend tcp_be_reject
    mode tcp
    tcp-request content reject
    server s 127.0.0.1:@DEAD@
backend http_be
    mode http
    server s 127.0.0.1:@DEAD@
backend http_be_reject
    mode http
    tcp-request content reject
    server s 127.0.0.1:@DEAD@
";

/// How the proxy ended the client's connection after `send`.
/// A log line with its timers masked ([`mask_timers`]) and its connection counts too
/// (`%ac/%fc/%bc/%sc/%rc`: the first four count the connections open at that moment, in which
/// the previous case's connection may still be closing, in either proxy; the retries stay).
fn masked(line: &str) -> String {
    mask_timers(line)
        .split(' ')
        .map(|w| {
            let parts: Vec<&str> = w.split('/').collect();
            let numeric = |p: &&str| {
                !p.is_empty()
                    && p.trim_start_matches('+')
                        .bytes()
                        .all(|b| b.is_ascii_digit())
            };
            if parts.len() == 5 && parts.iter().all(numeric) {
                format!("N/N/N/N/{}", parts[4])
            } else {
                w.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn ending(port: u16, send: &[u8]) -> String {
    let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    if !send.is_empty() {
        // A reset may come before the bytes are out.
        let _ = c.write_all(send);
    }
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match c.read(&mut buf) {
            Ok(0) if got.is_empty() => return "FIN".into(),
            Ok(0) => {
                let text = String::from_utf8_lossy(&got).into_owned();
                return format!("{} then FIN", text.lines().next().unwrap_or(""));
            }
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return "RST".into(),
            Err(e) => return format!("{e}"),
        }
    }
}

#[test]
fn rejects_log_close_and_count_as_haproxy_does() {
    let names = [
        "tcp_conn",
        "tcp_conn_late",
        "tcp_sess",
        "tcp_sess_tls",
        "tcp_content",
        "tcp_inspect",
        "tcp_quiet",
        "tcp_backend",
        "http_conn",
        "http_sess",
        "http_sess_proxy",
        "http_sess_quiet",
        "http_content",
    ];
    let live = Backend::banner("up");
    let mut cfg = CFG
        .replace("@DEAD@", &free_port().to_string())
        .replace("@LIVE@", &live.port.to_string());
    let ports: Vec<(&str, u16)> = names.iter().map(|n| (*n, free_port())).collect();
    for (name, port) in &ports {
        cfg = cfg.replace(&format!("@P{name}@"), &port.to_string());
    }
    let port = |name: &str| ports.iter().find(|(n, _)| *n == name).unwrap().1;
    let get = |path: &str| {
        format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").into_bytes()
    };
    // (frontend, what the client sends, the log lines it makes)
    let cases: Vec<(&str, Vec<u8>, usize)> = vec![
        ("tcp_conn", Vec::new(), 0),
        ("tcp_conn_late", Vec::new(), 0),
        ("tcp_sess", Vec::new(), 0),
        ("tcp_content", Vec::new(), 1),
        ("tcp_inspect", b"bad".to_vec(), 1),
        // `option dontlognull`: a session whose client sent nothing is not logged, however it
        // ends (here its server refuses, `SC`); a rejected one that sent bytes is.
        ("tcp_quiet", Vec::new(), 0),
        ("tcp_quiet", b"bad".to_vec(), 1),
        ("tcp_backend", Vec::new(), 1),
        // (Connection and session rules run at accept: a client that sent bytes at once would
        // race them, whose unread bytes turn a close into a reset.)
        ("http_conn", Vec::new(), 0),
        ("http_sess", Vec::new(), 0),
        (
            "http_sess_proxy",
            b"PROXY TCP4 192.0.2.1 192.0.2.2 1234 80\r\n".to_vec(),
            1,
        ),
        (
            "http_sess_quiet",
            b"PROXY TCP4 192.0.2.1 192.0.2.2 1234 80\r\n".to_vec(),
            0,
        ),
        ("http_content", get("/reject"), 1),
        ("http_content", get("/deny"), 1),
        ("http_content", get("/ok"), 1),
        ("http_content", get("/backend"), 1),
    ];
    both("reject rules", &cfg, |_, _, _, run| {
        let mut seen = Vec::new();
        for (name, send, lines) in &cases {
            let end = ending(port(name), send);
            seen.push(format!("{name} {:?}: {end}", String::from_utf8_lossy(send)));
            // Each connection's line (if any) before the next connection: workers flush
            // their lines independently.
            seen.extend(run.lines_n(*lines).iter().map(|l| masked(l)));
        }
        // A session rejected once its TLS handshake is over.
        let tls = client::connect(
            port("tcp_sess_tls"),
            "www.example.com",
            client::config(&[], false),
        );
        let end = tls.map(|mut t| match t.read(&mut [0u8; 16]) {
            Ok(0) => "closed".to_string(),
            Ok(n) => format!("{n} bytes"),
            Err(e) => format!("{:?}", e.kind()),
        });
        seen.push(format!("tcp_sess_tls: {end:?}"));
        seen.extend(run.lines_n(1).iter().map(|l| masked(l)));
        let cols = ["dcon", "dses", "dreq"];
        seen.extend(run.show_stat().lines(&cols, |_, sv| sv == "FRONTEND"));
        seen
    });
}
