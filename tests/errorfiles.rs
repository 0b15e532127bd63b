//! Error pages: `errorfile` (an empty file closes without a response), `http-errors` sections
//! with `errorfiles NAME [CODE...]`, `http-error status N ...`, and the `errorfile`,
//! `errorfiles` and `default-errorfiles` arguments of `http-request deny|return`, side by side
//! with haproxy 2.6 (reg-tests http-errorfiles/*.vtc cover the same ground). Each request's
//! answer (status, the `x-err` header the files carry, the body, whether the connection stayed
//! open) must be the same through both. `monitor-uri` (the proxy's 200 page, before any
//! rule) is checked here too, and `http-error` pages whose headers and body are log-format
//! strings (`hdr NAME FMT`, `lf-string`, `lf-file`), rendered on the request they answer.
// Test code blocks and locks freely: it is not a worker event loop.
#![allow(clippy::disallowed_methods)]

mod support;

use std::io::Read;
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::Duration;

use support::http::{header, Client};
use support::*;

fn page(status: &str, tag: &str) -> String {
    format!("HTTP/1.1 {status}\r\ncontent-length: 3\r\nx-err: {tag}\r\n\r\n{tag}")
}

fn config(dir: &TempDir, fe1: u16, fe2: u16) -> String {
    let file = |name: &str, text: &str| {
        let p = dir.path(name);
        std::fs::write(&p, text).unwrap();
        p.display().to_string()
    };
    let (e400a, e403a, e404a, e500a) = (
        file("400a", &page("400 Bad request", "s1a")),
        file("403a", &page("403 Forbidden", "s1b")),
        file("404a", &page("404 Not Found", "s1c")),
        file("500a", ""),
    );
    let (e400b, e403b) = (
        file("400b", &page("400 Bad request", "s2a")),
        file("403b", &page("403 Forbidden", "s2b")),
    );
    let (d400, d404, d503) = (
        file("d400", &page("400 Bad request", "dfa")),
        file("d404", &page("404 Not Found", "dfb")),
        file("d503", &page("503 Service Unavailable", "dfc")),
    );
    let lf410 = file("lf410", "gone: %[path]");
    format!(
        "http-errors one\n    errorfile 400 {e400a}\n    errorfile 403 {e403a}\n    errorfile 404 {e404a}\n    errorfile 500 {e500a}\n\
         http-errors two\n    errorfile 400 {e400b}\n    errorfile 403 {e403b}\n\
         defaults\n    mode http\n    timeout client 5s\n    timeout server 5s\n    timeout connect 5s\n\
         \x20   errorfiles two\n    errorfile 400 {d400}\n    errorfile 404 {d404}\n\
         frontend fe1\n    bind 127.0.0.1:{fe1}\n\
         \x20   errorfile 503 {d503}\n    errorfiles one 500 404\n\
         \x20   http-error status 400\n\
         \x20   http-error status 429 content-type text/plain hdr x-err lit string slow\n\
         \x20   http-request deny deny_status 400 if {{ path /400 }}\n\
         \x20   http-request deny if {{ path /403 }}\n\
         \x20   http-request deny deny_status 404 if {{ path /404 }}\n\
         \x20   http-request deny deny_status 500 if {{ path /500 }}\n\
         \x20   http-request deny deny_status 429 if {{ path /429 }}\n\
         \x20   http-request deny deny_status 503 if {{ path /503 }}\n\
         \x20   http-request deny deny_status 403 errorfiles one if {{ path /d403 }}\n\
         \x20   http-request deny deny_status 408 errorfile /dev/null if {{ path /d408 }}\n\
         \x20   http-request return status 400 default-errorfiles if {{ path /r400 }}\n\
         \x20   http-request return status 404 errorfiles two if {{ path /r404 }}\n\
         frontend fe2\n    bind 127.0.0.1:{fe2}\n    errorfiles one\n    monitor-uri /health\n\
         \x20   http-error status 503 content-type text/plain hdr x-err \"%[path]\" lf-string \"no server for %[path] (host %[req.hdr(host)])\"\n\
         \x20   http-error status 200 content-type text/plain hdr x-err \"up %[path]\" lf-string ok\n\
         \x20   http-error status 410 content-type text/plain hdr x-err \"%[method]\" hdr x-none \"%[req.hdr(nope)]\" lf-file {lf410}\n\
         \x20   http-request deny deny_status 410 if {{ path /410 }}\n\
         \x20   http-request deny if {{ path /health }}\n\
         \x20   http-request deny deny_status 400 if {{ path /400 }}\n\
         \x20   http-request deny if {{ path /403 }}\n\
         \x20   http-request deny deny_status 500 if {{ path /500 }}\n",
    )
}

