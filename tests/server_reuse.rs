//! Which server connection serves which request, side by side with Debian's haproxy:
//! - a connection that began with a PROXY header (`send-proxy`, `send-proxy-v2` with
//!   `proxy-v2-options`) serves only requests that would send the same header: never another
//!   client (under `http-reuse always` too: the receiver sees each client's own port), and a
//!   new one for each unique id (`proxy-v2-options unique-id`);
//! - `http-reuse aggressive` sends a client's first request only over a connection already
//!   proven reusable (one that carried two requests);
//! - `pool-max-conn N` bounds the idle connections to a server, the connection a session
//!   holds between its requests included: with a pool of one, a second client's own
//!   connection closes after its first request and its next requests take the first client's.
//!
//! A receiving proxy (`accept-proxy`) answers each request with what it saw.
#![allow(clippy::disallowed_methods)]

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use support::side::both;

/// Sends `n` requests on one connection (`first` headers on the first one), closes it and
/// waits for the proxy to close, and gives each response's `x-seen` header, with the client's
/// own port replaced by `ME`.
fn client(port: u16, first: &str, n: usize) -> Vec<String> {
    let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let me = c.local_addr().unwrap().port().to_string();
    let mut out = Vec::new();
    for i in 0..n {
        let extra = if i == 0 { first } else { "" };
        let req = format!("GET /{i} HTTP/1.1\r\nHost: x\r\nin: r{i}\r\n{extra}\r\n");
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
        let seen = text
            .lines()
            .find_map(|l| l.strip_prefix("x-seen: "))
            .unwrap_or("-")
            .replace(&me, "ME");
        out.push(seen);
    }
    // A polite close: the proxy has finished with the connection (and given its server
    // connection back to the pool) when it closes its side, so the next client sees the pool
    // as this one left it, whichever thread served it.
    c.shutdown(std::net::Shutdown::Write).unwrap();
    let mut rest = Vec::new();
    let _ = c.read_to_end(&mut rest);
    out
}

/// A sender with `server_opts` in front of a receiver that reports the client port and unique
/// id its PROXY header carried.
fn proxied(server_opts: &str) -> String {
    format!(
        "global
    nbthread 1
defaults
    mode http
    timeout connect 2s
    timeout client 5s
    timeout server 5s
    unique-id-format ID-%[req.hdr(in)]
listen sender
    bind 127.0.0.1:@P2@
    http-reuse always
    server r 127.0.0.1:@P1@ {server_opts}
listen receiver
    bind 127.0.0.1:@P1@ accept-proxy
    http-request return status 200 hdr x-seen \"%[src_port] id=%[fc_pp_unique_id] first=%[http_first_req]\"
"
    )
}

#[test]
fn a_proxy_header_ties_a_server_connection_to_its_client() {
    both(
        "server_reuse_send_proxy",
        &proxied("send-proxy"),
        |_, _, p2, _| {
            let mut seen = Vec::new();
            for _ in 0..3 {
                seen.extend(client(p2, "", 2));
            }
            // Whether an idle connection is kept at all is haproxy's estimate of the connections
            // needed (it closes a second client's); only whose connection served is compared.
            seen.iter()
                .map(|s| s.split(" first=").next().unwrap_or("").to_string())
                .collect()
        },
    );
}

#[test]
fn a_unique_id_in_the_proxy_header_takes_a_connection_per_request() {
    let opts = "send-proxy-v2 proxy-v2-options unique-id,crc32c";
    both(
        "server_reuse_v2_unique_id",
        &proxied(opts),
        |_, _, p2, _| {
            let mut seen = client(p2, "", 3);
            seen.extend(client(p2, "", 2));
            seen
        },
    );
}

/// A sender whose server has `pool-max-conn 1`, with `threads` worker threads, in front of a
/// receiver that reports which client's connection carried each request.
fn pool_of_one(threads: u32) -> String {
    format!(
        "global
    nbthread {threads}
defaults
    mode http
    timeout connect 2s
    timeout client 5s
    timeout server 5s
listen sender
    bind 127.0.0.1:@P2@
    http-reuse safe
    http-request set-header client-id %[req.hdr(client-id)] if {{ req.hdr(client-id) -m found }}
    server srv 127.0.0.1:@P1@ pool-max-conn 1
listen receiver
    bind 127.0.0.1:@P1@
    http-request set-var(sess.client_id) req.hdr(client-id)
    http-request return status 200 hdr x-seen \"%[var(sess.client_id)] first=%[http_first_req]\"
"
    )
}

