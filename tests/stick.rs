//! Stick tables used by rules (`track-sc*`, `sc-*` actions, `sc*_`/`src_`/`table_*` fetches
//! and converters), side by side with `/usr/sbin/haproxy` 2.6: the same configuration and
//! the same requests through both, then the same answers and the same `show table` output
//! (entry addresses and expiry masked).
//!
//! Rates are stored over one hour so that every event of a test falls in one period on both
//! sides (the freq counters themselves are compared with haproxy in `src/stick/freq.rs`).
#![allow(clippy::disallowed_methods)]

mod support;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::Duration;

use support::*;

/// An HTTP/1.1 server: `/NNN...` answers status NNN (else 200), `/close` closes without an
/// answer; keep-alive.
fn http_backend() -> u16 {
    named_backend("")
}

/// [`http_backend`] whose answers carry `x-v: NAME`.
fn named_backend(name: &'static str) -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    thread::spawn(move || {
        for c in l.incoming().flatten() {
            thread::spawn(move || serve(c, name));
        }
    });
    port
}

fn serve(mut c: TcpStream, name: &str) {
    let _ = c.set_read_timeout(Some(Duration::from_secs(5)));
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
            match c.read(&mut chunk) {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
        let end = buf.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
        let head = String::from_utf8_lossy(&buf[..end]).to_string();
        buf.drain(..end);
        let path = head.split(' ').nth(1).unwrap_or("/").to_string();
        if path.starts_with("/close") {
            return;
        }
        let status = path
            .get(1..4)
            .and_then(|s| s.parse::<u16>().ok())
            .unwrap_or(200);
        let resp = format!("HTTP/1.1 {status} X\r\nContent-Length: 2\r\nx-v: {name}\r\n\r\nok");
        if c.write_all(resp.as_bytes()).is_err() {
            return;
        }
    }
}

struct Haproxy(Child);