/// What a client sees for `path` on `port`.
fn ask(port: u16, path: &str) -> String {
    let mut c = Client::connect(port);
    c.send(format!("GET {path} HTTP/1.1\r\nhost: a\r\n\r\n").as_bytes());
    match c.response(false) {
        Some(r) => {
            c.s.set_read_timeout(Some(Duration::from_millis(300)))
                .unwrap();
            let mut b = [0u8; 1];
            let open = !matches!(c.s.read(&mut b), Ok(0));
            format!(
                "{path}: {} x-err={:?} body={:?} open={open}",
                r.status,
                header(&r.head, "x-err"),
                String::from_utf8_lossy(&r.body),
            )
        }
        None => format!("{path}: closed without a response"),
    }
}

fn run_through(program: &str) -> Vec<String> {
    let dir = TempDir::new("errorfiles");
    let (fe1, fe2) = (free_port(), free_port());
    let cfg = dir.path("p.cfg");
    std::fs::write(&cfg, config(&dir, fe1, fe2)).unwrap();
    let mut child = Command::new(program)
        .arg("-db")
        .arg("-f")
        .arg(&cfg)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let up = eventually(Duration::from_secs(5), || {
        [fe1, fe2]
            .iter()
            .all(|&p| TcpStream::connect(("127.0.0.1", p)).is_ok())
    });
    let mut out = Vec::new();
    if up {
        for path in [
            "/400", "/403", "/404", "/500", "/429", "/503", "/d403", "/d408", "/r400", "/r404",
        ] {
            out.push(format!("fe1 {}", ask(fe1, path)));
        }
        // `monitor-uri`: answered 200 before the rule that would deny it.
        for path in ["/400", "/403", "/500", "/health", "/hEAlth", "/410"] {
            out.push(format!("fe2 {}", ask(fe2, path)));
        }
    } else {
        out.push(format!("{program} did not start"));
    }
    let _ = child.kill();
    let _ = child.wait();
    out
}

#[test]
fn error_pages_match_haproxy() {
    let ours = run_through(BIN);
    let joined = ours.join("\n");
    for want in [
        // `http-error status 400` puts back the built-in page over the defaults' file.
        "fe1 /400: 400 x-err=None",
        // From section `two`, named in `defaults`.
        "fe1 /403: 403 x-err=Some(\"s2b\")",
        // `errorfiles one 500 404` after the defaults' `errorfile 404`: section one wins.
        "fe1 /404: 404 x-err=Some(\"s1c\")",
        // Section one's 500 is an empty file: closed without a response.
        "fe1 /500: closed without a response",
        "fe1 /429: 429 x-err=Some(\"lit\") body=\"slow\"",
        "fe1 /d408: closed without a response",
        "fe2 /400: 400 x-err=Some(\"s1a\")",
        // `http-error` pages with log-format strings, rendered on the request: for
        // `monitor-uri`, for a deny, and for the 503 of a frontend without a backend.
        "fe2 /health: 200 x-err=Some(\"up /health\") body=\"ok\"",
        "fe2 /hEAlth: 503 x-err=Some(\"/hEAlth\") body=\"no server for /hEAlth (host a)\"",
        "fe2 /410: 410 x-err=Some(\"GET\") body=\"gone: /410\"",
    ] {
        assert!(joined.contains(want), "missing {want:?} in:\n{joined}");
    }
    if !have_haproxy("the error pages side-by-side test") {
        return;
    }
    let reference = run_through(HAPROXY);
    let diff: Vec<String> = reference
        .iter()
        .zip(&ours)
        .filter(|(h, b)| h != b)
        .map(|(h, b)| format!("  haproxy: {h}\n  bascule: {b}"))
        .collect();
    assert!(diff.is_empty(), "differences:\n{}", diff.join("\n"));
}

/// `errorloc`, `errorloc302` and `errorloc303 CODE URL`: the generated error becomes HAProxy's
/// redirect (302 or 303, `cache-control: no-cache`, no body), whole heads compared, the
/// three requests on one keep-alive connection.
#[test]
fn errorloc_redirects_as_haproxy() {
    let cfg = "defaults\n    mode http\n    timeout client 5s\n    timeout server 5s\n    timeout connect 1s\n\
               \x20   errorloc 503 https://status.example.com/down\n\
               frontend fe\n    bind 127.0.0.1:@P2@\n\
               \x20   errorloc303 403 /forbidden?x=1\n    errorloc302 429 http://slow.example.com/\n\
               \x20   http-request deny if { path /403 }\n\
               \x20   http-request deny deny_status 429 if { path /429 }\n\
               \x20   default_backend be\n\
               backend be\n    server s 127.0.0.1:1\n";
    support::side::both("errorloc", cfg, |_, _, p2, _| {
        let mut c = Client::connect(p2);
        ["/403", "/429", "/503"]
            .iter()
            .map(|path| {
                c.send(format!("GET {path} HTTP/1.1\r\nhost: a\r\n\r\n").as_bytes());
                c.response(false)
                    .map_or_else(|| format!("{path}: no response"), |r| r.head)
            })
            .collect()
    });
}

