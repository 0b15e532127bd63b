//! End-to-end HTTP/1.1 mode: real clients, the real binary, a hand-written HTTP backend.
// Test code blocks and locks freely: it is not a worker event loop.
#![allow(clippy::disallowed_methods)]

mod support;

use std::io::{Read, Write};
use std::time::Duration;

use support::http::{header, Client, HttpBackend};
use support::*;

fn http_cfg(port: u16, servers: &[u16], extra_defaults: &str) -> String {
    let mut cfg = format!(
        "global\n    nbthread 2\ndefaults\n    mode http\n    timeout connect 1s\n    timeout client 5s\n    timeout server 5s\n{extra_defaults}\
         frontend fe\n    bind 127.0.0.1:{port}\n    default_backend be\nbackend be\n"
    );
    for (i, p) in servers.iter().enumerate() {
        cfg.push_str(&format!("    server s{i} 127.0.0.1:{p}\n"));
    }
    cfg
}

fn start(servers: &[u16], extra: &str) -> (Proxy, u16) {
    let port = free_port();
    (
        Proxy::start(&http_cfg(port, servers, extra), port, &[]),
        port,
    )
}

#[test]
fn keep_alive_reuses_server_connections() {
    let be = HttpBackend::start();
    let (_p, port) = start(&[be.port], "");
    let base = be.connections();
    let threads: Vec<_> = (0..10)
        .map(|_| {
            std::thread::spawn(move || {
                let mut c = Client::connect(port);
                for _ in 0..100 {
                    let r = c.get("/size/10");
                    assert_eq!(r.status, 200);
                    assert_eq!(r.body.len(), 10);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let used = be.connections() - base;
    assert!(
        used <= 10,
        "1000 requests on 10 client connections used {used} server connections"
    );
    assert_eq!(be.seen().len(), 1000);
}

#[test]
fn pipelined_requests_are_answered_in_order() {
    let be = HttpBackend::start();
    let (_p, port) = start(&[be.port], "");
    let mut c = Client::connect(port);
    c.send(b"GET /size/1 HTTP/1.1\r\nHost: a\r\n\r\nGET /size/2 HTTP/1.1\r\nHost: a\r\n\r\nGET /size/3 HTTP/1.1\r\nHost: a\r\n\r\n");
    for n in 1..=3 {
        let r = c.response(false).unwrap();
        assert_eq!(r.body.len(), n);
    }
}

#[test]
fn chunked_both_ways_with_trailers() {
    let be = HttpBackend::start();
    let (_p, port) = start(&[be.port], "");
    let mut c = Client::connect(port);
    c.send(b"POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;x=y\r\nde\r\n0\r\nX-Up: t\r\n\r\n");
    let r = c.response(false).unwrap();
    assert_eq!(r.body, b"ok 5");
    assert_eq!(be.seen().last().unwrap().body, b"abcde");
    // The chunked response arrives with its framing and trailer unchanged.
    c.send(b"GET /chunked HTTP/1.1\r\nHost: a\r\n\r\n");
    let mut raw = Vec::new();
    let mut buf = [0u8; 4096];
    while !raw.ends_with(b"X-T: done\r\n\r\n") {
        let n = c.s.read(&mut buf).unwrap();
        assert!(n > 0, "closed early: {}", String::from_utf8_lossy(&raw));
        raw.extend_from_slice(&buf[..n]);
    }
    let text = String::from_utf8_lossy(&raw);
    assert!(
        text.contains("\r\n\r\n4\r\nWiki\r\n5;e=1\r\npedia\r\n0\r\nX-T: done\r\n\r\n"),
        "{text}"
    );
    // And the connection is still usable.
    assert_eq!(c.get("/size/2").body.len(), 2);
}

#[test]
fn bodiless_responses_head_204_304() {
    let be = HttpBackend::start();
    let (_p, port) = start(&[be.port], "");
    let mut c = Client::connect(port);
    c.send(b"HEAD /size/50 HTTP/1.1\r\nHost: a\r\n\r\n");
    let r = c.response(true).unwrap();
    assert_eq!(header(&r.head, "content-length"), Some("50"));
    assert_eq!(c.get("/204").status, 204);
    assert_eq!(c.get("/304").status, 304);
    assert_eq!(c.get("/size/3").body, b"xxx");
}

#[test]
fn expect_100_continue() {
    let be = HttpBackend::start();
    let (_p, port) = start(&[be.port], "");
    let mut c = Client::connect(port);
    c.send(b"POST /up HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n");
    let interim = c.response(false).unwrap();
    assert_eq!(interim.status, 100);
    c.send(b"hello");
    let r = c.response(false).unwrap();
    assert_eq!((r.status, r.body.as_slice()), (200, &b"ok 5"[..]));
}

#[test]
fn http_1_0_client_gets_a_closed_connection() {
    let be = HttpBackend::start();
    let (_p, port) = start(&[be.port], "");
    let mut c = Client::connect(port);
    c.send(b"GET /size/4 HTTP/1.0\r\n\r\n");
    let r = c.response(false).unwrap();
    assert_eq!(r.body, b"xxxx");
    assert!(c.closed());
}

#[test]
fn smuggling_probes_never_reach_the_backend() {
    let be = HttpBackend::start();
    let (_p, port) = start(&[be.port], "");
    let probes: &[&[u8]] = &[
        b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 6\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: a\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 4\r\n\r\n5c\r\nGET /smuggled HTTP/1.1\r\n\r\n0\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: xchunked\r\n\r\n0\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding : chunked\r\n\r\n0\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 40\r\n\r\nGET /smuggled HTTP/1.1\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n\r\n0\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: a\r\nX: y\r\n folded\r\n\r\n",
        b"GET / HTTP/1.1\r\n\r\n",
    ];
    for p in probes {
        let mut c = Client::connect(port);
        c.send(p);
        let r = c.response(false).expect("an answer");
        assert_eq!(r.status, 400, "probe {:?}", String::from_utf8_lossy(p));
        assert!(c.closed(), "connection left open after a 400");
    }
    assert!(be.seen().is_empty(), "reached the backend: {:?}", be.seen());
}

#[test]
fn oversized_heads_get_414_and_431() {
    let be = HttpBackend::start();
    let (_p, port) = start(&[be.port], "");
    let mut c = Client::connect(port);
    let long_uri = format!("GET /{} HTTP/1.1\r\nHost: a\r\n\r\n", "a".repeat(20_000));
    c.send(long_uri.as_bytes());
    assert_eq!(c.response(false).unwrap().status, 414);
    let mut c = Client::connect(port);
    let big = format!(
        "GET / HTTP/1.1\r\nHost: a\r\nX-Big: {}\r\n\r\n",
        "b".repeat(20_000)
    );
    c.send(big.as_bytes());
    assert_eq!(c.response(false).unwrap().status, 431);
    let mut c = Client::connect(port);
    let mut many = String::from("GET / HTTP/1.1\r\nHost: a\r\n");
    for i in 0..150 {
        many.push_str(&format!("X-{i}: v\r\n"));
    }
    many.push_str("\r\n");
    c.send(many.as_bytes());
    assert_eq!(c.response(false).unwrap().status, 431);
}

#[test]
fn server_misbehaviour_maps_to_502_and_504() {
    let be = HttpBackend::start();
    let (_p, port) = start(&[be.port], "    timeout server 500ms\n");
    let mut c = Client::connect(port);
    let r = c.get("/garbage");
    assert_eq!(r.status, 502);
    assert!(r.body.starts_with(b"<html><body><h1>502 Bad Gateway</h1>"));
    let mut c = Client::connect(port);
    assert_eq!(c.get("/slow").status, 504);
    // Closing halfway through the body: the client sees the connection end, not a hang.
    let mut c = Client::connect(port);
    c.send(b"GET /midclose HTTP/1.1\r\nHost: a\r\n\r\n");
    let mut all = Vec::new();
    let _ = c.s.read_to_end(&mut all);
    assert!(String::from_utf8_lossy(&all).ends_with("only ten!!"));
    // A close-delimited response is passed on and the client connection closed.
    let mut c = Client::connect(port);
    let r = c.get("/close");
    assert_eq!(r.body, b"until the end");
}

#[test]
fn no_server_gives_503() {
    let mut dead = Backend::start(Behaviour::Echo);
    dead.stop();
    let (_p, port) = start(&[dead.port], "    retries 1\n");
    let mut c = Client::connect(port);
    let r = c.get("/");
    assert_eq!(r.status, 503);
    assert!(r
        .body
        .starts_with(b"<html><body><h1>503 Service Unavailable</h1>"));
}

#[test]
fn an_upload_answered_early_is_drained_not_reset() {
    // The 503 goes out before the body is read; the client keeps sending. A close with bytes
    // still arriving would answer them with a reset; the proxy half-closes and drains instead.
    let mut dead = Backend::start(Behaviour::Echo);
    dead.stop();
    let (_p, port) = start(&[dead.port], "    retries 0\n");
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(b"POST /upload HTTP/1.1\r\nHost: a\r\nContent-Length: 10000000\r\n\r\n")
        .unwrap();
    s.write_all(&[b'x'; 1024]).unwrap();
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = s
            .read(&mut buf)
            .expect("the 503 and then the end of the stream");
        if n == 0 {
            break;
        }
        answer.extend_from_slice(&buf[..n]);
    }
    assert!(
        answer.starts_with(b"HTTP/1.1 503"),
        "{}",
        String::from_utf8_lossy(&answer)
    );
    for _ in 0..5 {
        s.write_all(&[b'x'; 16 * 1024])
            .expect("the proxy still takes the rest of the upload");
        std::thread::sleep(Duration::from_millis(40));
    }
    assert_eq!(s.read(&mut buf).expect("no reset"), 0);
}

#[test]
fn incomplete_head_times_out_with_408() {
    let be = HttpBackend::start();
    let (_p, port) = start(&[be.port], "    timeout http-request 300ms\n");
    let mut c = Client::connect(port);
    c.send(b"GET / HTTP/1.1\r\nHost: a\r\n");
    let r = c.response(false).unwrap();
    assert_eq!(r.status, 408);
}

#[test]
fn forwardfor_and_headers_passed_unchanged() {
    let be = HttpBackend::start();
    let (_p, port) = start(&[be.port], "    option forwardfor\n");
    let mut c = Client::connect(port);
    c.send(b"GET /Mixed/Case?q=1 HTTP/1.1\r\nHost: a\r\nX-MiXeD-CaSe: Value\r\nConnection: keep-alive, X-Hop\r\nX-Hop: secret\r\n\r\n");
    let r = c.response(false).unwrap();
    assert_eq!(r.status, 200);
    // The backend's response header keeps its case on the way back.
    let r2 = c.get("/size/1");
    assert!(r2.head.contains("X-Backend-Case: Kept"), "{}", r2.head);
    let seen = be.seen();
    let head = &seen[0].head;
    assert!(
        head.starts_with("GET /Mixed/Case?q=1 HTTP/1.1\r\n"),
        "{head}"
    );
    assert!(head.contains("X-MiXeD-CaSe: Value\r\n"), "{head}");
    assert_eq!(header(head, "x-forwarded-for"), Some("127.0.0.1"));
    assert!(
        header(head, "x-hop").is_none(),
        "hop-by-hop header forwarded: {head}"
    );
    assert!(header(head, "via").is_none());
}

#[test]
fn websocket_upgrade_becomes_a_tunnel() {
    let be = HttpBackend::start();
    let (_p, port) = start(&[be.port], "    timeout tunnel 5s\n");
    let mut c = Client::connect(port);
    c.send(b"GET /ws HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n");
    let r = c.response(true).unwrap();
    assert_eq!(r.status, 101);
    assert!(header(&r.head, "upgrade").is_some());
    for msg in [&b"frame one"[..], b"frame two"] {
        c.s.write_all(msg).unwrap();
        let mut got = vec![0u8; msg.len()];
        c.s.read_exact(&mut got).unwrap();
        assert_eq!(got, msg);
    }
    let seen = be.seen();
    assert_eq!(header(&seen[0].head, "upgrade"), Some("websocket"));
}

#[test]
fn httpclose_closes_both_sides() {
    let be = HttpBackend::start();
    let (_p, port) = start(&[be.port], "    option httpclose\n");
    let mut c = Client::connect(port);
    let r = c.get("/size/1");
    assert_eq!(header(&r.head, "connection"), Some("close"));
    assert!(c.closed());
    assert_eq!(header(&be.seen()[0].head, "connection"), Some("close"));
}

#[test]
fn reused_connection_closed_by_server_is_retried() {
    let be = HttpBackend::start();
    let (_p, port) = start(&[be.port], "");
    let mut c = Client::connect(port);
    assert_eq!(c.get("/then-close").body, b"by");
    // The session's server connection is now closed by the server: the next (idempotent,
    // bodyless) request is sent again on a new connection instead of failing.
    std::thread::sleep(std::time::Duration::from_millis(100));
    let r = c.get("/size/3");
    assert_eq!((r.status, r.body.as_slice()), (200, &b"xxx"[..]));
}

#[test]
fn http_reuse_never_and_always() {
    for (mode, max_conns) in [("never", 10), ("always", 2)] {
        let be = HttpBackend::start();
        let (_p, port) = start(&[be.port], &format!("    http-reuse {mode}\n"));
        let base = be.connections();
        // Ten sequential client connections, two requests each (pools are per worker: with two
        // workers, "always" may hold two idle connections).
        for _ in 0..10 {
            let mut c = Client::connect(port);
            assert_eq!(c.get("/size/1").status, 200);
            assert_eq!(c.get("/size/1").status, 200);
            drop(c);
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let used = be.connections() - base;
        assert!(
            used <= max_conns && (mode != "never" || used == 10),
            "http-reuse {mode}: {used} server connections"
        );
    }
}

#[test]
fn server_connections_the_proxy_drops_are_reset() {
    // With `http-reuse never` a server connection is not pooled once its client leaves. Bascule
    // then closes it with a reset, as HAProxy does, so that the proxy's side leaves no socket in
    // TIME_WAIT: the server sees ECONNRESET, not an orderly end of stream.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let be_port = listener.local_addr().unwrap().port();
    let (_p, port) = start(&[be_port], "    http-reuse never\n");
    let server = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut buf = [0u8; 4096];
        let mut head = Vec::new();
        while !head.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = s.read(&mut buf).unwrap();
            assert!(n > 0, "the proxy closed before its request was complete");
            head.extend_from_slice(&buf[..n]);
        }
        s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            .unwrap();
        s.read(&mut buf).map_err(|e| e.kind())
    });
    let mut c = Client::connect(port);
    let r = c.get("/");
    assert_eq!((r.status, r.body.as_slice()), (200, &b"ok"[..]));
    drop(c);
    let end = server.join().unwrap();
    assert_eq!(end, Err(std::io::ErrorKind::ConnectionReset));
}

#[test]
fn errorfile_replaces_the_generated_503() {
    let mut dead = Backend::start(Behaviour::Echo);
    dead.stop();
    let dir = TempDir::new("errorfile");
    let file = dir.path("503.http");
    std::fs::write(
        &file,
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain\r\ncontent-length: 6\r\nconnection: close\r\n\r\nsorry\n",
    )
    .unwrap();
    let extra = format!("    retries 0\n    errorfile 503 {}\n", file.display());
    let (_p, port) = start(&[dead.port], &extra);
    let mut c = Client::connect(port);
    let r = c.get("/");
    assert_eq!((r.status, r.body.as_slice()), (503, &b"sorry\n"[..]));
}

#[test]
fn errorfile_is_checked_at_load() {
    let dir = TempDir::new("errorfile");
    let bad = dir.path("bad.http");
    std::fs::write(&bad, "<html>not a response</html>").unwrap();
    let cfg = dir.path("c.cfg");
    std::fs::write(
        &cfg,
        format!(
            "defaults\n    mode http\n    errorfile 503 {}\n    errorfile 999 {}\n    errorfile 502 /nonexistent/file\n",
            bad.display(),
            bad.display()
        ),
    )
    .unwrap();
    let out = std::process::Command::new(BIN)
        .args(["-c", "-f", cfg.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    for want in [
        ":3:",
        "unable to parse headers",
        ":4:",
        "'999'",
        ":5:",
        "cannot read",
    ] {
        assert!(stderr.contains(want), "missing {want:?} in:\n{stderr}");
    }
}

fn rss_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap()
}

const GIB: u64 = 1 << 30;

/// 1 GiB each way through the proxy raises its peak RSS by less than 32 MiB. Slow in debug
/// builds, so run by hand: `cargo test --release --test http1 -- --ignored streaming`.
#[test]
#[ignore]
fn streaming_1gib_both_ways_in_bounded_memory() {
    let be = HttpBackend::start();
    let (p, port) = start(
        &[be.port],
        "    timeout client 60s\n    timeout server 60s\n",
    );
    let before = rss_kib(p.pid(), "VmRSS:");
    let mut c = Client::connect(port);
    c.s.set_read_timeout(Some(std::time::Duration::from_secs(60)))
        .unwrap();
    // Upload.
    c.send(format!("POST /sink HTTP/1.1\r\nHost: a\r\nContent-Length: {GIB}\r\n\r\n").as_bytes());
    let chunk = vec![b'u'; 1 << 20];
    for _ in 0..1024 {
        c.s.write_all(&chunk).unwrap();
    }
    let r = c.response(false).unwrap();
    assert_eq!(r.body, format!("got {GIB}").as_bytes());
    // Download, counted without keeping it.
    c.send(format!("GET /stream/{GIB} HTTP/1.1\r\nHost: a\r\n\r\n").as_bytes());
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        c.s.read_exact(&mut b).unwrap();
        head.push(b[0]);
    }
    let mut left = GIB;
    let mut buf = vec![0u8; 1 << 20];
    while left > 0 {
        let n = c.s.read(&mut buf).unwrap();
        assert!(n > 0, "closed with {left} bytes left");
        left -= n as u64;
    }
    let peak = rss_kib(p.pid(), "VmHWM:");
    eprintln!("proxy RSS at start {before} KiB, peak {peak} KiB");
    assert!(
        peak < before + 32 * 1024,
        "peak RSS {peak} KiB, {} KiB above the start",
        peak - before
    );
}

#[test]
fn keep_alive_requests_follow_weights() {
    let a = HttpBackend::start();
    let b = HttpBackend::start();
    let port = free_port();
    let cfg = http_cfg(port, &[], "").replace(
        "\nbackend be\n",
        &format!(
            "\nbackend be\n    server a 127.0.0.1:{} weight 3\n    server b 127.0.0.1:{} weight 1\n",
            a.port, b.port
        ),
    );
    let _p = Proxy::start(&cfg, port, &[]);
    let (a0, b0) = (a.seen().len(), b.seen().len());
    let mut c = Client::connect(port);
    for _ in 0..400 {
        assert_eq!(c.get("/size/1").status, 200);
    }
    let (na, nb) = (a.seen().len() - a0, b.seen().len() - b0);
    assert!(
        (294..=306).contains(&na) && (94..=106).contains(&nb),
        "requests a={na} b={nb}"
    );
    // Each server kept its connection for this client: two server connections in all.
    assert!(a.connections() + b.connections() <= 3);
}

#[test]
fn refused_upgrade_stays_plain_http() {
    let be = HttpBackend::start();
    let (_p, port) = start(&[be.port], "");
    let mut c = Client::connect(port);
    c.send(b"GET /size/2 HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Key: k\r\n\r\n");
    let r = c.response(false).unwrap();
    assert_eq!((r.status, r.body.len()), (200, 2));
    assert_eq!(c.get("/size/3").body.len(), 3);
}

#[test]
fn abortonclose_cancels_a_queued_request() {
    let be = HttpBackend::start();
    let port = free_port();
    let cfg = http_cfg(port, &[], "    option abortonclose\n    timeout queue 5s\n").replace(
        "\nbackend be\n",
        &format!(
            "\nbackend be\n    server s 127.0.0.1:{} maxconn 1\n",
            be.port
        ),
    );
    let _p = Proxy::start(&cfg, port, &[]);
    let slow = std::thread::spawn(move || Client::connect(port).get("/slow").status);
    // /slow holds the server's one slot before the next request comes.
    assert!(
        support::eventually(Duration::from_secs(5), || be.seen().len() == 1),
        "/slow never reached the server"
    );
    // This one queues behind /slow (maxconn 1), then its client leaves.
    let mut gone = Client::connect(port);
    gone.send(b"GET /size/1 HTTP/1.1\r\nHost: a\r\n\r\n");
    std::thread::sleep(std::time::Duration::from_millis(200));
    drop(gone);
    assert_eq!(slow.join().unwrap(), 200);
    std::thread::sleep(std::time::Duration::from_millis(300));
    let paths: Vec<String> = be
        .seen()
        .iter()
        .map(|s| s.head.lines().next().unwrap_or("").to_string())
        .collect();
    assert_eq!(
        paths,
        ["GET /slow HTTP/1.1"],
        "the abandoned request reached the server"
    );
}

#[test]
fn http_check_marks_a_server_answering_500_down_and_back_up() {
    let a = HttpBackend::start();
    let b = HttpBackend::start();
    let port = free_port();
    let cfg = http_cfg(port, &[], "").replace(
        "\nbackend be\n",
        &format!(
            "\nbackend be\n    option httpchk GET /health HTTP/1.1\n    http-check send hdr Host checks\n    http-check expect status 200\n\
             server a 127.0.0.1:{} check inter 100ms fall 2 rise 2\n    server b 127.0.0.1:{} check inter 100ms fall 2 rise 2\n",
            a.port, b.port
        ),
    );
    let p = Proxy::start(&cfg, port, &[]);
    b.health.store(500, std::sync::atomic::Ordering::SeqCst);
    assert!(
        eventually(std::time::Duration::from_secs(2), || p
            .stderr()
            .contains("Server be/b is DOWN")),
        "{}",
        p.stderr()
    );
    assert!(
        p.stderr()
            .contains("reason: Layer7 wrong status, code: 500, info: \""),
        "{}",
        p.stderr()
    );
    // DOWN: requests all go to a.
    let before = b
        .seen()
        .iter()
        .filter(|s| !s.head.starts_with("GET /health"))
        .count();
    let mut c = Client::connect(port);
    for _ in 0..10 {
        assert_eq!(c.get("/size/1").status, 200);
    }
    let after = b
        .seen()
        .iter()
        .filter(|s| !s.head.starts_with("GET /health"))
        .count();
    assert_eq!(before, after, "a DOWN server got traffic");
    // The check request carried the configured header.
    assert!(b
        .seen()
        .iter()
        .any(|s| s.head.starts_with("GET /health HTTP/1.1\r\n")
            && header(&s.head, "host") == Some("checks")));
    b.health.store(200, std::sync::atomic::Ordering::SeqCst);
    assert!(
        eventually(std::time::Duration::from_secs(2), || p
            .stderr()
            .contains("Server be/b is UP")),
        "{}",
        p.stderr()
    );
}

#[test]
fn splice_auto_moves_large_bodies_and_keeps_framing() {
    let be = HttpBackend::start();
    let (p, port) = start(&[be.port], "    option splice-auto\n");
    let mut c = Client::connect(port);
    // Large responses, each followed by a small one on the same connections: splicing must stop
    // exactly at the end of each body.
    for n in [3_000_000usize, 65_537, 1 << 20] {
        let r = c.get(&format!("/size/{n}"));
        assert_eq!(r.status, 200);
        assert_eq!(r.body.len(), n);
        assert!(r.body.iter().all(|&b| b == b'x'));
        let small = c.get("/size/10");
        assert_eq!(small.body, b"xxxxxxxxxx");
    }
    assert!(
        pipe_count(p.pid()) > 0,
        "no pipe was opened: the large bodies were not spliced"
    );
    // A large request body, then another request on the same connection.
    let n = 2_500_000;
    c.send(format!("POST /sink HTTP/1.1\r\nHost: t\r\nContent-Length: {n}\r\n\r\n").as_bytes());
    c.send(&vec![b'q'; n]);
    let r = c.response(false).expect("a response");
    assert_eq!(String::from_utf8_lossy(&r.body), format!("got {n}"));
    assert_eq!(c.get("/size/3").body, b"xxx");
}

#[test]
fn splice_response_with_small_and_empty_bodies() {
    let be = HttpBackend::start();
    let (_p, port) = start(&[be.port], "    option splice-response\n");
    let mut c = Client::connect(port);
    for path in ["/size/0", "/size/1", "/204", "/chunked", "/size/100000"] {
        let r = c.get(path);
        assert!(r.status == 200 || r.status == 204, "{path}: {}", r.head);
    }
    assert_eq!(c.get("/chunked").body.len(), "Wiki".len() + "pedia".len());
}

#[test]
fn idle_keep_alive_connections_park_resume_and_expire() {
    let be = HttpBackend::start();
    let (p, port) = start(&[be.port], "    timeout http-keep-alive 700ms\n");
    let mut c = Client::connect(port);
    // Pauses longer than the parking delay (100 ms): each request resumes a parked connection.
    for _ in 0..3 {
        assert_eq!(c.get("/size/5").body, b"xxxxx");
        std::thread::sleep(Duration::from_millis(250));
    }
    // Many parked at once, all resumed.
    let fds_before = fd_count(p.pid());
    let mut many: Vec<Client> = (0..50).map(|_| Client::connect(port)).collect();
    for m in &mut many {
        assert_eq!(m.get("/size/1").status, 200);
    }
    std::thread::sleep(Duration::from_millis(300));
    for m in &mut many {
        assert_eq!(m.get("/size/2").body, b"xx");
    }
    // Past `timeout http-keep-alive`, a parked connection is closed without a response.
    let started = std::time::Instant::now();
    assert!(c.closed(), "the idle connection stayed open");
    let waited = started.elapsed();
    assert!(
        waited < Duration::from_millis(1500),
        "closed after {waited:?}, not at the keep-alive timeout"
    );
    // Clients that leave while parked are closed on our side too: what remains is at most one
    // pooled server connection per client.
    drop(many);
    assert!(
        eventually(Duration::from_secs(3), || fd_count(p.pid())
            <= fds_before + 50),
        "descriptors left open: {} (before: {fds_before})",
        fd_count(p.pid())
    );
}

#[test]
fn soft_stop_closes_parked_connections_at_once() {
    let be = HttpBackend::start();
    let (mut p, port) = start(&[be.port], "    timeout http-keep-alive 30s\n");
    let mut c = Client::connect(port);
    assert_eq!(c.get("/size/1").status, 200);
    std::thread::sleep(Duration::from_millis(300));
    p.signal("-USR1");
    let status = p.wait_exit(Duration::from_secs(3));
    assert!(status.is_some(), "soft stop waited for the idle connection");
    assert!(c.closed());
}

#[test]
fn more_sessions_than_the_scratch_pool_keeps_end_cleanly() {
    // One worker, more simultaneous sessions than its pool of scratch vectors keeps (256): the
    // extra ones are freed when their sessions end, and the proxy carries on.
    let be = HttpBackend::start();
    let port = free_port();
    let cfg = http_cfg(port, &[be.port], "").replace("nbthread 2", "nbthread 1");
    let mut p = Proxy::start(&cfg, port, &[]);
    let mut clients: Vec<Client> = (0..300).map(|_| Client::connect(port)).collect();
    for c in &mut clients {
        assert_eq!(c.get("/size/1").status, 200);
    }
    drop(clients);
    std::thread::sleep(Duration::from_millis(300));
    assert!(p.child_running(), "the proxy died: {}", p.stderr());
    assert_eq!(Client::connect(port).get("/size/2").body, b"xx");
    p.signal("-USR1");
    assert!(p.wait_exit(Duration::from_secs(3)).is_some());
}

#[test]
fn nbthread_1_serves_from_a_single_threaded_process() {
    // With one worker, the worker, the health checks and the signal handling share the main
    // thread: the kernel then takes no reference on a descriptor per socket call.
    let be = HttpBackend::start();
    let port = free_port();
    let cfg = http_cfg(port, &[be.port], "")
        .replace("nbthread 2", "nbthread 1")
        .replace(
            &format!("127.0.0.1:{}\n", be.port),
            &format!("127.0.0.1:{} check inter 100ms\n", be.port),
        );
    let mut p = Proxy::start(&cfg, port, &[]);
    let mut c = Client::connect(port);
    for _ in 0..3 {
        assert_eq!(c.get("/size/3").body, b"xxx");
    }
    std::thread::sleep(Duration::from_millis(300)); // a few health checks
    let threads = std::fs::read_dir(format!("/proc/{}/task", p.pid()))
        .expect("the proxy's /proc entry")
        .count();
    assert_eq!(threads, 1, "threads of a nbthread 1 process");
    assert_eq!(c.get("/size/1").body, b"x");
    drop(c);
    p.signal("-USR1");
    assert!(p.wait_exit(Duration::from_secs(3)).is_some());
}

/// The header lines of a head whose name is `name`.
fn header_lines<'h>(head: &'h str, name: &str) -> Vec<&'h str> {
    head.split("\r\n")
        .filter(|l| {
            l.split_once(':')
                .is_some_and(|(n, _)| n.eq_ignore_ascii_case(name))
        })
        .collect()
}

