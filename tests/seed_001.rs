//! Seed 001 (`tests/configs/seed_001.cfg`) through the real binary: it starts unchanged (only
//! its addresses point at this test's backends, and a stats socket is added to drive it), with
//! warnings that say what was applied of `ulimit-n 1000000` and `maxconn 30000000`; a client
//! keeps its server for 100 requests through the `SERVERID` cookie (which the servers never
//! see: `insert indirect`), and moves to another server, with a new cookie, once its server is
//! put in maintenance on the stats socket.
#![allow(clippy::disallowed_methods)]

mod support;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::net::UnixStream;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use support::{free_port, TempDir, BIN};

/// Requests each backend saw: (server, the request's `Cookie` headers).
type Seen = Arc<Mutex<Vec<(String, Vec<String>)>>>;

fn backend(name: String, seen: Seen) -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    thread::spawn(move || {
        for c in l.incoming().flatten() {
            let (name, seen) = (name.clone(), seen.clone());
            thread::spawn(move || serve(c, &name, &seen));
        }
    });
    port
}

fn serve(mut c: TcpStream, name: &str, seen: &Seen) {
    let _ = c.set_read_timeout(Some(Duration::from_secs(10)));
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
            match c.read(&mut chunk) {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
        let end = buf.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
        let head = String::from_utf8_lossy(&buf[..end]).to_string();
        buf.drain(..end);
        let cookies = head
            .lines()
            .filter(|l| l.to_ascii_lowercase().starts_with("cookie:"))
            .map(|l| l[7..].trim().to_string())
            .collect();
        seen.lock().unwrap().push((name.to_string(), cookies));
        let resp = format!(
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nX-Srv: {name}\r\n\r\n{name}",
            name.len()
        );
        if c.write_all(resp.as_bytes()).is_err() {
            return;
        }
    }
}

/// One keep-alive client: sends a GET with `cookie` (if any) and returns (the server named by
/// the body, the `Set-Cookie` value if any).
struct Client(TcpStream);

impl Client {
    fn get(&mut self, cookie: Option<&str>) -> (String, Option<String>) {
        let c = cookie.map_or(String::new(), |c| format!("Cookie: {c}\r\n"));
        let req = format!("GET / HTTP/1.1\r\nHost: seed\r\n{c}\r\n");
        self.0.write_all(req.as_bytes()).unwrap();
        let mut buf = Vec::new();
        let mut chunk = [0u8; 4096];
        let (head, len) = loop {
            let n = self.0.read(&mut chunk).unwrap();
            assert!(n > 0, "the proxy closed");
            buf.extend_from_slice(&chunk[..n]);
            if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&buf[..end]).to_string();
                let len: usize = head
                    .lines()
                    .find_map(|l| {
                        let (n, v) = l.split_once(':')?;
                        n.eq_ignore_ascii_case("content-length")
                            .then(|| v.trim().parse().ok())?
                    })
                    .unwrap_or(0);
                buf.drain(..end + 4);
                break (head, len);
            }
        };
        while buf.len() < len {
            let n = self.0.read(&mut chunk).unwrap();
            assert!(n > 0);
            buf.extend_from_slice(&chunk[..n]);
        }
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        let set = head.lines().find_map(|l| {
            let (n, v) = l.split_once(':')?;
            n.eq_ignore_ascii_case("set-cookie")
                .then(|| v.trim().to_string())
        });
        (String::from_utf8_lossy(&buf[..len]).to_string(), set)
    }
}

fn cli(sock: &std::path::Path, command: &str) -> String {
    let mut s = UnixStream::connect(sock).unwrap();
    s.write_all(format!("{command}\n").as_bytes()).unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out
}

/// `SERVERID=web03; path=/` -> `SERVERID=web03`.
fn cookie_of(set: &str) -> String {
    set.split(';').next().unwrap().trim().to_string()
}