impl Drop for Haproxy {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Both proxies running `body` (a configuration with `{port}` for the frontend's port and
/// `{sock}` for the stats socket).
struct Pair {
    _dir: TempDir,
    _h: Haproxy,
    _b: Proxy,
    /// (port, stats socket) of haproxy, then of Bascule.
    sides: [(u16, std::path::PathBuf); 2],
}

fn pair(body: &str) -> Pair {
    let dir = TempDir::new("stick");
    let (hport, bport) = (free_port(), free_port());
    let (hsock, bsock) = (dir.path("h.sock"), dir.path("b.sock"));
    let cfg = |port: u16, sock: &Path| {
        body.replace("{port}", &port.to_string())
            .replace("{sock}", &sock.display().to_string())
    };
    let hcfg = dir.path("h.cfg");
    std::fs::write(&hcfg, cfg(hport, &hsock)).unwrap();
    let h = Haproxy(
        Command::new(HAPROXY)
            .arg("-db")
            .arg("-f")
            .arg(&hcfg)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("run haproxy"),
    );
    let b = Proxy::start(&cfg(bport, &bsock), bport, &[]);
    assert!(eventually(Duration::from_secs(5), || {
        UnixStream::connect(&hsock).is_ok()
    }));
    // The readiness probes opened connections: start from empty tables on both sides.
    for s in [&hsock, &bsock] {
        assert!(eventually(Duration::from_secs(5), || {
            let all = cmd(s, "show table");
            for name in all.lines().filter_map(|l| l.strip_prefix("# table: ")) {
                let name = name.split(',').next().unwrap_or("");
                let _ = cmd(s, &format!("clear table {name}"));
            }
            !cmd(s, "show table").contains("key=") && !all.is_empty()
        }));
    }
    Pair {
        _dir: dir,
        _h: h,
        _b: b,
        sides: [(hport, hsock), (bport, bsock)],
    }
}

fn cmd(sock: &Path, c: &str) -> String {
    let Ok(mut s) = UnixStream::connect(sock) else {
        return String::new();
    };
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let _ = s.write_all(format!("{c}\n").as_bytes());
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out
}

/// `show table` with entry addresses and expiry masked.
fn table(sock: &Path, name: &str) -> String {
    cmd(sock, &format!("show table {name}"))
        .lines()
        .map(|l| match l.split_once(": key=") {
            Some((p, rest)) if p.starts_with("0x") => {
                let rest: Vec<&str> = rest
                    .split(' ')
                    .map(|w| if w.starts_with("exp=") { "exp=T" } else { w })
                    .collect();
                format!("PTR: key={}", rest.join(" "))
            }
            _ => l.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Sends one request for `path` with `hdr` (a header line) on its own connection; returns the
/// status and `x-v`.
fn request_with(port: u16, path: &str, hdr: &str) -> (u16, String) {
    let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let req = format!("GET {path} HTTP/1.1\r\nHost: x\r\n{hdr}\r\nConnection: close\r\n\r\n");
    c.write_all(req.as_bytes()).unwrap();
    let mut out = Vec::new();
    let _ = c.read_to_end(&mut out);
    let text = String::from_utf8_lossy(&out);
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let v = text
        .lines()
        .find_map(|l| l.strip_prefix("x-v: "))
        .unwrap_or("")
        .to_string();
    (status, v)
}

/// Sends `paths` as keep-alive requests on one connection (the last with `Connection:
/// close`); returns each answer's status and its `x-v` header.
fn requests(port: u16, paths: &[&str]) -> Vec<(u16, String)> {
    let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut out = Vec::new();
    let mut buf = Vec::new();
    for (i, p) in paths.iter().enumerate() {
        let close = if i + 1 == paths.len() {
            "Connection: close\r\n"
        } else {
            ""
        };
        let req = format!("GET {p} HTTP/1.1\r\nHost: x\r\n{close}\r\n");
        if c.write_all(req.as_bytes()).is_err() {
            break;
        }
        let mut chunk = [0u8; 4096];
        while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
            match c.read(&mut chunk) {
                Ok(0) | Err(_) => return out,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
        let end = buf.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
        let head = String::from_utf8_lossy(&buf[..end]).to_string();
        buf.drain(..end);
        let mut len = 0usize;
        let mut v = String::new();
        for l in head.lines().skip(1) {
            if let Some((n, val)) = l.split_once(':') {
                if n.eq_ignore_ascii_case("content-length") {
                    len = val.trim().parse().unwrap_or(0);
                } else if n.eq_ignore_ascii_case("x-v") {
                    v = val.trim().to_string();
                }
            }
        }
        while buf.len() < len {
            match c.read(&mut chunk) {
                Ok(0) | Err(_) => return out,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
        buf.drain(..len);
        let status = head
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        out.push((status, v));
        if head.to_ascii_lowercase().contains("connection: close") {
            break;
        }
    }
    out
}

/// Waits until no entry of table `fe` is in use on either side (every session ended), then
/// returns both tables.
fn settled(p: &Pair) -> [String; 2] {
    let idle = |sock: &Path| {
        let t = cmd(sock, "show table fe");
        t.split_whitespace()
            .all(|w| !(w.starts_with("use=") || w.starts_with("conn_cur=")) || w.ends_with("=0"))
    };
    for (_, s) in &p.sides {
        assert!(
            eventually(Duration::from_secs(5), || idle(s)),
            "{}",
            cmd(s, "show table fe")
        );
    }
    [table(&p.sides[0].1, "fe"), table(&p.sides[1].1, "fe")]
}

const DEFAULTS: &str = "defaults\n    mode http\n    timeout connect 2s\n    timeout client 5s\n    timeout server 5s\n";

#[test]
fn every_counter_as_haproxy_counts_it() {
    if !have_haproxy("every_counter_as_haproxy_counts_it") {
        return;
    }
    let be = http_backend();
    let mut dead = Backend::echo();
    dead.stop();
    let p = pair(&format!(
        "global\n    stats socket {{sock}} level admin\n{DEFAULTS}\
         frontend fe\n    bind 127.0.0.1:{{port}}\n\
         \x20   stick-table type ip size 10 store conn_cnt,conn_cur,conn_rate(1h),sess_cnt,sess_rate(1h),http_req_cnt,http_req_rate(1h),http_err_cnt,http_err_rate(1h),http_fail_cnt,http_fail_rate(1h),bytes_in_cnt,bytes_in_rate(1h),bytes_out_cnt,bytes_out_rate(1h)\n\
         \x20   tcp-request connection track-sc1 src\n\
         \x20   http-request track-sc0 src\n\
         \x20   timeout tarpit 100ms\n\
         \x20   http-request deny if {{ path /deny }}\n\
         \x20   http-request auth if {{ path /auth }}\n\
         \x20   http-request tarpit if {{ path /tarpit }}\n\
         \x20   http-request return status 404 if {{ path /ret404 }}\n\
         \x20   http-response deny if {{ status 418 }}\n\
         \x20   use_backend dead if {{ path /dead }}\n\
         \x20   default_backend be\n\
         backend be\n    server s 127.0.0.1:{be}\n\
         backend dead\n    server s 127.0.0.1:{}\n",
        dead.port
    ));
    let paths = [
        "/200", "/404", "/500", "/501", "/503", "/deny", "/ret404", "/dead", "/close", "/auth",
        "/tarpit", "/418",
    ];
    for (port, _) in &p.sides {
        for path in paths {
            requests(*port, &[path]);
        }
        // Three requests on one connection: one session, three streams.
        requests(*port, &["/200", "/403", "/200"]);
    }
    let [h, b] = settled(&p);
    assert!(h.contains("http_req_cnt=30"), "{h}");
    assert_eq!(b, h);
}

#[test]
fn rate_limit_denies_exactly_the_requests_over_the_limit() {
    if !have_haproxy("rate_limit_denies_exactly_the_requests_over_the_limit") {
        return;
    }
    let be = http_backend();
    let p = pair(&format!(
        "global\n    stats socket {{sock}} level admin\n{DEFAULTS}\
         frontend fe\n    bind 127.0.0.1:{{port}}\n\
         \x20   stick-table type ip size 100 expire 1h store http_req_rate(1h)\n\
         \x20   http-request track-sc0 src\n\
         \x20   http-request deny deny_status 429 if {{ sc_http_req_rate(0) gt 10 }}\n\
         \x20   default_backend be\n\
         backend be\n    server s 127.0.0.1:{be}\n"
    ));
    let mut seen = Vec::new();
    for (port, _) in &p.sides {
        let mut statuses = Vec::new();
        // Five requests on one connection, then one per connection.
        statuses.extend(requests(*port, &["/"; 5]).into_iter().map(|r| r.0));
        for _ in 0..10 {
            statuses.extend(requests(*port, &["/"]).into_iter().map(|r| r.0));
        }
        seen.push(statuses);
    }
    let mut want = vec![200; 10];
    want.extend([429; 5]);
    assert_eq!(seen[0], want);
    assert_eq!(seen[1], want);
    let [h, b] = settled(&p);
    assert_eq!(b, h);
}

#[test]
fn fetches_and_converters_read_what_haproxy_reads() {
    if !have_haproxy("fetches_and_converters_read_what_haproxy_reads") {
        return;
    }
    let be = http_backend();
    // Each path selects one expression, sent back in `x-v`.
    let exprs = [
        ("/a", "%[sc0_get_gpc0]"),
        ("/b", "%[sc_get_gpc0(0)]"),
        ("/c", "%[src_get_gpc0]"),
        (
            "/d",
            "%[sc0_http_req_cnt]/%[sc1_http_req_cnt]/%[sc_http_req_cnt(2)]",
        ),
        ("/e", "%[sc0_trackers]/%[sc0_tracked]/%[sc2_tracked]"),
        ("/f", "%[table_cnt]/%[table_avl]/%[table_cnt(other)]"),
        (
            "/g",
            "%[src,table_gpc0(fe)]/%[src,in_table(fe)]/%[str(1.2.3.4),in_table(fe)]",
        ),
        (
            "/h",
            "%[src_inc_gpc0]/%[src_inc_gpc0]/%[src_clr_gpc0]/%[src_get_gpc0]",
        ),
        (
            "/i",
            "%[sc0_conn_cur]/%[sc0_conn_cnt]/%[src_conn_cnt(other)]/%[sc1_conn_cnt(fe)]",
        ),
        ("/j", "%[sc_get_gpt0(0)]/%[sc0_get_gpc1]/%[sc0_gpc0_rate]"),
        (
            "/k",
            "%[src_updt_conn_cnt(other)]/%[src,table_conn_cnt(other)]/%[src,table_trackers(fe)]",
        ),
        (
            "/l",
            "%[sc_get_gpc(1,2)]/%[sc_gpc_rate(1,2)]/%[sc0_kbytes_in]/%[src_kbytes_out]",
        ),
        (
            "/m",
            "%[sc_get_gpc(0,2)]/%[sc2_get_gpc0]/%[src_get_gpc(1,arr)]/%[src,table_gpc(1,arr)]",
        ),
    ];
    let mut body = format!(
        "global\n    stats socket {{sock}} level admin\n{DEFAULTS}\
         frontend fe\n    bind 127.0.0.1:{{port}}\n\
         \x20   stick-table type ip size 10 store gpc0,gpc0_rate(1h),gpt0,http_req_cnt,conn_cur,conn_cnt,bytes_in_cnt\n\
         \x20   tcp-request connection track-sc1 src table other\n\
         \x20   http-request track-sc0 src\n\
         \x20   http-request sc-inc-gpc0(0) if {{ path /inc }}\n\
         \x20   http-request track-sc2 src table arr\n\
         \x20   http-request sc-inc-gpc(1,2) if {{ path /inc }}\n\
         \x20   http-request sc-set-gpt0(0) 42 if {{ path /inc }}\n"
    );
    for (path, e) in exprs {
        body.push_str(&format!(
            "    http-request return status 200 hdr x-v \"{e}\" if {{ path {path} }}\n"
        ));
    }
    body.push_str(&format!(
        "    default_backend be\nbackend be\n    server s 127.0.0.1:{be}\n\
         backend other\n    stick-table type ip size 5 store conn_cnt,http_req_cnt\n\
         backend arr\n    stick-table type ip size 5 store gpc(2),gpc_rate(2,1h)\n"
    ));
    let p = pair(&body);
    let mut seen = Vec::new();
    for (port, _) in &p.sides {
        let mut all: Vec<&str> = exprs.iter().map(|e| e.0).collect();
        all.insert(3, "/inc");
        all.insert(4, "/inc");
        let first = requests(*port, &all);
        let again = requests(*port, &all);
        seen.push((first, again));
    }
    assert_eq!(seen[0].0.len(), 15, "{:?}", seen[0]);
    assert_eq!(seen[1], seen[0]);
    let [h, b] = settled(&p);
    assert_eq!(b, h);
    for t in ["other", "arr"] {
        assert_eq!(table(&p.sides[1].1, t), table(&p.sides[0].1, t));
    }
}

#[test]
fn conn_cur_counts_open_connections_and_drops_when_they_close() {
    if !have_haproxy("conn_cur_counts_open_connections_and_drops_when_they_close") {
        return;
    }
    let be = Backend::echo();
    let p = pair(&format!(
        "global\n    stats socket {{sock}} level admin\n{}\
         frontend fe\n    bind 127.0.0.1:{{port}}\n\
         \x20   stick-table type ip size 10 store conn_cur,conn_cnt,sess_cnt,bytes_in_cnt,bytes_out_cnt\n\
         \x20   tcp-request connection track-sc0 src\n\
         \x20   tcp-request content track-sc1 src\n\
         \x20   tcp-request connection reject if {{ sc0_conn_cur gt 5 }}\n\
         \x20   default_backend be\n\
         backend be\n    server s 127.0.0.1:{}\n",
        tcp_defaults(),
        be.port
    ));
    for (port, sock) in &p.sides {
        let mut open: Vec<TcpStream> = (0..3).map(|_| connect(*port)).collect();
        for c in &mut open {
            c.write_all(b"ping").unwrap();
            let mut b = [0u8; 4];
            c.read_exact(&mut b).unwrap();
        }
        assert!(
            eventually(Duration::from_secs(5), || cmd(sock, "show table fe")
                .contains("conn_cur=6")),
            "{}",
            cmd(sock, "show table fe")
        );
        // A fourth connection is over the limit: closed at once.
        // (The reset may come before `connect` returns.)
        if let Ok(mut extra) = TcpStream::connect(("127.0.0.1", *port)) {
            extra
                .set_read_timeout(Some(Duration::from_secs(5)))
                .unwrap();
            let _ = extra.write_all(b"x");
            let mut got = Vec::new();
            let _ = extra.read_to_end(&mut got);
            assert!(got.is_empty());
        }
        drop(open);
    }
    let [h, b] = settled(&p);
    assert!(h.contains("conn_cur=0"), "{h}");
    assert_eq!(b, h);
}

#[test]
fn stick_on_sends_a_key_back_to_its_server() {
    if !have_haproxy("stick_on_sends_a_key_back_to_its_server") {
        return;
    }
    let (a, b, c) = (named_backend("a"), named_backend("b"), named_backend("c"));
    let p = pair(&format!(
        "global\n    nbthread 1\n    stats socket {{sock}} level admin\n{DEFAULTS}\
         frontend fe\n    bind 127.0.0.1:{{port}}\n\
         \x20   stick-table type ip size 10 store http_req_cnt\n\
         \x20   default_backend be\n\
         backend be\n    balance roundrobin\n\
         \x20   stick-table type string len 16 size 10 expire 1h\n\
         \x20   stick on req.hdr(x-user)\n\
         \x20   stick store-response res.hdr(x-v) table by_srv\n\
         \x20   stick match req.hdr(x-srv) table by_srv\n\
         \x20   server a 127.0.0.1:{a}\n    server b 127.0.0.1:{b}\n    server c 127.0.0.1:{c}\n\
         backend by_srv\n    stick-table type string size 10 store gpc0\n"
    ));
    let users = [
        "x-user: u1",
        "x-user: u2",
        "x-user: u1",
        "x-user: u3",
        "x-user: u2",
        "x-user: u1",
        "x-user: u4",
        "x-user: u3",
        "x-srv: b",
        "x-srv: nobody",
        "x-user: u2",
    ];
    let mut seen = Vec::new();
    for (port, sock) in &p.sides {
        let mut v: Vec<(u16, String)> = Vec::new();
        // A path that stores the answering server's own name in `by_srv`.
        for _ in 0..3 {
            v.push(request_with(*port, "/srv", ""));
        }
        for u in users {
            v.push(request_with(*port, "/", u));
        }
        seen.push((v, table(sock, "be"), table(sock, "by_srv")));
        // A stored server in maintenance: the balancer chooses another (which one is the
        // balancer's business), the key is stored with it and sticks there.
        let before: Vec<String> = (1..=4)
            .map(|i| request_with(*port, "/", &format!("x-user: u{i}")).1)
            .collect();
        cmd(sock, "disable server be/a");
        for (i, was) in before.iter().enumerate() {
            let u = format!("x-user: u{}", i + 1);
            let (first, again) = (
                request_with(*port, "/", &u).1,
                request_with(*port, "/", &u).1,
            );
            assert_eq!(first, again, "{u}");
            if was == "a" {
                assert_ne!(first, "a", "{u}");
            } else {
                assert_eq!(&first, was, "{u}");
            }
        }
    }
    assert_eq!(seen[1], seen[0]);
    // u1 always lands where it landed first.
    let u1: Vec<&String> = [3, 5, 8].iter().map(|&i| &seen[0].0[i].1).collect();
    assert!(u1.iter().all(|s| *s == u1[0]), "{:?}", seen[0].0);
}

/// A stored server in maintenance still gets its keys under `option persist`, and under a
/// `force-persist` rule that matches; without either, the balancer chooses another. As
/// haproxy does (`sticking_rule_find_target`).
#[test]
fn persist_keeps_a_stuck_server_that_is_down() {
    if !have_haproxy("persist_keeps_a_stuck_server_that_is_down") {
        return;
    }
    let (a, b) = (named_backend("a"), named_backend("b"));
    let p = pair(&format!(
        "global\n    nbthread 1\n    stats socket {{sock}} level admin\n{DEFAULTS}\
         frontend fe\n    bind 127.0.0.1:{{port}}\n\
         \x20   use_backend persist if {{ path_beg /p }}\n\
         \x20   default_backend forced\n\
         backend persist\n    balance roundrobin\n    option persist\n\
         \x20   stick-table type string len 16 size 10\n\
         \x20   stick on req.hdr(x-user)\n\
         \x20   server a 127.0.0.1:{a}\n    server b 127.0.0.1:{b}\n\
         backend forced\n    balance roundrobin\n\
         \x20   force-persist if {{ req.hdr(x-force) -m found }}\n\
         \x20   stick-table type string len 16 size 10\n\
         \x20   stick on req.hdr(x-user)\n\
         \x20   server a 127.0.0.1:{a}\n    server b 127.0.0.1:{b}\n"
    ));
    let mut seen = Vec::new();
    for (port, sock) in &p.sides {
        let mut v = Vec::new();
        // u1 on a, u2 on b in both backends.
        for path in ["/p", "/f"] {
            for u in ["u1", "u2"] {
                v.push(request_with(*port, path, &format!("x-user: {u}")).1);
            }
        }
        cmd(sock, "disable server persist/a");
        cmd(sock, "disable server forced/a");
        for _ in 0..2 {
            v.push(request_with(*port, "/p", "x-user: u1").1);
            v.push(request_with(*port, "/f", "x-user: u1\r\nx-force: 1").1);
        }
        // No force: u1 moves to b and is stored there.
        v.push(request_with(*port, "/f", "x-user: u1").1);
        v.push(request_with(*port, "/f", "x-user: u1\r\nx-force: 1").1);
        seen.push(v);
    }
    assert_eq!(seen[0][..4], ["a", "b", "a", "b"], "{:?}", seen[0]);
    assert_eq!(seen[1], seen[0]);
}

#[test]
fn stick_on_src_in_tcp_mode() {
    if !have_haproxy("stick_on_src_in_tcp_mode") {
        return;
    }
    let (a, b) = (Backend::banner("a"), Backend::banner("b"));
    let p = pair(&format!(
        "global\n    nbthread 1\n    stats socket {{sock}} level admin\n{}\
         frontend fe\n    bind 127.0.0.1:{{port}}\n    default_backend be\n\
         \x20   stick-table type ip size 10 store conn_cnt\n\
         backend be\n    balance roundrobin\n\
         \x20   stick-table type ip size 10 expire 1h\n\
         \x20   stick on src\n\
         \x20   server a 127.0.0.1:{}\n    server b 127.0.0.1:{}\n",
        tcp_defaults(),
        a.port,
        b.port
    ));
    let mut seen = Vec::new();
    for (port, sock) in &p.sides {
        // The readiness probe may have stored a server already: every connection goes to the
        // one stored, whichever it is.
        let got: Vec<String> = (0..4)
            .map(|_| String::from_utf8_lossy(&read_all(&mut connect(*port))).into_owned())
            .collect();
        assert!(got.iter().all(|g| *g == got[0]), "{got:?}");
        let t = table(sock, "be");
        assert!(t.contains(&format!("server_key={}\n", got[0])), "{t}");
        // Which server the balancer chose first differs (the readiness probes): mask it.
        seen.push(
            t.lines()
                .map(|l| l.split(" server_id=").next().unwrap_or(l))
                .collect::<Vec<_>>()
                .join("\n"),
        );
    }
    assert_eq!(seen[1], seen[0]);
}

#[test]
fn http_response_track_counts_the_transaction_it_tracks() {
    if !have_haproxy("http_response_track_counts_the_transaction_it_tracks") {
        return;
    }
    let be = http_backend();
    let p = pair(&format!(
        "global\n    stats socket {{sock}} level admin\n{DEFAULTS}\
         frontend fe\n    bind 127.0.0.1:{{port}}\n\
         \x20   stick-table type ip size 10 store conn_cnt,conn_cur,http_req_cnt,http_err_cnt,http_fail_cnt,bytes_in_cnt,bytes_out_cnt,sess_cnt\n\
         \x20   http-response track-sc1 src\n\
         \x20   http-response set-header x-v \"%[sc1_conn_cur]/%[sc1_http_req_cnt]/%[sc1_http_err_cnt]/%[sc1_http_fail_cnt]\"\n\
         \x20   default_backend be\n\
         backend be\n    server s 127.0.0.1:{be}\n"
    ));
    let mut seen = Vec::new();
    for (port, _) in &p.sides {
        seen.push(requests(*port, &["/200", "/404", "/500", "/404", "/501"]));
    }
    assert_eq!(seen[0].len(), 5);
    assert_eq!(seen[1], seen[0]);
    let [h, b] = settled(&p);
    assert_eq!(b, h);
}
