//! The client and destination addresses at HAProxy 2.6's three levels, side by side with
//! Debian's haproxy: the connection's (`fc_src`, `fc_dst`: the socket's, changed only by
//! `tcp-request connection set-src|set-dst`), the session's (a PROXY header's, then
//! `tcp-request session` rules) and each stream's (`src`, `dst`: `tcp-request content` and
//! `http-request` rules, starting again from the session's at each request of a keep-alive
//! connection, also after the connection idled long enough to be parked). `http_first_req`
//! says which request is the connection's first. TCP mode likewise, read from the log line.
#![allow(clippy::disallowed_methods)]

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::thread;
use std::time::Duration;

use support::side::both;

/// Sends `reqs` on one connection (after `preface`), waiting `pause` between them, and gives
/// each response's `x-addrs` header.
fn exchange(port: u16, preface: &[u8], reqs: &[&str], pause: Duration) -> Vec<String> {
    let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    c.write_all(preface).unwrap();
    let mut out = Vec::new();
    for (i, extra) in reqs.iter().enumerate() {
        if i > 0 {
            thread::sleep(pause);
        }
        let req = format!("GET /{i} HTTP/1.1\r\nHost: x\r\n{extra}\r\n");
        c.write_all(req.as_bytes()).unwrap();
        let mut got = Vec::new();
        let mut b = [0u8; 4096];
        while !got.windows(4).any(|w| w == b"\r\n\r\n") {
            match c.read(&mut b) {
                Ok(n) if n > 0 => got.extend_from_slice(&b[..n]),
                _ => break,
            }
        }
        let text = String::from_utf8_lossy(&got).to_string();
        out.push(
            text.lines()
                .find_map(|l| l.strip_prefix("x-addrs: "))
                .unwrap_or("-")
                .to_string(),
        );
    }
    out
}

const HTTP: &str = "defaults
    mode http
    timeout connect 2s
    timeout client 5s
    timeout server 5s
    timeout http-keep-alive 5s
frontend levels
    bind 127.0.0.1:@P2@
    tcp-request connection set-src ipv4(10.0.0.1)
    tcp-request connection set-dst ipv4(10.0.0.2)
    tcp-request session set-var(sess.fc) fc_src
    tcp-request session set-src ipv4(10.1.0.1)
    http-request set-src hdr(x-src) if { req.hdr(x-src) -m found }
    http-request set-dst hdr(x-dst) if { req.hdr(x-dst) -m found }
    http-request return status 200 hdr x-addrs \"%[fc_src] %[fc_dst] %[src] %[dst] %[var(sess.fc)] first=%[http_first_req]\"
frontend proxied
    bind 127.0.0.1:@P1@ accept-proxy
    tcp-request connection set-src ipv4(10.0.0.1)
    http-request return status 200 hdr x-addrs \"%[fc_src] %[src] %[dst] first=%[http_first_req]\"
";

#[test]
fn http_addresses_have_a_connection_a_session_and_a_stream_level() {
    both("address_levels_http", HTTP, |_, p1, p2, _| {
        let mut seen = Vec::new();
        // A stream's `set-src` lasts one request; the next starts from the session's (also
        // after a pause long enough to park the connection).
        for pause in [Duration::ZERO, Duration::from_millis(250)] {
            seen.extend(exchange(
                p2,
                b"",
                &[
                    "x-src: 192.168.0.1\r\nx-dst: 192.168.0.2\r\n",
                    "",
                    "x-src: 192.168.1.1\r\n",
                ],
                pause,
            ));
        }
        // A PROXY header's addresses are the session's; the connection rule's the connection's.
        let header = b"PROXY TCP4 203.0.113.9 198.51.100.7 5555 8443\r\n";
        seen.extend(exchange(p1, header, &["", ""], Duration::from_millis(250)));
        seen
    });
}

#[test]
fn tcp_addresses_have_the_same_levels() {
    let echo = support::Backend::echo();
    let cfg = format!(
        "global
    log 127.0.0.1:@LOG@ format raw local0
defaults
    mode tcp
    log global
    timeout connect 2s
    timeout client 2s
    timeout server 2s
frontend fe
    bind 127.0.0.1:@P2@
    tcp-request connection set-src ipv4(10.0.0.1)
    tcp-request connection set-dst ipv4(10.0.0.2)
    tcp-request session set-src ipv4(10.1.0.1)
    tcp-request session set-dst-port int(8080)
    tcp-request content set-dst ipv4(10.2.0.2)
    log-format \"%[fc_src] %[fc_dst] %[src] %[dst] %[dst_port] %fi %ci\"
    default_backend be
frontend proxied
    bind 127.0.0.1:@P1@ accept-proxy
    tcp-request connection set-dst ipv4(10.0.0.2)
    log-format \"%[fc_src] %[fc_dst] %[src] %[dst] %ci %fi\"
    default_backend be
backend be
    server s 127.0.0.1:{}
",
        echo.port
    );
    both("address_levels_tcp", &cfg, |_, p1, p2, run| {
        for (port, preface) in [
            (p2, &b""[..]),
            (
                p1,
                &b"PROXY TCP4 203.0.113.9 198.51.100.7 5555 8443\r\n"[..],
            ),
        ] {
            let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
            c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            c.write_all(preface).unwrap();
            c.write_all(b"ping").unwrap();
            let mut b = [0u8; 4];
            c.read_exact(&mut b).unwrap();
            assert_eq!(&b, b"ping");
        }
        // The two connections' lines, sorted: workers flush theirs independently.
        let mut lines = run.lines_n(2);
        lines.sort();
        lines
    });
}
