//! HTTP/2, side by side with Debian's haproxy 2.6. Clients (`bind ... proto h2`, ALPN `h2` on
//! `bind ... ssl`): the h2 crate's client through each proxy to a plain HTTP/1.1 server the test
//! starts, comparing what the client got (status, headers that matter, body), what the server
//! received (HAProxy's H2-to-H1 translation: origin-form target, `host` from `:authority`,
//! cookies joined, chunked body when no length came) and the log line (`%HV` is `HTTP/2.0`,
//! `%r` shows the absolute URI). Servers (`server ... proto h2`, ALPN `h2` on `server ... ssl`):
//! HTTP/1.1 clients through each proxy to an h2 crate server the test runs, comparing the
//! pseudo-headers and headers it received and the HTTP/1.1 responses (framing, no reason).
//! Also: a `HEAD` that `set-method GET` sends on gets the head alone; uploads are acknowledged
//! as HAProxy acknowledges them (a frame-level client sees the WINDOW_UPDATEs: every byte of a
//! body, ended or not, before the response, and a connection window opened wide); an invalid
//! `content-length` resets the stream.
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
        seen.extend(run.lines_n(6).iter().map(|l| mask(l)));
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
            // Each request holds the server 1 s: a loaded machine may take a while to have
            // all five there, which only overlapping requests can be.
            for _ in 0..5 {
                let mut s = s.clone();
                tasks.push(tokio::spawn(async move {
                    let req = get("http://example.com/sleep/1000").body(()).unwrap();
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
        // The HTTP/2 connection's line before the next connection opens: workers flush their
        // lines independently.
        let mut logs = run.lines_n(1);
        // An HTTP/1.1 client of the same listener still gets HTTP/1.1.
        let config = support::tls::config(&["http/1.1"], false);
        let mut tls = support::tls::connect(p2, "www.example.com", config).unwrap();
        let r = support::tls::exchange(&mut tls, "GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        seen.push(format!(
            "{} {}",
            r.status(),
            String::from_utf8_lossy(&r.body)
        ));
        logs.extend(run.lines_n(1));
        seen.extend(logs.iter().map(|l| mask(l)));
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

/// What an HTTP/2 server the test runs received: one line per request, with its
/// pseudo-headers, headers (sorted) and body.
#[derive(Clone, Default)]
struct H2Seen(Arc<std::sync::Mutex<Vec<String>>>);

/// An HTTP/2 server (prior knowledge, or TLS with ALPN `h2` when `tls` is given) on a port of
/// its own, in a thread of its own. It answers `/stream` with a body of unknown length (two
/// DATA frames), `/empty` with no body and no length, anything else with `content-length`.
fn h2_server(tls: Option<Arc<rustls::ServerConfig>>) -> (u16, H2Seen) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = H2Seen::default();
    let record = seen.clone();
    std::thread::spawn(move || {
        runtime().block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            loop {
                let (tcp, _) = listener.accept().await.unwrap();
                let (record, tls) = (record.clone(), tls.clone());
                tokio::spawn(async move {
                    match tls {
                        Some(c) => {
                            let Ok(s) = tokio_rustls::TlsAcceptor::from(c).accept(tcp).await else {
                                return;
                            };
                            h2_serve(s, record).await
                        }
                        None => h2_serve(tcp, record).await,
                    }
                });
            }
        });
    });
    (port, seen)
}

