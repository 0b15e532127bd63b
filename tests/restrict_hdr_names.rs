//! `option http-restrict-req-hdr-names preserve|delete|reject`, side by side with Debian's
//! haproxy: request headers whose names carry a character other than a letter, a digit or `-`
//! (`X_my_hdr`) are forwarded, removed, or refused with a 403, per proxy (the frontend's option
//! applies after its `http-request` rules, then the backend's after its own), inherited from
//! `defaults`. The test compares the status, the header names the server received and the log
//! line.
#![allow(clippy::disallowed_methods)]

mod support;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::thread;
use std::time::Duration;

use support::side::{both, mask};

/// A server that answers each request with `x-seen:` the names of the headers it received,
/// in order, lowercased.
fn server() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    thread::spawn(move || {
        for mut c in l.incoming().flatten() {
            thread::spawn(move || {
                c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
                let mut got = Vec::new();
                let mut b = [0u8; 4096];
                loop {
                    let Some(end) = got.windows(4).position(|w| w == b"\r\n\r\n") else {
                        match c.read(&mut b) {
                            Ok(n) if n > 0 => got.extend_from_slice(&b[..n]),
                            _ => return,
                        }
                        continue;
                    };
                    let head = String::from_utf8_lossy(&got[..end]).to_lowercase();
                    got.drain(..end + 4);
                    let seen: Vec<&str> = head
                        .lines()
                        .skip(1)
                        .filter_map(|l| l.split_once(':').map(|(n, _)| n))
                        .collect();
                    let res = format!(
                        "HTTP/1.1 200 OK\r\nx-seen: {}\r\nContent-Length: 2\r\n\r\nok",
                        seen.join(",")
                    );
                    if c.write_all(res.as_bytes()).is_err() {
                        return;
                    }
                }
            });
        }
    });
    port
}

/// One request with `headers` on a new connection: the status line and `x-seen`.
fn exchange(port: u16, path: &str, headers: &str) -> String {
    let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let req = format!("GET {path} HTTP/1.1\r\nHost: x\r\n{headers}Connection: close\r\n\r\n");
    c.write_all(req.as_bytes()).unwrap();
    let mut out = Vec::new();
    let _ = c.read_to_end(&mut out);
    let text = String::from_utf8_lossy(&out);
    let status = text.lines().next().unwrap_or("").to_string();
    let seen = text
        .lines()
        .find_map(|l| l.strip_prefix("x-seen: "))
        .unwrap_or("-");
    format!("{status} | {seen}")
}

#[test]
fn header_names_are_preserved_deleted_or_rejected_as_haproxy_does() {
    let srv = server();
    let cfg = format!(
        "global
    log 127.0.0.1:@LOG@ len 2048 format raw local0
defaults
    mode http
    log global
    option httplog
    timeout connect 2s
    timeout client 5s
    timeout server 5s
    option http-restrict-req-hdr-names delete
frontend fe
    bind 127.0.0.1:@P2@
    http-request del-header x_gone if {{ path /fe-reject-after-rule }}
    option http-restrict-req-hdr-names preserve
    use_backend reject if {{ path_beg /reject }}
    use_backend preserve if {{ path_beg /preserve }}
    default_backend inherit
frontend fe_reject
    bind 127.0.0.1:@P1@
    option http-restrict-req-hdr-names reject
    http-request del-header x_gone
    default_backend preserve
backend inherit
    server s 127.0.0.1:{srv}
backend preserve
    option http-restrict-req-hdr-names preserve
    server s 127.0.0.1:{srv}
backend reject
    option http-restrict-req-hdr-names reject
    server s 127.0.0.1:{srv}
"
    );
    both("restrict_hdr_names", &cfg, |_, p1, p2, run| {
        let mut seen = vec![
            exchange(p2, "/inherit", "X_my_hdr: on\r\nx-ok: 1\r\nx.dot: 2\r\n"),
            exchange(p2, "/inherit", "x-ok: 1\r\nX-trailing_: 3\r\nA1-b2: 4\r\n"),
            exchange(p2, "/preserve", "X_my_hdr: on\r\n"),
            exchange(p2, "/reject", "X_my_hdr: on\r\n"),
            exchange(p2, "/reject", "x-fine: on\r\n"),
            exchange(p1, "/", "x_gone: 1\r\n"),
            exchange(p1, "/", "x_gone: 1\r\nx_other: 2\r\n"),
        ];
        // One line per connection, sorted: workers flush theirs independently.
        let mut lines: Vec<String> = run
            .lines_n(seen.len())
            .iter()
            .map(|l| {
                // The client's port, the timers and the connection counts (a previous
                // connection may not be closed yet) differ between runs.
                let l = mask(l);
                let mut w: Vec<&str> = l.split(' ').collect();
                if w.len() > 10 {
                    w[0] = "CLIENT";
                    w[4] = "TIMERS";
                    w[10] = "COUNTS";
                }
                w.join(" ")
            })
            .collect();
        lines.sort();
        seen.extend(lines);
        seen
    });
}
