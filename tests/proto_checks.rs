//! Protocol health checks (`option redis-check`, `mysql-check`, `pgsql-check`, `smtpchk`,
//! `ldap-check`) and the reporting options of `tcp-check expect` (`error-status`,
//! `ok-status`, `on-success`, `on-error`, `rbinary`), side by side with haproxy 2.6: the same
//! scripted servers are checked by both with `option log-health-checks`, and the check lines
//! each logs (dates, pids and durations masked) must be the same. Each server answers every
//! check the same way, so each backend logs one line.
//!
//! Without haproxy, Bascule's lines are still checked against the ones HAProxy is known to
//! write (see the list at the end).
#![allow(clippy::disallowed_methods)]

mod support;

use std::io::{Read, Write};
use std::net::{TcpListener, UdpSocket};
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use support::{free_port, TempDir, BIN, HAPROXY};

/// One move of a scripted server.
#[derive(Clone)]
enum Move {
    /// Write these bytes.
    Send(Vec<u8>),
    /// Read this many bytes (or until the peer stops sending).
    Recv(usize),
}

fn send(b: &[u8]) -> Move {
    Move::Send(b.to_vec())
}

fn hex(h: &str) -> Move {
    let h: String = h.split_whitespace().collect();
    Move::Send(
        (0..h.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&h[i..i + 2], 16).unwrap())
            .collect(),
    )
}

/// A server that plays `script` on every connection, then closes it.
fn server(script: Vec<Move>) -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    thread::spawn(move || {
        for mut c in l.incoming().flatten() {
            let script = script.clone();
            thread::spawn(move || {
                let _ = c.set_read_timeout(Some(Duration::from_secs(2)));
                for m in script {
                    match m {
                        Move::Send(b) => {
                            if c.write_all(&b).is_err() {
                                return;
                            }
                        }
                        Move::Recv(n) => {
                            let mut got = 0;
                            let mut buf = [0u8; 512];
                            while got < n {
                                match c.read(&mut buf[..(n - got).min(512)]) {
                                    Ok(0) | Err(_) => return,
                                    Ok(k) => got += k,
                                }
                            }
                        }
                    }
                }
            });
        }
    });
    port
}

const MYSQL_HANDSHAKE: &str = "4A0000000A382E302E3139000A0000006F3C025E6249410D00FFFFFF0200FFC7\
     15000000000000000000007C182159106E2761144322200063616368696E675F736861325F70617373776F726400";