async fn h2_serve<T>(io: T, record: H2Seen)
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + 'static,
{
    let Ok(mut conn) = h2::server::handshake(io).await else {
        return;
    };
    while let Some(Ok((req, mut respond))) = conn.accept().await {
        let record = record.clone();
        tokio::spawn(async move {
            let (parts, mut body) = req.into_parts();
            let mut data = Vec::new();
            while let Some(Ok(d)) = body.data().await {
                let _ = body.flow_control().release_capacity(d.len());
                data.extend_from_slice(&d);
            }
            let mut headers: Vec<String> = parts
                .headers
                .iter()
                .map(|(n, v)| format!("{n}: {}", v.to_str().unwrap_or("?")))
                .collect();
            headers.sort();
            record.0.lock().unwrap().push(format!(
                "{} {} {headers:?} {:?}",
                parts.method,
                parts.uri,
                String::from_utf8_lossy(&data)
            ));
            let path = parts.uri.path().to_string();
            let res = http::Response::builder().status(200).header("x-h2", "yes");
            match path.as_str() {
                "/stream" => {
                    let res = res.body(()).unwrap();
                    let mut s = respond.send_response(res, false).unwrap();
                    s.send_data(Bytes::from_static(b"part one, "), false)
                        .unwrap();
                    s.send_data(Bytes::from_static(b"part two"), true).unwrap();
                }
                "/empty" => {
                    let _ = respond.send_response(res.body(()).unwrap(), true);
                }
                _ => {
                    let text = format!("h2 got {} bytes", data.len());
                    let res = res.header("content-length", text.len()).body(()).unwrap();
                    let head = parts.method == http::Method::HEAD;
                    let mut s = respond.send_response(res, head).unwrap();
                    if !head {
                        s.send_data(Bytes::from(text), true).unwrap();
                    }
                }
            }
        });
    }
}

/// HTTP/1.1 requests through each proxy to an HTTP/2 server: what it received, what the
/// client got back.
fn through_h2_server(test: &str, server_opts: &str, tls: Option<Arc<rustls::ServerConfig>>) {
    let (port, seen) = h2_server(tls);
    let cfg = format!(
        "{GLOBAL}frontend fe\n    bind 127.0.0.1:@P2@\n\
         \x20   log-format \"%HM %HU %HV %ST %b/%s\"\n    default_backend be\n\
         backend be\n    server s 127.0.0.1:{port} {server_opts}\n"
    );
    both(test, &cfg, |_, _, p2, run| {
        seen.0.lock().unwrap().clear();
        let mut c = support::http::Client::connect(p2);
        let mut got = Vec::new();
        for raw in [
            "GET /a?b HTTP/1.1\r\nHost: example.com\r\nX-One: 1\r\n\r\n".to_string(),
            "POST /post HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhello".into(),
            "POST /chunks HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n".into(),
            "HEAD /head HTTP/1.1\r\nHost: h\r\n\r\n".into(),
            "GET /stream HTTP/1.1\r\nHost: h\r\n\r\n".into(),
            "GET /empty HTTP/1.1\r\nHost: h\r\n\r\n".into(),
            "GET http://example.com/abs HTTP/1.1\r\nHost: example.com\r\n\r\n".into(),
        ] {
            c.send(raw.as_bytes());
            let r = c.response(raw.starts_with("HEAD")).unwrap();
            let mut head: Vec<&str> = r
                .head
                .lines()
                .filter(|l| !l.is_empty() && !l.starts_with("date:"))
                .collect();
            head.sort();
            got.push(format!("{head:?} {:?}", String::from_utf8_lossy(&r.body)));
        }
        got.extend(seen.0.lock().unwrap().drain(..));
        got.extend(run.lines_n(7).iter().map(|l| mask(l)));
        got
    });
}

#[test]
fn requests_reach_an_h2c_server_as_haproxy_translates_them() {
    through_h2_server("proto h2", "proto h2", None);
}

#[test]
fn alpn_h2_on_a_tls_server_speaks_http2() {
    use rustls::pki_types::pem::PemObject;
    let pem = support::tls::fixture("www-ecdsa.pem");
    let chain = rustls::pki_types::CertificateDer::pem_file_iter(&pem)
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let key = rustls::pki_types::PrivateKeyDer::from_pem_file(&pem).unwrap();
    let mut c = rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .unwrap();
    c.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    through_h2_server(
        "alpn h2 server",
        "ssl verify none alpn h2,http/1.1",
        Some(Arc::new(c)),
    );
}

