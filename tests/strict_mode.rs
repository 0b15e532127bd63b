//! `http-request strict-mode`, `http-response strict-mode` and `http-after-response strict-mode`, side by side with Debian's
//! haproxy: with `tune.bufsize 2048` and `tune.maxrewrite 128`, a message whose body filled the
//! buffer has room for one more 80-byte header, not two. The second `set-header` then fails:
//! in strict mode (the default) the transaction ends with a 500 (`PR` for a request rule, `PH`
//! for a response rule); after `strict-mode off` the rewrite is skipped and the message goes on
//! without it (also when a `wait-for-body` came between). A small message has room for both.
//! The test compares what the client got, which
//! `x-` headers the server received, and the log line.
#![allow(clippy::disallowed_methods)]

mod support;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::thread;
use std::time::Duration;

use support::side::{both, Run};

/// A server that reads one request (head and `Content-Length` body) and answers 200, closing,
/// with `x-seen:` the names of the `x-` headers it got; for a path under `/big` the response
/// has a 1900-byte body, sent with the head in one write.
fn server() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    thread::spawn(move || {
        for mut c in l.incoming().flatten() {
            thread::spawn(move || {
                c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
                let mut got = Vec::new();
                let mut b = [0u8; 4096];
                let head_end = loop {
                    if let Some(p) = got.windows(4).position(|w| w == b"\r\n\r\n") {
                        break p + 4;
                    }
                    match c.read(&mut b) {
                        Ok(n) if n > 0 => got.extend_from_slice(&b[..n]),
                        _ => return,
                    }
                };
                let head = String::from_utf8_lossy(&got[..head_end]).to_lowercase();
                let len: usize = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:"))
                    .map_or(0, |v| v.trim().parse().unwrap());
                while got.len() < head_end + len {
                    match c.read(&mut b) {
                        Ok(n) if n > 0 => got.extend_from_slice(&b[..n]),
                        _ => return,
                    }
                }
                let seen: Vec<&str> = head
                    .lines()
                    .filter_map(|l| l.split_once(':').map(|(n, _)| n))
                    .filter(|n| n.starts_with("x-"))
                    .collect();
                let path = head.split(' ').nth(1).unwrap_or("");
                let body = if path.starts_with("/big") {
                    "b".repeat(1900)
                } else {
                    "ok".to_string()
                };
                let res = format!(
                    "HTTP/1.1 200 OK\r\nx-seen: {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    seen.join(","),
                    body.len()
                );
                let _ = c.write_all(res.as_bytes());
            });
        }
    });
    port
}

/// Sends one request (the connection closed after it) and gives the response's status line, its `x-` headers and body length.
fn exchange(port: u16, path: &str, body_len: usize) -> String {
    let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let req = format!(
        "POST {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: {body_len}\r\n\r\n{}",
        "a".repeat(body_len)
    );
    c.write_all(req.as_bytes()).unwrap();
    let mut got = Vec::new();
    let _ = c.read_to_end(&mut got);
    let text = String::from_utf8_lossy(&got);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let mut lines = head.lines();
    let status = lines.next().unwrap_or("").to_string();
    let xs: Vec<String> = lines
        .map(str::to_lowercase)
        .filter(|l| l.starts_with("x-"))
        .collect();
    format!("{path}: {status} {xs:?} body {}", body.len())
}

