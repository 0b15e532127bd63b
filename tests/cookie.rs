//! Cookie persistence side by side with haproxy 2.6: one configuration (a `listen` section per
//! cookie mode) runs through Debian's haproxy and through Bascule, the same request bytes go
//! through each, and the test compares, request by request: the status, the `Set-Cookie`,
//! `Set-Cookie2` and `Cache-Control` headers the client got (cookie dates masked), which server answered and the
//! `Cookie` headers it received, and the log line (`%s %ST %tsc %rc %CC %CS`).
//!
//! Without haproxy the test prints "skipped" (and fails when `CI` is set).
#![allow(clippy::disallowed_methods)]

mod support;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream, UdpSocket};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use support::{free_port, TempDir, BIN, HAPROXY};

/// Requests not compared with haproxy, and why; Bascule's own answer is checked instead.
const DELIBERATE: &[(&str, &str)] = &[(
    "ins_sc2_middle",
    "haproxy 2.6.12 removes a cookie from the middle of a Set-Cookie2 header without shortening \
     the header, which leaves garbage behind (`a=1, b=2=x; Version=1, b=2`); Bascule sends \
     `a=1, b=2`",
)];

/// What the backends saw: (server name, `Cookie` header lines).
type Seen = Arc<Mutex<Vec<(String, Vec<String>)>>>;

/// A backend named `name`: records each request's `Cookie` headers; answers 200 with `X-Srv`,
/// and for a path containing `sc=V` a `Set-Cookie: V` (`+` for spaces, `~3B` for `;`), for
/// `cc=V` a `Cache-Control: V`.
fn backend(name: &str, seen: &Seen) -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let (name, seen) = (name.to_string(), seen.clone());
    thread::spawn(move || {
        for c in l.incoming().flatten() {
            let (name, seen) = (name.clone(), seen.clone());
            thread::spawn(move || serve(c, &name, &seen));
        }
    });
    port
}

fn param(path: &str, key: &str) -> Option<String> {
    let q = path.split_once('?')?.1;
    q.split('&').find_map(|kv| {
        let (k, v) = kv.split_once('=')?;
        (k == key).then(|| v.replace('+', " ").replace("~3B", ";").replace("~3D", "="))
    })
}

fn serve(mut c: TcpStream, name: &str, seen: &Seen) {
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
        let cookies = head
            .lines()
            .filter(|l| l.to_ascii_lowercase().starts_with("cookie:"))
            .map(|l| l[7..].trim_start().to_string())
            .collect();
        seen.lock().unwrap().push((name.to_string(), cookies));
        let path = head.split(' ').nth(1).unwrap_or("/").to_string();
        let mut extra = String::new();
        if let Some(v) = param(&path, "sc") {
            extra += &format!("Set-Cookie: {v}\r\n");
        }
        if let Some(v) = param(&path, "sc2") {
            extra += &format!("Set-Cookie2: {v}\r\n");
        }
        if let Some(v) = param(&path, "cc") {
            extra += &format!("Cache-Control: {v}\r\n");
        }
        let resp = format!(
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nX-Srv: {name}\r\n{extra}\r\n{name}",
            name.len()
        );
        if c.write_all(resp.as_bytes()).is_err() {
            return;
        }
    }
}

/// One request: the listen section (by index) and the request's extra header lines and path.
struct Case {
    name: &'static str,
    listen: usize,
    method: &'static str,
    path: &'static str,
    headers: &'static str,
}

const fn case(
    name: &'static str,
    listen: usize,
    path: &'static str,
    headers: &'static str,
) -> Case {
    Case {
        name,
        listen,
        method: "GET",
        path,
        headers,
    }
}