#[test]
fn a_head_request_sent_as_get_gets_no_body() {
    let be = HttpBackend::start();
    let cfg = format!(
        "{GLOBAL}frontend fe\n    bind 127.0.0.1:@P2@\n    http-request set-method GET\n\
         \x20   default_backend be\nbackend be\n    server s 127.0.0.1:{}\n",
        be.port
    );
    both("HEAD as GET", &cfg, |_, _, p2, _| {
        let before = be.connections();
        let mut c = support::http::Client::connect(p2);
        let mut got = Vec::new();
        for path in ["/size/12", "/chunked", "/size/3"] {
            c.send(format!("HEAD {path} HTTP/1.1\r\nHost: h\r\n\r\n").as_bytes());
            let r = c.response(true).unwrap();
            got.push(format!(
                "{} {:?}",
                r.status,
                String::from_utf8_lossy(&r.body)
            ));
        }
        // The next response is the right one: no body bytes were left behind.
        let r = c.get("/size/4");
        got.push(format!(
            "{} {:?}",
            r.status,
            String::from_utf8_lossy(&r.body)
        ));
        got.push(format!("server connections: {}", be.connections() - before));
        got
    });
}

/// A `HEAD` stream whose server sends a body (`set-method GET`) ends only once that body is
/// drained and the server connection is idle again, as haproxy ends a stream with the message
/// it received: the client's next stream, sent the moment the first ended, reuses the
/// connection. (Ended at the head, the next stream found the connection still draining and
/// opened a second one: a server that serves one connection at a time then never answered.)
#[test]
fn a_head_stream_ends_once_the_body_is_drained_and_the_next_reuses_the_connection() {
    let be = HttpBackend::start();
    let cfg = format!(
        "{GLOBAL}frontend fe\n    bind 127.0.0.1:@P2@ proto h2\n    http-request set-method GET\n\
         \x20   default_backend be\nbackend be\n    server s 127.0.0.1:{}\n",
        be.port
    );
    both("HEAD stream ends after the drain", &cfg, |_, _, p2, _| {
        let before = be.connections();
        let mut got = runtime().block_on(async {
            let mut send = h2c(p2).await;
            let head = http::Request::builder()
                .method("HEAD")
                .uri("http://example.com/chunked-slow")
                .body(())
                .unwrap();
            let head = fetch(&mut send, head, None).await;
            let next = fetch(
                &mut send,
                get("http://example.com/size/3").body(()).unwrap(),
                None,
            )
            .await;
            vec![
                format!("{} {:?}", head.status, head.body),
                format!("{} {:?}", next.status, next.body),
            ]
        });
        got.push(format!("server connections: {}", be.connections() - before));
        got
    });
}

#[test]
fn large_bodies_flow_both_ways_within_the_windows() {
    let be = HttpBackend::start();
    let cfg = format!(
        "{GLOBAL}frontend fe\n    bind 127.0.0.1:@P2@ proto h2\n    default_backend be\n\
         backend be\n    server s 127.0.0.1:{}\n",
        be.port
    );
    both("large bodies", &cfg, |_, _, p2, _| {
        runtime().block_on(async {
            let mut s = h2c(p2).await;
            let mut seen = Vec::new();
            // Past the 64 KiB windows of the stream and the connection, both ways.
            let req = get("http://example.com/stream/1000000").body(()).unwrap();
            let g = fetch(&mut s, req, None).await;
            seen.push(format!("{} {}", g.status, g.body.len()));
            let body = vec![b'u'; 300_000];
            let req = http::Request::builder()
                .method("POST")
                .uri("http://example.com/sink")
                .header("content-length", body.len())
                .body(())
                .unwrap();
            let mut send = s.clone().ready().await.unwrap();
            let (res, mut up) = send.send_request(req, false).unwrap();
            let mut rest = Bytes::from(body);
            while !rest.is_empty() {
                up.reserve_capacity(rest.len());
                let n = std::future::poll_fn(|cx| up.poll_capacity(cx))
                    .await
                    .unwrap()
                    .unwrap();
                let n = n.min(rest.len());
                let last = n == rest.len();
                up.send_data(rest.split_to(n), last).unwrap();
            }
            let res = res.await.unwrap();
            let mut recv = res.into_body();
            let mut got = Vec::new();
            while let Some(d) = recv.data().await {
                got.extend_from_slice(&d.unwrap());
            }
            seen.push(String::from_utf8_lossy(&got).into_owned());
            seen
        })
    });
}

