//! `log-forward` and `ring` sections side by side with haproxy: syslog messages received on
//! UDP and TCP (octet-counted and one per line) go to a UDP target and to a ring, whose TCP
//! syslog server gets them octet-counted; `show events` lists what the ring holds. Every
//! message carries a date, which both keep (converted between the RFC 3164 and RFC 5424
//! forms), so the lines compare byte for byte.
#![allow(clippy::disallowed_methods)]

mod support;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream, UdpSocket};
use std::time::{Duration, Instant};

use support::side::both;

/// Reads `n` octet-counted frames from the ring's next connection to `l`.
fn frames(l: &TcpListener, n: usize) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut out = Vec::new();
    // A connection left over from the previous run (closed when its process stopped) gives
    // nothing: the next one is the ring's.
    while out.is_empty() && Instant::now() < deadline {
        let s = match l.accept() {
            Ok((s, _)) => s,
            Err(_) => {
                std::thread::sleep(Duration::from_millis(20));
                continue;
            }
        };
        out = read_frames(s, n);
    }
    out
}

/// Reads up to `n` octet-counted frames from `s`.
fn read_frames(mut s: TcpStream, n: usize) -> Vec<String> {
    s.set_nonblocking(false).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut buf = Vec::new();
    let mut out = Vec::new();
    let mut chunk = [0u8; 4096];
    while out.len() < n {
        // Parse what is there: `LEN SP MSG`.
        while let Some(sp) = buf.iter().position(|&c| c == b' ') {
            let Ok(len) = String::from_utf8_lossy(&buf[..sp]).parse::<usize>() else {
                panic!("not octet-counted: {:?}", String::from_utf8_lossy(&buf));
            };
            if buf.len() < sp + 1 + len {
                break;
            }
            out.push(String::from_utf8_lossy(&buf[sp + 1..sp + 1 + len]).into_owned());
            buf.drain(..sp + 1 + len);
        }
        if out.len() >= n {
            break;
        }
        match s.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(k) => buf.extend_from_slice(&chunk[..k]),
        }
    }
    out
}

#[test]
fn messages_are_forwarded_to_targets_and_rings_as_haproxy_does() {
    let syslog = TcpListener::bind("127.0.0.1:0").unwrap();
    syslog.set_nonblocking(true).unwrap();
    let sport = syslog.local_addr().unwrap().port();
    let cfg = format!(
        "global\n    stats socket @SOCK@ level admin\n\
         ring r1\n    description \"My ring\"\n    format rfc5424\n    maxlen 1200\n    size 32764\n\
         \x20   timeout connect 5s\n    timeout server 10s\n    server srv 127.0.0.1:{sport} log-proto octet-count\n\
         log-forward lf\n    dgram-bind 127.0.0.1:@P1@\n    bind 127.0.0.1:@P2@\n\
         \x20   log ring@r1 local0\n    log 127.0.0.1:@LOG@ format raw local0\n    maxconn 10\n    timeout client 5s\n"
    );
    let msgs = [
        "<134>Nov 24 21:00:00 myhost app[42]: hello udp",
        "<14>1 2026-11-24T21:00:00.000000+00:00 h2 tag2 7 ID1 [x@1 a=\"b\"] five four two four",
        "<133>Nov  4 01:02:03 tagonly: no pid",
    ];
    both(
        "messages_are_forwarded_to_targets_and_rings_as_haproxy_does",
        &cfg,
        |_, p1, p2, run| {
            let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
            for m in &msgs {
                udp.send_to(m.as_bytes(), ("127.0.0.1", p1)).unwrap();
            }
            // The raw target: the message text alone. The datagrams are passed on before the
            // TCP messages are sent, so that they come first in the ring too; among themselves
            // they may come in any order (threads take them), so each group is sorted.
            let mut raw = run.lines_n(msgs.len());
            raw.sort();
            // TCP: octet-counted, then one per line.
            let mut t = TcpStream::connect(("127.0.0.1", p2)).unwrap();
            let m = "<134>Nov 24 21:00:00 tcphost tcp[1]: octet counted";
            t.write_all(format!("{} {m}", m.len()).as_bytes()).unwrap();
            t.write_all(b"<134>Nov 24 21:00:00 tcphost tcp[1]: one line\n")
                .unwrap();
            t.flush().unwrap();
            raw.extend(run.lines_n(2));
            let mut out = frames(&syslog, 5);
            let udp_first = |v: &mut Vec<String>| {
                let n = msgs.len().min(v.len());
                v[..n].sort();
            };
            udp_first(&mut out);
            out.extend(raw);
            let events = run.cli("show events r1");
            let mut events: Vec<String> = events
                .lines()
                .filter(|l| !l.is_empty())
                .map(str::to_string)
                .collect();
            udp_first(&mut events);
            out.extend(events);
            out.push(run.cli("show events nosuch").trim().to_string());
            out
        },
    );
}

/// A ring's `server ... ssl` sends its messages over TLS (checking the certificate against
/// `ca-file` and the `sni` name) to a `log-forward` section's `bind ... ssl crt FILE`, which
/// passes them on: every message arrives as haproxy delivers it.
#[test]
fn messages_cross_a_tls_ring_server_to_a_tls_log_forward_listener_as_haproxy_does() {
    let cfg = "global\n    insecure-fork-wanted\n\
         ring r1\n    format rfc5424\n    maxlen 1200\n    size 32764\n\
         \x20   timeout connect 5s\n    timeout server 10s\n\
         \x20   server tls1 127.0.0.1:@P2@ ssl verify required ca-file @CRT@/ca.pem sni str(www.example.com)\n\
         log-forward in\n    dgram-bind 127.0.0.1:@P1@\n    log ring@r1 local0\n\
         log-forward out\n    bind 127.0.0.1:@P2@ ssl crt @CRT@/www-ecdsa.pem\n\
         \x20   log 127.0.0.1:@LOG@ format rfc5424 local0\n    timeout client 5s\n";
    let msgs = [
        "<134>Nov 24 21:00:00 myhost app[42]: first over tls",
        "<14>1 2026-11-24T21:00:00.000000+00:00 h2 tag2 7 ID1 [x@1 a=\"b\"] second over tls",
        "<133>Nov  4 01:02:03 tagonly: third, no pid",
    ];
    both(
        "messages_cross_a_tls_ring_server_to_a_tls_log_forward_listener_as_haproxy_does",
        cfg,
        |_, p1, _, run| {
            let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
            for m in &msgs {
                udp.send_to(m.as_bytes(), ("127.0.0.1", p1)).unwrap();
            }
            let mut out = run.lines_n(msgs.len());
            assert_eq!(out.len(), msgs.len(), "every message arrives: {out:?}");
            // haproxy's threads may take the datagrams in another order.
            out.sort();
            out
        },
    );
}
