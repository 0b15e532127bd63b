//! Stick-table replication between peers over HAProxy's peers protocol: Bascule with
//! Debian's haproxy as the other peer (both directions), and two Bascule processes keeping a
//! client on its server through `stick on` when it changes process.
#![allow(clippy::disallowed_methods)]

mod support;

use std::io::Write;
use std::net::TcpStream;
use std::time::Duration;

use support::http::{Client, HttpBackend};
use support::side::Run;
use support::*;

/// A configuration for peer `me` of a section `mypeers` with peers A (`pa`) and B (`pb`):
/// the frontend on `port` tracks `x-user` in `mypeers/t` and counts `/inc` in gpc0; its
/// backend sticks on `x-user` in `mypeers/s` over `servers`.
fn config(me: &str, pa: u16, pb: u16, port: u16, servers: &[(&str, u16)]) -> String {
    let servers: String = servers
        .iter()
        .map(|(n, p)| format!("    server {n} 127.0.0.1:{p}\n"))
        .collect();
    format!(
        "global\n    localpeer {me}\n    stats socket @SOCK@ level admin\n\
         peers mypeers\n    peer A 127.0.0.1:{pa}\n    peer B 127.0.0.1:{pb}\n\
         \x20   table t type string len 32 size 100 expire 1m store http_req_cnt,http_req_rate(10s),gpc0,gpt0\n\
         \x20   table s type string len 32 size 100 expire 1m\n\
         defaults\n    mode http\n    timeout connect 2s\n    timeout client 5s\n    timeout server 5s\n\
         frontend fe\n    bind 127.0.0.1:{port}\n\
         \x20   http-request track-sc0 req.hdr(x-user) table mypeers/t\n\
         \x20   http-request sc-inc-gpc0(0) if {{ path /inc }}\n\
         \x20   default_backend be\n\
         backend be\n    balance roundrobin\n\
         \x20   stick on req.hdr(x-user) table mypeers/s\n{servers}"
    )
}

fn request(port: u16, user: &str, path: &str) -> String {
    let mut c = Client::connect(port);
    c.send(format!("GET {path} HTTP/1.1\r\nHost: x\r\nx-user: {user}\r\n\r\n").as_bytes());
    let r = c.response(false).expect("a response");
    assert_eq!(r.status, 200, "{}", r.head);
    String::from_utf8_lossy(&r.body).into_owned()
}

/// The `show table` line of `key` in `table`, once `want` is in it (`None` if it never is).
fn wait_entry(run: &Run, table: &str, key: &str, want: &[&str]) -> Option<String> {
    let mut found = None;
    eventually(Duration::from_secs(10), || {
        let out = run.cli(&format!("show table {table} key {key}"));
        found = out
            .lines()
            .find(|l| l.contains(&format!("key={key} ")))
            .map(str::to_string);
        found
            .as_deref()
            .is_some_and(|l| want.iter().all(|w| l.contains(w)))
    })
    .then(|| found.unwrap())
}

fn wait_listening(port: u16) {
    assert!(eventually(Duration::from_secs(5), || TcpStream::connect((
        "127.0.0.1",
        port
    ))
    .is_ok()));
}

#[test]
fn bascule_and_haproxy_replicate_counters_and_stickiness_both_ways() {
    if !have_haproxy("bascule_and_haproxy_replicate_counters_and_stickiness_both_ways") {
        return;
    }
    let (s1, s2) = (HttpBackend::start(), HttpBackend::start());
    let servers = [("s1", s1.port), ("s2", s2.port)];
    let (pa, pb, fa, fb) = (free_port(), free_port(), free_port(), free_port());
    let a = Run::start(BIN, &config("A", pa, pb, fa, &servers), fa);
    let b = Run::start(HAPROXY, &config("B", pa, pb, fb, &servers), fb);
    wait_listening(pb);

    // Counted here, seen there: http_req_cnt, gpc0 and the stuck server.
    request(fa, "u1", "/");
    request(fa, "u1", "/inc");
    let line = wait_entry(&b, "mypeers/t", "u1", &["http_req_cnt=2", "gpc0=1"]);
    assert!(
        line.is_some(),
        "haproxy never learnt u1: {}",
        b.cli("show table mypeers/t")
    );
    let line = wait_entry(&b, "mypeers/s", "u1", &["server_id=1", "server_key=s1"]);
    assert!(line.is_some(), "{}", b.cli("show table mypeers/s"));

    // And the other way: haproxy's counts reach Bascule.
    for _ in 0..3 {
        request(fb, "u2", "/inc");
    }
    let line = wait_entry(&a, "mypeers/t", "u2", &["http_req_cnt=3", "gpc0=3"]);
    assert!(
        line.is_some(),
        "Bascule never learnt u2: {}",
        a.cli("show table mypeers/t")
    );
    // A rate copied: the 3 requests of the last 10 s.
    assert!(line.unwrap().contains("http_req_rate(10000)=3"));
    let line = wait_entry(&a, "mypeers/s", "u2", &["server_key=s"]);
    assert!(line.is_some(), "{}", a.cli("show table mypeers/s"));

    // `set table` on one side is an update too.
    a.cli("set table mypeers/t key u9 data.gpt0 7");
    assert!(wait_entry(&b, "mypeers/t", "u9", &["gpt0=7"]).is_some());
}