#[test]
fn an_idle_connection_is_closed_after_timeout_client() {
    let cfg = format!(
        "{GLOBAL}frontend fe\n    bind 127.0.0.1:@P2@ proto h2\n    timeout client 500ms\n\
         \x20   http-request return status 200\n"
    );
    both("idle h2 connection", &cfg, |_, _, p2, _| {
        runtime().block_on(async {
            let tcp = TcpStream::connect(("127.0.0.1", p2)).await.unwrap();
            let (mut s, conn) = h2::client::handshake(tcp).await.unwrap();
            let driver = tokio::spawn(conn);
            let req = get("http://example.com/").body(()).unwrap();
            let status = fetch(&mut s, req, None).await.status;
            let start = std::time::Instant::now();
            let ended = tokio::time::timeout(std::time::Duration::from_secs(5), driver).await;
            let waited = start.elapsed();
            vec![
                format!("{status}"),
                format!("closed: {}", ended.is_ok()),
                format!("after the timeout: {}", waited.as_millis() >= 400),
            ]
        })
    });
}

#[test]
fn http2_end_to_end_without_authority() {
    let cfg = format!(
        "{GLOBAL}listen inner\n    bind 127.0.0.1:@P1@ proto h2\n\
         \x20   http-request return status 200 content-type text/plain lf-string \"%[req.hdr(host)]|%[path]\"\n\
         listen outer\n    bind 127.0.0.1:@P2@ proto h2\n    server s 127.0.0.1:@P1@ proto h2\n"
    );
    both("h2 to h2", &cfg, |_, _, p2, _| {
        runtime().block_on(async {
            let mut s = h2c(p2).await;
            let mut seen = Vec::new();
            for req in [
                get("/no-authority").body(()).unwrap(),
                get("/with-host").header("host", "h").body(()).unwrap(),
            ] {
                let g = fetch(&mut s, req, None).await;
                seen.push(format!("{} {}", g.status, g.body));
            }
            seen
        })
    });
}

#[test]
fn the_pri_method_is_refused_over_both_versions() {
    let cfg = format!(
        "{GLOBAL}frontend fe\n    bind 127.0.0.1:@P1@\n    bind 127.0.0.1:@P2@ proto h2\n\
         \x20   http-request return status 200\n"
    );
    both("PRI", &cfg, |_, p1, p2, _| {
        let mut seen = runtime().block_on(async {
            let mut s = h2c(p2).await;
            let req = http::Request::builder()
                .method("PRI")
                .uri("http://example.com/")
                .body(())
                .unwrap();
            vec![fetch(&mut s, req, None).await.status.to_string()]
        });
        let mut c = support::http::Client::connect(p1);
        c.send(b"PRI /x HTTP/1.1\r\nHost: h\r\n\r\n");
        seen.push(c.response(false).unwrap().status.to_string());
        seen
    });
}

