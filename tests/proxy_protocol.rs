//! `bind ... accept-proxy`: the PROXY protocol header (v1 and v2) a load balancer in front
//! sends, side by side with haproxy 2.6: the addresses it gives replace the connection's in
//! fetches and logs, in HTTP and TCP mode, and a connection without a valid header is closed
//! with HAProxy's log line.
#![allow(clippy::disallowed_methods)]

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use support::side::{both, mask};
use support::*;

const V2_SIG: &[u8] = b"\r\n\r\n\0\r\nQUIT\n";

fn v2(cmd: u8, fam: u8, body: &[u8]) -> Vec<u8> {
    let mut b = V2_SIG.to_vec();
    b.extend_from_slice(&[0x20 | cmd, fam]);
    b.extend_from_slice(&(body.len() as u16).to_be_bytes());
    b.extend_from_slice(body);
    b
}

/// TCP4 192.0.2.10:4242 -> 198.51.100.7:8443, UNIQUE_ID and AUTHORITY TLVs.
fn v2_tcp4() -> Vec<u8> {
    let mut body = vec![192, 0, 2, 10, 198, 51, 100, 7, 0x10, 0x92, 0x20, 0xfb];
    body.extend_from_slice(&[0x05, 0, 3, b'u', b'i', b'd']);
    body.extend_from_slice(&[0x02, 0, 5, b'a', b'.', b'c', b'o', b'm']);
    v2(1, 0x11, &body)
}

/// Sends `bytes` then reads what comes back until the proxy closes (or 2 s pass).
fn exchange(port: u16, bytes: &[u8]) -> String {
    let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    c.write_all(bytes).unwrap();
    let mut out = Vec::new();
    let _ = c.read_to_end(&mut out);
    let text = String::from_utf8_lossy(&out).into_owned();
    // The status line, `x-dst` and the body: the other headers differ between the proxies.
    match text.split_once("\r\n\r\n") {
        Some((head, body)) => {
            let dst = head
                .lines()
                .find_map(|l| l.strip_prefix("x-dst: "))
                .map_or(String::new(), |d| format!(" [{d}]"));
            format!("{}{dst} | {body}", head.lines().next().unwrap_or(""))
        }
        None => text,
    }
}

#[test]
fn http_mode_takes_the_addresses_of_the_header() {
    let cfg = "global\n    log 127.0.0.1:@LOG@ format raw local0\n\
        defaults\n    mode http\n    log global\n    timeout connect 2s\n    timeout client 2s\n    timeout server 2s\n\
        frontend fe\n    bind 127.0.0.1:@P2@ accept-proxy\n\
        \x20   log-format \"%ci:%cp %fi:%fp %ST %{+Q}r\"\n\
        \x20   http-request return status 200 content-type text/plain lf-string \"%[src]:%[src_port] %[dst]:%[dst_port] %[fc_rcvd_proxy] id=%[fc_pp_unique_id] sni=%[fc_pp_authority]\"\n\
        \x20   http-after-response set-header x-dst %[dst]:%[dst_port]\n";
    let req = b"GET /x HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n";
    both(
        "http_mode_takes_the_addresses_of_the_header",
        cfg,
        |_, _, port, run| {
            let mut seen = Vec::new();
            let cases: Vec<Vec<u8>> = vec![
                [&b"PROXY TCP4 192.0.2.1 203.0.113.9 5555 80\r\n"[..], req].concat(),
                [&b"PROXY TCP6 2001:db8::1 2001:db8::2 1 2\r\n"[..], req].concat(),
                [&v2_tcp4()[..], req].concat(),
                // UNKNOWN and LOCAL keep the connection's own addresses (masked below).
                [&b"PROXY UNKNOWN\r\n"[..], req].concat(),
                [&v2(0, 0x11, &[0; 12])[..], req].concat(),
                // No header, a bad one, a v2 header cut short then closed.
                req.to_vec(),
                b"PROXY TCP4 1.2.3.4 5.6.7.8 1\r\n".to_vec(),
                v2_tcp4()[..20].to_vec(),
            ];
            for bytes in cases {
                let got = exchange(port, &bytes);
                seen.push(
                    got.replace("127.0.0.1:", "LOCAL:")
                        .split(' ')
                        .map(|w| {
                            if w.starts_with("LOCAL:") {
                                "LOCAL:PORT"
                            } else if w.starts_with("[LOCAL:") {
                                "[LOCAL:PORT]"
                            } else {
                                w
                            }
                        })
                        .collect::<Vec<_>>()
                        .join(" "),
                );
            }
            assert!(
                seen[2].ends_with("198.51.100.7:8443 1 id=uid sni=a.com"),
                "{seen:?}"
            );
            assert!(seen[0].ends_with("203.0.113.9:80 1 id= sni="), "{seen:?}");
            // After-response rules see the header's destination too.
            assert!(seen[0].contains("[203.0.113.9:80]"), "{seen:?}");
            // One line per connection (sorted below: workers flush theirs independently).
            let lines = run.lines_n(8);
            let mut lines: Vec<String> = lines
                .iter()
                .map(|l| {
                    mask(l)
                        .split(' ')
                        .map(|w| {
                            if w.starts_with("127.0.0.1:") {
                                "127.0.0.1:PORT"
                            } else {
                                w
                            }
                        })
                        .collect::<Vec<_>>()
                        .join(" ")
                })
                .collect();
            lines.sort();
            seen.extend(lines);
            seen
        },
    );
}

