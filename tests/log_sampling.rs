//! `log ... sample RANGES:SIZE`: of each SIZE lines in a row, only those at the positions of
//! RANGES go to the target (HAProxy's log load balancing), side by side with Debian's
//! haproxy. Requests are sent one after the other, each once its line has reached a second,
//! unsampled target (workers flush their lines independently, and a line logged late would
//! take another's place in the count), so the lines come in a known order (`option
//! dontlognull`: the harness's probe connection, which is not logged, takes no place).
#![allow(clippy::disallowed_methods)]

mod support;

use std::io::{Read, Write};
use std::net::{TcpStream, UdpSocket};
use std::time::Duration;

use support::side::{both, Run};

#[test]
fn sampled_targets_take_their_share_of_lines() {
    // Every line, to know when each request's line went out.
    let all = UdpSocket::bind("127.0.0.1:0").unwrap();
    let cfg = format!("defaults\n    mode http\n    timeout client 5s\n    timeout server 5s\n    timeout connect 2s\n\
               frontend web\n    bind 127.0.0.1:@P2@\n    option dontlognull\n\
               \x20   log 127.0.0.1:@LOG@ format raw sample 2-3,5:6 local0\n\
               \x20   log 127.0.0.1:{} format raw local0\n\
               \x20   log-format \"%HU\"\n\
               \x20   http-request return status 200\n", all.local_addr().unwrap().port());
    both("log sampling", &cfg, |_, _, p2, run: &mut Run| {
        for n in 1..=13 {
            let mut c = TcpStream::connect(("127.0.0.1", p2)).unwrap();
            c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            c.write_all(
                format!("GET /r{n} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes(),
            )
            .unwrap();
            let mut b = Vec::new();
            let _ = c.read_to_end(&mut b);
            assert!(b.starts_with(b"HTTP/1.1 200"), "request {n}");
            let line = support::recv_lines(&all, 1, support::LOG_WAIT);
            assert_eq!(line, [format!("/r{n}")], "the unsampled target's line");
        }
        let lines = run.lines_n(6);
        // Positions 2, 3 and 5 of each 6 (1-based).
        let want = ["/r2", "/r3", "/r5", "/r8", "/r9", "/r11"];
        let got: Vec<&str> = lines.iter().map(|l| l.trim_end()).collect();
        assert_eq!(got, want);
        lines
    });
}