#[test]
fn early_hints_go_out_as_informational_headers() {
    let cfg = format!(
        "{GLOBAL}frontend fe\n    bind 127.0.0.1:@P2@ proto h2\n\
         \x20   http-request early-hint link \"</style.css>; rel=preload\"\n\
         \x20   http-request return status 200 content-type text/plain string done\n"
    );
    both("early hints", &cfg, |_, _, p2, _| {
        runtime().block_on(async {
            let s = h2c(p2).await;
            let mut send = s.ready().await.unwrap();
            let req = get("http://example.com/").body(()).unwrap();
            let (mut res, _) = send.send_request(req, true).unwrap();
            let mut seen = Vec::new();
            while let Some(info) = std::future::poll_fn(|cx| res.poll_informational(cx)).await {
                let info = info.unwrap();
                let link = info
                    .headers()
                    .get("link")
                    .map(|v| v.to_str().unwrap().to_string());
                seen.push(format!("{} {link:?}", info.status()));
            }
            let res = res.await.unwrap();
            seen.push(res.status().to_string());
            assert_eq!(seen.len(), 2, "{seen:?}");
            seen
        })
    });
}

#[test]
fn connection_rules_run_once_and_streams_count_on_their_entries() {
    let cfg = format!(
        "{GLOBAL}backend st\n    stick-table type ip size 10 expire 1m store conn_cnt,sess_cnt,http_req_cnt\n\
         frontend fe\n    bind 127.0.0.1:@P2@ proto h2\n\
         \x20   tcp-request connection track-sc0 src table st\n\
         \x20   tcp-request connection set-var(sess.n) int(7)\n\
         \x20   http-request return status 200 content-type text/plain lf-string \"%[sc0_conn_cnt] %[sc0_sess_cnt] %[sc0_http_req_cnt] %[var(sess.n)]\"\n\
         frontend closed\n    bind 127.0.0.1:@P1@ proto h2\n    tcp-request connection reject\n\
         \x20   http-request return status 200\n"
    );
    both("connection rules", &cfg, |_, p1, p2, _| {
        runtime().block_on(async {
            let mut seen = Vec::new();
            // Counts relative to the first answer: the harness's probe connected once.
            for requests in [3, 1] {
                let mut s = h2c(p2).await;
                for _ in 0..requests {
                    let g = fetch(&mut s, get("http://example.com/").body(()).unwrap(), None).await;
                    seen.push(format!("{} {}", g.status, g.body));
                }
            }
            // A connection its rules reject gets no HTTP/2 at all.
            let handshake = async {
                let tcp = TcpStream::connect(("127.0.0.1", p1)).await.ok()?;
                h2::client::handshake(tcp).await.ok()
            };
            let refused = match handshake.await {
                None => true,
                Some((s, conn)) => {
                    let driver = tokio::spawn(conn);
                    let req = get("http://e/").body(()).unwrap();
                    let r = match s.ready().await {
                        Ok(mut s) => match s.send_request(req, true) {
                            Ok((res, _)) => res.await.is_err(),
                            Err(_) => true,
                        },
                        Err(_) => true,
                    };
                    driver.abort();
                    r
                }
            };
            seen.push(format!("rejected connection refused: {refused}"));
            seen
        })
    });
}

#[test]
fn the_http2_preface_on_an_http1_listener_switches_to_http2() {
    let cfg = format!(
        "{GLOBAL}frontend fe\n    bind 127.0.0.1:@P2@\n    bind 127.0.0.1:@P1@ proto h1\n\
         \x20   tcp-request connection track-sc0 src table st\n\
         \x20   log-format \"%HV %ST %r\"\n\
         \x20   http-request return status 200 content-type text/plain lf-string \"%[sc0_conn_cnt] %[sc0_http_req_cnt]\"\n\
         backend st\n    stick-table type ip size 10 expire 1m store conn_cnt,http_req_cnt\n"
    );
    both("h2 preface on h1", &cfg, |_, p1, p2, run| {
        let mut logs = Vec::new();
        let mut seen = runtime().block_on(async {
            let mut s = h2c(p2).await;
            let mut seen = Vec::new();
            for _ in 0..2 {
                let g = fetch(&mut s, get("http://example.com/x").body(()).unwrap(), None).await;
                seen.push(format!("{} {}", g.status, g.body));
            }
            // The streams' lines before the next connection opens: workers flush their lines
            // independently.
            logs.extend(run.lines_n(2));
            // `proto h1`: the preface is an invalid HTTP/1 request.
            let tcp = TcpStream::connect(("127.0.0.1", p1)).await.unwrap();
            let refused = match h2::client::handshake(tcp).await {
                Err(_) => true,
                Ok((mut s, conn)) => {
                    let driver = tokio::spawn(conn);
                    let req = get("http://e/").body(()).unwrap();
                    let r = match s.send_request(req, true) {
                        Ok((res, _)) => res.await.is_err(),
                        Err(_) => true,
                    };
                    driver.abort();
                    r
                }
            };
            seen.push(format!("proto h1 refused: {refused}"));
            seen
        });
        logs.extend(run.lines_n(1));
        seen.extend(logs.iter().map(|l| mask(l)));
        seen
    });
}