/// The listen sections: (name, lines).
const LISTENS: &[(&str, &str)] = &[
    ("ins", "cookie SRV insert indirect nocache"),
    ("insplain", "cookie SRV insert"),
    ("rw", "cookie SRV rewrite"),
    ("pfx", "cookie JSESSIONID prefix"),
    ("pres", "cookie SRV insert preserve"),
    (
        "attrs",
        "cookie SRV insert indirect httponly secure domain .example.com domain .example.org attr SameSite=Lax attr Partitioned",
    ),
    ("dates", "cookie SRV insert indirect maxidle 30m maxlife 8h"),
    ("persist", "cookie SRV insert indirect\n    option persist"),
    ("persistrd", "cookie SRV insert indirect\n    option persist\n    option redispatch"),
    (
        "force",
        "cookie SRV insert indirect\n    force-persist if { hdr(x-force) -m found }\n    ignore-persist if { path_beg /static }",
    ),
    ("post", "cookie SRV insert postonly"),
    ("dyn", "cookie SRV insert indirect dynamic\n    dynamic-cookie-key s3cr3t"),
    ("nock", "cookie SRV insert indirect"),
    ("idle", "cookie SRV insert indirect maxidle 10m"),
    ("life", "cookie SRV insert indirect maxlife 1h"),
    (
        "persistus",
        "cookie SRV insert indirect\n    option persist\n    use-server s3 if { path_beg /use }",
    ),
    (
        "deny",
        "cookie SRV insert indirect\n    http-request deny if { path_beg /deny }\n    http-request tarpit if { path_beg /tarpit }\n    timeout tarpit 10ms\n    use-server s2 if { path_beg /use }",
    ),
];

