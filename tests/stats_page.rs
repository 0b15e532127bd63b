//! The statistics page (`stats enable`, `stats uri`...), side by side with haproxy: which
//! requests it answers, its status codes and headers, `stats auth` and its realm, the CSV
//! export (the same header, the same lines), `scope`, the admin form (`stats admin`) and
//! `stats http-request` rules, and that its responses pass through `http-after-response`.
#![allow(clippy::disallowed_methods)]

mod support;

use support::http::{header, Client, Response};
use support::side::both;

/// The parts of a response both proxies must agree on: the status and the headers the page
/// sets (not the framing: haproxy chunks the page, Bascule gives its length).
fn summary(r: &Response) -> String {
    let mut out = format!("{}", r.status);
    for h in [
        "content-type",
        "cache-control",
        "refresh",
        "www-authenticate",
        "location",
        "x-after",
    ] {
        if let Some(v) = header(&r.head, h) {
            out.push_str(&format!(" {h}={v}"));
        }
    }
    out
}

/// A GET with extra header lines.
fn get(c: &mut Client, path: &str, extra: &str) -> Response {
    c.send(format!("GET {path} HTTP/1.1\r\nHost: test\r\n{extra}\r\n").as_bytes());
    c.response(false).unwrap_or(Response {
        head: String::new(),
        status: 0,
        body: Vec::new(),
    })
}

/// The proxy, server and status columns of a CSV export, and its header line.
fn csv_lines(body: &[u8]) -> Vec<String> {
    let text = String::from_utf8_lossy(body);
    text.lines()
        .map(|l| {
            if l.starts_with('#') {
                return l.to_string();
            }
            let f: Vec<&str> = l.split(',').collect();
            f.iter()
                .take(2)
                .chain(f.get(17))
                .copied()
                .collect::<Vec<_>>()
                .join(",")
        })
        .collect()
}