#[test]
fn a_stream_reset_mid_upload_leaves_the_connection_usable() {
    let be = HttpBackend::start();
    let cfg = format!(
        "{GLOBAL}frontend fe\n    bind 127.0.0.1:@P2@ proto h2\n    default_backend be\n\
         backend be\n    server s 127.0.0.1:{}\n",
        be.port
    );
    both("reset mid-upload", &cfg, |_, _, p2, _| {
        runtime().block_on(async {
            let mut s = h2c(p2).await;
            let mut send = s.clone().ready().await.unwrap();
            let req = http::Request::builder()
                .method("POST")
                .uri("http://example.com/sink")
                .header("content-length", "100000")
                .body(())
                .unwrap();
            let (res, mut up) = send.send_request(req, false).unwrap();
            up.send_data(Bytes::from(vec![b'x'; 1000]), false).unwrap();
            up.send_reset(h2::Reason::CANCEL);
            let first = res
                .await
                .map(|r| r.status().as_u16())
                .map_err(|e| e.reason());
            let g = fetch(
                &mut s,
                get("http://example.com/after").body(()).unwrap(),
                None,
            )
            .await;
            vec![format!("{first:?}"), format!("{} {}", g.status, g.body)]
        })
    });
}

/// A frame-level HTTP/2 client that keeps to its flow-control windows, to see the
/// WINDOW_UPDATE frames a proxy sends (the h2 crate's client hides them).
mod raw {
    use std::io::{Read, Write};
    use std::net::TcpStream;
    use std::time::Duration;

    const DATA: u8 = 0x0;
    const HEADERS: u8 = 0x1;
    const RST_STREAM: u8 = 0x3;
    const SETTINGS: u8 = 0x4;
    const GOAWAY: u8 = 0x7;
    const WINDOW_UPDATE: u8 = 0x8;
    const END_STREAM: u8 = 0x1;
    const END_HEADERS: u8 = 0x4;
    const ACK: u8 = 0x1;

    pub struct Client {
        s: TcpStream,
        /// What this client may still send: on the connection, and on a new stream.
        conn_window: i64,
        initial_window: i64,
    }

    /// What one upload saw.
    pub struct Upload {
        /// Stream WINDOW_UPDATE increments received before the response HEADERS.
        pub acked_before_response: i64,
        pub body: String,
    }

    impl Client {
        /// Connects and exchanges SETTINGS (this client's are the defaults).
        pub fn connect(port: u16) -> Client {
            let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let mut c = Client {
                s,
                conn_window: 65535,
                initial_window: 65535,
            };
            c.s.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n").unwrap();
            c.send(SETTINGS, 0, 0, &[]);
            loop {
                let (kind, flags, _, payload) = c.frame();
                if kind == SETTINGS && flags & ACK == 0 {
                    for s in payload.chunks(6) {
                        if s[..2] == [0, 4] {
                            c.initial_window =
                                i64::from(u32::from_be_bytes([s[2], s[3], s[4], s[5]]));
                        }
                    }
                    c.send(SETTINGS, ACK, 0, &[]);
                    return c;
                }
            }
        }

