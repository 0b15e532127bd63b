//! Variables side by side with haproxy 2.6: global `set-var`/`set-var-fmt` evaluated at load,
//! `var(NAME,DEFAULT)`, the conditions of `set-var(NAME,COND...)` (action and converter), and
//! `get var` on the stats socket. The same configuration runs in Debian's haproxy and in
//! Bascule; each request's `x-*` response headers and each CLI reply are compared.
#![allow(clippy::disallowed_methods)]

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use support::{eventually, free_port, Proxy, TempDir, HAPROXY};

fn config(port: u16, sock: &Path) -> String {
    format!(
        r#"global
    stats socket {sock} level admin
    set-var proc.int12 int(12)
    set-var proc.int5 var(proc.str60,60),div(proc.int12)
    set-var proc.str1 str("this is")
    set-var-fmt proc.str "%[var(proc.str1)] a string"
defaults
    mode http
    timeout connect 1s
    timeout client 2s
    timeout server 2s
frontend fe
    bind 127.0.0.1:{port}
    http-request set-var(txn.a,ifnotexists) int(1)
    http-request set-var(txn.a,ifnotexists) int(2)
    http-request set-var(txn.b,ifexists) int(3)
    http-request set-var(txn.c) str(x)
    http-request set-var(txn.c,ifempty) str(y)
    http-request set-var(txn.c,ifempty) str()
    http-request set-var(txn.d) int(10)
    http-request set-var(txn.d,ifgt) int(15)
    http-request set-var(txn.e) int(10)
    http-request set-var(txn.e,ifgt) int(5)
    http-request set-var(txn.f) int(10)
    http-request set-var(txn.f,iflt) str(s)
    http-request set-var(txn.g,ifset) int(1)
    http-request set-var(txn.g,ifnotexists) int(2)
    http-request set-var(txn.h,ifnotset) int(4)
    http-request set-var(txn.i) str(a),set-var(txn.j,ifnotempty)
    http-request set-var(proc.ifexists,ifexists) int(7)
    http-request set-var(txn.k,ifnotempty) int(0)
    http-request set-var(sess.cnt) var(sess.cnt,0),add(1)
    http-request return status 200 hdr x-proc "%[var(proc.int5)]|%[var(proc.str)]|%[var(proc.ifexists)]" hdr x-txn "a=%[var(txn.a)] b=%[var(txn.b)] c=%[var(txn.c)] d=%[var(txn.d)] e=%[var(txn.e)] f=%[var(txn.f)] g=%[var(txn.g)] h=%[var(txn.h)] j=%[var(txn.j)] k=%[var(txn.k)] z=%[var(txn.z,dflt)]" hdr x-sess "%[var(sess.cnt)]"
"#,
        sock = sock.display()
    )
}

/// Two requests on one connection: the `x-*` headers of each response.
fn exchange(port: u16) -> Vec<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    let mut out = Vec::new();
    for _ in 0..2 {
        s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        let mut buf = Vec::new();
        let mut b = [0u8; 4096];
        while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = s.read(&mut b).unwrap();
            assert!(n > 0, "closed early");
            buf.extend_from_slice(&b[..n]);
        }
        let head = String::from_utf8_lossy(&buf).to_string();
        let mut xs: Vec<String> = head
            .lines()
            .filter(|l| l.to_ascii_lowercase().starts_with("x-"))
            .map(|l| {
                l.to_ascii_lowercase()
                    .split_once(':')
                    .map_or(String::new(), |(k, v)| format!("{k}:{}", v.trim()))
            })
            .collect();
        xs.sort();
        out.extend(xs);
    }
    out
}

fn cli(sock: &Path, cmd: &str) -> String {
    let mut s = UnixStream::connect(sock).unwrap();
    s.write_all(format!("{cmd}\n").as_bytes()).unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out
}

#[test]
fn variables_match_haproxy() {
    if !support::have_haproxy("variables_match_haproxy") {
        return;
    }
    let dir = TempDir::new("vars");
    let (hport, bport) = (free_port(), free_port());
    let (hsock, bsock) = (dir.path("h.sock"), dir.path("b.sock"));
    std::fs::write(dir.path("h.cfg"), config(hport, &hsock)).unwrap();
    let mut h = Command::new(HAPROXY)
        .arg("-db")
        .arg("-f")
        .arg(dir.path("h.cfg"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let _b = Proxy::start(&config(bport, &bsock), bport, &[]);
    assert!(eventually(Duration::from_secs(5), || {
        TcpStream::connect(("127.0.0.1", hport)).is_ok() && UnixStream::connect(&hsock).is_ok()
    }));
    let (href, ours) = (exchange(hport), exchange(bport));
    let _ = h.kill();
    let _ = h.wait();
    assert!(!href.is_empty());
    assert_eq!(ours, href, "responses");
    // haproxy is gone: compare the CLI against what it answered before exiting would need it
    // running, so start it again for the CLI questions.
    let mut h = Command::new(HAPROXY)
        .arg("-db")
        .arg("-f")
        .arg(dir.path("h.cfg"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    assert!(eventually(Duration::from_secs(5), || UnixStream::connect(
        &hsock
    )
    .is_ok()));
    for cmd in [
        "get var proc.int5",
        "get var proc.str",
        "get var proc.nope",
        "get var txn.a",
        "get var",
        "set var proc.str str(x)",
        "experimental-mode on; set var proc.str str(updating); set var proc.str fmt %[var(proc.str),regsub(ing,ed)]; get var proc.str",
        "experimental-mode on; set var txn.a int(1)",
        "experimental-mode on; set var proc.str",
        "experimental-mode on; set var",
        "experimental-mode on; set var proc.str bad int(1)",
        "experimental-mode",
    ] {
        assert_eq!(cli(&bsock, cmd), cli(&hsock, cmd), "reply to '{cmd}'");
    }
    let _ = h.kill();
    let _ = h.wait();
}
