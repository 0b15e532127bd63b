//! Access logs cost no allocation per request either: the keep-alive path of
//! `alloc_keepalive.rs` with a frontend that logs every transaction through a `log-format`
//! full of `%[fetch,conv...]` samples (a variable set by a rule, converters, the method and
//! status, the last rule), a unique id computed from a `unique-id-format` and sent in a header.
//!
//! Like `alloc_keepalive.rs`, the test binary counts every heap allocation of the process with
//! `alloc_support`'s counting global allocator; the client, the backend and the syslog sink
//! allocate nothing while requests run.
#![allow(clippy::disallowed_methods)]

mod alloc_support;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

const RESPONSE: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 64\r\n\r\n\
xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx";
const REQUEST: &[u8] = b"GET /64 HTTP/1.1\r\nHost: bench\r\nUser-Agent: alloc-test\r\n\r\n";

fn request(c: &mut TcpStream, buf: &mut [u8; 4096]) {
    c.write_all(REQUEST).unwrap();
    // The response is a fixed size: read until we have it all.
    let mut got = 0;
    let want = RESPONSE.len();
    while got < want {
        let n = c.read(&mut buf[got..]).unwrap();
        assert!(n > 0, "proxy closed the connection");
        got += n;
    }
    assert_eq!(&buf[..12], b"HTTP/1.1 200");
}

static LINES: AtomicU64 = AtomicU64::new(0);

/// Receives the log lines into a fixed buffer (so that the proxy never finds the socket full)
/// and counts those that show the samples.
fn sink(s: UdpSocket) {
    let mut buf = [0u8; 4096];
    while let Ok(n) = s.recv(&mut buf) {
        let line = &buf[..n];
        const SHOWN: &[u8] = b"ua=\"ALLOC-TEST\" b64=YWxsb2MtdGVzdA== m=GET st=- ";
        if line.windows(SHOWN.len()).any(|w| w == SHOWN) {
            LINES.fetch_add(1, Ordering::Relaxed);
        }
    }
}

#[test]
fn logged_keep_alive_requests_do_not_allocate() {
    let be = TcpListener::bind("127.0.0.1:0").unwrap();
    let be_port = be.local_addr().unwrap().port();
    std::thread::spawn(move || alloc_support::backend(be, RESPONSE));
    let logs = UdpSocket::bind("127.0.0.1:0").unwrap();
    // Room for a burst of lines while this thread waits for a core (as far as the system
    // allows: UDP drops what does not fit, which the check below tolerates).
    let _ = socket2::SockRef::from(&logs).set_recv_buffer_size(8 << 20);
    let log_port = logs.local_addr().unwrap().port();
    std::thread::spawn(move || sink(logs));
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let cfg = format!(
        "global\n    nbthread 1\n    log 127.0.0.1:{log_port} local0\n\
         defaults\n    mode http\n    log global\n    timeout connect 1s\n    timeout client 10s\n    timeout server 10s\n\
         frontend fe\n    bind 127.0.0.1:{port}\n\
         \x20   http-request set-var(txn.ua) req.hdr(user-agent)\n\
         \x20   http-request allow\n\
         \x20   unique-id-format %[uuid]-%[var(txn.ua),lower]-%ci\n\
         \x20   unique-id-header X-Uid\n\
         \x20   log-format \"%ci:%cp [%tr] %ft %b/%s %TR/%Tw/%Tc/%Tr/%Ta %ST %B %tsc %ac/%fc/%bc/%sc/%rc %sq/%bq %{{+Q}}r ua=%{{+Q,+E}}[var(txn.ua),upper] b64=%[var(txn.ua),base64] m=%[method] st=%[status] id=%ID lr=%[last_rule_line] src=%[src,ipmask(24)]\"\n\
         \x20   default_backend be\n\
         backend be\n    server s 127.0.0.1:{be_port}\n"
    );
    let loaded = bascule::config::load_str("alloc.cfg", &cfg).expect("valid config");
    alloc_support::run_in_process(loaded.config);
    let mut c = alloc_support::connect_when_listening(port);
    c.set_nodelay(true).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut buf = [0u8; 4096];
    // Warm up: buffers, pools, the server connection and the log buffers are set up by now.
    for _ in 0..1_000 {
        request(&mut c, &mut buf);
    }
    let before = alloc_support::allocations();
    const N: u64 = 10_000;
    for _ in 0..N {
        request(&mut c, &mut buf);
    }
    let allocated = alloc_support::allocations() - before;
    assert!(
        allocated < N / 100,
        "{allocated} heap allocations during {N} logged keep-alive requests ({:.2} per request)",
        allocated as f64 / N as f64
    );
    // The requests were logged, with their samples (UDP may lose a few lines on a loaded
    // machine: the receiving thread can be kept off the cores for a while).
    let logged = || LINES.load(Ordering::Relaxed) >= (1_000 + N) * 97 / 100;
    for _ in 0..250 {
        if logged() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(logged(), "{} lines logged", LINES.load(Ordering::Relaxed));
}