        /// What the client may still send on the connection.
        pub fn conn_window(&self) -> i64 {
            self.conn_window
        }

        fn send(&mut self, kind: u8, flags: u8, sid: u32, payload: &[u8]) {
            let n = payload.len();
            let mut f = vec![(n >> 16) as u8, (n >> 8) as u8, n as u8, kind, flags];
            f.extend_from_slice(&sid.to_be_bytes());
            f.extend_from_slice(payload);
            self.s.write_all(&f).unwrap();
        }

        fn frame(&mut self) -> (u8, u8, u32, Vec<u8>) {
            let mut h = [0u8; 9];
            self.s.read_exact(&mut h).expect("a frame within 5 s");
            let n = usize::from(h[0]) << 16 | usize::from(h[1]) << 8 | usize::from(h[2]);
            let mut payload = vec![0u8; n];
            self.s.read_exact(&mut payload).unwrap();
            let sid = u32::from_be_bytes([h[5], h[6], h[7], h[8]]) & 0x7fff_ffff;
            (h[3], h[4], sid, payload)
        }

        /// POSTs `len` bytes to `/sink` on stream `sid`, in DATA frames of at most 16 KiB sent
        /// only within the windows (waiting for WINDOW_UPDATEs when they are spent), the last
        /// one ending the stream; then reads the response.
        pub fn post(&mut self, sid: u32, len: usize) -> Upload {
            let mut block = Vec::new();
            let length = len.to_string();
            for (n, v) in [
                (":method", "POST"),
                (":scheme", "http"),
                (":path", "/sink"),
                (":authority", "example.com"),
                ("content-length", length.as_str()),
            ] {
                // HPACK: a literal without indexing, with a new name, no Huffman.
                block.push(0);
                block.push(n.len() as u8);
                block.extend_from_slice(n.as_bytes());
                block.push(v.len() as u8);
                block.extend_from_slice(v.as_bytes());
            }
            self.send(HEADERS, END_HEADERS, sid, &block);
            let mut window = self.initial_window;
            let mut acked = 0;
            let mut sent = 0;
            let mut answered = false;
            let mut body = Vec::new();
            loop {
                let credit = window.min(self.conn_window).min(16384) as usize;
                if sent < len && credit > 0 {
                    let n = credit.min(len - sent);
                    sent += n;
                    let flags = if sent == len { END_STREAM } else { 0 };
                    self.send(DATA, flags, sid, &vec![b'x'; n]);
                    window -= n as i64;
                    self.conn_window -= n as i64;
                    continue;
                }
                let (kind, flags, id, payload) = self.frame();
                match kind {
                    WINDOW_UPDATE => {
                        let inc = i64::from(u32::from_be_bytes(payload[..4].try_into().unwrap()));
                        if id == 0 {
                            self.conn_window += inc;
                        } else if id == sid {
                            window += inc;
                            if !answered {
                                acked += inc;
                            }
                        }
                    }
                    HEADERS if id == sid => answered = true,
                    DATA if id == sid => {
                        body.extend_from_slice(&payload);
                        if flags & END_STREAM != 0 {
                            break;
                        }
                    }
                    RST_STREAM | GOAWAY => panic!("stream {sid}: frame type {kind} on {id}"),
                    _ => {}
                }
            }
            Upload {
                acked_before_response: acked,
                body: String::from_utf8_lossy(&body).into_owned(),
            }
        }
    }
}