/// A response Bascule generates ends its head as haproxy's HTTP/1 multiplexer ends it:
/// `connection: close` last when the connection closes after it (the client asked, an
/// HTTP/1.0 client, a request body left unread), `connection: keep-alive` for an HTTP/1.0
/// client that keeps its connection, nothing for an HTTP/1.1 one; whole heads compared, and
/// whether the connection closed.
#[test]
fn generated_responses_say_how_the_connection_goes_on_as_haproxy() {
    let cfg = "defaults\n    mode http\n    timeout client 5s\n    timeout server 5s\n    timeout connect 1s\n\
               frontend fe\n    bind 127.0.0.1:@P2@\n\
               \x20   http-request deny if { path /d }\n\
               \x20   http-request return status 200 content-type text/plain string ok if { path /r }\n\
               \x20   http-request deny deny_status 400 if { path /b400 }\n\
               \x20   http-request deny deny_status 408 if { path /b408 }\n\
               \x20   default_backend be\n\
               backend be\n    retries 0\n    server s 127.0.0.1:1\n";
    let requests = [
        "GET /d HTTP/1.0\r\n\r\n",
        "GET /d HTTP/1.0\r\nconnection: keep-alive\r\n\r\n",
        "POST /d HTTP/1.1\r\nhost: a\r\ncontent-length: 5\r\n\r\n",
        "GET /d HTTP/1.1\r\nhost: a\r\n\r\n",
        "GET /r HTTP/1.1\r\nhost: a\r\nconnection: close\r\n\r\n",
        "GET /x HTTP/1.1\r\nhost: a\r\nconnection: close\r\n\r\n",
        "GET /x HTTP/1.0\r\n\r\n",
        "GET /x HTTP/1.0\r\nconnection: keep-alive\r\n\r\n",
        "GET /x HTTP/1.1\r\nhost: a\r\n\r\n",
        // HAProxy's own 400 and 408 pages close the connection; sent raw by its multiplexer
        // for a request it could not parse, as messages (lower case) for a rule's.
        "GET /b400 HTTP/1.1\r\nhost: a\r\n\r\n",
        "GET /b408 HTTP/1.1\r\nhost: a\r\n\r\n",
        "GET / HTTP/1.1\r\nhost: a\r\nbad header\r\n\r\n",
    ];
    support::side::both(
        "connection header of generated responses",
        cfg,
        |_, _, p2, _| {
            requests
                .iter()
                .map(|req| {
                    let mut c = Client::connect(p2);
                    c.send(req.as_bytes());
                    let Some(r) = c.response(false) else {
                        return format!("{req:?}: no response");
                    };
                    // Whether the connection then closes (a kept one stays open far longer).
                    let _ = c.s.set_read_timeout(Some(Duration::from_millis(300)));
                    format!("{}closed: {}", r.head, c.closed())
                })
                .collect()
        },
    );
}

/// `monitor fail if|unless COND`: a `monitor-uri` request is answered 503 (the proxy's page
/// for it) when a condition holds, 200 otherwise; compared with haproxy.
#[test]
fn monitor_fail_answers_503_when_its_condition_holds() {
    let cfg = "defaults\n    mode http\n    timeout client 5s\n    timeout server 5s\n    timeout connect 1s\n\
               frontend fe\n    bind 127.0.0.1:@P2@\n    monitor-uri /health\n\
               \x20   monitor fail if { req.hdr(x-down) -m found }\n\
               \x20   monitor fail unless { nbsrv(be) ge 1 }\n    default_backend be\n\
               frontend fe2\n    bind 127.0.0.1:@P1@\n    monitor-uri /health\n\
               \x20   monitor fail unless { nbsrv(off) ge 1 }\n    default_backend off\n\
               backend be\n    server s 127.0.0.1:1\n\
               backend off\n    server s 127.0.0.1:1 disabled\n";
    support::side::both("monitor fail", cfg, |_, p1, p2, _| {
        [
            (p2, "GET /health HTTP/1.1\r\nhost: a\r\n\r\n"),
            (p2, "GET /health HTTP/1.1\r\nhost: a\r\nx-down: 1\r\n\r\n"),
            (p1, "GET /health HTTP/1.1\r\nhost: a\r\n\r\n"),
        ]
        .iter()
        .map(|(port, req)| {
            let mut c = Client::connect(*port);
            c.send(req.as_bytes());
            c.response(false)
                .map_or_else(|| format!("{req:?}: no response"), |r| r.head)
        })
        .collect()
    });
}