#[test]
fn requests_needing_normalisation_reach_the_server_unambiguous() {
    let be = HttpBackend::start();
    let (_p, port) = start(&[be.port], "");
    let mut c = Client::connect(port);
    // Equal Content-Lengths, as two headers or a list: one header goes on.
    for dup in [
        "Content-Length: 5\r\nContent-Length: 5\r\n",
        "Content-Length: 5, 5\r\n",
    ] {
        c.send(format!("POST /dup HTTP/1.1\r\nHost: a\r\n{dup}\r\nhello").as_bytes());
        assert_eq!(c.response(false).unwrap().body, b"ok 5");
        let seen = be.seen().pop().unwrap();
        assert_eq!(
            header_lines(&seen.head, "content-length"),
            ["Content-Length: 5"]
        );
        assert_eq!(seen.body, b"hello");
    }
    // Bare LF line endings: answered, and forwarded with CRLF (the backend only reads CRLF).
    c.send(b"POST /lf HTTP/1.1\nHost: a\nX-A: b\r\nContent-Length: 5\n\nhello");
    assert_eq!(c.response(false).unwrap().body, b"ok 5");
    let seen = be.seen().pop().unwrap();
    assert_eq!(
        seen.head,
        "POST /lf HTTP/1.1\r\nHost: a\r\nX-A: b\r\nContent-Length: 5\r\n\r\n"
    );
    // Empty lines before the request line are dropped, not forwarded in its place.
    c.send(b"\r\nGET /after-crlf HTTP/1.1\r\nHost: a\r\n\r\n");
    assert_eq!(c.response(false).unwrap().status, 200);
    assert!(be
        .seen()
        .pop()
        .unwrap()
        .head
        .starts_with("GET /after-crlf HTTP/1.1\r\nHost: a\r\n"));
    // The default port leaves an absolute-form target and the Host that repeats it.
    c.send(b"GET http://a:80/abs HTTP/1.1\r\nHost: a:80\r\n\r\n");
    assert_eq!(c.response(false).unwrap().status, 200);
    let seen = be.seen().pop().unwrap();
    assert!(
        seen.head
            .starts_with("GET http://a/abs HTTP/1.1\r\nHost: a\r\n"),
        "{}",
        seen.head
    );
}