fn cases() -> Vec<Case> {
    let mut v = vec![
        case("ins_new", 0, "/a", ""),
        case("ins_valid", 0, "/a", "Cookie: SRV=s2\r\n"),
        case("ins_valid_mixed", 0, "/a", "Cookie: a=1; SRV=s2; b=2\r\n"),
        case(
            "ins_valid_first",
            0,
            "/a",
            "Cookie: SRV=s2;b=2\r\nCookie: c=3, SRV=s1\r\n",
        ),
        case("ins_spaces", 0, "/a", "Cookie: a = 1 ; SRV = s1\r\n"),
        case("ins_invalid", 0, "/a", "Cookie: SRV=zz; x=1\r\n"),
        case("ins_down", 0, "/a", "Cookie: SRV=s3\r\n"),
        case("ins_empty", 0, "/a", "Cookie: SRV=\r\n"),
        case(
            "ins_dollar",
            0,
            "/a",
            "Cookie: $Version=1; SRV=s1; $Path=/; a=2\r\n",
        ),
        case("ins_server_sets", 0, "/a?sc=SRV~3Dapp", ""),
        case(
            "ins_sc2_middle",
            0,
            "/a?sc2=a~3D1,+SRV~3Dx~3B+Version~3D1,+b~3D2",
            "",
        ),
        case(
            "ins_sc2_only",
            0,
            "/a?sc2=SRV~3Dx~3B+Version~3D1&sc=SRV~3Dy",
            "",
        ),
        case("rw_sc2", 2, "/a?sc2=c~3D3,+SRV~3Dapp~3B+Version~3D1", ""),
        case("pfx_sc2", 3, "/a?sc2=JSESSIONID~3Dq,+z~3D1", ""),
        case("ins_cc_private", 0, "/a?cc=private", ""),
        case("ins_cc_public", 0, "/a?cc=max-age~3D5,+public", ""),
        case("ins_capture", 0, "/a", "Cookie: sess=abcdef; SRV=s1\r\n"),
        case("plain_new", 1, "/a", "Cookie: a=1\r\n"),
        case("plain_valid", 1, "/a", "Cookie: a=1; SRV=s1\r\n"),
        case("rw_set", 2, "/a?sc=SRV~3Dapp;+path~3D/", ""),
        case("rw_valid", 2, "/a?sc=SRV~3Dx", "Cookie: SRV=s2\r\n"),
        case("rw_other", 2, "/a?sc=OTHER~3Dx", "Cookie: SRV=s1\r\n"),
        case("pfx_set", 3, "/a?sc=JSESSIONID~3Dabc", ""),
        case("pfx_valid", 3, "/a", "Cookie: x=1; JSESSIONID=s2~abc\r\n"),
        case("pfx_noprefix", 3, "/a", "Cookie: JSESSIONID=abc\r\n"),
        case("pres_server", 4, "/a?sc=SRV~3D", ""),
        case("pres_none", 4, "/a", ""),
        case("attrs", 5, "/a", ""),
        case("dates_new", 6, "/a", ""),
        case("dates_nodate", 6, "/a", "Cookie: SRV=s1\r\n"),
        case("dates_expired", 6, "/a", "Cookie: SRV=s1|AAAAB\r\n"),
        case("dates_old", 6, "/a", "Cookie: SRV=s1|Z0000|AAAAB\r\n"),
        case("dates_future", 6, "/a", "Cookie: SRV=s1|z0000|z0000\r\n"),
        case("persist_down", 7, "/a", "Cookie: SRV=s3\r\n"),
        case("persist_dead", 8, "/a", "Cookie: SRV=s4\r\n"),
        case("persist_dead_noredisp", 7, "/a", "Cookie: SRV=s4\r\n"),
        case("force_down", 9, "/a", "Cookie: SRV=s3\r\nX-Force: 1\r\n"),
        case("force_no", 9, "/a", "Cookie: SRV=s3\r\n"),
        case("ignore", 9, "/static/x", "Cookie: SRV=s1\r\n"),
        case("post_get", 10, "/a", ""),
        case("dyn_new", 11, "/a", ""),
        case("nock_new", 12, "/a", "Cookie: SRV=s1\r\n"),
        case("idle_new", 13, "/a", ""),
        case("idle_nodate", 13, "/a", "Cookie: SRV=s2\r\n"),
        case("life_new", 14, "/a", ""),
        case(
            "life_expired_old",
            14,
            "/a",
            "Cookie: SRV=s1|AAAAB|AAAAB\r\n",
        ),
        case("persist_use_server_down", 15, "/use", "Cookie: SRV=s1\r\n"),
        case("deny", 16, "/deny", "Cookie: sess=xyz; SRV=s1\r\n"),
        case("tarpit", 16, "/tarpit", "Cookie: SRV=zz\r\n"),
        case("use_server_first", 16, "/use", "Cookie: SRV=s1\r\n"),
        case("use_server_nocookie", 16, "/use", ""),
    ];
    // Dates relative to now: a recent visit (refreshed) and one in the near future (kept).
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as u32;
    let dated = |last: u32, first: u32| -> &'static str {
        Box::leak(
            format!("Cookie: SRV=s1|{}|{}\r\n", b64(last >> 2), b64(first >> 2)).into_boxed_str(),
        )
    };
    v.push(case("dates_recent", 6, "/a", dated(now - 8, now - 100)));
    v.push(case("dates_ahead", 6, "/a", dated(now + 100, now - 100)));
    v.push(Case {
        name: "post_post",
        listen: 10,
        method: "POST",
        path: "/a",
        headers: "Content-Length: 0\r\n",
    });
    v
}

/// A 30-bit value as HAProxy's 5 base64 characters (the cookie dates).
fn b64(v: u32) -> String {
    const T: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    (0..5)
        .map(|i| T[((v >> (24 - 6 * i)) & 63) as usize] as char)
        .collect()
}

/// What one request showed.
#[derive(Debug, PartialEq)]
struct Seen1 {
    status: String,
    headers: Vec<String>,
    server: Vec<(String, Vec<String>)>,
    log: String,
}

/// Masks the 5-character dates after `|` in cookie values.
fn mask_dates(s: &str) -> String {
    let mut out = String::new();
    let mut it = s.char_indices().peekable();
    let b = s.as_bytes();
    while let Some((i, c)) = it.next() {
        out.push(c);
        if c == '|'
            && b.len() >= i + 6
            && b[i + 1..i + 6]
                .iter()
                .all(|x| x.is_ascii_alphanumeric() || *x == b'+' || *x == b'/')
        {
            out.push_str("DATE");
            for _ in 0..5 {
                it.next();
            }
        }
    }
    out
}