#[test]
fn seed_001_keeps_a_client_on_its_server_until_it_goes_down() {
    let seed = std::fs::read_to_string("tests/configs/seed_001.cfg").unwrap();
    let seen: Seen = Arc::default();
    let dir = TempDir::new("seed001");
    let sock = dir.path("admin.sock");
    let port = free_port();
    let mut cfg = seed.replace("127.0.0.1:25080", &format!("127.0.0.1:{port}"));
    for i in 1..=10 {
        let p = backend(format!("web{i:02}"), seen.clone());
        cfg = cfg.replace(&format!("127.0.0.1:251{i:02}"), &format!("127.0.0.1:{p}"));
    }
    cfg = cfg.replace(
        "    ulimit-n 1000000\n",
        &format!(
            "    ulimit-n 1000000\n    stats socket {} level admin\n",
            sock.display()
        ),
    );
    let path = dir.path("seed.cfg");
    std::fs::write(&path, &cfg).unwrap();
    let stderr = dir.path("stderr");
    let mut child = Command::new(BIN)
        .args(["-d", "-f", path.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&stderr).unwrap())
        .spawn()
        .unwrap();
    let up = support::eventually(Duration::from_secs(5), || {
        TcpStream::connect(("127.0.0.1", port)).is_ok() && sock.exists()
    });
    let errors = std::fs::read_to_string(&stderr).unwrap_or_default();
    assert!(up, "seed 001 did not start:\n{errors}");
    // What could not be applied is said, and what applies instead.
    let (soft, _) = nofile();
    if soft < 1_000_000 {
        assert!(
            errors.contains("'ulimit-n 1000000'") && errors.contains("which applies"),
            "{errors}"
        );
    }
    assert!(
        errors.contains("global maxconn 30000000 needs")
            && errors.contains("maxconn 30000000 applies"),
        "{errors}"
    );

    let mut c = Client(TcpStream::connect(("127.0.0.1", port)).unwrap());
    c.0.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let (first, set) = c.get(None);
    let set = set.expect("a persistence cookie is inserted");
    assert_eq!(cookie_of(&set), format!("SERVERID={first}"), "{set}");
    let cookie = cookie_of(&set);
    seen.lock().unwrap().clear();
    for _ in 0..100 {
        let (srv, set) = c.get(Some(&format!("lang=fr; {cookie}")));
        assert_eq!(srv, first, "the client left its server");
        assert_eq!(set, None, "a valid cookie is not set again");
    }
    {
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), 100);
        // `indirect`: the server sees the client's other cookies, never SERVERID.
        assert!(
            seen.iter()
                .all(|(s, c)| s == &first && c == &["lang=fr".to_string()]),
            "{seen:?}"
        );
    }

    let reply = cli(&sock, &format!("disable server app/{first}"));
    assert!(reply.trim().is_empty(), "{reply}");
    let (moved, set) = c.get(Some(&cookie));
    assert_ne!(moved, first, "the client stayed on a server in maintenance");
    let set = set.expect("the client gets its new server's cookie");
    assert_eq!(cookie_of(&set), format!("SERVERID={moved}"));
    let new_cookie = cookie_of(&set);
    for _ in 0..20 {
        assert_eq!(c.get(Some(&new_cookie)).0, moved);
    }
    // Back in service, the server gets its clients back (the cookie names it again).
    cli(&sock, &format!("enable server app/{first}"));
    assert_eq!(c.get(Some(&cookie)).0, first);

    let _ = child.kill();
    let _ = child.wait();
}

/// This process's (soft, hard) limits on open files, from /proc.
fn nofile() -> (u64, u64) {
    let limits = std::fs::read_to_string("/proc/self/limits").unwrap_or_default();
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .unwrap_or("");
    let nums: Vec<u64> = line
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect();
    (
        nums.first().copied().unwrap_or(0),
        nums.get(1).copied().unwrap_or(0),
    )
}