#[test]
fn tcp_mode_takes_the_addresses_of_the_header() {
    let be = Backend::echo();
    let cfg = format!(
        "global\n    log 127.0.0.1:@LOG@ format raw local0\n\
         defaults\n    mode tcp\n    log global\n    timeout connect 2s\n    timeout client 2s\n    timeout server 2s\n\
         frontend fe\n    bind 127.0.0.1:@P2@ accept-proxy\n\
         \x20   log-format \"%ci:%cp %fi:%fp %[src] %[dst_port] %B %ts\"\n\
         \x20   default_backend be\n\
         backend be\n    server s 127.0.0.1:{}\n",
        be.port
    );
    both(
        "tcp_mode_takes_the_addresses_of_the_header",
        &cfg,
        |_, _, port, run| {
            let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
            c.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
            // The header and the first bytes in one segment: only the bytes reach the server.
            c.write_all(b"PROXY TCP4 192.0.2.1 203.0.113.9 5555 443\r\nhello")
                .unwrap();
            let mut got = [0u8; 5];
            c.read_exact(&mut got).unwrap();
            drop(c);
            let mut out = vec![String::from_utf8_lossy(&got).into_owned()];
            out.extend(run.lines_n(1).iter().map(|l| mask(l)));
            out
        },
    );
}

#[test]
fn send_proxy_v2_announces_the_client_to_the_next_proxy() {
    // One process, two frontends: `fe` (the client's) sends to `inner` through a server with
    // `send-proxy-v2`; `inner` reads the header and shows what it learnt.
    let cfg = "defaults\n    mode http\n    timeout connect 2s\n    timeout client 2s\n    timeout server 2s\n\
        frontend fe\n    bind 127.0.0.1:@P2@\n    default_backend next\n\
        backend next\n    server inner 127.0.0.1:@P1@ send-proxy-v2\n\
        frontend inner\n    bind 127.0.0.1:@P1@ accept-proxy\n\
        \x20   http-request return status 200 content-type text/plain lf-string \"%[src] %[dst]:%[dst_port] %[fc_rcvd_proxy]\"\n";
    let req = b"GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n";
    both(
        "send_proxy_v2_announces_the_client_to_the_next_proxy",
        cfg,
        |_, _, port, _| {
            let got = exchange(port, req);
            // The outer frontend's port differs from run to run.
            let got = got.replace(&format!(":{port} "), ":FE ");
            assert!(got.ends_with("127.0.0.1 127.0.0.1:FE 1"), "{got}");
            vec![got]
        },
    );
}

