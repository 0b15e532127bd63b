//! A backend whose `server ... ssl` has `sni EXPR` evaluates it on every request (the SNI
//! decides which server connection may carry the request): in steady state that evaluation
//! allocates nothing.
//!
//! The TLS server is /usr/sbin/haproxy, in its own process, so that only Bascule's allocations
//! are counted. Bascule's TLS client itself allocates per record, so the test compares two
//! frontends of one Bascule in front of the same server, one through a backend without `sni`
//! and one through a backend with `sni req.hdr(host)`: their allocations per keep-alive
//! request must be the same. The counting allocator is `alloc_support`'s.
#![allow(clippy::disallowed_methods)]

mod alloc_support;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

const REQUEST: &[u8] = b"GET /64 HTTP/1.1\r\nHost: bench\r\nUser-Agent: alloc-test\r\n\r\n";
const BODY: &str = "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx";

/// A free port below the kernel's ephemeral range (as `support::free_port` picks them: a port
/// `bind(:0)` finds could be taken by an outgoing connection before a proxy binds it), never
/// the same twice.
fn free_port() -> u16 {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let start = std::process::id().wrapping_mul(7919) % 22_000;
    loop {
        let k = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        assert!(k < 22_000, "no free port below 32000");
        let port = (10_000 + (start + k) % 22_000) as u16;
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
}

fn connect(port: u16) -> TcpStream {
    for _ in 0..200 {
        if let Ok(s) = TcpStream::connect(("127.0.0.1", port)) {
            s.set_nodelay(true).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            return s;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("nothing listens on {port}");
}

/// One request; reads the response up to the end of its 64-byte body.
fn request(c: &mut TcpStream, buf: &mut [u8; 4096]) {
    c.write_all(REQUEST).unwrap();
    let mut got = 0;
    loop {
        let n = c.read(&mut buf[got..]).unwrap();
        assert!(n > 0, "proxy closed the connection");
        got += n;
        if got >= BODY.len() && buf[..got].ends_with(BODY.as_bytes()) {
            break;
        }
    }
    assert_eq!(&buf[..12], b"HTTP/1.1 200");
}

/// Allocations per request over `n` keep-alive requests on `c`, after a warm-up.
fn per_request(c: &mut TcpStream, n: u64) -> f64 {
    let mut buf = [0u8; 4096];
    for _ in 0..500 {
        request(c, &mut buf);
    }
    let before = alloc_support::allocations();
    for _ in 0..n {
        request(c, &mut buf);
    }
    (alloc_support::allocations() - before) as f64 / n as f64
}

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn sni_expressions_do_not_allocate_per_request() {
    let crt = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/tls/www-ecdsa.pem");
    let tls_port = free_port();
    let dir = std::env::temp_dir().join(format!("alloc_sni_{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let server_cfg = dir.join("server.cfg");
    std::fs::write(
        &server_cfg,
        format!(
            "defaults\n    mode http\n    timeout client 10s\n    timeout connect 1s\n    timeout server 10s\n\
             frontend tls\n    bind 127.0.0.1:{tls_port} ssl crt {crt}\n\
             \x20   http-request return status 200 content-type text/plain string {BODY}\n"
        ),
    )
    .unwrap();
    let _server = Killed(
        Command::new("/usr/sbin/haproxy")
            .args(["-db", "-f"])
            .arg(&server_cfg)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("/usr/sbin/haproxy runs"),
    );

    let (plain, sni) = (free_port(), free_port());
    let cfg = format!(
        "global\n    nbthread 1\ndefaults\n    mode http\n    timeout connect 1s\n    timeout client 10s\n    timeout server 10s\n\
         frontend plain\n    bind 127.0.0.1:{plain}\n    default_backend plain\n\
         frontend sni\n    bind 127.0.0.1:{sni}\n    default_backend sni\n\
         backend plain\n    server s 127.0.0.1:{tls_port} ssl verify none\n\
         backend sni\n    server s 127.0.0.1:{tls_port} ssl verify none sni req.hdr(host)\n"
    );
    let loaded = bascule::config::load_str("alloc.cfg", &cfg).expect("valid config");
    // The expression is compiled, so every request through `sni` evaluates it.
    assert_eq!(loaded.config.backends[1].sni_exprs.len(), 1);
    alloc_support::run_in_process(loaded.config);
    connect(tls_port);

    const N: u64 = 4_000;
    let without = per_request(&mut connect(plain), N);
    let with = per_request(&mut connect(sni), N);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        with - without < 0.01,
        "{with:.3} allocations per request with `sni req.hdr(host)`, {without:.3} without"
    );
}