#[test]
fn strict_mode_makes_a_failed_rewrite_a_500() {
    let srv = server();
    let v = "v".repeat(80);
    let cfg = format!(
        "global\n    log 127.0.0.1:@LOG@ format raw local0\n    tune.bufsize 2048\n    tune.maxrewrite 128\n\
         defaults\n    mode http\n    log global\n    timeout client 5s\n    timeout server 5s\n    timeout connect 2s\n\
         \x20   option http-buffer-request\n\
         frontend fe\n    bind 127.0.0.1:@P2@\n    log-format \"%ST %ts %{{+Q}}r\"\n\
         \x20   http-request set-var(txn.p) path\n\
         \x20   http-request strict-mode off if {{ path_beg /wait }}\n\
         \x20   http-request wait-for-body time 1s if {{ path_beg /wait }}\n\
         \x20   http-request set-header x-a {v} if {{ path_beg /req }} || {{ path_beg /wait }}\n\
         \x20   http-request strict-mode off if {{ path_beg /req/soft }}\n\
         \x20   http-request set-header x-b {v} if {{ path_beg /req }} || {{ path_beg /wait }}\n\
         \x20   default_backend be\n\
         backend be\n\
         \x20   http-response set-header x-c {v} if {{ var(txn.p) -m beg /big }}\n\
         \x20   http-response strict-mode off if {{ var(txn.p) -m beg /big/soft }}\n\
         \x20   http-response set-header x-d {v} if {{ var(txn.p) -m beg /big }}\n\
         \x20   server s1 127.0.0.1:{srv}\n"
    );
    both("strict_mode", &cfg, |_, _, p2, run: &mut Run| {
        let mut seen = Vec::new();
        for (path, len) in [
            ("/req/small", 10),
            ("/req/strict", 1900),
            ("/req/soft", 1900),
            // `strict-mode off` holds across a `wait-for-body`.
            ("/wait", 1900),
            ("/big/strict", 0),
            ("/big/soft", 0),
            ("/small", 1900),
        ] {
            seen.push(exchange(p2, path, len));
            // Each request's line before the next connection (workers flush independently).
            seen.extend(run.lines_n(1));
        }
        seen
    });
}

/// `http-after-response strict-mode`: the same rewrites as above in `http-after-response`
/// rules (the backend's, then the frontend's). In strict mode a failed rewrite replaces the
/// response with a 500 (`PH`), on which the rules run again; after `strict-mode off` the
/// rewrite is skipped; each list starts strict again.
#[test]
fn after_response_strict_mode() {
    let srv = server();
    let v = "v".repeat(80);
    let cfg = format!(
        "global\n    log 127.0.0.1:@LOG@ format raw local0\n    tune.bufsize 2048\n    tune.maxrewrite 128\n\
         defaults\n    mode http\n    log global\n    timeout client 5s\n    timeout server 5s\n    timeout connect 2s\n\
         frontend fe\n    bind 127.0.0.1:@P2@\n    log-format \"%ST %ts %{{+Q}}r\"\n\
         \x20   http-request set-var(txn.p) path\n\
         \x20   http-after-response set-header x-g {v} if {{ var(txn.p) -m beg /big/fe }}\n\
         \x20   default_backend be\n\
         backend be\n\
         \x20   http-after-response set-header x-e {v} if {{ var(txn.p) -m beg /big }}\n\
         \x20   http-after-response strict-mode off if {{ var(txn.p) -m beg /big/soft }} || {{ var(txn.p) -m beg /big/fe }}\n\
         \x20   http-after-response set-header x-f {v} if {{ var(txn.p) -m beg /big }}\n\
         \x20   server s1 127.0.0.1:{srv}\n"
    );
    both(
        "after_response_strict_mode",
        &cfg,
        |_, _, p2, run: &mut Run| {
            let mut seen = Vec::new();
            for path in ["/small", "/big/strict", "/big/soft", "/big/fe"] {
                seen.push(exchange(p2, path, 0));
                // Each request's line before the next connection (workers flush
                // independently).
                seen.extend(run.lines_n(1));
            }
            let got = |p: &str| seen.iter().find(|l| l.starts_with(p)).cloned().unwrap();
            assert!(got("/big/strict:").contains(" 500 "), "{seen:?}");
            let soft = got("/big/soft:");
            assert!(
                soft.contains(" 200 ") && soft.contains("x-e") && !soft.contains("x-f"),
                "{seen:?}"
            );
            // The frontend's list starts strict: its rewrite fails after the backend's soft one.
            assert!(got("/big/fe:").contains(" 500 "), "{seen:?}");
            seen
        },
    );
}