/// The case's request target: its path with `case=NAME` in the query, so that its log line
/// (which ends with `%HU`) is told from any other.
fn target(c: &Case) -> String {
    let sep = if c.path.contains('?') { '&' } else { '?' };
    format!("{}{sep}case={}", c.path, c.name)
}

fn request(port: u16, c: &Case) -> (String, Vec<String>) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let req = format!(
        "{} {} HTTP/1.1\r\nHost: h\r\n{}Connection: close\r\n\r\n",
        c.method,
        target(c),
        c.headers
    );
    s.write_all(req.as_bytes()).unwrap();
    let mut resp = Vec::new();
    let _ = s.read_to_end(&mut resp);
    let text = String::from_utf8_lossy(&resp).to_string();
    let mut lines = text.split("\r\n");
    let status = lines.next().unwrap_or("").to_string();
    let headers = lines
        .take_while(|l| !l.is_empty())
        .filter_map(|l| {
            let (n, v) = l.split_once(':')?;
            let n = n.to_ascii_lowercase();
            (n == "set-cookie" || n == "set-cookie2" || n == "cache-control")
                .then(|| mask_dates(&format!("{n}:{v}")))
        })
        .collect();
    (status, headers)
}

fn config(ports: &[u16], servers: &[u16; 4], log: u16, socket: &str) -> String {
    let mut cfg = format!(
        "global\n    nbthread 1\n    stats socket {socket} level admin\n\
         defaults\n    mode http\n    timeout connect 300ms\n    timeout client 5s\n    timeout server 5s\n    \
         retries 1\n    log 127.0.0.1:{log} local0\n    \
         log-format \"%b %s %ST %tsc %rc %CC %CS %HU\"\n"
    );
    for (i, (name, lines)) in LISTENS.iter().enumerate() {
        // Dynamic cookies are for servers without a `cookie` of their own: s1 and s2 here.
        let (c1, c2) = if *name == "dyn" || *name == "nock" {
            ("", "")
        } else {
            (" cookie s1", " cookie s2")
        };
        cfg += &format!(
            "listen {name}\n    bind 127.0.0.1:{}\n    capture cookie sess len 10\n    {lines}\n    \
             server s1 127.0.0.1:{}{c1}\n    server s2 127.0.0.1:{}{c2}\n    \
             server s3 127.0.0.1:{} cookie s3 disabled\n    server s4 127.0.0.1:{} cookie s4 check inter 100 fall 1 rise 1\n",
            ports[i], servers[0], servers[1], servers[2], servers[3]
        );
    }
    cfg
}