/// `Basic` credentials for `user:pass`.
fn basic(cred: &str) -> String {
    const T: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let b = cred.as_bytes();
    let mut out = String::new();
    for chunk in b.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, &c)| n | u32::from(c) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(T[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    format!("Authorization: Basic {out}\r\n")
}

const DEFAULTS: &str = "defaults\n    mode http\n    timeout connect 2s\n    timeout client 5s\n    timeout server 5s\n";

#[test]
fn auth_realm_refresh_and_csv_as_haproxy() {
    let cfg = format!(
        "global\n    stats socket @SOCK@ level admin\n{DEFAULTS}\
         frontend fe\n    bind 127.0.0.1:@P1@\n    default_backend be\n\
         listen st\n    bind 127.0.0.1:@P2@\n\
         \x20   stats enable\n    stats uri /stats\n    stats realm My\\ Realm\n\
         \x20   stats auth admin:pw\n    stats auth other:secret\n    stats refresh 10s\n\
         backend be\n    server s1 127.0.0.1:9 disabled\n    server s2 127.0.0.1:9\n\
         backend empty\n"
    );
    both(
        "auth_realm_refresh_and_csv_as_haproxy",
        &cfg,
        |_, _, p2, _| {
            let mut out = Vec::new();
            // No or wrong credentials: 401 with the realm, and the connection closed.
            for cred in ["", &basic("admin:nope")] {
                let mut c = Client::connect(p2);
                out.push(summary(&get(&mut c, "/stats", cred)));
                out.push(format!("closed: {}", c.closed()));
            }
            let mut c = Client::connect(p2);
            // The page, then its CSV export (the same connection).
            let auth = basic("admin:pw");
            let page = get(&mut c, "/stats", &auth);
            out.push(summary(&page));
            let body = String::from_utf8_lossy(&page.body).to_string();
            for name in ["fe", "st", "be", "s1", "s2", "empty"] {
                out.push(format!("page names {name}: {}", body.contains(name)));
            }
            let csv = get(&mut c, "/stats;csv", &basic("other:secret"));
            out.push(summary(&csv));
            out.extend(csv_lines(&csv.body));
            // `;norefresh` drops the refresh header; a HEAD has the headers only.
            out.push(summary(&get(&mut c, "/stats;csv;norefresh", &auth)));
            c.send(format!("HEAD /stats HTTP/1.1\r\nHost: t\r\n{auth}\r\n").as_bytes());
            out.push(summary(&c.response(true).expect("a response")));
            // Not the page: other paths and methods go to the (empty) backend.
            out.push(summary(&get(&mut c, "/other", &auth)));
            let mut c = Client::connect(p2);
            c.send(
                format!("PUT /stats HTTP/1.1\r\nHost: t\r\ncontent-length: 0\r\n{auth}\r\n")
                    .as_bytes(),
            );
            out.push(c.response(false).map_or("none".into(), |r| summary(&r)));
            out
        },
    );
}

#[test]
fn scope_and_admin_form_as_haproxy() {
    let cfg = format!(
        "global\n    stats socket @SOCK@ level admin\n{DEFAULTS}\
         frontend fe\n    bind 127.0.0.1:@P2@\n    stats enable\n    stats uri /\n\
         \x20   stats admin if {{ src 127.0.0.1 }}\n    default_backend b1\n\
         backend b1\n    server srv1 127.0.0.1:9\n    server srv2 127.0.0.1:9\n    server srv3 127.0.0.1:9\n\
         backend b2\n    server srv1 127.0.0.1:9\n    server srv2 127.0.0.1:9\n\
         listen other\n    bind 127.0.0.1:@P1@\n    stats enable\n    stats scope b2\n    stats scope .\n\
         \x20   server x 127.0.0.1:9\n"
    );
    both("scope_and_admin_form_as_haproxy", &cfg, |_, p1, p2, run| {
        let mut out = Vec::new();
        let mut c = Client::connect(p2);
        let r = get(&mut c, "/?;csv;scope=b1", "");
        out.push(summary(&r));
        out.extend(csv_lines(&r.body));
        // The form: backend by id or name, several servers, the outcome in the redirect.
        for body in [
            "s=srv1&s=srv3&action=maint&b=b1",
            "s=srv2&action=drain&b=%233",
            "s=srv1&s=nosuch&action=ready&b=b2",
            "s=nosuch&action=maint&b=b2",
            "action=maint&b=b2",
            "s=srv1&action=explode&b=b2",
        ] {
            c.send(
                format!(
                    "POST /?scope=b HTTP/1.1\r\nHost: t\r\ncontent-type: application/x-www-form-urlencoded\r\ncontent-length: {}\r\n\r\n{body}",
                    body.len()
                )
                .as_bytes(),
            );
            out.push(summary(&c.response(false).expect("a response")));
        }
        // The scope and `;up` go back in the redirect.
        let body = "s=srv3&action=ready&b=b1";
        c.send(
            format!(
                "POST /?scope=b1;up HTTP/1.1\r\nHost: t\r\ncontent-length: {}\r\n\r\n{body}",
                body.len()
            )
            .as_bytes(),
        );
        out.push(summary(&c.response(false).expect("a response")));
        let stat = run.cli("show stat");
        out.extend(csv_lines(stat.as_bytes()).into_iter().skip(1));
        // `stats scope`: only b2 and the proxy itself; the default URI.
        let mut o = Client::connect(p1);
        let r = get(&mut o, "/haproxy?stats;csv", "");
        out.push(summary(&r));
        out.extend(csv_lines(&r.body).into_iter().skip(1));
        // A POST where no `stats admin` rule holds: denied.
        let body = "s=x&action=maint&b=other";
        o.send(
            format!(
                "POST /haproxy?stats HTTP/1.1\r\nHost: t\r\ncontent-length: {}\r\n\r\n{body}",
                body.len()
            )
            .as_bytes(),
        );
        out.push(summary(&o.response(false).expect("a response")));
        out
    });
}

#[test]
fn stats_http_request_rules_and_after_response_as_haproxy() {
    let cfg = format!(
        "global\n    stats socket @SOCK@ level admin\n{DEFAULTS}\
         frontend fe\n    bind 127.0.0.1:@P2@\n    http-after-response set-header x-after %[method]\n\
         \x20   http-request deny if {{ path /denied }}\n    default_backend be\n\
         backend be\n    stats enable\n    stats uri /st\n\
         \x20   acl secret hdr(x-key) letmein\n\
         \x20   stats http-request deny if {{ path_beg /st/deny }}\n\
         \x20   stats http-request auth realm Inner unless secret\n\
         \x20   http-after-response set-status 299 if {{ capture.req.uri /st;csv }}\n\
         \x20   server s1 127.0.0.1:9\n\
         listen ls\n    bind 127.0.0.1:@P1@\n    mode tcp\n    stats enable\n    server s 127.0.0.1:9\n"
    );
    both(
        "stats_http_request_rules_and_after_response_as_haproxy",
        &cfg,
        |_, _, p2, _| {
            let mut out = Vec::new();
            for (path, extra) in [
                ("/st", ""),
                ("/st/deny", "x-key: letmein\r\n"),
                ("/st", "x-key: letmein\r\n"),
                ("/st;csv", "x-key: letmein\r\n"),
                ("/denied", ""),
            ] {
                let mut c = Client::connect(p2);
                let r = get(&mut c, path, extra);
                out.push(format!("{path}: {} closed={}", summary(&r), c.closed()));
            }
            out
        },
    );
}

#[test]
fn defaults_settings_are_inherited_until_the_proxy_has_its_own() {
    let cfg = "global\n    stats socket @SOCK@ level admin\n\
         defaults\n    mode http\n    timeout connect 2s\n    timeout client 5s\n    timeout server 5s\n\
         \x20   stats uri /from-defaults\n\
         frontend inherits\n    bind 127.0.0.1:@P2@\n    default_backend be\n\
         frontend own\n    bind 127.0.0.1:@P1@\n    stats enable\n    default_backend be\n\
         backend be\n    server s1 127.0.0.1:9\n";
    both(
        "defaults_settings_are_inherited_until_the_proxy_has_its_own",
        cfg,
        |_, p1, p2, _| {
            let mut out = Vec::new();
            for (port, path) in [
                (p2, "/from-defaults"),
                (p2, "/haproxy?stats"),
                (p1, "/from-defaults"),
                (p1, "/haproxy?stats"),
            ] {
                let mut c = Client::connect(port);
                out.push(format!(
                    "{port_name} {path} {}",
                    summary(&get(&mut c, path, "")),
                    port_name = if port == p1 { "own" } else { "inherits" }
                ));
            }
            out
        },
    );
}