/// Each backend: its name, its check lines and its server's script.
fn backends() -> Vec<(&'static str, &'static str, Vec<Move>)> {
    let smtp_ok = |greeting_len: usize, reply: &[u8]| {
        vec![
            send(b"220 test SMTP\r\n"),
            Move::Recv(greeting_len),
            send(reply),
            Move::Recv(6),
            send(b"221 test closing\r\n"),
        ]
    };
    vec![
        (
            "redis_ok",
            "option redis-check",
            vec![Move::Recv(14), send(b"+PONG\r\n")],
        ),
        (
            "redis_err",
            "option redis-check",
            vec![Move::Recv(14), send(b"-ERR loading\r\n")],
        ),
        (
            "mysql_handshake",
            "option mysql-check",
            vec![hex(MYSQL_HANDSHAKE)],
        ),
        (
            "mysql_login",
            "option mysql-check user user",
            vec![hex(MYSQL_HANDSHAKE), Move::Recv(47), hex("03000002000000")],
        ),
        (
            "mysql_denied",
            "option mysql-check user user pre-41",
            vec![
                hex(MYSQL_HANDSHAKE),
                Move::Recv(20),
                hex("16000002FF1504"),
                send(b"#28000Access denied"),
            ],
        ),
        (
            "pgsql_ok",
            "option pgsql-check user postgres",
            vec![Move::Recv(23), hex("520000000800000000")],
        ),
        (
            "pgsql_fatal",
            "option pgsql-check user postgres",
            vec![Move::Recv(23), hex("450000000B53464154414C00")],
        ),
        (
            "pgsql_junk",
            "option pgsql-check user postgres",
            vec![Move::Recv(23), send(b"Not a PostgreSQL response")],
        ),
        ("smtp_helo", "option smtpchk", smtp_ok(16, b"250 test\r\n")),
        (
            "smtp_ehlo",
            "option smtpchk EHLO domain.tld",
            smtp_ok(17, b"250-test\r\n250-8BITMIME\r\n250 SIZE 100\r\n"),
        ),
        (
            "smtp_busy",
            "option smtpchk",
            vec![send(b"421 Try again later\r\n")],
        ),
        (
            "smtp_not",
            "option smtpchk",
            vec![send(b"I'm not a SMTP server\r\n")],
        ),
        (
            "smtp_refused",
            "option smtpchk",
            vec![send(b"220 test\r\n"), Move::Recv(16), send(b"550 No\r\n")],
        ),
        (
            "ldap_ok",
            "option ldap-check",
            vec![Move::Recv(14), hex("300C020101 61 070A01 00 04000400")],
        ),
        (
            "ldap_long_length",
            "option ldap-check",
            vec![
                Move::Recv(14),
                hex("308400000010020101 61 84000000070A01 00 04000400"),
            ],
        ),
        (
            "ldap_not_bind",
            "option ldap-check",
            vec![Move::Recv(14), hex("300C020101 60 070A01 00 04000400")],
        ),
        (
            "ldap_code",
            "option ldap-check",
            vec![Move::Recv(14), hex("300C020101 61 070A01 31 04000400")],
        ),
        (
            "tcpchk_reported_error",
            "option tcp-check\n    tcp-check send PING\\r\\n\n    \
             tcp-check expect error-status L7STS on-error \"no pong\" string PONG",
            vec![Move::Recv(6), send(b"NOPE\r\n")],
        ),
        (
            "tcpchk_reported_success",
            "option tcp-check\n    tcp-check send PING\\r\\n\n    \
             tcp-check expect rbinary ^504F on-success \"pong seen\" ok-status L7OK",
            vec![Move::Recv(6), send(b"PONG\r\n")],
        ),
    ]
}

fn config(sink: u16, ports: &[u16]) -> String {
    let mut cfg = String::from(
        "defaults\n    mode tcp\n    timeout client 5s\n    timeout server 5s\n    \
         timeout connect 1s\n    timeout check 1s\n\
         frontend fe\n    bind 127.0.0.1:@LISTEN@\n    default_backend redis_ok\n",
    );
    for ((name, lines, _), port) in backends().iter().zip(ports) {
        cfg.push_str(&format!(
            "backend {name}\n    log 127.0.0.1:{sink} local0\n    option log-health-checks\n    \
             {lines}\n    server srv 127.0.0.1:{port} check inter 200ms rise 1 fall 1\n"
        ));
    }
    cfg
}

/// `<133>Nov 24 07:37:21 haproxy[11037]: Health ... check duration: 0ms, ...` ->
/// `Health ... check duration: Nms, ...`
fn mask(line: &str) -> String {
    let line = line.trim_end_matches(['\n', '\0']);
    let msg = line.find("]: ").map_or(line, |i| &line[i + 3..]);
    match msg.find("check duration: ") {
        Some(i) => {
            let rest = &msg[i + 16..];
            let end = rest.find("ms").unwrap_or(0);
            format!("{}check duration: Nms{}", &msg[..i], &rest[end + 2..])
        }
        None => msg.to_string(),
    }
}

