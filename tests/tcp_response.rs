//! `tcp-response content` rules, side by side with Debian's haproxy. In a TCP backend they
//! inspect the server's first bytes before any is forwarded. In an HTTP backend they
//! run on the response before the `http-response` rules; `set-var` sets what later rules read,
//! `accept` ends the list (the `http-response` rules still run), `reject` closes the client's
//! connection without a response. What the client sees and the log line (status, termination
//! state, last final rule) must be the same through both.
#![allow(clippy::disallowed_methods)]

mod support;

use support::http::{header, Client, HttpBackend};
use support::side::{both, Run};

#[test]
fn tcp_response_rules_run_before_http_response_rules() {
    let srv = HttpBackend::start();
    let cfg = format!(
        "defaults\n    mode http\n    timeout client 5s\n    timeout server 5s\n    timeout connect 2s\n\
         frontend fe\n    bind 127.0.0.1:@P2@\n    option dontlognull\n\
         \x20   log 127.0.0.1:@LOG@ format raw local0\n\
         \x20   log-format \"%HU %ST %ts lr=%[last_rule_line]\"\n    default_backend be\n\
         backend be\n\
         \x20   tcp-request content set-var(txn.path) path\n\
         \x20   tcp-response content set-var(txn.phase) str(inspected)\n\
         \x20   tcp-response content reject if {{ var(txn.path) -m beg /rej }}\n\
         \x20   tcp-response content accept if {{ var(txn.path) -m beg /acc }}\n\
         \x20   tcp-response content set-var(txn.after) str(reached)\n\
         \x20   http-response set-header x-phase %[var(txn.phase)]\n\
         \x20   http-response set-header x-after %[var(txn.after)]\n\
         \x20   http-response deny if {{ var(txn.path) -m beg /acc/deny }}\n\
         \x20   server s1 127.0.0.1:{}\n",
        srv.port
    );
    both("tcp-response content", &cfg, |_, _, p2, run: &mut Run| {
        let (mut seen, mut lines) = (Vec::new(), Vec::new());
        for path in ["/plain", "/acc", "/acc/deny", "/rej"] {
            let mut c = Client::connect(p2);
            c.send(
                format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes(),
            );
            seen.push(match c.response(false) {
                Some(r) => format!(
                    "{path}: {} x-phase={:?} x-after={:?}",
                    r.status,
                    header(&r.head, "x-phase"),
                    header(&r.head, "x-after"),
                ),
                None => format!("{path}: closed without a response"),
            });
            // Each connection's line before the next one opens: workers flush their lines
            // independently.
            lines.extend(run.lines_n(1));
        }
        seen.extend(lines.iter().map(|l| l.trim_end().to_string()));
        let joined = seen.join("\n");
        for want in [
            "/plain: 200 x-phase=Some(\"inspected\") x-after=Some(\"reached\")",
            "/acc: 200 x-phase=Some(\"inspected\")",
            "/acc/deny: 502",
            "/rej: closed without a response",
            // The last final rule: the `accept`, then the `deny` after it; a rejected
            // response is logged without a status.
            "/plain 200 -- lr=-",
            "/acc 200 -- lr=16",
            "/acc/deny 502 PH lr=20",
            "/rej -1 PD lr=15",
        ] {
            assert!(joined.contains(want), "missing {want:?} in:\n{joined}");
        }
        seen
    });
}

const RULES: &str = "    tcp-response inspect-delay 2s
    tcp-response content set-var(txn.first) res.payload(0,4) if { res.len ge 4 }
    tcp-response content reject if { res.payload(0,4) -m str EVIL }
    tcp-response content accept if { res.len ge 12 }
";

