//! `option logasap`, side by side with Debian's haproxy: an HTTP transaction is logged when the
//! server's response head arrives (its `%Tt`, `%Ta`, `%Tu` and `%B` prefixed with `+`, `%B`
//! counting what the buffer held), not when a slow body ends; a TCP session when its server
//! connection is up. The test reads the log socket while the body is still being sent.
#![allow(clippy::disallowed_methods)]

mod support;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::thread;
use std::time::Duration;

use support::side::{both, Run};

/// A server that sends a response head with a 10-byte Content-Length, then the body 1.5 s
/// later; in TCP mode it says "hi" and echoes.
fn slow_server() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    thread::spawn(move || {
        for mut c in l.incoming().flatten() {
            thread::spawn(move || {
                let mut b = [0u8; 4096];
                let n = c.read(&mut b).unwrap_or(0);
                if b[..n].starts_with(b"GET ") {
                    let _ = c.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n");
                    thread::sleep(Duration::from_millis(1500));
                    let _ = c.write_all(b"0123456789");
                } else {
                    let _ = c.write_all(&b[..n]);
                }
                let _ = c.read(&mut b);
            });
        }
    });
    port
}

/// The masked log lines (the times vary): `+N` and `N` become `+T` and `T`; `-1` stays.
fn shape(lines: Vec<String>) -> Vec<String> {
    lines
        .into_iter()
        .map(|l| {
            l.split(' ')
                .map(|w| match w.strip_prefix('+') {
                    Some(n) if n.parse::<i64>().is_ok() => "+T".to_string(),
                    // A time that was measured (never -1) is masked.
                    _ if w.parse::<i64>().is_ok_and(|n| n >= 0) && w.len() < 6 => "T".to_string(),
                    _ => w.to_string(),
                })
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect()
}

#[test]
fn logasap_logs_at_the_response_head_and_at_connect() {
    let srv = slow_server();
    let cfg = format!(
        "global\n    log 127.0.0.1:@LOG@ format raw local0\n\
         defaults\n    log global\n    timeout client 5s\n    timeout server 5s\n    timeout connect 2s\n\
         frontend web\n    mode http\n    option logasap\n    bind 127.0.0.1:@P2@\n\
         \x20   log-format \"%ST %Tt %Ta %Tu %B %U %ts %Tr %Tw %Tc\"\n    default_backend be\n\
         frontend raw\n    mode tcp\n    option logasap\n    bind 127.0.0.1:@P1@\n\
         \x20   log-format \"%Tt %B %U %ts\"\n    default_backend be_tcp\n\
         backend be\n    mode http\n    server s1 127.0.0.1:{srv}\n\
         backend be_tcp\n    mode tcp\n    server s1 127.0.0.1:{srv}\n"
    );
    both("logasap", &cfg, |_, p1, p2, run: &mut Run| {
        let mut seen = Vec::new();
        let mut c = TcpStream::connect(("127.0.0.1", p2)).unwrap();
        c.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        let mut got = Vec::new();
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        while !got.windows(4).any(|w| w == b"\r\n\r\n") {
            let mut b = [0u8; 256];
            match c.read(&mut b) {
                Ok(0) | Err(_) => break,
                Ok(n) => got.extend_from_slice(&b[..n]),
            }
        }
        // The body is 1.5 s behind the head: the line comes before it (waited for, then the
        // body found not there yet).
        let line = shape(run.lines_n(1));
        c.set_nonblocking(true).unwrap();
        let mut b = [0u8; 256];
        let body_first = match c.read(&mut b) {
            Ok(n) => {
                got.extend_from_slice(&b[..n]);
                n > 0
            }
            Err(_) => false,
        };
        c.set_nonblocking(false).unwrap();
        seen.push(format!(
            "during the body: {line:?}, body there first: {body_first}"
        ));
        while !got.ends_with(b"0123456789") {
            let mut b = [0u8; 256];
            match c.read(&mut b) {
                Ok(0) | Err(_) => break,
                Ok(n) => got.extend_from_slice(&b[..n]),
            }
        }
        drop(c);
        // No second line: what comes within 600 ms.
        thread::sleep(Duration::from_millis(300));
        seen.push(format!("after: {:?}", shape(run.lines())));
        let mut t = TcpStream::connect(("127.0.0.1", p1)).unwrap();
        t.write_all(b"hello").unwrap();
        let mut b = [0u8; 16];
        let n = t.read(&mut b).unwrap();
        seen.push(format!("tcp echo {:?}", String::from_utf8_lossy(&b[..n])));
        seen.push(format!("tcp, still open: {:?}", shape(run.lines_n(1))));
        drop(t);
        // No second line: what comes within 600 ms.
        thread::sleep(Duration::from_millis(300));
        seen.push(format!("tcp, closed: {:?}", shape(run.lines())));
        seen
    });
}
