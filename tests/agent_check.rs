//! Agent checks (`agent-check`, `agent-port`, `agent-send`, `agent-inter`), side by side with
//! Debian's haproxy: an agent the test runs answers each check with a line that sets the
//! server's weight, `maxconn`, administrative and operational state; what `show servers
//! state` and `show stat` then say about the server, and the state-change log lines, must be
//! the same through both. The agent's answer changes during the test (down and in
//! maintenance, then back).
#![allow(clippy::disallowed_methods)]

mod support;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use support::side::{both, Run};

/// An agent that checks it was sent `hello\n`, then answers `*line` and closes.
fn agent(line: Arc<Mutex<String>>) -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    thread::spawn(move || {
        for mut c in l.incoming().flatten() {
            let _ = c.set_read_timeout(Some(Duration::from_secs(2)));
            let mut got = [0u8; 6];
            if c.read_exact(&mut got).is_ok() && &got == b"hello\n" {
                let reply = line.lock().unwrap().clone();
                let _ = c.write_all(reply.as_bytes());
            }
        }
    });
    port
}

/// `show servers state` columns srv_op_state, srv_admin_state, srv_uweight, srv_iweight and
/// `show stat` columns slim and status of server `srv`. (`show stat`'s weight is left out:
/// haproxy shows the effective weight of before the maintenance while in it.)
fn server_view(run: &Run) -> String {
    let state = run.cli("show servers state be");
    let row = state
        .lines()
        .find(|l| l.split(' ').nth(3) == Some("srv"))
        .unwrap_or_default()
        .split(' ')
        .collect::<Vec<_>>();
    let stat = run.cli("show stat");
    let cols: Vec<&str> = stat
        .lines()
        .next()
        .unwrap_or_default()
        .trim_start_matches("# ")
        .split(',')
        .collect();
    let srow: Vec<&str> = stat
        .lines()
        .find(|l| l.starts_with("be,srv,"))
        .unwrap_or_default()
        .split(',')
        .collect();
    let col = |name: &str| {
        cols.iter()
            .position(|c| *c == name)
            .and_then(|i| srow.get(i).copied())
            .unwrap_or("?")
    };
    format!(
        "op={} admin={} uweight={} iweight={} slim={} status={}",
        row.get(5).unwrap_or(&"?"),
        row.get(6).unwrap_or(&"?"),
        row.get(7).unwrap_or(&"?"),
        row.get(8).unwrap_or(&"?"),
        col("slim"),
        col("status"),
    )
}

/// A log line with its check duration (which varies) masked.
fn mask_duration(l: &str) -> String {
    match l.find("check duration: ") {
        Some(i) => {
            let rest = &l[i..];
            let end = rest.find("ms").map_or(rest.len(), |e| e + 2);
            format!("{}check duration: Nms{}", &l[..i], &rest[end..])
        }
        None => l.to_string(),
    }
}

/// Waits (up to 10 s) until the server looks like `want` says, then returns what it looks like.
fn settle(run: &Run, want: &str) -> String {
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        let seen = server_view(run);
        if seen.contains(want) || Instant::now() > until {
            return seen;
        }
        thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn agent_answers_drive_the_server_like_haproxy() {
    let line = Arc::new(Mutex::new(String::from("up 100%\n")));
    let port = agent(line.clone());
    let cfg = format!(
        "global\n    stats socket @SOCK@ level admin\n\
         defaults\n    mode tcp\n    timeout client 5s\n    timeout server 5s\n    timeout connect 2s\n\
         frontend fe\n    bind 127.0.0.1:@P2@\n    default_backend be\n\
         backend be\n    log 127.0.0.1:@LOG@ format raw local0\n\
         \x20   server srv 127.0.0.1:{port} weight 40 agent-check agent-port {port} agent-send \"hello\\n\" agent-inter 50ms\n"
    );
    both("agent-check", &cfg, |_, _, _, run: &mut Run| {
        let mut seen = Vec::new();
        *line.lock().unwrap() = "up 100%\n".into();
        seen.push(settle(run, "op=2 admin=0 uweight=40"));
        *line.lock().unwrap() = "75%,maxconn:30,maint,down # going away\n".into();
        seen.push(settle(run, "op=0 admin=1 uweight=30"));
        *line.lock().unwrap() = "ready up 50%\n".into();
        seen.push(settle(run, "op=2 admin=0 uweight=20"));
        // Down without maintenance, then up again: both are state changes, logged.
        *line.lock().unwrap() = "down # disk full\n".into();
        seen.push(settle(run, "op=0 admin=0"));
        *line.lock().unwrap() = "up\n".into();
        seen.push(settle(run, "op=2 admin=0"));
        // Check durations vary.
        // The six lines of the state changes above (haproxy's count), waited for.
        let lines = run.lines_n(6);
        seen.extend(lines.iter().map(|l| mask_duration(l)));
        let joined = seen.join("\n");
        for want in [
            "op=2 admin=0 uweight=40 iweight=40 slim= status=no check",
            "op=0 admin=1 uweight=30 iweight=40 slim=30 status=MAINT",
            "op=2 admin=0 uweight=20 iweight=40 slim=30",
            "op=0 admin=0 uweight=20 iweight=40 slim=30 status=DOWN (agent)",
            "Server be/srv is DOWN, reason: Layer7 wrong status, code: 0, info: \"via agent : down (disk full)\"",
        ] {
            assert!(joined.contains(want), "missing {want:?} in:\n{joined}");
        }
        seen
    });
}

/// With `option log-health-checks`, each change of the agent's status is logged as HAProxy
/// logs it ("Agent check for server be/srv succeeded|failed, reason: ..., status: 1/1 UP"),
/// before the server's own state-change line; an answer that repeats the status logs nothing.
#[test]
fn agent_status_changes_are_logged_like_haproxy() {
    let line = Arc::new(Mutex::new(String::from("up\n")));
    let port = agent(line.clone());
    let cfg = format!(
        "global\n    stats socket @SOCK@ level admin\n\
         defaults\n    mode tcp\n    timeout client 5s\n    timeout server 5s\n    timeout connect 2s\n\
         frontend fe\n    bind 127.0.0.1:@P2@\n    default_backend be\n\
         backend be\n    option log-health-checks\n    log 127.0.0.1:@LOG@ format raw local0\n\
         \x20   server srv 127.0.0.1:{port} agent-check agent-port {port} agent-send \"hello\\n\" agent-inter 50ms\n"
    );
    both("agent-check-log", &cfg, |_, _, _, run: &mut Run| {
        *line.lock().unwrap() = "up\n".into();
        let mut seen = vec![settle(run, "op=2 admin=0")];
        // The first answer's line.
        seen.extend(run.lines_n(1));
        *line.lock().unwrap() = "down # disk full\n".into();
        seen.push(settle(run, "op=0 admin=0"));
        *line.lock().unwrap() = "up\n".into();
        seen.push(settle(run, "op=2 admin=0"));
        // Agent failed, server DOWN, backend empty; agent succeeded, server UP.
        seen.extend(run.lines_n(5));
        for want in [
            "Agent check for server be/srv succeeded, reason: Layer7 check passed, code: 0, info: \"via agent : up\"",
            "Agent check for server be/srv failed, reason: Layer7 wrong status, code: 0, info: \"via agent : down (disk full)\"",
        ] {
            assert!(
                seen.iter().filter(|l| l.starts_with(want)).count() >= 1,
                "missing {want:?} in {seen:#?}"
            );
        }
        seen.iter().map(|l| mask_duration(l)).collect()
    });
}