#[test]
fn pool_max_conn_bounds_the_idle_connections_sessions_hold() {
    both(
        "server_reuse_pool_max_conn",
        &pool_of_one(1),
        |_, _, p2, _| {
            let mut seen = Vec::new();
            for id in ["c1", "c2", "c3"] {
                seen.extend(client(p2, &format!("client-id: {id}\r\n"), 3));
            }
            seen
        },
    );
}

/// With two worker threads, clients land on either; the pool is still one for the process: a
/// thread whose own pool is empty takes over the connection the other thread holds idle, and
/// `pool-max-conn` counts both threads' idle connections (HAProxy's connection takeover).
#[test]
fn the_idle_pool_is_shared_by_the_worker_threads() {
    both(
        "server_reuse_pool_threads",
        &pool_of_one(2),
        |_, _, p2, _| {
            let mut seen = Vec::new();
            for i in 1..=8 {
                seen.extend(client(p2, &format!("client-id: c{i}\r\n"), 3));
            }
            seen
        },
    );
}

/// A sender with `http-reuse aggressive` and `threads` worker threads.
fn aggressive(threads: u32) -> String {
    format!(
        "global
    nbthread {threads}
defaults
    mode http
    timeout connect 2s
    timeout client 5s
    timeout server 5s
listen sender
    bind 127.0.0.1:@P2@
    http-reuse aggressive
    server srv 127.0.0.1:@P1@
listen receiver
    bind 127.0.0.1:@P1@
    http-request return status 200 hdr x-seen \"first=%[http_first_req]\"
"
    )
}

#[test]
fn aggressive_reuse_sends_a_first_request_only_over_a_proven_connection() {
    both("server_reuse_aggressive", &aggressive(1), |_, _, p2, _| {
        // A connection that carried one request is not proven: the second client's first
        // request gets a new one; after two requests it is, and the third client's first
        // request takes it.
        let mut seen = client(p2, "", 1);
        seen.extend(client(p2, "", 2));
        seen.extend(client(p2, "", 1));
        seen
    });
}

/// The same with two worker threads: the proven connection serves a first request on either.
#[test]
fn aggressive_reuse_finds_the_proven_connection_on_the_other_thread() {
    both(
        "server_reuse_aggressive_threads",
        &aggressive(2),
        |_, _, p2, _| {
            let mut seen = client(p2, "", 1);
            seen.extend(client(p2, "", 2));
            for _ in 0..6 {
                seen.extend(client(p2, "", 1));
            }
            seen
        },
    );
}

/// An idle server connection is closed once it has idled for the pool's delay (5 s), also when
/// no request comes to take it: the proxy's descriptors go back to what they were before the
/// request.
#[test]
fn idle_server_connections_close_without_traffic() {
    let http = support::http::HttpBackend::start();
    let port = support::free_port();
    let cfg = format!(
        "global\n    nbthread 1\ndefaults\n    mode http\n    timeout connect 2s\n    timeout client 5s\n    timeout server 5s\n\
         listen fe\n    bind 127.0.0.1:{port}\n    http-reuse always\n    server s1 127.0.0.1:{}\n",
        http.port
    );
    let proxy = support::Proxy::started(&cfg, port);
    let pid = proxy.pid();
    let before = support::fd_count(pid);
    let mut c = support::connect(port);
    c.write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    let reply = support::read_all(&mut c);
    assert!(reply.starts_with(b"HTTP/1.1 200"), "{reply:?}");
    drop(c);
    // The server connection idles in the pool...
    assert!(support::eventually(Duration::from_secs(2), || {
        support::fd_count(pid) == before + 1
    }));
    // ...and is closed after the pool's delay, though no request came.
    let closed = support::eventually(Duration::from_secs(10), || support::fd_count(pid) == before);
    assert!(
        closed,
        "{} descriptors, {before} before",
        support::fd_count(pid)
    );
}