fn run_through(program: &str, ports: &[u16]) -> Vec<String> {
    let sink = UdpSocket::bind("127.0.0.1:0").unwrap();
    sink.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let dir = TempDir::new("protochecks");
    let cfg = dir.path("p.cfg");
    let listen = free_port();
    let text =
        config(sink.local_addr().unwrap().port(), ports).replace("@LISTEN@", &listen.to_string());
    std::fs::write(&cfg, text).unwrap();
    let mut child = Command::new(program)
        .arg("-db")
        .arg("-f")
        .arg(&cfg)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Several checks per server: the later ones must not log anything new. The window opens
    // once the proxy listens (a loaded machine may take a while to start it) and lasts 1.5 s,
    // longer while lines still come (until 700 ms pass without one), 10 s at most.
    let started = Instant::now();
    while Instant::now() < started + Duration::from_secs(5)
        && std::net::TcpStream::connect(("127.0.0.1", listen)).is_err()
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    let up = Instant::now();
    let mut last = up;
    let mut lines = Vec::new();
    let mut b = [0u8; 65536];
    loop {
        let now = Instant::now();
        let quiet =
            now >= up + Duration::from_millis(1500) && now >= last + Duration::from_millis(700);
        if quiet || now >= up + Duration::from_secs(10) {
            break;
        }
        if let Ok(n) = sink.recv(&mut b) {
            let line = mask(&String::from_utf8_lossy(&b[..n]));
            last = Instant::now();
            // State changes ("Server X is DOWN") depend on the order of the first checks.
            if line.starts_with("Health check") {
                lines.push(line);
            }
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    lines.sort();
    lines
}

#[test]
fn protocol_check_lines_match_haproxy() {
    let ports: Vec<u16> = backends().into_iter().map(|(_, _, s)| server(s)).collect();
    let ours = run_through(BIN, &ports);
    let joined = ours.join("\n");
    for want in [
        "be redis_ok/srv succeeded, reason: Layer7 check passed, code: 0, info: \"Redis server is ok\"",
        "be redis_err/srv failed, reason: Layer7 wrong status, code: 0, info: \"-ERR loading\"",
        "be mysql_handshake/srv succeeded, reason: Layer7 check passed, code: 0, info: \"8.0.19\"",
        "be mysql_login/srv succeeded, reason: Layer7 check passed, code: 0, info: \"8.0.19\"",
        "be mysql_denied/srv failed, reason: Layer7 wrong status, code: 1045, info: \"#28000Access denied\"",
        "be pgsql_ok/srv succeeded, reason: Layer7 check passed, code: 0, info: \"PostgreSQL server is ok\"",
        "be pgsql_fatal/srv failed, reason: Layer7 invalid response, info: \"FATAL\"",
        "be pgsql_junk/srv failed, reason: Layer7 wrong status, code: 0, info: \"PostgreSQL unknown error\"",
        "be smtp_helo/srv succeeded, reason: Layer7 check passed, code: 221, info: \"test closing\"",
        "be smtp_ehlo/srv succeeded, reason: Layer7 check passed, code: 221, info: \"test closing\"",
        "be smtp_busy/srv failed, reason: Layer7 wrong status, code: 421, info: \"Try again later\"",
        "be smtp_not/srv failed, reason: Layer7 invalid response, info: \"I'm not a SMTP server\"",
        "be smtp_refused/srv failed, reason: Layer7 wrong status, code: 550, info: \"No\"",
        "be ldap_ok/srv succeeded, reason: Layer7 check passed, code: 0, info: \"Success\"",
        "be ldap_long_length/srv succeeded, reason: Layer7 check passed, code: 0, info: \"Success\"",
        "be ldap_not_bind/srv failed, reason: Layer7 invalid response, info: \"Not LDAPv3 protocol\"",
        "be ldap_code/srv failed, reason: Layer7 wrong status, code: 49, info: \"See RFC",
        "be tcpchk_reported_error/srv failed, reason: Layer7 wrong status, code: 0, info: \"no pong\"",
        "be tcpchk_reported_success/srv succeeded, reason: Layer7 check passed, code: 0, info: \"pong seen\"",
    ] {
        let want = want.replacen("be ", "Health check for server ", 1);
        assert!(joined.contains(&want), "missing {want:?} in:\n{joined}");
    }
    if !support::have_haproxy("the protocol checks side-by-side test") {
        return;
    }
    let reference = run_through(HAPROXY, &ports);
    let missing: Vec<_> = reference.iter().filter(|l| !ours.contains(l)).collect();
    let extra: Vec<_> = ours.iter().filter(|l| !reference.contains(l)).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "only haproxy:\n{missing:#?}\nonly bascule:\n{extra:#?}"
    );
}
