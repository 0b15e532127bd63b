//! `server ... socks4 ADDR` and `check-via-socks4`, side by side with haproxy: traffic and
//! health checks reach the server through a SOCKS4 proxy the test runs, which records the
//! CONNECT requests it gets and grants or refuses them.
#![allow(clippy::disallowed_methods)]

mod support;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use support::http::{Client, HttpBackend};
use support::side::both;

/// A SOCKS4 proxy: reads the 16-byte CONNECT request HAProxy sends, records it, answers
/// `grant` (0x5A) or a refusal (0x5B), then relays both ways.
struct Socks {
    port: u16,
    seen: Arc<Mutex<Vec<Vec<u8>>>>,
    grant: Arc<AtomicBool>,
}

impl Socks {
    fn start() -> Socks {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let grant = Arc::new(AtomicBool::new(true));
        let (s2, g2) = (seen.clone(), grant.clone());
        thread::spawn(move || {
            for c in l.incoming() {
                let Ok(mut c) = c else { continue };
                let (seen, grant) = (s2.clone(), g2.clone());
                thread::spawn(move || {
                    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
                    let mut req = [0u8; 16];
                    if c.read_exact(&mut req).is_err() {
                        return;
                    }
                    seen.lock().unwrap().push(req.to_vec());
                    let ok = grant.load(Ordering::SeqCst);
                    let _ = c.write_all(&[0, if ok { 0x5A } else { 0x5B }, 0, 0, 0, 0, 0, 0]);
                    if !ok {
                        return;
                    }
                    let port = u16::from_be_bytes([req[2], req[3]]);
                    let ip = std::net::Ipv4Addr::new(req[4], req[5], req[6], req[7]);
                    let Ok(up) = TcpStream::connect((ip, port)) else {
                        return;
                    };
                    let (mut a, mut b) = (c.try_clone().unwrap(), up.try_clone().unwrap());
                    let t = thread::spawn(move || {
                        let _ = std::io::copy(&mut a, &mut b);
                        let _ = b.shutdown(std::net::Shutdown::Write);
                    });
                    let (mut up, mut c) = (up, c);
                    let _ = std::io::copy(&mut up, &mut c);
                    let _ = c.shutdown(std::net::Shutdown::Write);
                    let _ = t.join();
                });
            }
        });
        Socks { port, seen, grant }
    }
}

#[test]
fn traffic_and_checks_go_through_the_socks4_proxy_as_haproxy_sends_them() {
    let be = HttpBackend::start();
    let socks = Socks::start();
    let cfg = format!(
        "global\n    stats socket @SOCK@ level admin\n\
         defaults\n    mode http\n    timeout connect 2s\n    timeout client 5s\n    timeout server 5s\n\
         frontend fe\n    bind 127.0.0.1:@P2@\n    default_backend be\n\
         backend be\n    option httpchk GET /health\n\
         \x20   server s1 127.0.0.1:{} socks4 127.0.0.1:{} check-via-socks4 check inter 200 rise 1 fall 1\n",
        be.port, socks.port
    );
    both(
        "traffic_and_checks_go_through_the_socks4_proxy_as_haproxy_sends_them",
        &cfg,
        |_, _, p2, run| {
            socks.grant.store(true, Ordering::SeqCst);
            let mut out = Vec::new();
            // The check goes through the proxy: the server comes UP.
            assert!(support::eventually(Duration::from_secs(5), || {
                run.cli("show stat").contains(",UP,")
            }));
            let mut c = Client::connect(p2);
            out.push(format!("through: {}", c.get("/x").status));
            // Every CONNECT request names the server, with HAProxy's user id.
            let seen = socks.seen.lock().unwrap().clone();
            socks.seen.lock().unwrap().clear();
            out.push(format!(
                "requests all alike: {}",
                seen.windows(2).all(|w| w[0] == w[1])
            ));
            out.push(format!("{:02x?}", seen.first()));
            // A proxy that refuses: the check fails, the server goes DOWN, requests get 503.
            socks.grant.store(false, Ordering::SeqCst);
            assert!(support::eventually(Duration::from_secs(5), || {
                run.cli("show stat").contains("be,s1,") && run.cli("show stat").contains(",DOWN,")
            }));
            let mut c = Client::connect(p2);
            out.push(format!("refused: {}", c.get("/x").status));
            out
        },
    );
}
