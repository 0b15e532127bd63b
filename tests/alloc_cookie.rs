//! Cookie persistence on the steady-state keep-alive path allocates nothing per request: the
//! request's cookie is read and removed (`insert indirect`), the server's `Set-Cookie` deleted
//! and a dated one inserted (`maxidle`), with `Cache-control: private` (`nocache`).
//!
//! This test binary counts every heap allocation of the process with a counting global
//! allocator, runs Bascule in-process (one worker), and drives 10,000 keep-alive requests from a
//! client and to a backend that themselves allocate nothing (fixed buffers, std sockets). Any
//! allocation counted during those requests is therefore the proxy's. Only this file uses
//! `unsafe`: implementing `GlobalAlloc` requires it.
#![allow(clippy::disallowed_methods)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

// SAFETY: every call is forwarded unchanged to the system allocator, which upholds the
// GlobalAlloc contract; we only count.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: same layout contract as our caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from System.alloc/realloc with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

const RESPONSE: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 64\r\nSet-Cookie: SRV=app; path=/\r\nCache-Control: max-age=60\r\n\r\n\
xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx";
const REQUEST: &[u8] =
    b"GET /64 HTTP/1.1\r\nHost: bench\r\nCookie: a=1; SRV=s; b=2\r\nUser-Agent: alloc-test\r\n\r\n";

/// Counts complete request heads in a stream of bytes split arbitrarily across reads.
struct HeadCounter {
    tail: u32,
}

impl HeadCounter {
    fn feed(&mut self, bytes: &[u8]) -> usize {
        let mut heads = 0;
        for &b in bytes {
            // A tiny state machine over the last bytes: \r\n\r\n ends a head.
            self.tail = match (self.tail, b) {
                (0 | 2, b'\r') => self.tail + 1,
                (1 | 3, b'\n') => self.tail + 1,
                (_, b'\r') => 1,
                _ => 0,
            };
            if self.tail == 4 {
                heads += 1;
                self.tail = 0;
            }
        }
        heads
    }
}

fn backend(listener: TcpListener) {
    while let Ok((mut s, _)) = listener.accept() {
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            let mut counter = HeadCounter { tail: 0 };
            while let Ok(n) = s.read(&mut buf) {
                if n == 0 {
                    return;
                }
                for _ in 0..counter.feed(&buf[..n]) {
                    if s.write_all(RESPONSE).is_err() {
                        return;
                    }
                }
            }
        });
    }
}

fn request(c: &mut TcpStream, buf: &mut [u8; 4096]) {
    c.write_all(REQUEST).unwrap();
    // The head (edited by the proxy) then a 64-byte body.
    let mut got = 0;
    loop {
        let n = c.read(&mut buf[got..]).unwrap();
        assert!(n > 0, "proxy closed the connection");
        got += n;
        if let Some(end) = buf[..got].windows(4).position(|w| w == b"\r\n\r\n") {
            if got >= end + 4 + 64 {
                break;
            }
        }
    }
    assert_eq!(&buf[..12], b"HTTP/1.1 200");
    let head = &buf[..got];
    let has = |x: &[u8]| head.windows(x.len()).any(|w| w == x);
    assert!(has(b"Set-Cookie: SRV=s|"), "no cookie inserted");
    assert!(has(b"Cache-control: private") && !has(b"SRV=app"));
}

#[test]
fn cookie_persistence_does_not_allocate() {
    let be = TcpListener::bind("127.0.0.1:0").unwrap();
    let be_port = be.local_addr().unwrap().port();
    std::thread::spawn(move || backend(be));
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let cfg = format!(
        "global\n    nbthread 1\ndefaults\n    mode http\n    timeout connect 1s\n    timeout client 10s\n    timeout server 10s\n\n\
         frontend fe\n    bind 127.0.0.1:{port}\n    capture cookie a len 8\n    default_backend be\n\
         backend be\n    cookie SRV insert indirect nocache maxidle 1s\n    server s 127.0.0.1:{be_port} cookie s\n"
    );
    let loaded = bascule::config::load_str("alloc.cfg", &cfg).expect("valid config");
    let opts = bascule::cli::Options {
        foreground: true,
        ..Default::default()
    };
    std::thread::spawn(move || bascule::runtime::process::run(loaded.config, &opts));

    let mut c = None;
    for _ in 0..100 {
        if let Ok(s) = TcpStream::connect(("127.0.0.1", port)) {
            c = Some(s);
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut c = c.expect("proxy listening");
    c.set_nodelay(true).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut buf = [0u8; 4096];
    // Warm up: buffers, pools and the server connection are set up by now.
    for _ in 0..1_000 {
        request(&mut c, &mut buf);
    }
    let before = ALLOCATIONS.load(Ordering::SeqCst);
    const N: u64 = 10_000;
    for _ in 0..N {
        request(&mut c, &mut buf);
    }
    let allocated = ALLOCATIONS.load(Ordering::SeqCst) - before;
    assert!(
        allocated < N / 100,
        "{allocated} heap allocations during {N} keep-alive requests ({:.2} per request)",
        allocated as f64 / N as f64
    );
}
