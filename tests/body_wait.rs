//! Waiting for a message body: `http-request wait-for-body`, `option http-buffer-request` and
//! `http-response wait-for-body`, side by side with haproxy 2.6 (reg-test
//! http-messaging/http_wait_for_body.vtc covers the same ground).
//!
//! Each scenario sends the same bytes through Debian's haproxy and through Bascule, running one
//! configuration in front of a scripted backend, and compares what the client got (status, and
//! whether the connection stayed usable), what the backend received (the body length) and the
//! access log line (status, termination state, backend/server, which timers are set).
// Test code blocks and locks freely: it is not a worker event loop.
#![allow(clippy::disallowed_methods)]

mod support;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream, UdpSocket};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use support::http::Client;
use support::*;

/// The backend: answers each request according to its path, and records the body length of
/// each request it read ("path len").
fn backend(seen: Arc<Mutex<Vec<String>>>) -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    thread::spawn(move || {
        for c in l.incoming().flatten() {
            let seen = seen.clone();
            thread::spawn(move || serve(c, &seen));
        }
    });
    port
}

fn serve(mut c: TcpStream, seen: &Mutex<Vec<String>>) {
    c.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    let mut buf = Vec::new();
    loop {
        let Some(end) = read_until_head(&mut c, &mut buf) else {
            return;
        };
        let head = String::from_utf8_lossy(&buf[..end]).into_owned();
        buf.drain(..end);
        let path = head.split(' ').nth(1).unwrap_or("").to_string();
        let len = head
            .lines()
            .find_map(|l| {
                let (n, v) = l.split_once(':')?;
                n.eq_ignore_ascii_case("content-length")
                    .then(|| v.trim().parse::<usize>().ok())?
            })
            .unwrap_or(0);
        while buf.len() < len {
            let mut b = [0u8; 4096];
            match c.read(&mut b) {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&b[..n]),
            }
        }
        buf.drain(..len);
        seen.lock().unwrap().push(format!("{path} {len}"));
        let ok = match path.as_str() {
            // Ten bytes announced, three sent, then silence.
            "/stalled" => c.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nabc"),
            // 1000 bytes of the body, then the last one after a pause shorter than the wait.
            "/late" => c
                .write_all(b"HTTP/1.1 201 Created\r\ncontent-length: 1001\r\n\r\n")
                .and_then(|()| c.write_all(&[b'x'; 1000]))
                .map(|()| thread::sleep(Duration::from_millis(40)))
                .and_then(|()| c.write_all(b"y")),
            _ => c.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"),
        };
        if ok.is_err() || path == "/stalled" {
            thread::sleep(Duration::from_secs(1));
            return;
        }
    }
}

fn read_until_head(c: &mut TcpStream, buf: &mut Vec<u8>) -> Option<usize> {
    loop {
        if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            return Some(p + 4);
        }
        let mut b = [0u8; 4096];
        match c.read(&mut b) {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&b[..n]),
        }
    }
}

struct Ports {
    fe1: u16,
    fe2: u16,
    fe3: u16,
}

fn config(p: &Ports, be: u16, sink: u16) -> String {
    format!(
        "defaults\n    mode http\n    timeout client 5s\n    timeout server 5s\n    timeout connect 5s\n\
         \x20   log 127.0.0.1:{sink} local0\n    option httplog\n    option dontlognull\n\
         frontend fe1\n    bind 127.0.0.1:{}\n\
         \x20   http-request wait-for-body time 100ms if {{ path_beg /a }}\n\
         \x20   http-request wait-for-body time 100ms at-least 1000 if {{ path_beg /b }}\n\
         \x20   default_backend be1\n\
         frontend fe2\n    bind 127.0.0.1:{}\n    default_backend be2\n\
         frontend fe3\n    bind 127.0.0.1:{}\n    timeout http-request 100ms\n\
         \x20   option http-buffer-request\n    default_backend be1\n\
         backend be1\n    server s1 127.0.0.1:{be}\n\
         backend be2\n\
         \x20   http-response wait-for-body time 100ms if {{ status eq 200 }}\n\
         \x20   http-response wait-for-body time 100ms at-least 1000 if {{ status eq 201 }}\n\
         \x20   server s1 127.0.0.1:{be}\n",
        p.fe1, p.fe2, p.fe3
    )
}

