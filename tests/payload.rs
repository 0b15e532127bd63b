//! `req.payload(OFFSET,LENGTH)` and `req.payload_lv(OFFSET1,LENGTH[,OFFSET2])` side by side
//! with haproxy 2.6 (issue 16): a TCP frontend inspects the first bytes a client sends and
//! picks a backend (each answers its name) or rejects; each case sends its bytes, in pieces
//! when the decision must wait for more (in `tcp-request content` rules, a payload still too
//! short leaves a condition undecided until the inspect delay ends; `use_backend` then reads
//! what came), and both proxies must answer alike.
#![allow(clippy::disallowed_methods)]

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::thread;
use std::time::Duration;

use support::{eventually, free_port, Backend, Proxy, TempDir, HAPROXY};

fn config(port: u16, be: &[u16; 5]) -> String {
    format!(
        r#"defaults
    mode tcp
    timeout connect 1s
    timeout client 3s
    timeout server 3s

frontend fe
    bind 127.0.0.1:{port}
    tcp-request inspect-delay 600ms
    tcp-request content reject if {{ req.payload(0,2) -m bin 5858 }}
    tcp-request content accept if {{ req.payload(0,3) -m bin 414141 }}
    tcp-request content accept if {{ req.payload_lv(0,1) -m found }}
    use_backend be_a if {{ req.payload(0,3) -m bin 414141 }}
    use_backend be_b if {{ req.payload_lv(0,1) -m str BBB }}
    use_backend be_c if {{ req.payload_lv(1,2,+1) -m str cc }}
    use_backend be_d if {{ req.payload(2,0) -m sub zz }}
    use_backend be_e if {{ req.payload_lv(0,1,5) -m bin 4545 }}
    default_backend be_def

backend be_a
    server a 127.0.0.1:{a}
backend be_b
    server b 127.0.0.1:{b}
backend be_c
    server c 127.0.0.1:{c}
backend be_d
    server d 127.0.0.1:{d}
backend be_e
    server e 127.0.0.1:{e}
backend be_def
    server e 127.0.0.1:{e}
"#,
        a = be[0],
        b = be[1],
        c = be[2],
        d = be[3],
        e = be[4],
    )
}

/// Sends `pieces` 300 ms apart, then reads what comes back until the proxy closes.
fn ask(port: u16, pieces: &[&[u8]]) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(4))).unwrap();
    for (i, p) in pieces.iter().enumerate() {
        if i > 0 {
            thread::sleep(Duration::from_millis(300));
        }
        if s.write_all(p).is_err() {
            break;
        }
    }
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

/// (what the case shows, the pieces sent, what the answer must be).
const CASES: &[(&str, &[&[u8]], &str)] = &[
    ("payload at 0", &[b"AAAx"], "a"),
    ("payload waits for its bytes", &[b"AA", b"A"], "a"),
    ("reject", &[b"XXyy"], ""),
    ("length-value", &[b"\x03BBBq"], "b"),
    ("length-value waits for its value", &[b"\x03B", b"BB"], "b"),
    ("two-byte length, relative offset", &[b"?\x00\x02?ccq"], "c"),
    ("whole buffer from an offset", &[b"qqqqzzq"], "d"),
    ("absolute second offset", &[b"\x02qqqqEE"], "e"),
    ("nothing matches once the delay is over", &[b"hello"], "e"),
    ("a zero length is no block", &[b"\x00BBB"], "e"),
];

#[test]
fn payload_fetches_match_haproxy() {
    if !support::have_haproxy("payload_fetches_match_haproxy") {
        return;
    }
    let backends: Vec<Backend> = ["a", "b", "c", "d", "e"]
        .iter()
        .map(|n| Backend::banner(n))
        .collect();
    let be = [0, 1, 2, 3, 4].map(|i| backends[i].port);
    // The deprecated `payload` and `payload_lv` read the request in request rules.
    for legacy in [false, true] {
        let spell = |cfg: String| {
            if legacy {
                cfg.replace("req.payload", "payload")
            } else {
                cfg
            }
        };
        compare(legacy, |p| spell(config(p, &be)));
    }
}

/// Runs the cases through haproxy and Bascule on `config(port)`.
fn compare(legacy: bool, config: impl Fn(u16) -> String) {
    let (h, b) = (free_port(), free_port());
    let dir = TempDir::new("payload");
    std::fs::write(dir.path("h.cfg"), config(h)).unwrap();
    let mut hp = Command::new(HAPROXY)
        .arg("-db")
        .arg("-f")
        .arg(dir.path("h.cfg"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let _bp = Proxy::start(&config(b), b, &[]);
    assert!(eventually(Duration::from_secs(5), || TcpStream::connect((
        "127.0.0.1",
        h
    ))
    .is_ok()));
    let mut diffs = Vec::new();
    for (what, pieces, want) in CASES {
        let theirs = ask(h, pieces);
        let ours = ask(b, pieces);
        if theirs != *want || ours != *want {
            diffs.push(format!(
                "{what} (legacy names: {legacy}): haproxy {theirs:?}, bascule {ours:?}, expected {want:?}"
            ));
        }
    }
    let _ = hp.kill();
    let _ = hp.wait();
    assert!(diffs.is_empty(), "\n{}", diffs.join("\n"));
}
