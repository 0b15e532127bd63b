//! HTTP/2 clients (`bind ... proto h2`, ALPN `h2` on `bind ... ssl`), side by side with Debian's
//! haproxy 2.6: the h2 crate's client through each proxy to a plain HTTP/1.1 server the test
//! starts, comparing what the client got (status, headers that matter, body), what the server
//! received (HAProxy's H2-to-H1 translation: origin-form target, `host` from `:authority`,
//! cookies joined, chunked body when no length came) and the log line (`%HV` is `HTTP/2.0`,
//! `%r` shows the absolute URI).
//!
//! Without haproxy the side-by-side tests print "skipped" (and fail when `CI` is set).
#![allow(clippy::disallowed_methods)]

mod support;

use std::sync::Arc;

use bytes::Bytes;
use support::http::HttpBackend;
use support::side::{both, mask};
use support::{free_port, BIN};
use tokio::net::TcpStream;

const GLOBAL: &str = "global\n    log 127.0.0.1:@LOG@ format raw local0\n\
defaults\n    mode http\n    log global\n    timeout client 2s\n    timeout server 5s\n    timeout connect 2s\n";

/// What a client saw of one response.
#[derive(Debug, PartialEq, Eq)]
struct Got {
    status: u16,
    /// Headers other than `date`, sorted.
    headers: Vec<String>,
    body: String,
}

type Sender = h2::client::SendRequest<Bytes>;

/// Sends `req` with `body` (`None`: the HEADERS frame ends the stream) and reads the whole
/// response.
async fn fetch(send: &mut Sender, req: http::Request<()>, body: Option<&[u8]>) -> Got {
    let mut send = send.clone().ready().await.unwrap();
    let (res, mut stream) = send.send_request(req, body.is_none()).unwrap();
    if let Some(b) = body {
        stream.send_data(Bytes::copy_from_slice(b), true).unwrap();
    }
    let res = res.await.unwrap();
    let status = res.status().as_u16();
    let mut headers: Vec<String> = res
        .headers()
        .iter()
        .filter(|(n, _)| n.as_str() != "date")
        .map(|(n, v)| format!("{n}: {}", v.to_str().unwrap_or("?")))
        .collect();
    headers.sort();
    let mut recv = res.into_body();
    let mut body = Vec::new();
    while let Some(d) = recv.data().await {
        let d = d.unwrap();
        let _ = recv.flow_control().release_capacity(d.len());
        body.extend_from_slice(&d);
    }
    Got {
        status,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    }
}

