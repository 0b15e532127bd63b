//! `option abortonclose`: a client that leaves cancels its request wherever it waits, side by
//! side with haproxy 2.6 (reg-test http-messaging/http_abortonclose.vtc covers the same ground):
//! during the connection retries to a dead server (`CC`, no status), in the queue of a full
//! server (`CQ`, the queue time counted) and while the server prepares its response (`CH`, and
//! HAProxy's 400).
// Test code blocks and locks freely: it is not a worker event loop.
#![allow(clippy::disallowed_methods)]

mod support;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream, UdpSocket};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use support::*;

/// A server that reads a request and never answers (each connection held 3 s); with the count
/// of requests it has read.
fn silent_server() -> (u16, Arc<AtomicUsize>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let read = Arc::new(AtomicUsize::new(0));
    let counted = read.clone();
    thread::spawn(move || {
        for mut c in l.incoming().flatten() {
            let counted = counted.clone();
            thread::spawn(move || {
                c.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
                let mut b = [0u8; 4096];
                if c.read(&mut b).is_ok_and(|n| n > 0) {
                    counted.fetch_add(1, Ordering::SeqCst);
                }
                thread::sleep(Duration::from_secs(3));
            });
        }
    });
    (port, read)
}

/// The `qcur` (current queue) of `proxy/server` in `show stat` on the stats socket `cli`.
fn queued(cli: &std::path::Path, proxy: &str, server: &str) -> Option<u64> {
    let mut s = std::os::unix::net::UnixStream::connect(cli).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    s.write_all(b"show stat\n").ok()?;
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out.lines()
        .map(|l| l.split(',').collect::<Vec<_>>())
        .find(|f| f.len() > 2 && f[0] == proxy && f[1] == server)
        .and_then(|f| f[2].parse().ok())
}

/// The two frontends' ports.
struct Ports {
    fe_dead: u16,
    fe_held: u16,
}

fn config(p: &Ports, dead: u16, silent: u16, sink: u16, cli: &std::path::Path) -> String {
    format!(
        "global\n    stats socket {}\n\
         defaults\n    mode http\n    option abortonclose\n    retries 1\n    timeout client 10s\n\
         \x20   timeout server 10s\n    timeout connect 100ms\n    timeout queue 5s\n\
         \x20   log 127.0.0.1:{sink} local0\n    option httplog\n    option dontlognull\n\
         frontend fe_dead\n    bind 127.0.0.1:{}\n    default_backend be_dead\n\
         frontend fe_held\n    bind 127.0.0.1:{}\n    default_backend be_held\n\
         backend be_dead\n    timeout connect 1s\n    retries 10\n    server s1 127.0.0.1:{dead}\n\
         backend be_held\n    server s1 127.0.0.1:{silent} maxconn 1\n",
        cli.display(),
        p.fe_dead,
        p.fe_held
    )
}

fn request(port: u16, path: &str) -> TcpStream {
    let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
    c.write_all(format!("GET {path} HTTP/1.1\r\nhost: a\r\n\r\n").as_bytes())
        .unwrap();
    c
}

/// frontend, backend/server, which timers are set (-1 or N), status and termination state.
fn mask(line: &str) -> String {
    let Some(rest) = line.split("] ").nth(1) else {
        return line.to_string();
    };
    let f: Vec<&str> = rest.split_whitespace().collect();
    if f.len() < 8 {
        return rest.to_string();
    }
    let timers: Vec<&str> = f[2]
        .split('/')
        .map(|t| if t == "-1" { "-1" } else { "N" })
        .collect();
    format!("{} {} {} {} {}", f[0], f[1], timers.join("/"), f[3], f[7])
}

fn logs(sink: &UdpSocket, n: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    sink.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    while out.len() < n {
        match sink.recv(&mut buf) {
            Ok(k) => out.push(mask(&String::from_utf8_lossy(&buf[..k]))),
            Err(_) => break,
        }
    }
    out.sort();
    out
}

fn run_through(program: &str) -> Vec<String> {
    let sink = UdpSocket::bind("127.0.0.1:0").unwrap();
    let p = Ports {
        fe_dead: free_port(),
        fe_held: free_port(),
    };
    // Nothing listens there.
    let dead = free_port();
    let dir = TempDir::new("abortonclose");
    let cfg = dir.path("p.cfg");
    let cli = dir.path("cli.sock");
    let (silent, read) = silent_server();
    let text = config(&p, dead, silent, sink.local_addr().unwrap().port(), &cli);
    std::fs::write(&cfg, text).unwrap();
    let mut child: Child = Command::new(program)
        .arg("-db")
        .arg("-f")
        .arg(&cfg)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let up = eventually(Duration::from_secs(5), || {
        [p.fe_dead, p.fe_held]
            .iter()
            .all(|&port| TcpStream::connect(("127.0.0.1", port)).is_ok())
    });
    let mut out = Vec::new();
    if up {
        // Retrying a dead server (10 retries, a second apart): the client leaves at once.
        drop(request(p.fe_dead, "/retrying"));
        out.push(logs(&sink, 1).join(" | "));
        // The server (maxconn 1) holds a first request; a second one queues, then its client
        // leaves (its line waited for); then the first one's client leaves too.
        let first = request(p.fe_held, "/first");
        let at_server = eventually(Duration::from_secs(5), || read.load(Ordering::SeqCst) == 1);
        let second = request(p.fe_held, "/queued");
        let in_queue = eventually(Duration::from_secs(5), || {
            // In the backend's queue or the server's, as the proxy's counters see it.
            ["BACKEND", "s1"]
                .iter()
                .any(|row| queued(&cli, "be_held", row) == Some(1))
        });
        drop(second);
        let mut held = logs(&sink, 1);
        drop(first);
        held.extend(logs(&sink, 1));
        held.sort();
        out.push(format!("at server {at_server}, queued {in_queue}"));
        out.push(held.join(" | "));
    } else {
        out.push(format!("{program} did not start"));
    }
    let _ = child.kill();
    let _ = child.wait();
    out
}

#[test]
fn a_client_that_leaves_cancels_its_request_as_in_haproxy() {
    let ours = run_through(BIN);
    assert_eq!(
        ours,
        [
            "fe_dead be_dead/s1 N/N/-1/-1/N -1 CC--",
            "at server true, queued true",
            "fe_held be_held/<NOSRV> N/N/-1/-1/N -1 CQ-- | fe_held be_held/s1 N/N/N/-1/N 400 CH--",
        ]
    );
    if !have_haproxy("the abortonclose side-by-side test") {
        return;
    }
    assert_eq!(run_through(HAPROXY), ours);
}