fn run_through(which: &str, dir: &TempDir, seen: &Seen, servers: &[u16; 4]) -> Vec<Seen1> {
    let ports: Vec<u16> = (0..LISTENS.len()).map(|_| free_port()).collect();
    let sink = UdpSocket::bind("127.0.0.1:0").unwrap();
    sink.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    let log = sink.local_addr().unwrap().port();
    let socket = dir.path(&format!("{which}.sock"));
    let cfg = config(&ports, servers, log, socket.to_str().unwrap());
    let path = dir.path(&format!("{which}.cfg"));
    std::fs::write(&path, &cfg).unwrap();
    let bin = if which == "haproxy" { HAPROXY } else { BIN };
    let mut child: Child = Command::new(bin)
        .args(["-d", "-f", path.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let up = support::eventually(Duration::from_secs(5), || {
        ports
            .iter()
            .all(|p| TcpStream::connect(("127.0.0.1", *p)).is_ok())
    });
    assert!(up, "{which} did not start:\n{cfg}");
    // s4 (nothing listens) is DOWN after its first check, in every section.
    let s4_down = || {
        let Ok(mut c) = std::os::unix::net::UnixStream::connect(&socket) else {
            return false;
        };
        let _ = c.write_all(b"show stat\n");
        let mut csv = String::new();
        let _ = c.read_to_string(&mut csv);
        let rows: Vec<Vec<&str>> = csv
            .lines()
            .map(|l| l.split(',').collect::<Vec<_>>())
            .filter(|f| f.get(1) == Some(&"s4"))
            .collect();
        rows.len() == LISTENS.len() && rows.iter().all(|f| f.get(17) == Some(&"DOWN"))
    };
    assert!(
        support::eventually(Duration::from_secs(5), s4_down),
        "{which}: s4 never went DOWN"
    );
    sink.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    while sink.recv(&mut [0u8; 2048]).is_ok_and(|_| true) {
        sink.set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
    }
    // Each case's line, waited for as long as a loaded machine may need.
    sink.set_read_timeout(Some(support::LOG_WAIT)).unwrap();
    let mut out = Vec::new();
    for c in cases() {
        seen.lock().unwrap().clear();
        let (status, headers) = request(ports[c.listen], &c);
        let mut buf = [0u8; 2048];
        let log = loop {
            match sink.recv(&mut buf) {
                Ok(n) => {
                    let line = String::from_utf8_lossy(&buf[..n]).to_string();
                    // This case's line (health-check lines and late ones are skipped); the
                    // URI that identifies it is left out of the comparison.
                    let line = line.trim_end();
                    let uri = target(&c);
                    if let Some(rest) = line.strip_suffix(uri.as_str()) {
                        let fields = rest.split("]: ").nth(1).unwrap_or(rest);
                        break fields.trim().to_string();
                    }
                }
                Err(_) => break String::from("(no log)"),
            }
        };
        let server = seen.lock().unwrap().clone();
        out.push(Seen1 {
            status,
            headers,
            server,
            log: mask_dates(&log),
        });
    }
    let _ = child.kill();
    let _ = child.wait();
    out
}

#[test]
fn cookie_persistence_matches_haproxy() {
    if !support::have_haproxy("the cookie side-by-side test") {
        return;
    }
    let seen: Seen = Arc::default();
    let servers = [
        backend("s1", &seen),
        backend("s2", &seen),
        backend("s3", &seen),
        free_port(),
    ];
    let dir = TempDir::new("cookie");
    let reference = run_through("haproxy", &dir, &seen, &servers);
    let ours = run_through("bascule", &dir, &seen, &servers);
    let mut diffs = Vec::new();
    for ((c, h), o) in cases().iter().zip(&reference).zip(&ours) {
        if DELIBERATE.iter().any(|(n, _)| *n == c.name) {
            continue;
        }
        if h != o {
            diffs.push(format!("=== {}\nhaproxy: {h:?}\nbascule: {o:?}", c.name));
        }
    }
    if std::env::var_os("COOKIE_DUMP").is_some() {
        for (c, h) in cases().iter().zip(&reference) {
            println!("=== {}: {h:?}", c.name);
        }
    }
    assert!(
        diffs.is_empty(),
        "{} differences:\n{}",
        diffs.len(),
        diffs.join("\n")
    );
    // Each case went to the listen section it names (the log starts with it).
    for (c, h) in cases().iter().zip(&reference) {
        assert!(
            h.log.starts_with(&format!("{} ", LISTENS[c.listen].0)),
            "{}: {:?}",
            c.name,
            h
        );
    }
    // The comparison compared something.
    let by = |n: &str| &reference[cases().iter().position(|c| c.name == n).unwrap()];
    assert!(by("ins_new").log.contains("--NI"), "{:?}", by("ins_new"));
    assert!(
        by("ins_valid").log.contains("--VN"),
        "{:?}",
        by("ins_valid")
    );
    assert!(by("ins_down").log.contains("--DI"), "{:?}", by("ins_down"));
    assert!(
        by("dates_recent").log.contains("--VU"),
        "{:?}",
        by("dates_recent")
    );
    assert!(
        by("persist_dead_noredisp").status.contains("503"),
        "{:?}",
        by("persist_dead_noredisp")
    );
}
