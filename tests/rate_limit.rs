//! Accept pacing (`rate-limit sessions`, global `maxconnrate` and `maxsessrate`): a burst of 40
//! connections at 20 per second is served, none refused, over about two seconds (20 at once,
//! then one every 50 ms as the first second fades), by Bascule and, when installed, by
//! haproxy 2.6 under the same configuration. The bounds are loose (the machine is shared) but
//! no limit at all, or a limit that refuses, fails them.
#![allow(clippy::disallowed_methods)]

mod support;

use std::io::Read;
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use support::{free_port, Backend, TempDir, BIN, HAPROXY};

/// Opens `n` connections at once; returns, per connection, when its banner arrived (`None`:
/// refused or reset).
fn burst(port: u16, n: usize) -> Vec<Option<Duration>> {
    let t0 = Instant::now();
    let handles: Vec<_> = (0..n)
        .map(|_| {
            thread::spawn(move || {
                let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
                s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
                let mut got = Vec::new();
                s.read_to_end(&mut got).ok()?;
                (got == b"paced").then(|| t0.elapsed())
            })
        })
        .collect();
    handles.into_iter().map(|h| h.join().unwrap()).collect()
}

/// Runs `bin` on `cfg` (listening on `port`), sends the burst, and checks its pacing.
fn paced(bin: &str, cfg: &str, port: u16) {
    let dir = TempDir::new("rate");
    let path = dir.path("rate.cfg");
    std::fs::write(&path, cfg).unwrap();
    let mut child = Command::new(bin)
        .args(["-d", "-f", path.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let up = support::eventually(Duration::from_secs(5), || {
        TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    assert!(up, "{bin} did not start");
    // The probe counted in the current second; two seconds later the rate has forgotten it.
    thread::sleep(Duration::from_millis(2100));
    let done = burst(port, 40);
    // `show info` reports the limit, as HAProxy does (when the config has a stats socket).
    let info = cfg.split("stats socket ").nth(1).map(|rest| {
        let sock = rest.split_whitespace().next().unwrap_or("");
        let mut s = std::os::unix::net::UnixStream::connect(sock).unwrap();
        std::io::Write::write_all(&mut s, b"show info\n").unwrap();
        let mut out = String::new();
        let _ = s.read_to_string(&mut out);
        out
    });
    let _ = child.kill();
    let _ = child.wait();
    if let Some(info) = info {
        assert!(info.contains("ConnRateLimit: 20\n"), "{bin}: {info}");
    }
    let refused = done.iter().filter(|d| d.is_none()).count();
    assert_eq!(
        refused, 0,
        "{bin}: {refused} of 40 connections failed: {done:?}"
    );
    let times: Vec<Duration> = done.into_iter().flatten().collect();
    let early = times
        .iter()
        .filter(|t| **t < Duration::from_millis(500))
        .count();
    let last = times.iter().max().copied().unwrap_or_default();
    assert!(
        (15..=25).contains(&early),
        "{bin}: {early} connections served in the first 0.5 s (expected about 20): {times:?}"
    );
    assert!(
        last >= Duration::from_millis(1500) && last <= Duration::from_secs(4),
        "{bin}: the 40th connection served after {last:?} (expected about 2 s): {times:?}"
    );
}

fn config(global: &str, listen: &str, port: u16, backend: u16) -> String {
    format!(
        "global\n    nbthread 1\n{global}{}listen paced\n    bind 127.0.0.1:{port}\n{listen}    server s1 127.0.0.1:{backend}\n",
        support::tcp_defaults()
    )
}

fn both(global: &str, listen: &str) {
    let b = Backend::banner("paced");
    let port = free_port();
    let cfg = config(global, listen, port, b.port);
    paced(BIN, &cfg, port);
    if support::have_haproxy("the pacing reference run") {
        paced(HAPROXY, &cfg, port);
    }
}

#[test]
fn rate_limit_sessions_paces_accepts() {
    both("", "    rate-limit sessions 20\n");
}

#[test]
fn maxconnrate_paces_accepts() {
    let dir = TempDir::new("rate-sock");
    let sock = dir.path("admin.sock");
    both(
        &format!(
            "    maxconnrate 20\n    stats socket {} level admin\n",
            sock.display()
        ),
        "",
    );
}

#[test]
fn maxsessrate_paces_accepts() {
    both("    maxsessrate 20\n", "");
}
