//! The steady-state HTTP/1 keep-alive path allocates nothing per request.
//!
//! This test binary counts every heap allocation of the process with a counting global
//! allocator, runs Bascule in-process (one worker), and drives 10,000 keep-alive requests from a
//! client and to a backend that themselves allocate nothing (fixed buffers, std sockets). Any
//! allocation counted during those requests is therefore the proxy's. The counting allocator is
//! `alloc_support`'s.
#![allow(clippy::disallowed_methods)]

mod alloc_support;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
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

#[test]
fn keep_alive_requests_do_not_allocate() {
    let be = TcpListener::bind("127.0.0.1:0").unwrap();
    let be_port = be.local_addr().unwrap().port();
    std::thread::spawn(move || alloc_support::backend(be, RESPONSE));
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let cfg = format!(
        "global\n    nbthread 1\ndefaults\n    mode http\n    timeout connect 1s\n    timeout client 10s\n    timeout server 10s\n    option forwardfor\n\
         frontend fe\n    bind 127.0.0.1:{port}\n    default_backend be\n\
         backend be\n    server s 127.0.0.1:{be_port}\n"
    );
    let loaded = bascule::config::load_str("alloc.cfg", &cfg).expect("valid config");
    alloc_support::run_in_process(loaded.config);
    let mut c = alloc_support::connect_when_listening(port);
    c.set_nodelay(true).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut buf = [0u8; 4096];
    // Warm up: buffers, pools and the server connection are set up by now.
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
        "{allocated} heap allocations during {N} keep-alive requests ({:.2} per request)",
        allocated as f64 / N as f64
    );
}