/// One client action.
enum Step {
    Send(&'static [u8]),
    Pause(u64),
    /// Reads one response and notes its status.
    Response,
    /// Reads `HTTP/1.1 100 Continue` (and notes it).
    Continue,
}

struct Scenario {
    name: &'static str,
    frontend: fn(&Ports) -> u16,
    steps: Vec<Step>,
}

fn scenarios() -> Vec<Scenario> {
    use Step::*;
    let fe1 = |p: &Ports| p.fe1;
    let fe2 = |p: &Ports| p.fe2;
    let fe3 = |p: &Ports| p.fe3;
    let get2 = b"GET /next HTTP/1.1\r\nhost: a\r\n\r\n";
    vec![
        Scenario {
            name: "request body incomplete when the wait ends: 408",
            frontend: fe1,
            steps: vec![
                Send(b"POST /a1 HTTP/1.1\r\nhost: a\r\ncontent-length: 10\r\n\r\nabc"),
                Response,
            ],
        },
        Scenario {
            name: "request body completed within the wait",
            frontend: fe1,
            steps: vec![
                Send(b"POST /a2 HTTP/1.1\r\nhost: a\r\ncontent-length: 5\r\n\r\nab"),
                Pause(30),
                Send(b"cde"),
                Response,
            ],
        },
        Scenario {
            name: "chunked request body completed within the wait",
            frontend: fe1,
            steps: vec![
                Send(b"POST /a3 HTTP/1.1\r\nhost: a\r\ntransfer-encoding: chunked\r\n\r\n1\r\nx\r\n"),
                Pause(30),
                Send(b"0\r\n\r\n"),
                Response,
                Send(get2),
                Response,
            ],
        },
        Scenario {
            name: "at-least reached, the rest streamed",
            frontend: fe1,
            steps: vec![
                Send(b"POST /b1 HTTP/1.1\r\nhost: a\r\ncontent-length: 1001\r\n\r\n"),
                Send(&[b'x'; 1000]),
                Pause(200),
                Send(b"y"),
                Response,
            ],
        },
        Scenario {
            name: "at-least not reached: 408",
            frontend: fe1,
            steps: vec![
                Send(b"POST /b2 HTTP/1.1\r\nhost: a\r\ncontent-length: 1001\r\n\r\n"),
                Send(&[b'x'; 999]),
                Response,
            ],
        },
        Scenario {
            name: "Expect: 100-continue is answered before the wait",
            frontend: fe1,
            steps: vec![
                Send(b"POST /a4 HTTP/1.1\r\nhost: a\r\nexpect: 100-continue\r\ncontent-length: 3\r\n\r\n"),
                Continue,
                Send(b"abc"),
                Response,
            ],
        },
        Scenario {
            name: "http-buffer-request: body incomplete within timeout http-request: 408",
            frontend: fe3,
            steps: vec![
                Send(b"POST /c1 HTTP/1.1\r\nhost: a\r\ncontent-length: 10\r\n\r\nabc"),
                Response,
            ],
        },
        Scenario {
            name: "http-buffer-request: whole body",
            frontend: fe3,
            steps: vec![
                Send(b"POST /c2 HTTP/1.1\r\nhost: a\r\ncontent-length: 3\r\n\r\na"),
                Pause(30),
                Send(b"bc"),
                Response,
            ],
        },
        Scenario {
            name: "response body incomplete when the wait ends: 504, client kept",
            frontend: fe2,
            steps: vec![
                Send(b"GET /stalled HTTP/1.1\r\nhost: a\r\n\r\n"),
                Response,
                Send(get2),
                Response,
            ],
        },
        Scenario {
            name: "response body reaching at-least within the wait",
            frontend: fe2,
            steps: vec![Send(b"GET /late HTTP/1.1\r\nhost: a\r\n\r\n"), Response],
        },
    ]
}

/// What one scenario showed.
fn run_scenario(s: &Scenario, p: &Ports, seen: &Mutex<Vec<String>>, sink: &UdpSocket) -> String {
    seen.lock().unwrap().clear();
    let mut c = Client::connect((s.frontend)(p));
    let mut got = Vec::new();
    for step in &s.steps {
        match step {
            Step::Send(b) => {
                if c.s.write_all(b).is_err() {
                    got.push("send failed".to_string());
                }
            }
            Step::Pause(ms) => thread::sleep(Duration::from_millis(*ms)),
            Step::Response | Step::Continue => match c.response(false) {
                Some(r) => got.push(format!("{} body={}", r.status, r.body.len())),
                None => got.push("no response".to_string()),
            },
        }
    }
    drop(c);
    let mut logs = Vec::new();
    let mut buf = [0u8; 4096];
    // Every scenario logs at least one line (waited for as long as a loaded machine may
    // need); then wait briefly for more.
    sink.set_read_timeout(Some(support::LOG_WAIT)).unwrap();
    while let Ok(n) = sink.recv(&mut buf) {
        logs.push(mask(&String::from_utf8_lossy(&buf[..n])));
        sink.set_read_timeout(Some(Duration::from_millis(300)))
            .unwrap();
    }
    format!(
        "{}\n  client: {}\n  backend: {:?}\n  log: {}",
        s.name,
        got.join(", "),
        seen.lock().unwrap(),
        logs.join(" | ")
    )
}

/// The fields of an httplog line that both proxies must agree on: frontend, backend/server,
/// which timers are set (-1 or N), status and termination state.
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

fn start(program: &str, cfg: &std::path::Path) -> Child {
    Command::new(program)
        .arg("-db")
        .arg("-f")
        .arg(cfg)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

fn run_through(program: &str) -> Vec<String> {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let be = backend(seen.clone());
    let sink = UdpSocket::bind("127.0.0.1:0").unwrap();
    let p = Ports {
        fe1: free_port(),
        fe2: free_port(),
        fe3: free_port(),
    };
    let dir = TempDir::new("body-wait");
    let cfg = dir.path("p.cfg");
    std::fs::write(&cfg, config(&p, be, sink.local_addr().unwrap().port())).unwrap();
    let mut child = start(program, &cfg);
    let up = eventually(Duration::from_secs(5), || {
        [p.fe1, p.fe2, p.fe3]
            .iter()
            .all(|&port| TcpStream::connect(("127.0.0.1", port)).is_ok())
    });
    // The probes' connections log nothing (`option dontlognull`).
    let out = if up {
        scenarios()
            .iter()
            .map(|s| run_scenario(s, &p, &seen, &sink))
            .collect()
    } else {
        vec![format!("{program} did not start")]
    };
    let _ = child.kill();
    let _ = child.wait();
    out
}

#[test]
fn body_waits_match_haproxy() {
    let ours = run_through(BIN);
    // Bascule's own expectations, so the test means something without haproxy too.
    let joined = ours.join("\n");
    for want in [
        "client: 408 body=110\n  backend: []\n  log: fe1 fe1/<NOSRV> -1/-1/-1/-1/N 408 cR--",
        "client: 504 body=92, 200 body=2",
        "client: 100 body=0, 200 body=2\n  backend: [\"/a4 3\"]",
        "client: 201 body=1001",
    ] {
        assert!(joined.contains(want), "missing {want:?} in:\n{joined}");
    }
    if !have_haproxy("the body-wait side-by-side test") {
        return;
    }
    let reference = run_through(HAPROXY);
    let diff: Vec<String> = reference
        .iter()
        .zip(&ours)
        .filter(|(h, b)| h != b)
        .map(|(h, b)| format!("haproxy:\n{h}\nbascule:\n{b}\n"))
        .collect();
    assert!(diff.is_empty(), "{}", diff.join("\n"));
}