/// In a TCP backend the rules inspect the server's first bytes (`res.len`, `res.payload`)
/// before anything is forwarded: `reject` closes both sides with nothing sent (`PD`),
/// `accept` lets the bytes through; a rule undecided until `tcp-response inspect-delay` ends
/// counts as not matching.
#[test]
fn tcp_mode_rules_inspect_the_servers_first_bytes() {
    let evil = support::Backend::start(support::Behaviour::Banner("EVIL payload".into()));
    let good = support::Backend::start(support::Behaviour::Banner("GOOD payload".into()));
    let cfg = format!(
        "global\n    log 127.0.0.1:@LOG@ format raw local0\n\
         defaults\n    mode tcp\n    log global\n    timeout client 5s\n    timeout server 5s\n    timeout connect 2s\n\
         \x20   log-format \"%b %ts %B lr=%[last_rule_line] v=%[var(txn.first)]\"\n\
         frontend fe_evil\n    bind 127.0.0.1:@P1@\n    default_backend evil\n\
         frontend fe_good\n    bind 127.0.0.1:@P2@\n    default_backend good\n\
         backend evil\n{RULES}    server s 127.0.0.1:{}\n\
         backend good\n{RULES}    server s 127.0.0.1:{}\n",
        evil.port, good.port
    );
    both(
        "tcp-response content, TCP mode",
        &cfg,
        |_, p1, p2, run: &mut Run| {
            use std::io::Read;
            let mut seen = Vec::new();
            for port in [p1, p2] {
                let mut c = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
                c.set_read_timeout(Some(std::time::Duration::from_secs(5)))
                    .unwrap();
                let mut got = Vec::new();
                let _ = c.read_to_end(&mut got);
                seen.push(String::from_utf8_lossy(&got).into_owned());
            }
            // Sorted: workers flush the two connections' lines independently.
            let mut lines = run.lines_n(2);
            lines.sort();
            seen.extend(lines);
            seen
        },
    );
}

/// In a TCP backend the rules read the server's first bytes (`res.payload`): with an inspect
/// delay they wait for enough of them, while the client's bytes reach the server; without one
/// they run once, at once (haproxy 2.6: before the server sent anything, so the reject below
/// never fires). `reject` closes both sides, the client getting nothing.
#[test]
fn tcp_mode_response_rules_read_the_servers_bytes() {
    use std::io::{Read, Write};
    let echo = support::Backend::echo();
    let cfg = format!(
        "defaults\n    mode tcp\n    timeout client 5s\n    timeout server 5s\n    timeout connect 2s\n\
         frontend delayed\n    bind 127.0.0.1:@P2@\n    default_backend be_delay\n\
         frontend at_once\n    bind 127.0.0.1:@P1@\n    default_backend be_now\n\
         backend be_delay\n    tcp-response inspect-delay 2s\n\
         \x20   tcp-response content reject if {{ res.payload(0,6) -m str badbad }}\n\
         \x20   server s1 127.0.0.1:{port}\n\
         backend be_now\n\
         \x20   tcp-response content reject if {{ res.payload(0,3) -m str bad }}\n\
         \x20   server s1 127.0.0.1:{port}\n",
        port = echo.port
    );
    both(
        "tcp-response content in TCP mode",
        &cfg,
        |bin, p1, p2, _| {
            let talk = |port: u16, parts: &[&str]| {
                let mut c = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
                c.set_read_timeout(Some(std::time::Duration::from_secs(4)))
                    .unwrap();
                for p in parts {
                    c.write_all(p.as_bytes()).unwrap();
                    std::thread::sleep(std::time::Duration::from_millis(100));
                }
                c.shutdown(std::net::Shutdown::Write).unwrap();
                let mut got = Vec::new();
                let _ = c.read_to_end(&mut got);
                format!(
                    "{port_kind} {parts:?}: {:?}",
                    String::from_utf8_lossy(&got),
                    port_kind = if port == p2 { "delay" } else { "now" }
                )
            };
            let seen = vec![
                talk(p2, &["hello"]),
                // Sent in two parts: undecided after "bad", rejected once "badbad" is there.
                talk(p2, &["bad", "bad!"]),
                talk(p2, &["bad", "good"]),
                talk(p1, &["badxx"]),
                talk(p1, &["hello"]),
            ];
            assert!(seen[0].ends_with(": \"hello\""), "{seen:?}");
            assert!(seen[1].ends_with(": \"\""), "{seen:?}");
            assert!(seen[2].ends_with(": \"badgood\""), "{seen:?}");
            assert!(seen[3].ends_with(": \"badxx\""), "{bin}: {seen:?}");
            assert!(seen[4].ends_with(": \"hello\""), "{seen:?}");
            seen
        },
    );
}
