//! `tls-ticket-keys FILE`, side by side with Debian's haproxy 2.6: two processes given the same
//! keys file resume each other's sessions (`ssl_fc_is_resumed` is 1 on the second for a session
//! made on the first), two given different files do not, over TLS 1.3 and TLS 1.2; rotating
//! the file (one key appended) keeps tickets sealed before it readable. A bad file is a load
//! error naming the file and the line.
//!
//! Without haproxy the side-by-side tests print "skipped" (and fail when `CI` is set).
#![allow(clippy::disallowed_methods)]

mod support;

use std::path::Path;
use std::process::Command;

use support::side::{both, Run};
use support::tls as client;
use support::{TempDir, BIN};

const GLOBAL: &str = "defaults\n    mode http\n    timeout client 2s\n    timeout server 5s\n    timeout connect 2s\n";

fn base64(data: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for c in data.chunks(3) {
        let n = (c[0] as u32) << 16
            | (*c.get(1).unwrap_or(&0) as u32) << 8
            | *c.get(2).unwrap_or(&0) as u32;
        for i in 0..4 {
            if i <= c.len() {
                out.push(A[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// A keys file of `seeds.len()` keys of `len` bytes, key `i` made of bytes derived from
/// `seeds[i]`.
fn keys_file(path: &Path, seeds: &[u8], len: usize) {
    let text: String = seeds
        .iter()
        .map(|&s| {
            let key: Vec<u8> = (0..len)
                .map(|i| s.wrapping_mul(31).wrapping_add(i as u8))
                .collect();
            base64(&key) + "\n"
        })
        .collect();
    std::fs::write(path, text).unwrap();
}

fn frontend(port: &str, keys: &Path, version: &str) -> String {
    format!(
        "{GLOBAL}frontend fe\n    bind 127.0.0.1:{port} ssl crt @CRT@/www-ecdsa.pem tls-ticket-keys {} ssl-min-ver {version} ssl-max-ver {version}\n\
         \x20   http-request return status 200 content-type text/plain lf-string \"%[ssl_fc_is_resumed]\"\n",
        keys.display()
    )
}

/// Whether a session made with the first process resumes on the second.
fn resumed_across(first: u16, second: u16, tls12: bool) -> Vec<String> {
    let c = client::config(&[], tls12);
    let mut seen = Vec::new();
    for port in [first, second] {
        let mut s = client::connect(port, "www.example.com", c.clone()).unwrap();
        let r = client::exchange(&mut s, "GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        seen.push(String::from_utf8_lossy(&r.body).into_owned());
    }
    seen
}

#[test]
fn processes_sharing_a_keys_file_resume_each_others_sessions() {
    let dir = TempDir::new("tickets");
    let (same, other) = (dir.path("same.keys"), dir.path("other.keys"));
    keys_file(&same, &[1, 2, 3, 4], 48);
    keys_file(&other, &[5, 6, 7], 48);
    for (version, tls12) in [("TLSv1.3", false), ("TLSv1.2", true)] {
        for (second_keys, want) in [(&same, "1"), (&other, "0")] {
            let cfg = frontend("@P2@", &same, version);
            both("tls-ticket-keys", &cfg, |bin, p1, p2, _| {
                let second = frontend(&p1.to_string(), second_keys, version);
                let _b = Run::start(bin, &second, p1);
                let seen = resumed_across(p2, p1, tls12);
                assert_eq!(seen, ["0", want], "{bin} {version}");
                seen
            });
        }
    }
}

#[test]
fn a_rotated_file_still_opens_the_tickets_of_the_previous_one() {
    let dir = TempDir::new("tickets-rotation");
    let (before, after, later) = (
        dir.path("before.keys"),
        dir.path("after.keys"),
        dir.path("later.keys"),
    );
    // AES-256 keys; one appended, then two more (the sealing key of `before` is then gone).
    keys_file(&before, &[1, 2, 3], 80);
    keys_file(&after, &[1, 2, 3, 4], 80);
    keys_file(&later, &[1, 2, 3, 4, 5, 6], 80);
    let cfg = frontend("@P2@", &before, "TLSv1.3");
    both("ticket rotation", &cfg, |bin, p1, p2, _| {
        let mut seen = Vec::new();
        for keys in [&after, &later] {
            let _b = Run::start(bin, &frontend(&p1.to_string(), keys, "TLSv1.3"), p1);
            seen.extend(resumed_across(p2, p1, false));
        }
        assert_eq!(seen, ["0", "1", "0", "0"], "{bin}");
        seen
    });
}

#[test]
fn bad_keys_files_are_load_errors_naming_the_file_and_line() {
    let dir = TempDir::new("tickets-bad");
    let crt = client::fixture("www-ecdsa.pem");
    let check = |keys: Option<&str>, want: &[&str]| {
        let path = dir.path("k.keys");
        match keys {
            Some(k) => std::fs::write(&path, k).unwrap(),
            None => std::fs::remove_file(&path).unwrap(),
        }
        let cfg = dir.path("p.cfg");
        std::fs::write(
            &cfg,
            format!(
                "{GLOBAL}frontend fe\n    bind 127.0.0.1:8443 ssl crt {} tls-ticket-keys {}\n",
                crt.display(),
                path.display()
            ),
        )
        .unwrap();
        let out = Command::new(BIN)
            .args(["-c", "-f", cfg.to_str().unwrap()])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{keys:?} was accepted");
        assert!(err.contains("k.keys"), "{err}");
        for w in want {
            assert!(err.contains(w), "{keys:?}: {w:?} not in {err}");
        }
    };
    let k48 = base64(&[7; 48]);
    check(Some(&format!("{k48}\n{k48}\n")), &["at least 3"]);
    check(
        Some(&format!("{k48}\n{k48}\nnot!base64\n")),
        &["line 3", "base64"],
    );
    let mixed = format!("{k48}\n{}\n{k48}\n", base64(&[7; 80]));
    check(Some(&mixed), &["line 2", "mixed"]);
    check(
        Some(&format!("{}\n", base64(&[7; 40]))),
        &["line 1", "48 bytes"],
    );
    check(Some(""), &["0 key"]);
    check(None, &["unable to read"]);
}

/// One command on the stats socket, the whole reply.
fn cli(sock: &Path, cmd: &str) -> String {
    use std::io::{Read, Write};
    let mut s = std::os::unix::net::UnixStream::connect(sock).unwrap();
    s.write_all(format!("{cmd}\n").as_bytes()).unwrap();
    s.shutdown(std::net::Shutdown::Write).unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

#[test]
fn the_stats_socket_shows_and_rotates_the_keys() {
    let dir = TempDir::new("tickets-cli");
    let (a, b, a_rotated) = (
        dir.path("a.keys"),
        dir.path("b.keys"),
        dir.path("a-rotated.keys"),
    );
    keys_file(&a, &[1, 2, 3], 48);
    keys_file(&b, &[4, 5, 6], 80);
    // What the file would hold after the two `set ssl tls-key` below.
    keys_file(&a_rotated, &[1, 2, 3, 7, 8], 48);
    let k = |s: u8| {
        base64(
            &(0..48)
                .map(|i| s.wrapping_mul(31).wrapping_add(i))
                .collect::<Vec<u8>>(),
        )
    };
    let sock = format!("{}/s-@P1@.sock", dir.0.display());
    let p3 = support::free_port();
    let cfg = format!(
        "global\n    stats socket {sock} level admin\n{GLOBAL}frontend fe\n\
         \x20   bind 127.0.0.1:@P2@ ssl crt @CRT@/www-ecdsa.pem tls-ticket-keys {a} ssl-max-ver TLSv1.2\n\
         \x20   bind 127.0.0.1:@P1@ ssl crt @CRT@/www-ecdsa.pem tls-ticket-keys {b}\n\
         \x20   bind 127.0.0.1:{p3} ssl crt @CRT@/www-ecdsa.pem tls-ticket-keys {a}\n\
         \x20   http-request return status 200 content-type text/plain lf-string \"%[ssl_fc_is_resumed]\"\n",
        a = a.display(),
        b = b.display(),
    );
    both("tls-keys on the stats socket", &cfg, |bin, p1, p2, _| {
        let sock = Path::new(&sock.replace("@P1@", &p1.to_string())).to_path_buf();
        let mut out = vec![cli(&sock, "show tls-keys"), cli(&sock, "show tls-keys *")];
        for key in [k(7), k(8)] {
            out.push(cli(&sock, &format!("set ssl tls-key #1 {key}")));
        }
        out.push(cli(&sock, &format!("show tls-keys {}", a.display())));
        out.push(cli(&sock, "set ssl tls-key #1 !!"));
        out.push(cli(&sock, &format!("set ssl tls-key #0 {}", k(9))));
        // Sessions made now are sealed with key 7: unknown to a process on the original file,
        // known to one on the rotated file.
        for (keys, want) in [(&a, "0"), (&a_rotated, "1")] {
            let port = support::free_port();
            let _other = Run::start(bin, &frontend(&port.to_string(), keys, "TLSv1.2"), port);
            let seen = resumed_across(p2, port, true);
            assert_eq!(seen, ["0", want], "{bin} {}", keys.display());
            out.extend(seen);
        }
        out
    });
}
