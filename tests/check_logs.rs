//! Golden test for `option log-health-checks`: the same backends and servers are checked by
//! Debian's haproxy (`/usr/sbin/haproxy`, the reference) and by Bascule, each logging to a UDP
//! socket the test binds. Every server answers the same way on every check, so each backend
//! logs a fixed set of lines (a result is logged only when the check's status or the server's
//! health changes); the sets are compared once dates, pids and check durations are masked.
//!
//! Without haproxy the test prints "skipped" (and fails when `CI` is set).
#![allow(clippy::disallowed_methods)]

mod support;

use std::io::{Read, Write};
use std::net::{TcpListener, UdpSocket};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use support::{free_port, TempDir, BIN, HAPROXY};

/// A server answering by path: `/ok` 200 with a body, `/503` 503, anything else junk.
fn server() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    thread::spawn(move || {
        for mut c in l.incoming().flatten() {
            thread::spawn(move || {
                let _ = c.set_read_timeout(Some(Duration::from_secs(2)));
                let mut buf = Vec::new();
                let mut chunk = [0u8; 2048];
                while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                    match c.read(&mut chunk) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
                let head = String::from_utf8_lossy(&buf).to_string();
                let reply: &[u8] = match head.split(' ').nth(1) {
                    Some("/ok") => b"HTTP/1.1 200 OK\r\ncontent-length: 7\r\n\r\nhealthy",
                    Some("/503") => {
                        b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\n\r\n"
                    }
                    _ => b"garbage\r\n\r\n",
                };
                let _ = c.write_all(reply);
            });
        }
    });
    port
}

fn config(listen: u16, srv: u16, dead: u16, sink: u16) -> String {
    let log = format!("    option log-health-checks\n    log 127.0.0.1:{sink} local0\n");
    let be = |name: &str, body: &str, server: &str| {
        format!("backend {name}\n{log}{body}    server s1 {server}\n")
    };
    let up = format!("127.0.0.1:{srv}");
    let down = format!("127.0.0.1:{dead}");
    [
        format!(
            "defaults\n    mode http\n    timeout client 5s\n    timeout server 5s\n    \
             timeout connect 1s\n    timeout check 1s\n    \
             default-server check inter 150ms rise 1 fall 1\n\
             frontend fe\n    bind 127.0.0.1:{listen}\n    default_backend l4_ok\n"
        ),
        be("l4_ok", "", &up),
        be("l4_refused", "", &down),
        be(
            "l4_refused_r2f3",
            "    default-server check inter 150ms rise 2 fall 3\n",
            &down,
        ),
        be("l4_backup", "", &format!("{down} backup")),
        // connect(2) itself fails: HAProxy's "General socket error (...)".
        be("l4_unreachable", "", "255.255.255.255:11111"),
        be("http_ok", "    option httpchk GET /ok\n", &up),
        be("http_503", "    option httpchk GET /503\n", &up),
        be("http_junk", "    option httpchk GET /junk\n", &up),
        be(
            "http_not_200",
            "    option httpchk GET /ok\n    http-check expect ! status 200\n",
            &up,
        ),
        be(
            "http_string",
            "    option httpchk GET /ok\n    http-check expect string nothere\n",
            &up,
        ),
        // Several expects in order, headers (`hdr`, `fhdr`, log-format patterns and the
        // check's own variables).
        be(
            "http_hdr_ok",
            "    option httpchk GET /ok\n    http-check expect status 200\n    \
             http-check expect hdr name content-length value 7\n    \
             http-check expect fhdr name -m beg CONTENT- value -m reg ^[0-9]+$\n",
            &up,
        ),
        be(
            "http_hdr_missing",
            "    option httpchk GET /ok\n    http-check expect hdr name x-missing\n",
            &up,
        ),
        // A variable set before the first expect sees no response yet (HAProxy reads it
        // for the expect): the pattern made from it is empty.
        be(
            "http_hdr_var_too_early",
            "    option httpchk GET /ok\n    \
             http-check set-var(check.len) res.hdr(content-length)\n    \
             http-check expect hdr name content-length value-lf \"%[var(check.len)]\"\n",
            &up,
        ),
        be(
            "http_hdr_vars",
            "    option httpchk GET /ok\n    http-check expect status 200\n    \
             http-check set-var(check.len) res.hdr(content-length)\n    \
             http-check expect hdr name-lf \"content-%[str(length)]\" value-lf \"%[var(check.len)]\"\n    \
             http-check expect ! hdr name content-length value-lf \"%[var(check.len)]0\"\n",
            &up,
        ),
        be(
            "http_second_expect_fails",
            "    option httpchk GET /ok\n    http-check expect status 200\n    \
             http-check expect string nothere\n",
            &up,
        ),
        be(
            "tcpchk_ok",
            "    option tcp-check\n    tcp-check send \"GET /ok HTTP/1.0\\r\\n\\r\\n\"\n    \
             tcp-check expect string HTTP/1.1\\ 200\n",
            &up,
        ),
        be(
            "tcpchk_mismatch",
            "    option tcp-check\n    tcp-check send \"GET /ok HTTP/1.0\\r\\n\\r\\n\"\n    \
             tcp-check expect string nothere\n",
            &up,
        ),
        be(
            "tcpchk_regex",
            "    option tcp-check\n    tcp-check send \"GET /ok HTTP/1.0\\r\\n\\r\\n\"\n    \
             tcp-check expect rstring ^HTTP/1.1\\ 5\n",
            &up,
        ),
        be(
            "tcpchk_bounded_negation",
            "    option tcp-check\n    tcp-check send \"GET /ok HTTP/1.0\\r\\n\\r\\n\"\n    \
             tcp-check expect min-recv 5 !rstring ^error comment \"no error\"\n",
            &up,
        ),
        be(
            "tcpchk_negation_matched",
            "    option tcp-check\n    tcp-check send \"GET /ok HTTP/1.0\\r\\n\\r\\n\"\n    \
             tcp-check expect ! string HTTP/1.1\n",
            &up,
        ),
        // The server waits for a request that never comes: `timeout check`, and HAProxy's
        // words for the pattern that was awaited.
        be(
            "tcpchk_regex_timeout",
            "    option tcp-check\n    tcp-check expect rstring ^never\n",
            &up,
        ),
        // Where a script's connection failed; a protocol check says nothing of its steps.
        be(
            "tcpchk_connect_refused",
            &format!("    option tcp-check\n    tcp-check connect port {dead}\n"),
            &up,
        ),
        be(
            "tcpchk_initial_refused",
            "    option tcp-check\n    tcp-check send PING\n",
            &down,
        ),
        be("redis_timeout", "    option redis-check\n", &up),
        be(
            "tcpchk_connect",
            "    option tcp-check\n    tcp-check connect\n",
            &up,
        ),
        be("no_option", "", &down).replace("    option log-health-checks\n", ""),
    ]
    .concat()
}

