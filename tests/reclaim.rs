//! Memory after a burst: a crowd of keep-alive clients that arrive at once and then idle leaves
//! the proxy holding about what idle connections need, not what the burst needed (see
//! src/runtime/reclaim.rs and src/base/pool.rs).
//!
//! Bounded, not a timed performance test: the limit is well above what Bascule keeps (measured
//! 0.57–0.66 MiB for 300 such clients, half a second after their burst) and well below what it
//! kept when its free lists stayed full after a burst (4,832 KiB after 5 s: 256 buffers of
//! 16 KiB and 256 scratch spaces); the proxy has several seconds to give it back.
// Test code blocks and locks freely: it is not a worker event loop.
#![allow(clippy::disallowed_methods)]

mod support;

use std::time::{Duration, Instant};

use support::http::{Client, HttpBackend};
use support::*;

const CLIENTS: usize = 300;
/// What the proxy may keep for `CLIENTS` idle connections beyond its RSS before the burst.
const LIMIT_KIB: u64 = 2048;
/// How long it has to give the rest back.
const WITHIN: Duration = Duration::from_secs(5);

/// A field of /proc/PID/status in KiB (VmRSS, VmHWM).
fn status_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"))
}

#[test]
fn memory_comes_back_after_a_burst_of_clients_that_then_idle() {
    let be = HttpBackend::start();
    let port = free_port();
    let cfg = format!(
        "global\n    nbthread 1\n    maxconn 2000\ndefaults\n    mode http\n    timeout connect 1s\n    \
         timeout client 30s\n    timeout server 30s\nfrontend fe\n    bind 127.0.0.1:{port}\n    \
         default_backend be\nbackend be\n    server s0 127.0.0.1:{}\n",
        be.port
    );
    let p = Proxy::start(&cfg, port, &[]);
    let pid = p.pid();
    // A few requests first, so that what the first one sets up once is in the baseline.
    let mut warm = Client::connect(port);
    for _ in 0..3 {
        assert_eq!(warm.get("/size/3").body, b"xxx");
    }
    drop(warm);
    std::thread::sleep(Duration::from_millis(600));
    let before = status_kib(pid, "VmRSS");

    // The burst: every client connects, then each sends a request, then every response is
    // read, so that all the sessions are live at once; then they all idle.
    let mut clients: Vec<Client> = (0..CLIENTS).map(|_| Client::connect(port)).collect();
    for c in &mut clients {
        c.send(b"GET /size/64 HTTP/1.1\r\nHost: test\r\n\r\n");
    }
    for c in &mut clients {
        let r = c.response(false).expect("a response");
        assert_eq!((r.status, r.body.len()), (200, 64));
    }
    let ready = Instant::now();
    let mut grown;
    loop {
        grown = status_kib(pid, "VmRSS").saturating_sub(before);
        if grown <= LIMIT_KIB {
            break;
        }
        assert!(
            ready.elapsed() < WITHIN,
            "{CLIENTS} idle clients still cost {grown} KiB of RSS {WITHIN:?} after their burst \
             (limit {LIMIT_KIB} KiB; RSS before {before} KiB, peak {} KiB)",
            status_kib(pid, "VmHWM")
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // Still served: parked connections resume on their next request.
    for c in clients.iter_mut().step_by(50) {
        assert_eq!(c.get("/size/3").body, b"xxx");
    }
}