#[test]
fn two_bascule_peers_keep_a_client_on_its_server() {
    let (s1, s2) = (HttpBackend::start(), HttpBackend::start());
    // The two processes list the servers in opposite orders: only the stored server name
    // sends u1 to the same one.
    let (pa, pb, fa, fb) = (free_port(), free_port(), free_port(), free_port());
    let a = Run::start(
        BIN,
        &config("A", pa, pb, fa, &[("s1", s1.port), ("s2", s2.port)]),
        fa,
    );
    let b = Run::start(
        BIN,
        &config("B", pa, pb, fb, &[("s2", s2.port), ("s1", s1.port)]),
        fb,
    );
    wait_listening(pa);
    wait_listening(pb);
    request(fa, "u1", "/"); // s1, the first of A's round robin
    assert_eq!(s1.seen().len(), 1);
    assert!(wait_entry(&b, "mypeers/s", "u1", &["server_key=s1"]).is_some());
    for _ in 0..3 {
        request(fb, "u1", "/");
    }
    assert_eq!((s1.seen().len(), s2.seen().len()), (4, 0));
    // A stuck on B reaches A the same way.
    request(fb, "u2", "/"); // B's round robin: s2 first... or next; whichever, A follows it.
    let line = wait_entry(&a, "mypeers/s", "u2", &["server_key="]).unwrap();
    let server = if line.contains("server_key=s1") {
        &s1
    } else {
        &s2
    };
    let before = server.seen().len();
    request(fa, "u2", "/");
    assert_eq!(server.seen().len(), before + 1);
}

#[test]
fn a_peer_that_speaks_something_else_is_refused() {
    let (pa, pb, fa) = (free_port(), free_port(), free_port());
    let a = Run::start(BIN, &config("A", pa, pb, fa, &[("s1", 1)]), fa);
    wait_listening(pa);
    let hello = |lines: &str| {
        let mut c = TcpStream::connect(("127.0.0.1", pa)).unwrap();
        c.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
        c.write_all(lines.as_bytes()).unwrap();
        let mut out = String::new();
        let _ = std::io::Read::read_to_string(&mut c, &mut out);
        out
    };
    assert_eq!(hello("HAProxyS 3.0\nA\nB 1 1\n"), "502\n");
    assert_eq!(hello("HAProxyS 2.1\nZ\nB 1 1\n"), "503\n");
    assert_eq!(hello("HAProxyS 2.1\nA\nC 1 1\n"), "504\n");
    assert_eq!(hello("HTTP/1.1 200\nA\nB 1 1\n"), "501\n");
    drop(a);
}

#[test]
fn a_peer_that_starts_late_gets_the_entries_already_there() {
    if !have_haproxy("a_peer_that_starts_late_gets_the_entries_already_there") {
        return;
    }
    let (pa, pb, fa, fb) = (free_port(), free_port(), free_port(), free_port());
    let a = Run::start(BIN, &config("A", pa, pb, fa, &[("s1", 1)]), fa);
    a.cli("set table mypeers/t key early data.gpt0 5 data.gpc0 2");
    // haproxy as the late one, then Bascule as the late one.
    for bin in [HAPROXY, BIN] {
        let b = Run::start(bin, &config("B", pa, pb, fb, &[("s1", 1)]), fb);
        let line = wait_entry(&b, "mypeers/t", "early", &["gpt0=5", "gpc0=2"]);
        assert!(line.is_some(), "{bin}: {}", b.cli("show table mypeers/t"));
        drop(b);
    }
}

#[test]
fn malformed_peer_messages_end_the_session_and_nothing_else() {
    let (pa, pb, fa) = (free_port(), free_port(), free_port());
    let a = Run::start(BIN, &config("A", pa, pb, fa, &[("s1", 1)]), fa);
    wait_listening(pa);
    // A table definition for "/t" (string keys of 32 bytes with the NUL, http_req_cnt only),
    // then malformed updates.
    let mut define = vec![10, 0x82];
    let body = [&[1u8, 2, b'/', b't', 6, 33, 0xf0, 0x1f][..], &[0]].concat(); // data bit 9
    define.push(body.len() as u8);
    define.extend_from_slice(&body);
    let cases: Vec<Vec<u8>> = vec![
        vec![
            10, 0x85, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
        ],
        [define.clone(), vec![10, 0x80, 3, 0, 0, 0]].concat(),
        [
            define.clone(),
            vec![10, 0x80, 7, 0, 0, 0, 1, 200, b'x', b'y'],
        ]
        .concat(),
        [define, vec![10, 0x81, 2, 1, b'k']].concat(),
        vec![255, 0],
        vec![1, 0],
    ];
    for bytes in cases {
        let mut c = TcpStream::connect(("127.0.0.1", pa)).unwrap();
        c.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
        c.write_all(b"HAProxyS 2.1\nA\nB 1 1\n").unwrap();
        c.write_all(&bytes).unwrap();
        let mut out = Vec::new();
        // The session answers 200, perhaps sends its tables, then closes.
        let _ = std::io::Read::read_to_end(&mut c, &mut out);
        assert!(out.starts_with(b"200\n"), "{out:?}");
    }
    // The process still serves, its table intact.
    assert!(a.cli("show table mypeers/t").contains("# table: mypeers/t"));
    a.cli("set table mypeers/t key ok data.gpt0 1");
    assert!(a.cli("show table mypeers/t").contains("key=ok"));
}