/// `<133>Nov 24 07:37:21 haproxy[11037]: Health ... check duration: 0ms, ...` ->
/// `<133>DATE haproxy[PID]: Health ... check duration: Nms, ...`
fn mask(line: &str) -> String {
    let line = line.trim_end_matches(['\n', '\0']);
    let (head, msg) = match line.find("]: ") {
        Some(i) => line.split_at(i + 3),
        None => ("", line),
    };
    let head = match head.find('>') {
        Some(a) => format!("{}DATE haproxy[PID]: ", &head[..=a]),
        None => head.to_string(),
    };
    let msg = match msg.find("check duration: ") {
        Some(i) => {
            let rest = &msg[i + 16..];
            let end = rest.find("ms").unwrap_or(0);
            format!("{}check duration: Nms{}", &msg[..i], &rest[end + 2..])
        }
        None => msg.to_string(),
    };
    format!("{head}{msg}")
}

fn run_through(program: &str, srv: u16, dead: u16) -> Vec<String> {
    let sink = UdpSocket::bind("127.0.0.1:0").unwrap();
    sink.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let dir = TempDir::new("checklogs");
    let cfg = dir.path("p.cfg");
    let listen = free_port();
    std::fs::write(
        &cfg,
        config(listen, srv, dead, sink.local_addr().unwrap().port()),
    )
    .unwrap();
    let mut cmd = if program == "haproxy" {
        let mut c = Command::new(HAPROXY);
        c.arg("-db");
        c
    } else {
        Command::new(BIN)
    };
    let mut child: Child = cmd
        .arg("-f")
        .arg(&cfg)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Several checks per server (every 150 ms, `timeout check` 1 s): the later ones must not
    // log anything new. The window opens once the proxy listens (a loaded machine may take a
    // while to start it) and lasts 2 s, longer while lines still come (until 700 ms pass
    // without one), 10 s at most.
    let started = Instant::now();
    while Instant::now() < started + Duration::from_secs(5)
        && std::net::TcpStream::connect(("127.0.0.1", listen)).is_err()
    {
        thread::sleep(Duration::from_millis(20));
    }
    let up = Instant::now();
    let mut last = up;
    let mut lines = Vec::new();
    let mut b = [0u8; 65536];
    loop {
        let now = Instant::now();
        let quiet = now >= up + Duration::from_secs(2) && now >= last + Duration::from_millis(700);
        if quiet || now >= up + Duration::from_secs(10) {
            break;
        }
        if let Ok(n) = sink.recv(&mut b) {
            lines.push(mask(&String::from_utf8_lossy(&b[..n])));
            last = Instant::now();
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    lines.sort();
    lines
}

#[test]
fn health_check_log_lines_match_haproxy() {
    if !support::have_haproxy("the check log golden test") {
        return;
    }
    let srv = server();
    let dead = free_port();
    let reference = run_through("haproxy", srv, dead);
    let ours = run_through("bascule", srv, dead);
    let missing: Vec<_> = reference.iter().filter(|l| !ours.contains(l)).collect();
    let extra: Vec<_> = ours.iter().filter(|l| !reference.contains(l)).collect();
    assert!(
        missing.is_empty() && extra.is_empty() && reference.len() == ours.len(),
        "only haproxy:\n{missing:#?}\nonly bascule:\n{extra:#?}"
    );
    // The comparison must have compared something of each kind.
    for want in [
        "Health check for server http_503/s1 failed, reason: Layer7 wrong status, code: 503",
        "Health check for backup server l4_backup/s1 failed",
        "Server l4_refused/s1 is DOWN. 0 active",
        "Server no_option/s1 is DOWN, reason: Layer4 connection problem",
        "TCPCHK did not match content 'nothere' at step 2",
        "info: \"General socket error (Network is unreachable)\"",
        "info: \"Connection refused at step 1 of tcp-check (connect port",
        "info: \"Connection refused at initial connection step of tcp-check\"",
        "redis_timeout/s1 failed, reason: Layer7 timeout, check duration",
        "reason: Layer7 timeout, info: \" at step 1 of tcp-check (expect regex)\"",
        "status: 0/2 DOWN",
    ] {
        assert!(reference.iter().any(|l| l.contains(want)), "{want}");
    }
}