#[test]
fn ambiguous_requests_are_refused_before_the_server() {
    let be = HttpBackend::start();
    let (_p, port) = start(&[be.port], "");
    let probes: &[(&[u8], u16)] = &[
        (
            b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
            422,
        ),
        (b"GET /a#frag HTTP/1.1\r\nHost: a\r\n\r\n", 400),
        (b"GET http://b/ HTTP/1.1\r\nHost: a\r\n\r\n", 400),
        (b"GET http://a:8080/ HTTP/1.1\r\nHost: a\r\n\r\n", 400),
        (b"GET / HTTP/1.0\r\nHost: a\r\nHost: b\r\n\r\n", 400),
    ];
    for (p, status) in probes {
        let mut c = Client::connect(port);
        c.send(p);
        let r = c.response(false).expect("an answer");
        assert_eq!(r.status, *status, "probe {:?}", String::from_utf8_lossy(p));
        assert!(c.closed(), "connection left open after a {status}");
    }
    assert!(be.seen().is_empty(), "reached the backend: {:?}", be.seen());
}

#[test]
fn balance_uri_hashes_absolute_form_without_the_default_port() {
    let backends: Vec<HttpBackend> = (0..4).map(|_| HttpBackend::start()).collect();
    let ports: Vec<u16> = backends.iter().map(|b| b.port).collect();
    let port = free_port();
    let cfg =
        http_cfg(port, &ports, "").replace("\nbackend be\n", "\nbackend be\n    balance uri\n");
    let _p = Proxy::start(&cfg, port, &[]);
    let mut c = Client::connect(port);
    for i in 0..16 {
        for target in [format!("http://h:80/p{i}"), format!("http://h/p{i}")] {
            c.send(format!("GET {target} HTTP/1.1\r\nHost: h\r\n\r\n").as_bytes());
            assert_eq!(c.response(false).unwrap().status, 200);
        }
    }
    let mut used = 0;
    for b in &backends {
        let seen = b.seen();
        used += usize::from(!seen.is_empty());
        for s in &seen {
            let line = s.head.lines().next().unwrap();
            let same = seen.iter().filter(|o| o.head.lines().next() == Some(line));
            assert_eq!(same.count(), 2, "{line}: the two spellings went apart");
        }
    }
    assert!(used > 1, "16 URIs all hashed to one of 4 servers");
}

