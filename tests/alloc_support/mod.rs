//! What the allocation tests share: a global allocator that counts every allocation of the
//! test process, and a backend that allocates nothing per request. Each `alloc_*` test binary
//! includes this module (`mod alloc_support;`), so its whole process is counted. The only
//! `unsafe` here is what implementing `GlobalAlloc` requires.
#![allow(dead_code)]
// Test code blocks freely: it is not a worker event loop.
#![allow(clippy::disallowed_methods)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicU64, Ordering};

/// Allocations (and reallocations) so far, in the whole process.
pub fn allocations() -> u64 {
    ALLOCATIONS.load(Ordering::SeqCst)
}

struct Counting;

pub static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

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

/// Counts complete request heads in a stream of bytes split arbitrarily across reads.
pub struct HeadCounter {
    pub tail: u32,
}

impl HeadCounter {
    pub fn feed(&mut self, bytes: &[u8]) -> usize {
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

/// A backend that answers every request head with `response`, allocating nothing per
/// request (fixed buffers, std sockets): what it sends is all the proxy's work.
pub fn backend(listener: TcpListener, response: &'static [u8]) {
    while let Ok((mut s, _)) = listener.accept() {
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            let mut counter = HeadCounter { tail: 0 };
            while let Ok(n) = s.read(&mut buf) {
                if n == 0 {
                    return;
                }
                for _ in 0..counter.feed(&buf[..n]) {
                    if s.write_all(response).is_err() {
                        return;
                    }
                }
            }
        });
    }
}

/// Runs Bascule on `config` inside this process (so that the counting allocator sees its
/// allocations), on a thread of its own.
pub fn run_in_process(config: bascule::config::model::Config) {
    let opts = bascule::cli::Options {
        foreground: true,
        ..Default::default()
    };
    std::thread::spawn(move || bascule::runtime::process::run(config, &opts));
}

/// Connects to the in-process proxy on `port`, waiting up to 2 s for it to listen.
pub fn connect_when_listening(port: u16) -> std::net::TcpStream {
    for _ in 0..100 {
        if let Ok(s) = std::net::TcpStream::connect(("127.0.0.1", port)) {
            return s;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    panic!("proxy not listening on {port}");
}