/// `tcp-request connection expect-proxy layer4 if COND`: a PROXY header is read only where the
/// rule fires, before the TLS handshake on an `ssl` bind, and the connection rules see the
/// socket's addresses (the header's come after them). Three binds: one where the rule fires,
/// one where it does not, an `ssl` one where it fires.
#[test]
fn expect_proxy_reads_a_header_only_where_the_rule_fires() {
    let tls_port = free_port();
    let cfg = format!(
        "defaults\n    mode http\n    timeout connect 2s\n    timeout client 2s\n    timeout server 2s\n\
         frontend fe\n    bind 127.0.0.1:@P2@\n    bind 127.0.0.1:@P1@\n\
         \x20   bind 127.0.0.1:{tls_port} ssl crt @CRT@/www-ecdsa.pem\n\
         \x20   tcp-request connection reject if {{ src 192.0.2.0/24 }}\n\
         \x20   tcp-request connection expect-proxy layer4 if {{ dst_port @P2@ }}\n\
         \x20   tcp-request connection expect-proxy layer4 if {{ dst_port {tls_port} }}\n\
         \x20   http-request return status 200 content-type text/plain lf-string \"%[src] %[dst] %[fc_rcvd_proxy] %[ssl_fc]\"\n"
    );
    let req = b"GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n";
    let header = b"PROXY TCP4 192.0.2.1 203.0.113.9 5555 80\r\n";
    both(
        "expect_proxy_reads_a_header_only_where_the_rule_fires",
        &cfg,
        |_, plain, port, _| {
            let mut seen = vec![
                // Fired: the header's addresses (the reject saw the socket's, 127.0.0.1).
                exchange(port, &[&header[..], req].concat()),
                // Fired, no header: closed.
                exchange(port, req),
                // Not fired: the connection's own addresses; a header is a bad request line.
                exchange(plain, req),
                exchange(plain, &[&header[..], req].concat())
                    .lines()
                    .next()
                    .unwrap_or("")
                    .to_string(),
            ];
            // Fired on the `ssl` bind: the header first, then the handshake.
            let mut sock = TcpStream::connect(("127.0.0.1", tls_port)).unwrap();
            sock.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
            sock.write_all(header).unwrap();
            let name = rustls::pki_types::ServerName::try_from("www.example.com").unwrap();
            let conn =
                rustls::ClientConnection::new(support::tls::config(&[], false), name).unwrap();
            let mut tls = rustls::StreamOwned::new(conn, sock);
            tls.write_all(req).unwrap();
            let mut out = Vec::new();
            let _ = tls.read_to_end(&mut out);
            let text = String::from_utf8_lossy(&out).into_owned();
            seen.push(text.split_once("\r\n\r\n").map_or(text.clone(), |(h, b)| {
                format!("{} | {b}", h.lines().next().unwrap_or(""))
            }));
            assert_eq!(
                seen[0], "HTTP/1.1 200 OK | 192.0.2.1 203.0.113.9 1 0",
                "{seen:?}"
            );
            assert_eq!(seen[1], "", "{seen:?}");
            assert_eq!(
                seen[2], "HTTP/1.1 200 OK | 127.0.0.1 127.0.0.1 0 0",
                "{seen:?}"
            );
            assert!(seen[3].starts_with("HTTP/1.1 400"), "{seen:?}");
            assert_eq!(
                seen[4], "HTTP/1.1 200 OK | 192.0.2.1 203.0.113.9 1 1",
                "{seen:?}"
            );
            seen
        },
    );
}

/// Health checks send the PROXY header as HAProxy 2.6 decides: `check-send-proxy` always, and
/// a server's own `send-proxy[-v2]` when its checks go to its address and port (not with a
/// check `port`); the receiver (`accept-proxy`) refuses a check that sends none.
#[test]
fn health_checks_send_the_proxy_header_as_haproxy_decides() {
    let cfg = "global
    stats socket @SOCK@ level admin
defaults
    mode http
    timeout client 5s
    timeout server 5s
    timeout connect 2s
frontend fe
    bind 127.0.0.1:@P2@
    default_backend be
backend be
    option httpchk GET /
    default-server check inter 100ms rise 1 fall 1
    server own 127.0.0.1:@P1@ send-proxy
    server own-v2 127.0.0.1:@P1@ send-proxy-v2
    server explicit 127.0.0.1:@P1@ check-send-proxy
    server none 127.0.0.1:@P1@
    server other-port 127.0.0.1:@P1@ send-proxy port @P1@
    server explicit-port 127.0.0.1:@P1@ send-proxy-v2 port @P1@ check-send-proxy
listen receiver
    bind 127.0.0.1:@P1@ accept-proxy
    http-request return status 200
";
    let want = "own=2 own-v2=2 explicit=2 none=0 other-port=0 explicit-port=2";
    both("check_send_proxy", cfg, |_, _, _, run| {
        // Each server's operational state (`show servers state`), once the checks settled.
        let view = || {
            let state = run.cli("show servers state be");
            state
                .lines()
                .filter(|l| l.starts_with(|c: char| c.is_ascii_digit()) && l.contains(" be "))
                .map(|l| {
                    let w: Vec<&str> = l.split(' ').collect();
                    format!("{}={}", w[3], w[5])
                })
                .collect::<Vec<_>>()
                .join(" ")
        };
        let until = std::time::Instant::now() + Duration::from_secs(10);
        let mut seen = view();
        while seen != want && std::time::Instant::now() < until {
            std::thread::sleep(Duration::from_millis(50));
            seen = view();
        }
        vec![seen]
    });
}