#[test]
fn http_1_0_client_gets_chunked_responses_dechunked() {
    let be = HttpBackend::start();
    let (_p, port) = start(&[be.port], "");
    // The whole body came with the head: a Content-Length, and keep-alive goes on.
    let mut c = Client::connect(port);
    c.send(b"GET /chunked HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    let r = c.response(false).unwrap();
    assert_eq!(header(&r.head, "content-length"), Some("9"), "{}", r.head);
    assert_eq!(header(&r.head, "transfer-encoding"), None);
    assert_eq!(r.body, b"Wikipedia");
    c.send(b"GET /size/3 HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    assert_eq!(c.response(false).unwrap().body, b"xxx");
    // Its end came later: delimited by the close.
    for req in [
        &b"GET /chunked-slow HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"[..],
        b"GET /chunked-slow HTTP/1.1\r\nHost: a\r\nTE: deflate\r\n\r\n",
    ] {
        let mut c = Client::connect(port);
        c.send(req);
        let r = c.response(false).unwrap();
        assert_eq!(header(&r.head, "transfer-encoding"), None, "{}", r.head);
        assert_eq!(header(&r.head, "content-length"), None);
        assert_eq!(header(&r.head, "connection"), Some("close"));
        assert_eq!(r.body, b"Wikipedia");
    }
    // A client that asked for trailers gets the chunked body as it is.
    let mut c = Client::connect(port);
    c.send(b"GET /chunked HTTP/1.1\r\nHost: a\r\nTE: trailers\r\n\r\n");
    let r = c.response(false).unwrap();
    assert_eq!(header(&r.head, "transfer-encoding"), Some("chunked"));
}

#[test]
fn response_framing_is_checked_like_request_framing() {
    let be = HttpBackend::start();
    let (_p, port) = start(&[be.port], "");
    for path in ["/te-gzip", "/cl-te", "/cl-differ"] {
        let before = be.connections();
        let mut c = Client::connect(port);
        assert_eq!(c.get(path).status, 502, "{path}");
        // The server connection that sent it is not reused.
        let mut c = Client::connect(port);
        assert_eq!(c.get("/size/1").status, 200);
        assert!(be.connections() >= before + 2, "{path}: connection reused");
    }
    let mut c = Client::connect(port);
    let r = c.get("/cl-twice");
    assert_eq!(r.body, b"ok");
    assert_eq!(
        header_lines(&r.head, "content-length"),
        ["Content-Length: 2"]
    );
}
