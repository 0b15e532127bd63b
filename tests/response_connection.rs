//! The `Connection` header of a forwarded response, side by side with haproxy 2.6: its HTTP/1
//! multiplexer says how the client connection goes on by the response's version as forwarded
//! and the client's, so an HTTP/1.0 response to an HTTP/1.1 client that keeps its connection
//! says `keep-alive`, and one that closes says nothing (HTTP/1.0 already means close). Each
//! case also checks that the connection is still usable, or closed, the same way in both.
// Test code blocks and locks freely: it is not a worker event loop.
#![allow(clippy::disallowed_methods)]

mod support;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::thread;
use std::time::Duration;

use support::http::Client;

/// A server that answers `/10` with an HTTP/1.0 response (then closes) and anything else with
/// an HTTP/1.1 keep-alive one, two bytes of body each.
fn versioned_server() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { return };
            thread::spawn(move || {
                let _ = conn.set_read_timeout(Some(Duration::from_secs(5)));
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                loop {
                    let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
                        match conn.read(&mut chunk) {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                        continue;
                    };
                    let head = String::from_utf8_lossy(&buf[..end]).into_owned();
                    buf.drain(..end + 4);
                    let old = head.starts_with("GET /10 ");
                    let version = if old { "HTTP/1.0" } else { "HTTP/1.1" };
                    let res = format!("{version} 200 OK\r\nContent-Length: 2\r\n\r\nok");
                    if conn.write_all(res.as_bytes()).is_err() || old {
                        return;
                    }
                }
            });
        }
    });
    port
}

/// The response head with names and values lower-cased (haproxy lower-cases the names it
/// forwards, Bascule keeps them as the server wrote them), then whether a second request on
/// the same connection was answered.
fn exchange(port: u16, req: &str) -> String {
    let mut c = Client::connect(port);
    c.send(req.as_bytes());
    let Some(first) = c.response(false) else {
        return format!("{req:?}: no response");
    };
    let again = if req.contains("HTTP/1.0") {
        "GET /11 HTTP/1.0\r\nconnection: keep-alive\r\n\r\n"
    } else {
        "GET /11 HTTP/1.1\r\nhost: a\r\n\r\n"
    };
    let _ = c.s.write_all(again.as_bytes());
    let second = c.response(false).map_or("closed", |_| "answered");
    format!("{req:?} -> {} / then {second}", first.head.to_lowercase())
}

#[test]
fn forwarded_responses_say_how_the_connection_goes_on_as_haproxy() {
    let server = versioned_server();
    let cfg = format!(
        "defaults\n    mode http\n    timeout client 5s\n    timeout server 5s\n    timeout connect 1s\n\
         frontend fe\n    bind 127.0.0.1:@P2@\n    default_backend be\n\
         backend be\n    server s 127.0.0.1:{server}\n"
    );
    let requests = [
        "GET /10 HTTP/1.1\r\nhost: a\r\n\r\n",
        "GET /10 HTTP/1.1\r\nhost: a\r\nconnection: close\r\n\r\n",
        "GET /10 HTTP/1.0\r\n\r\n",
        "GET /10 HTTP/1.0\r\nconnection: keep-alive\r\n\r\n",
        "GET /11 HTTP/1.1\r\nhost: a\r\n\r\n",
        "GET /11 HTTP/1.1\r\nhost: a\r\nconnection: close\r\n\r\n",
        "GET /11 HTTP/1.0\r\n\r\n",
        "GET /11 HTTP/1.0\r\nconnection: keep-alive\r\n\r\n",
    ];
    support::side::both(
        "connection header of forwarded responses",
        &cfg,
        |_, _, p2, _| requests.iter().map(|req| exchange(p2, req)).collect(),
    );
}
