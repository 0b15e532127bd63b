//! `server ... track` and `srv_sess_rate`, side by side with haproxy: a tracking server has no
//! check of its own and goes DOWN and back UP with the server it tracks (state, `show stat`
//! columns, the state-change log lines "... is DOWN via BE/SRV"); a server's session rate is
//! what `srv_sess_rate(BE/SRV)` and the `rate` column of `show stat` read.
#![allow(clippy::disallowed_methods)]

mod support;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use support::eventually;
use support::http::Client;
use support::side::{both, Run};

/// An HTTP server on `port` that answers every request with a 200 and closes, until dropped;
/// then the port refuses connections.
struct Server {
    port: u16,
    stop: Arc<AtomicBool>,
    thread: Option<thread::JoinHandle<()>>,
}

impl Server {
    fn start(port: u16) -> Server {
        let l = TcpListener::bind(("127.0.0.1", port)).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let thread = thread::spawn(move || {
            for c in l.incoming() {
                if flag.load(Ordering::Relaxed) {
                    return;
                }
                let Ok(mut c) = c else { continue };
                thread::spawn(move || {
                    let _ = c.set_read_timeout(Some(Duration::from_secs(2)));
                    let mut buf = Vec::new();
                    let mut chunk = [0u8; 1024];
                    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                        match c.read(&mut chunk) {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    }
                    let _ = c.write_all(
                        b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok",
                    );
                });
            }
        });
        Server {
            port,
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // Wake the accept loop so that it returns and the listener closes.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// `show stat` rows of backend `be` with the named columns, comma-separated.
fn stat(run: &Run, be: &str, cols: &[&str]) -> Vec<String> {
    let out = run.cli("show stat");
    let mut lines = out.lines();
    let header: Vec<&str> = lines
        .next()
        .unwrap_or_default()
        .trim_start_matches("# ")
        .split(',')
        .collect();
    let idx: Vec<usize> = cols
        .iter()
        .map(|c| header.iter().position(|h| h == c).unwrap())
        .collect();
    // The backend's own row is left out: its `chkdown` is not kept by Bascule yet.
    lines
        .filter(|l| l.starts_with(&format!("{be},")) && !l.contains(",BACKEND,"))
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            idx.iter().map(|&i| f[i]).collect::<Vec<_>>().join(",")
        })
        .collect()
}

/// The `status` column of server `srv` of `be`.
fn status_of(run: &Run, be: &str, srv: &str) -> String {
    stat(run, be, &["svname", "status"])
        .into_iter()
        .find_map(|r| r.strip_prefix(&format!("{srv},")).map(str::to_string))
        .unwrap_or_default()
}

/// Waits until server `srv` of `be` shows `want` in `show stat`.
fn wait_status(run: &Run, be: &str, srv: &str, want: &str) {
    assert!(
        eventually(Duration::from_secs(10), || status_of(run, be, srv) == want),
        "{be}/{srv} never showed {want}: {}",
        status_of(run, be, srv)
    );
}

/// Waits until no server of `be` has a connection open (the last request's may take a moment
/// to be seen closed), so that the state-change lines count no session.
fn wait_idle(run: &Run, be: &str) {
    assert!(
        eventually(Duration::from_secs(5), || stat(run, be, &["scur"])
            .iter()
            .all(|c| c == "0")),
        "{be} kept connections open"
    );
}

/// A log line with its check duration masked.
fn masked(line: &str) -> String {
    match line.find("check duration: ") {
        Some(i) => {
            let rest = &line[i + 16..];
            let end = rest.find("ms").unwrap_or(0);
            format!("{}check duration: Nms{}", &line[..i], &rest[end + 2..])
        }
        None => line.to_string(),
    }
}

const TRACK: &str = "global\n    stats socket @SOCK@ level admin\n\
    defaults\n    mode http\n    timeout connect 1s\n    timeout client 5s\n    timeout server 5s\n\
    frontend fe\n    bind 127.0.0.1:@P2@\n    default_backend app\n\
    backend app\n    log 127.0.0.1:@LOG@ format raw local0\n    balance roundrobin\n\
    \x20   server s2 127.0.0.1:@P1@ check inter 100ms rise 1 fall 1\n\
    \x20   server s3 127.0.0.1:@P1@ track s2\n\
    \x20   server s4 127.0.0.1:@P1@ track app/s3\n";

#[test]
fn tracking_servers_follow_the_tracked_servers_checks() {
    let cols = [
        "svname",
        "status",
        "chkfail",
        "chkdown",
        "check_status",
        "check_rise",
        "check_fall",
        "tracked",
    ];
    both(
        "tracking_servers_follow_the_tracked_servers_checks",
        TRACK,
        |_, p1, p2, run| {
            let server = Server::start(p1);
            let mut out = Vec::new();
            wait_status(run, "app", "s2", "UP");
            out.extend(stat(run, "app", &cols));
            out.push(Client::connect(p2).get("/").status.to_string());
            // The checked server's port refuses: it goes DOWN, and its trackers with it.
            wait_idle(run, "app");
            drop(server);
            wait_status(run, "app", "s4", "DOWN");
            out.extend(stat(run, "app", &cols));
            out.push(Client::connect(p2).get("/").status.to_string());
            // Back: all UP again.
            let _server = Server::start(p1);
            wait_status(run, "app", "s4", "UP");
            out.extend(stat(run, "app", &cols));
            out.push(Client::connect(p2).get("/").status.to_string());
            // Maintenance of the tracked server is inherited down the chain.
            wait_idle(run, "app");
            out.push(run.cli("disable server app/s2"));
            out.extend(stat(run, "app", &cols));
            out.push(run.cli("enable server app/s2"));
            wait_status(run, "app", "s4", "UP");
            // A tracked server may not be removed.
            out.push(run.cli("disable server app/s3"));
            out.push(run.cli("del server app/s3"));
            thread::sleep(Duration::from_millis(300));
            out.extend(
                run.lines()
                    .iter()
                    .filter(|l| l.contains("app/") || l.contains("backend app"))
                    .map(|l| masked(l)),
            );
            out
        },
    );
}

const RATE: &str = "global\n    stats socket @SOCK@ level admin\n\
    defaults\n    mode http\n    timeout connect 1s\n    timeout client 5s\n    timeout server 5s\n\
    frontend fe\n    bind 127.0.0.1:@P2@\n\
    \x20   acl busy srv_sess_rate(app/s1) gt 2\n\
    \x20   http-request return status 200 content-type text/plain lf-string \"rate=%[srv_sess_rate(app/s1)] idle=%[srv_sess_rate(app/s2)] be=%[be_sess_rate(app)]\" if { path /rate }\n\
    \x20   http-request return status 200 content-type text/plain string busy if { path /busy } busy\n\
    \x20   default_backend app\n\
    backend app\n    http-reuse never\n    use-server s1 if TRUE\n\
    \x20   server s1 127.0.0.1:@P1@\n    server s2 127.0.0.1:@P1@\n";

#[test]
fn srv_sess_rate_counts_the_sessions_of_the_last_second() {
    let test = "srv_sess_rate_counts_the_sessions_of_the_last_second";
    if !support::have_haproxy(test) {
        return;
    }
    // Side by side as `both` runs them, with one allowance: the rates are of the last second,
    // so a run that a loaded machine made last longer than that cannot show the same figures;
    // then only the rest is compared.
    let mut results = Vec::new();
    let mut slow = false;
    for bin in [support::HAPROXY, support::BIN] {
        let (p1, p2) = (support::free_port(), support::free_port());
        let cfg = RATE
            .replace("@P1@", &p1.to_string())
            .replace("@P2@", &p2.to_string());
        let run = Run::start(bin, &cfg, p2);
        let _server = Server::start(p1);
        let mut out = Vec::new();
        let rate = |out: &mut Vec<String>| {
            let r = Client::connect(p2).get("/rate");
            out.push(String::from_utf8_lossy(&r.body).into_owned());
        };
        rate(&mut out);
        let t0 = std::time::Instant::now();
        // One session per request: the server closes each connection.
        for _ in 0..3 {
            out.push(Client::connect(p2).get("/").status.to_string());
        }
        rate(&mut out);
        // Over 2 per second now: the ACL matches.
        let r = Client::connect(p2).get("/busy");
        out.push(String::from_utf8_lossy(&r.body).into_owned());
        out.extend(
            stat(&run, "app", &["svname", "stot", "rate", "rate_max"])
                .into_iter()
                .map(|l| format!("svname,stot,rate,rate_max: {l}")),
        );
        // The backend's own rate (its row, which `stat` leaves out).
        let all = run.cli("show stat");
        slow |= t0.elapsed() > Duration::from_millis(800);
        let header: Vec<&str> = all.lines().next().unwrap_or_default()[2..]
            .split(',')
            .collect();
        let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
        out.extend(
            all.lines()
                .filter(|l| l.starts_with("app,BACKEND,"))
                .map(|l| {
                    let f: Vec<&str> = l.split(',').collect();
                    format!("rate={} rate_max={}", f[col("rate")], f[col("rate_max")])
                }),
        );
        // A server an ACL points to may not be removed.
        out.push(run.cli("disable server app/s1"));
        out.push(run.cli("del server app/s1"));
        results.push(out);
    }
    if slow {
        // The rates (and what depends on them: `busy`) are not compared.
        for out in &mut results {
            for l in out.iter_mut() {
                if l.contains("rate") || l == "busy" {
                    *l = "(a rate: this run was too slow to compare it)".into();
                }
            }
        }
    }
    assert_eq!(
        results[0], results[1],
        "{test}: haproxy (left) and Bascule (right) differ"
    );
}

const CHAIN: &str = "global\n    stats socket @SOCK@ level admin\n\
    defaults\n    mode http\n    timeout connect 1s\n    timeout client 5s\n    timeout server 5s\n\
    frontend fe\n    bind 127.0.0.1:@P2@\n    default_backend be1\n\
    backend be1\n    log 127.0.0.1:@LOG@ format raw local0\n\
    \x20   server srv 127.0.0.1:@P1@ check inter 100ms\n\
    \x20   server t1 127.0.0.1:@P1@ track srv\n\
    \x20   server t2 127.0.0.1:@P1@ track be2/x\n\
    backend be2\n    log 127.0.0.1:@LOG@ format raw local0\n\
    \x20   server x 127.0.0.1:@P1@ track be1/t1\n\
    \x20   server d 127.0.0.1:@P1@ disabled check inter 1h\n\
    \x20   server e 127.0.0.1:@P1@ track d\n";

#[test]
fn drain_stopping_and_maintenance_go_down_a_chain_across_backends() {
    let commands = [
        "set server be1/srv state drain",
        "set server be1/srv state ready",
        "set server be1/srv health stopping",
        "set server be1/srv health up",
        "disable server be1/t1",
        "set server be1/srv state drain",
        "set server be1/srv state maint",
        "enable server be1/t1",
        "set server be1/srv state ready",
        "set server be1/srv health down",
        "set server be1/srv health up",
        // A tracking server's health is its tracked server's.
        "set server be1/t1 health down",
        "enable server be2/d",
    ];
    both(
        "drain_stopping_and_maintenance_go_down_a_chain_across_backends",
        CHAIN,
        |_, p1, _, run| {
            let _server = Server::start(p1);
            // A server declared `disabled` puts its trackers in maintenance from the start.
            let mut out = stat(run, "be2", &["svname", "status"]);
            // The first check may have run before the server listened: start from UP.
            wait_status(run, "be1", "srv", "UP");
            run.lines();
            for c in commands {
                out.push(run.cli(c));
                // The health progress ("UP 1/3") depends on when the next check runs.
                out.extend(
                    stat(run, "be1", &["svname", "status", "weight"])
                        .iter()
                        .map(|r| {
                            let f: Vec<&str> = r.split(',').collect();
                            let status = match f[1].split_once(' ') {
                                Some((word, n)) if n.contains('/') && !n.starts_with('(') => word,
                                _ => f[1],
                            };
                            format!("{},{status},{}", f[0], f[2])
                        }),
                );
            }
            thread::sleep(Duration::from_millis(300));
            out.extend(run.lines());
            out
        },
    );
}