#[test]
fn uploads_are_acknowledged_so_that_a_client_never_waits_for_credit() {
    let be = HttpBackend::start();
    let cfg = format!(
        "{GLOBAL}frontend fe\n    bind 127.0.0.1:@P2@ proto h2\n    default_backend be\n\
         backend be\n    server s 127.0.0.1:{}\n",
        be.port
    );
    both("uploads acknowledged", &cfg, |_, _, p2, _| {
        let mut c = raw::Client::connect(p2);
        let mut seen = Vec::new();
        // A body in one DATA frame that ends the stream: its credit comes back all the same,
        // before the response (HAProxy's reg-test h2_to_h1 waits for it), and the connection
        // window opens wide.
        let u = c.post(1, 38);
        seen.push(format!(
            "small: acked {} before the response, {}",
            u.acked_before_response, u.body
        ));
        seen.push(format!(
            "connection window past 2^30: {}",
            c.conn_window() > 1 << 30
        ));
        // Three times the stream window, sent only as credit comes back: every byte is
        // acknowledged by the time the server answers.
        let u = c.post(3, 200_000);
        seen.push(format!(
            "large: acked {} before the response, {}",
            u.acked_before_response, u.body
        ));
        seen
    });
}

#[test]
fn an_invalid_content_length_resets_the_stream() {
    let be = HttpBackend::start();
    let cfg = format!(
        "{GLOBAL}frontend fe\n    bind 127.0.0.1:@P2@ proto h2\n    default_backend be\n\
         backend be\n    server s 127.0.0.1:{}\n",
        be.port
    );
    both("invalid content-length", &cfg, |_, _, p2, _| {
        runtime().block_on(async {
            let mut seen = Vec::new();
            // Empty (the h2 crate reads it as 0), an empty list element, two that differ;
            // then two equal ones, which HAProxy takes as one. A connection each: data sent
            // on a stream already reset may cost the connection.
            for (values, body) in [
                (&[""][..], ""),
                (&["0,"][..], ""),
                (&["2", "3"][..], "ab"),
                (&["2", "2"][..], "ab"),
            ] {
                let mut req = http::Request::builder()
                    .method("POST")
                    .uri("http://example.com/sink");
                for v in values {
                    req = req.header("content-length", *v);
                }
                let s = h2c(p2).await;
                let mut send = s.ready().await.unwrap();
                let (res, mut up) = send
                    .send_request(req.body(()).unwrap(), body.is_empty())
                    .unwrap();
                if !body.is_empty() {
                    up.send_data(Bytes::from(body), true).unwrap();
                }
                let got = match res.await {
                    Ok(r) => {
                        let status = r.status().as_u16();
                        let mut recv = r.into_body();
                        let mut b = Vec::new();
                        while let Some(Ok(d)) = recv.data().await {
                            b.extend_from_slice(&d);
                        }
                        format!("{status} {}", String::from_utf8_lossy(&b))
                    }
                    Err(e) => format!("{:?}", e.reason()),
                };
                seen.push(format!("{values:?}: {got}"));
            }
            seen
        })
    });
}

/// Over HTTP/2, `req.ver` says `2.0` and `fc_http_major` 2 (1 over HTTP/1.1), as haproxy's
/// do, whatever the head the gateway builds for the session.
#[test]
fn req_ver_and_fc_http_major_tell_http2() {
    let cfg = format!(
        "{GLOBAL}frontend fe\n    bind 127.0.0.1:@P2@ proto h2\n    bind 127.0.0.1:@P1@\n\
         \x20   http-request return status 200 hdr x-f \"%[req.ver] %[fc_http_major]\"\n"
    );
    both("h2 versions", &cfg, |_, p1, p2, _| {
        let mut seen = runtime().block_on(async {
            let mut s = h2c(p2).await;
            let got = fetch(&mut s, get("http://h/").body(()).unwrap(), None).await;
            vec![format!("{:?}", got.headers)]
        });
        let mut c = std::net::TcpStream::connect(("127.0.0.1", p1)).unwrap();
        std::io::Write::write_all(&mut c, b"GET / HTTP/1.0\r\n\r\n").unwrap();
        let mut out = String::new();
        let _ = std::io::Read::read_to_string(&mut c, &mut out);
        seen.extend(
            out.lines()
                .filter(|l| l.starts_with("x-f"))
                .map(String::from),
        );
        seen
    });
}