/// An HTTP/2 connection with prior knowledge to 127.0.0.1:`port`; its driver runs beside.
async fn h2c(port: u16) -> Sender {
    let tcp = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let (send, conn) = h2::client::handshake(tcp).await.unwrap();
    tokio::spawn(async move {
        let _ = conn.await;
    });
    send
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn get(uri: &str) -> http::request::Builder {
    http::Request::builder().method("GET").uri(uri)
}

#[test]
fn requests_reach_an_http1_server_as_haproxy_translates_them() {
    let be = HttpBackend::start();
    let cfg = format!(
        "{GLOBAL}frontend fe\n    bind 127.0.0.1:@P2@ proto h2\n\
         \x20   capture request header host len 64\n    capture request header cookie len 64\n\
         \x20   log-format \"%HM %HU %HV %ST %r %hr\"\n\
         \x20   use_backend none if {{ path /none }}\n    default_backend be\n\
         backend be\n    server s 127.0.0.1:{}\n\
         backend none\n",
        be.port
    );
    both("h2 to h1", &cfg, |_, _, p2, run| {
        let before = be.seen().len();
        let got = runtime().block_on(async {
            let mut s = h2c(p2).await;
            let mut got = Vec::new();
            // :authority with the default port, a host header it overrides, split cookies.
            let req = get("http://example.com:80/a?b")
                .header("host", "other")
                .header("cookie", "c1=foo")
                .header("x-one", "1")
                .header("cookie", "c2=bar")
                .body(())
                .unwrap();
            got.push(fetch(&mut s, req, None).await);
            // No :authority: the path alone, the host header as it came.
            let req = get("/x").header("host", "h").body(()).unwrap();
            got.push(fetch(&mut s, req, None).await);
            // A body without content-length goes out chunked.
            let req = http::Request::builder()
                .method("POST")
                .uri("https://example.com/post")
                .body(())
                .unwrap();
            got.push(fetch(&mut s, req, Some(b"hello body")).await);
            let req = http::Request::builder()
                .method("HEAD")
                .uri("http://example.com/size/10")
                .body(())
                .unwrap();
            got.push(fetch(&mut s, req, None).await);
            // A chunked response is sent de-chunked; a generated 503.
            for path in ["/chunked", "/none"] {
                let req = get(&format!("http://example.com{path}")).body(()).unwrap();
                got.push(fetch(&mut s, req, None).await);
            }
            got
        });
        let mut seen: Vec<String> = got.iter().map(|g| format!("{g:?}")).collect();
        for r in &be.seen()[before..] {
            seen.push(format!("{} {:?}", r.head, String::from_utf8_lossy(&r.body)));
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
        seen.extend(run.lines().iter().map(|l| mask(l)));
        seen
    });
}

#[test]
fn streams_of_one_connection_run_at_once() {
    let be = HttpBackend::start();
    let cfg = format!(
        "{GLOBAL}frontend fe\n    bind 127.0.0.1:@P2@ proto h2\n    default_backend be\n\
         backend be\n    server s 127.0.0.1:{}\n",
        be.port
    );
    both("concurrent streams", &cfg, |_, _, p2, _| {
        let max_before = be.max_active.load(std::sync::atomic::Ordering::SeqCst);
        assert_eq!(max_before, 0, "one run at a time");
        let statuses = runtime().block_on(async {
            let s = h2c(p2).await;
            let mut tasks = Vec::new();
            for _ in 0..5 {
                let mut s = s.clone();
                tasks.push(tokio::spawn(async move {
                    let req = get("http://example.com/sleep/300").body(()).unwrap();
                    let g = fetch(&mut s, req, None).await;
                    (g.status, g.body)
                }));
            }
            let mut out = Vec::new();
            for t in tasks {
                out.push(t.await.unwrap());
            }
            out
        });
        // All five were at the server together.
        let max = be.max_active.swap(0, std::sync::atomic::Ordering::SeqCst);
        assert_eq!(max, 5);
        statuses
            .into_iter()
            .map(|(s, b)| format!("{s} {b}"))
            .collect()
    });
}

#[test]
fn alpn_h2_over_tls_serves_http2_with_the_connection_tls_facts() {
    let cfg = format!(
        "{GLOBAL}frontend fe\n    bind 127.0.0.1:@P2@ ssl crt @CRT@/www-ecdsa.pem alpn h2,http/1.1\n\
         \x20   log-format \"%HV %ST %[ssl_fc] %[ssl_fc_alpn] %[ssl_fc_sni]\"\n\
         \x20   http-request return status 200 content-type text/plain lf-string \"%[ssl_fc] %[ssl_fc_alpn] %[ssl_fc_sni] %[req.hdr(host)]\"\n"
    );
    both("alpn h2", &cfg, |_, _, p2, run| {
        let mut seen = runtime().block_on(async {
            let config = support::tls::config(&["h2", "http/1.1"], false);
            let tls = tls_connect(p2, config).await;
            assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
            let (mut s, conn) = h2::client::handshake(tls).await.unwrap();
            tokio::spawn(async move {
                let _ = conn.await;
            });
            let req = get("https://www.example.com/").body(()).unwrap();
            vec![format!("{:?}", fetch(&mut s, req, None).await)]
        });
        // An HTTP/1.1 client of the same listener still gets HTTP/1.1.
        let config = support::tls::config(&["http/1.1"], false);
        let mut tls = support::tls::connect(p2, "www.example.com", config).unwrap();
        let r = support::tls::exchange(&mut tls, "GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        seen.push(format!(
            "{} {}",
            r.status(),
            String::from_utf8_lossy(&r.body)
        ));
        std::thread::sleep(std::time::Duration::from_millis(200));
        seen.extend(run.lines().iter().map(|l| mask(l)));
        seen
    });
}

async fn tls_connect(
    port: u16,
    config: Arc<rustls::ClientConfig>,
) -> tokio_rustls::client::TlsStream<TcpStream> {
    let tcp = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let name = rustls::pki_types::ServerName::try_from("www.example.com").unwrap();
    tokio_rustls::TlsConnector::from(config)
        .connect(name, tcp)
        .await
        .unwrap()
}

#[test]
fn proto_is_refused_in_tcp_mode_and_for_unknown_protocols() {
    let port = free_port();
    for (line, want) in [
        (
            format!("frontend fe\n    mode tcp\n    bind 127.0.0.1:{port} proto h2\n    default_backend be\nbackend be\n    mode tcp\n"),
            "not usable in 'mode tcp'",
        ),
        (
            format!("frontend fe\n    mode http\n    bind 127.0.0.1:{port} proto h3x\n"),
            "unknown MUX protocol 'h3x'",
        ),
    ] {
        let dir = support::TempDir::new("h2cfg");
        let path = dir.path("p.cfg");
        std::fs::write(&path, line).unwrap();
        let out = std::process::Command::new(BIN)
            .args(["-c", "-f"])
            .arg(&path)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && stderr.contains(want), "{stderr}");
    }
}
