//! End-to-end TCP mode: the real binary between real clients and backends on 127.0.0.1.
//!
//! Each test reads like a HAProxy reg-test: start backends, write a configuration, run bascule,
//! send traffic, assert what the backends and clients saw.
// Test code blocks and locks freely: it is not a worker event loop.
#![allow(clippy::disallowed_methods)]

mod support;

use std::io::{Read, Write};
use std::net::Shutdown;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use support::*;

fn two_server_cfg(port: u16, balance: &str, a: (u16, u32), b: (u16, u32), extra: &str) -> String {
    format!(
        "global\n    nbthread 2\n{}{extra}\nfrontend fe\n    bind 127.0.0.1:{port}\n    default_backend be\n\
         backend be\n    balance {balance}\n    server a 127.0.0.1:{} weight {}\n    server b 127.0.0.1:{} weight {}\n",
        tcp_defaults(),
        a.0,
        a.1,
        b.0,
        b.1
    )
}

/// The last `n` lines of `text`, to keep failure messages readable.
fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

fn banner_through(port: u16) -> String {
    let mut c = connect(port);
    String::from_utf8_lossy(&read_all(&mut c)).into_owned()
}

fn check_weights(balance: &str) {
    let a = Backend::start(Behaviour::Banner("a".into()));
    let b = Backend::start(Behaviour::Banner("b".into()));
    let port = free_port();
    let _p = Proxy::start(
        &two_server_cfg(port, balance, (a.port, 3), (b.port, 1), ""),
        port,
        &[],
    );
    // The readiness probe went to one of them; count from here.
    let (a0, b0) = (a.count(), b.count());
    for _ in 0..400 {
        let got = banner_through(port);
        assert!(got == "a" || got == "b", "unexpected reply {got:?}");
    }
    let (ca, cb) = (a.count() - a0, b.count() - b0);
    assert!(
        (294..=306).contains(&ca) && (94..=106).contains(&cb),
        "{balance}: expected ~300/100 connections, got a={ca} b={cb}"
    );
}

#[test]
fn weighted_roundrobin_3_to_1() {
    check_weights("roundrobin");
}

#[test]
fn static_rr_honours_weights() {
    check_weights("static-rr");
}

/// One way of configuring retries for `stopped_server_gets_nothing_and_clients_still_succeed`.
struct RetryCase {
    name: &'static str,
    /// Lines added to the `defaults` section.
    defaults: &'static str,
}

/// HAProxy redispatches at once, without the turn-around pause, when the balancing is round
/// robin and another server is active (`sess_update_st_cer()` in `src/stream.c`: "we accept to
/// perform an immediate redispatch without waiting since we don't care about this particular
/// server"), whatever the redispatch interval. So with a live peer, no client waits out a
/// `timeout connect` turn-around.
const RETRY_CASES: &[RetryCase] = &[
    RetryCase {
        name: "redispatch on every retry",
        defaults: "    retries 2\n    option redispatch 1\n",
    },
    RetryCase {
        name: "plain option redispatch, retries 3, timeout connect 500ms",
        defaults: "    retries 3\n    option redispatch\n    timeout connect 500ms\n",
    },
];

#[test]
fn stopped_server_gets_nothing_and_clients_still_succeed() {
    let mut failures = Vec::new();
    for case in RETRY_CASES {
        let a = Backend::banner("a");
        let mut b = Backend::banner("b");
        let port = free_port();
        // The later `timeout connect` (if any) overrides the one of tcp_defaults().
        let cfg = two_server_cfg(port, "roundrobin", (a.port, 1), (b.port, 1), case.defaults);
        let p = Proxy::start(&cfg, port, &["-d"]);
        b.stop();
        let (a0, b0) = (a.count(), b.count());
        let mut slow = Vec::new();
        for i in 0..20 {
            let started = Instant::now();
            let got = banner_through(port);
            let took = started.elapsed();
            if got != "a" {
                failures.push(format!(
                    "{}: connection {i}: expected banner \"a\", got {got:?}",
                    case.name
                ));
            }
            // A turn-around pause lasts at least the 500 ms `timeout connect` of the second
            // case (1 s in the first): anything shorter is a loaded machine, not a pause.
            if took >= Duration::from_millis(490) {
                slow.push(format!("connection {i} took {took:?}"));
            }
        }
        if !slow.is_empty() {
            failures.push(format!(
                "{}: expected no turn-around pause with a live server to redispatch to, got:\n  {}",
                case.name,
                slow.join("\n  ")
            ));
        }
        if b.count() != b0 {
            failures.push(format!(
                "{}: the stopped server was reached: expected {b0} connections, got {}",
                case.name,
                b.count()
            ));
        }
        if a.count() - a0 != 20 {
            failures.push(format!(
                "{}: expected 20 connections at a, got {}",
                case.name,
                a.count() - a0
            ));
        }
        // The failures were retried, not hidden: the trace shows a redispatch on the 1st retry.
        if !p.stderr().contains("-> be/a connected (retries 1)") {
            failures.push(format!(
                "{}: expected a trace line '-> be/a connected (retries 1)', got (stderr tail):\n{}",
                case.name,
                tail(&p.stderr(), 12)
            ));
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

#[test]
fn retry_on_same_server_without_redispatch_then_gives_up() {
    let mut a = Backend::start(Behaviour::Banner("a".into()));
    a.stop();
    let port = free_port();
    let cfg = format!(
        "{}    retries 2\n    timeout connect 100ms\nfrontend fe\n    bind 127.0.0.1:{port}\n    default_backend be\n\
         backend be\n    server a 127.0.0.1:{}\n",
        tcp_defaults(),
        a.port
    );
    let p = Proxy::start(&cfg, port, &["-d"]);
    let started = Instant::now();
    let mut c = connect(port);
    assert!(read_all(&mut c).is_empty(), "expected a close");
    // Two turn-around pauses of min(1s, timeout connect) = 100 ms each.
    assert!(
        started.elapsed() >= Duration::from_millis(200),
        "{:?}",
        started.elapsed()
    );
    assert!(
        eventually(Duration::from_secs(2), || p
            .stderr()
            .contains("failed after 3 attempt(s)")),
        "{}",
        p.stderr()
    );
}

#[test]
fn half_close_client_still_receives_whole_reply() {
    let be = Backend::start(Behaviour::ReplyAfterEof(1 << 20));
    let port = free_port();
    let cfg = format!(
        "{}frontend fe\n    bind 127.0.0.1:{port}\n    default_backend be\nbackend be\n    server s 127.0.0.1:{}\n",
        tcp_defaults(),
        be.port
    );
    let _p = Proxy::start(&cfg, port, &[]);
    let mut c = connect(port);
    c.write_all(b"request bytes").unwrap();
    c.shutdown(Shutdown::Write).unwrap();
    let reply = read_all(&mut c);
    assert_eq!(reply.len(), 1 << 20);
    // (The readiness probe of Proxy::start sent an empty request first.)
    let received = be.received.lock().unwrap().clone();
    assert!(
        received.iter().any(|r| r == b"request bytes"),
        "{received:?}"
    );
}

#[test]
fn server_half_close_propagates() {
    let be = Backend::start(Behaviour::HalfCloseThenRead);
    let port = free_port();
    let cfg = format!(
        "{}frontend fe\n    bind 127.0.0.1:{port}\n    default_backend be\nbackend be\n    server s 127.0.0.1:{}\n",
        tcp_defaults(),
        be.port
    );
    let _p = Proxy::start(&cfg, port, &[]);
    let mut c = connect(port);
    let mut got = Vec::new();
    c.read_to_end(&mut got).unwrap();
    assert_eq!(got, b"hello");
    // The server's half-close reached us; our direction still flows.
    c.write_all(b"after eof").unwrap();
    c.shutdown(Shutdown::Write).unwrap();
    assert!(
        eventually(Duration::from_secs(3), || be
            .received
            .lock()
            .unwrap()
            .iter()
            .any(|r| r == b"after eof")),
        "{:?}",
        be.received.lock().unwrap()
    );
}

#[test]
fn client_timeout_closes_idle_connection() {
    let be = Backend::start(Behaviour::Echo);
    let port = free_port();
    let cfg = format!(
        "defaults\n    mode tcp\n    timeout connect 1s\n    timeout client 300ms\n    timeout server 10s\n\
         frontend fe\n    bind 127.0.0.1:{port}\n    default_backend be\nbackend be\n    server s 127.0.0.1:{}\n",
        be.port
    );
    let _p = Proxy::start(&cfg, port, &[]);
    let mut c = connect(port);
    c.write_all(b"ping").unwrap();
    let mut buf = [0u8; 4];
    c.read_exact(&mut buf).unwrap();
    let started = Instant::now();
    let mut rest = Vec::new();
    let _ = c.read_to_end(&mut rest);
    let idle = started.elapsed();
    assert!(
        idle >= Duration::from_millis(250) && idle < Duration::from_secs(3),
        "closed after {idle:?}"
    );
}

#[test]
fn client_timeout_closes_connection_where_client_never_sends() {
    let be = Backend::echo();
    let port = free_port();
    let cfg = format!(
        "defaults\n    mode tcp\n    timeout connect 1s\n    timeout client 300ms\n    timeout server 10s\n\
         frontend fe\n    bind 127.0.0.1:{port}\n    default_backend be\nbackend be\n    server s 127.0.0.1:{}\n",
        be.port
    );
    let p = Proxy::start(&cfg, port, &[]);
    assert!(
        eventually(Duration::from_secs(2), || be.open_now() == 0),
        "the readiness probe's server connection is still open"
    );
    let mut c = connect(port);
    let started = Instant::now();
    // Neither side says anything: the client side's idle timeout must end the session.
    let got = read_all(&mut c);
    let idle = started.elapsed();
    assert!(got.is_empty(), "expected no bytes, got {got:?}");
    assert!(
        idle >= Duration::from_millis(250) && idle < Duration::from_secs(2),
        "expected the proxy to close the idle client after ~300ms, closed after {idle:?}\n{}",
        p.stderr()
    );
    // The server side of the session is closed too, not left behind.
    assert!(
        eventually(Duration::from_secs(1), || be.open_now() == 0),
        "expected the server connection closed with the session, {} still open",
        be.open_now()
    );
}

#[test]
fn maxconn_holds_extra_connections_in_backlog() {
    let be = Backend::hold();
    let port = free_port();
    let cfg = format!(
        "global\n    nbthread 2\n{}frontend fe\n    bind 127.0.0.1:{port}\n    maxconn 2\n    default_backend be\n\
         backend be\n    server s 127.0.0.1:{}\n",
        tcp_defaults(),
        be.port
    );
    let p = Proxy::start(&cfg, port, &["-d"]);
    // The readiness probe of Proxy::start used one connection; let it go.
    assert!(eventually(Duration::from_secs(2), || be.open_now() == 0));
    let base = be.count();
    // Each client waits for its reply on its own thread (reads time out after IO_TIMEOUT).
    let readers: Vec<_> = (0..3)
        .map(|_| {
            let mut c = p.connect();
            std::thread::spawn(move || read_all(&mut c))
        })
        .collect();
    assert!(
        eventually(Duration::from_secs(2), || be.count() == base + 2),
        "expected 2 connections at the backend, got {}",
        be.count() - base
    );
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        be.count() - base,
        2,
        "expected maxconn 2 to hold the third connection back"
    );
    // One session ends: its slot goes to the third client, which reaches the backend while the
    // other held one is still open.
    be.release_one();
    assert!(
        eventually(Duration::from_secs(2), || be.count() == base + 3),
        "expected the third connection at the backend once a slot freed, got {} connections\n{}",
        be.count() - base,
        p.stderr()
    );
    assert!(
        eventually(Duration::from_secs(1), || be.open_now() == 2),
        "expected 2 connections open at the backend, got {}",
        be.open_now()
    );
    // None was dropped: every client gets its reply.
    be.release_all();
    for (i, r) in readers.into_iter().enumerate() {
        let got = r.join().unwrap();
        assert_eq!(
            String::from_utf8_lossy(&got),
            "released",
            "client {i}\n{}",
            p.stderr()
        );
    }
    assert_eq!(be.count() - base, 3);
}

#[test]
fn no_fd_leak_after_many_connections() {
    let a = Backend::echo();
    let mut dead = Backend::echo();
    dead.stop();
    let (port, dead_port) = (free_port(), free_port());
    // `fe` reaches `a`, sometimes after a refused attempt on `dead` (the retry path); `fe_dead`
    // reaches only `dead`, with no retry (the path where the session fails and the client is
    // closed without a server).
    let cfg = format!(
        "global\n    nbthread 2\n{}    retries 1\n    option redispatch 1\n\
         frontend fe\n    bind 127.0.0.1:{port}\n    default_backend be\n\
         frontend fe_dead\n    bind 127.0.0.1:{dead_port}\n    default_backend be_dead\n\
         backend be\n    server a 127.0.0.1:{}\n    server dead 127.0.0.1:{}\n\
         backend be_dead\n    retries 0\n    server dead 127.0.0.1:{}\n",
        tcp_defaults(),
        a.port,
        dead.port,
        dead.port
    );
    let p = Proxy::start(&cfg, port, &["-d"]);
    std::thread::sleep(Duration::from_millis(200));
    let before = fd_count(p.pid());
    assert!(before > 0, "cannot read /proc/{}/fd", p.pid());
    for i in 0..200 {
        if i % 4 == 3 {
            // No server at all: the proxy closes the client without a byte.
            let mut c = connect(dead_port);
            c.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
            c.write_all(b"x").unwrap();
            let mut got = Vec::new();
            match c.read_to_end(&mut got) {
                Ok(_) => assert!(got.is_empty(), "connection {i} to fe_dead: got {got:?}"),
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
                Err(e) => panic!(
                    "connection {i} to fe_dead: expected the proxy to close it, got {e} after 2 s"
                ),
            }
            continue;
        }
        let mut c = p.connect();
        c.write_all(b"x").unwrap();
        let mut b = [0u8; 1];
        c.read_exact(&mut b)
            .unwrap_or_else(|e| panic!("connection {i}: {e}"));
        if i % 3 == 0 {
            // Some clients vanish without a clean close.
            drop(c);
        } else {
            c.shutdown(Shutdown::Write).unwrap();
            let _ = read_all(&mut c);
        }
    }
    // Both error paths really ran.
    let stderr = p.stderr();
    assert!(
        stderr.contains("-> be/a connected (retries 1)"),
        "expected a retry from dead to a in the trace, got (tail):\n{}",
        tail(&stderr, 12)
    );
    assert!(
        stderr.contains("connection to server 'dead' failed after 1 attempt(s)"),
        "expected failed sessions on fe_dead in the trace, got (tail):\n{}",
        tail(&stderr, 12)
    );
    assert!(
        eventually(Duration::from_secs(3), || fd_count(p.pid()) == before),
        "expected {before} descriptors after 200 connections, got {}",
        fd_count(p.pid())
    );
}

#[test]
fn send_proxy_writes_proxy_v1_header() {
    let be = Backend::start(Behaviour::RecordFirstLine);
    let port = free_port();
    let cfg = format!(
        "{}frontend fe\n    bind 127.0.0.1:{port}\n    default_backend be\nbackend be\n    server s 127.0.0.1:{} send-proxy\n",
        tcp_defaults(),
        be.port
    );
    let _p = Proxy::start(&cfg, port, &[]);
    let mut c = connect(port);
    let local = c.local_addr().unwrap();
    assert_eq!(read_all(&mut c), b"ok");
    let lines = be.received.lock().unwrap().clone();
    let want = format!("PROXY TCP4 127.0.0.1 127.0.0.1 {} {port}\r\n", local.port());
    assert!(
        lines.iter().any(|l| l == want.as_bytes()),
        "want {want:?} among {:?}",
        lines
            .iter()
            .map(|l| String::from_utf8_lossy(l).into_owned())
            .collect::<Vec<_>>()
    );
}

#[test]
fn soft_stop_lets_open_connection_finish() {
    let be = Backend::start(Behaviour::Echo);
    let port = free_port();
    let cfg = format!(
        "global\n    nbthread 2\n{}frontend fe\n    bind 127.0.0.1:{port}\n    default_backend be\nbackend be\n    server s 127.0.0.1:{}\n",
        tcp_defaults(),
        be.port
    );
    let dir = TempDir::new("pid");
    let pidfile = dir.path("bascule.pid");
    let mut p = Proxy::start(&cfg, port, &["-p", pidfile.to_str().unwrap()]);
    let pid: u32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_eq!(pid, p.pid());
    let mut open = p.connect();
    open.write_all(b"one").unwrap();
    let mut buf = [0u8; 3];
    open.read_exact(&mut buf).unwrap();

    p.signal("-USR1");
    // New connections are refused once the listeners are closed.
    assert!(
        eventually(Duration::from_secs(1), || std::net::TcpStream::connect((
            "127.0.0.1",
            port
        ))
        .is_err()),
        "expected new connections refused within 1 s of SIGUSR1, still accepted"
    );
    // The open one still works.
    open.write_all(b"two").unwrap();
    open.read_exact(&mut buf).unwrap();
    assert_eq!(&buf, b"two");
    assert!(
        p.child.try_wait().unwrap().is_none(),
        "exited with a session open"
    );
    drop(open);
    let status = p
        .wait_exit(Duration::from_secs(2))
        .expect("expected an exit within 2 s of the last session's close, still running");
    assert!(status.success(), "{status}");
    assert!(!pidfile.exists(), "pidfile left behind");
}

#[test]
fn hard_stop_on_sigterm_even_with_open_sessions() {
    let be = Backend::start(Behaviour::Echo);
    let port = free_port();
    let cfg = format!(
        "{}frontend fe\n    bind 127.0.0.1:{port}\n    default_backend be\nbackend be\n    server s 127.0.0.1:{}\n",
        tcp_defaults(),
        be.port
    );
    let dir = TempDir::new("pid");
    let pidfile = dir.path("bascule.pid");
    let mut p = Proxy::start(&cfg, port, &["-p", pidfile.to_str().unwrap()]);
    let mut open = p.connect();
    open.write_all(b"x").unwrap();
    let mut b = [0u8; 1];
    open.read_exact(&mut b).unwrap();
    let started = Instant::now();
    p.signal("-TERM");
    assert!(
        p.wait_exit(Duration::from_secs(2)).is_some(),
        "expected an exit within 2 s of SIGTERM with a session open; still running\n{}",
        p.stderr()
    );
    // The session died with the process: the client reads EOF or a reset, promptly.
    let rest = read_all(&mut open);
    assert!(rest.is_empty(), "expected no more bytes, got {rest:?}");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "the open client was not closed with the process"
    );
    assert!(!pidfile.exists(), "pidfile left behind");
}

#[test]
fn daemon_mode_writes_pidfile_and_serves() {
    let be = Backend::banner("d");
    let port = free_port();
    let dir = TempDir::new("daemon");
    let cfg_path = dir.path("d.cfg");
    let pidfile = dir.path("d.pid");
    std::fs::write(
        &cfg_path,
        format!(
            "{}frontend fe\n    bind 127.0.0.1:{port}\n    default_backend be\nbackend be\n    server s 127.0.0.1:{}\n",
            tcp_defaults(),
            be.port
        ),
    )
    .unwrap();
    let launched = Instant::now();
    let status = run_bounded(
        Command::new(BIN)
            .args(["-D", "-f", cfg_path.to_str().unwrap()])
            .args(["-p", pidfile.to_str().unwrap()])
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.path("stderr")).unwrap()),
        Duration::from_secs(3),
    );
    let stderr = || std::fs::read_to_string(dir.path("stderr")).unwrap_or_default();
    let status = status.unwrap_or_else(|| {
        panic!(
            "expected `bascule -D` to return at once, still running after {:?}\n{}",
            launched.elapsed(),
            stderr()
        )
    });
    assert!(
        status.success(),
        "expected exit 0 from the launcher, got {status}\n{}",
        stderr()
    );
    assert!(
        eventually(Duration::from_secs(2), || pidfile.exists()),
        "no pidfile at {}",
        pidfile.display()
    );
    let pid = read_pidfile(&pidfile);
    let _guard = PidGuard(pid);
    assert!(alive(pid), "the pidfile names {pid}, which is not running");
    assert!(
        eventually(Duration::from_secs(2), || std::net::TcpStream::connect((
            "127.0.0.1",
            port
        ))
        .is_ok()),
        "the daemon does not listen on {port}\n{}",
        stderr()
    );
    // The banner comes from the backend, through the daemon.
    assert_eq!(banner_through(port), "d");
    signal(pid, "-TERM");
    assert!(
        eventually(Duration::from_secs(3), || !alive(pid)),
        "daemon {pid} survived SIGTERM"
    );
    assert!(
        eventually(Duration::from_secs(1), || !pidfile.exists()),
        "pidfile left behind"
    );
}

#[test]
fn sf_hands_over_to_a_new_process() {
    let be = Backend::echo();
    let port = free_port();
    let cfg = format!(
        "{}frontend fe\n    bind 127.0.0.1:{port}\n    default_backend be\nbackend be\n    server s 127.0.0.1:{}\n",
        tcp_defaults(),
        be.port
    );
    let mut old = Proxy::start(&cfg, port, &[]);
    let mut held = old.connect();
    held.write_all(b"a").unwrap();
    let mut b = [0u8; 1];
    held.read_exact(&mut b).unwrap();
    let old_pid = old.pid().to_string();
    let new = Proxy::start(&cfg, port, &["-sf", &old_pid]);
    // The old process got SIGUSR1 from the new one: it keeps its session, so it is still there.
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        old.child.try_wait().unwrap().is_none(),
        "expected the old process to wait for its open session, it exited\n{}",
        old.stderr()
    );
    // New connections are served (by the new process: the old one stopped listening).
    for i in 0..5 {
        let mut c = new.connect();
        c.write_all(b"n").unwrap();
        c.read_exact(&mut b)
            .unwrap_or_else(|e| panic!("new connection {i} during the handover: {e}"));
        assert_eq!(&b, b"n");
    }
    held.write_all(b"b").unwrap();
    held.read_exact(&mut b).unwrap();
    assert_eq!(&b, b"b", "the old session stopped echoing");
    drop(held);
    let status = old
        .wait_exit(Duration::from_secs(3))
        .expect("old process still running 3 s after its last session closed");
    assert!(
        status.success(),
        "expected exit 0 from the old process, got {status}"
    );
    assert!(
        new.child_running(),
        "the new process died\n{}",
        new.stderr()
    );
    let mut c = new.connect();
    c.write_all(b"z").unwrap();
    c.read_exact(&mut b).unwrap();
    assert_eq!(&b, b"z");
}

#[test]
fn check_mode_on_broken_file_exits_1_with_file_line() {
    let dir = TempDir::new("check");
    let cfg = dir.path("broken.cfg");
    std::fs::write(
        &cfg,
        "frontend fe\n    bind 127.0.0.1:1\n    timout client 5s\n",
    )
    .unwrap();
    let out = Command::new(BIN)
        .args(["-c", "-f", cfg.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(&format!("{}:3", cfg.display())), "{stderr}");
    assert!(stderr.contains("did you mean 'timeout'"), "{stderr}");
}

#[test]
fn health_check_marks_a_dead_server_down_and_back_up() {
    let a = Backend::start(Behaviour::Banner("a".into()));
    let mut b = Backend::start(Behaviour::Banner("b".into()));
    let b_port = b.port;
    let port = free_port();
    let cfg = format!(
        "{}frontend fe\n    bind 127.0.0.1:{port}\n    default_backend be\nbackend be\n\
         server a 127.0.0.1:{} check inter 100ms fall 2 rise 2\n    server b 127.0.0.1:{b_port} check inter 100ms fall 2 rise 2\n",
        tcp_defaults(),
        a.port
    );
    let p = Proxy::start(&cfg, port, &[]);
    b.stop();
    assert!(
        eventually(Duration::from_secs(2), || p
            .stderr()
            .contains("Server be/b is DOWN")),
        "{}",
        p.stderr()
    );
    assert!(p
        .stderr()
        .contains("reason: Layer4 connection problem, info: \"Connection refused\""));
    // DOWN: no connection attempt goes to b any more, so no retry is needed.
    for _ in 0..10 {
        assert_eq!(banner_through(port), "a");
    }
    // Bring b back on the same port: rise 2 successes mark it UP.
    let l = std::net::TcpListener::bind(("127.0.0.1", b_port)).expect("rebind b's port");
    assert!(
        eventually(Duration::from_secs(2), || p
            .stderr()
            .contains("Server be/b is UP")),
        "{}",
        p.stderr()
    );
    drop(l);
}

#[test]
fn hard_stop_after_bounds_a_soft_stop() {
    let be = Backend::start(Behaviour::Echo);
    let port = free_port();
    let cfg = format!(
        "global\n    hard-stop-after 500ms\n{}frontend fe\n    bind 127.0.0.1:{port}\n    default_backend be\nbackend be\n    server s 127.0.0.1:{}\n",
        tcp_defaults(),
        be.port
    );
    let mut p = Proxy::start(&cfg, port, &[]);
    let mut open = p.connect();
    open.write_all(b"x").unwrap();
    let mut b = [0u8; 1];
    open.read_exact(&mut b).unwrap();
    let started = Instant::now();
    p.signal("-USR1");
    let status = p.wait_exit(Duration::from_secs(3));
    assert!(
        status.is_some(),
        "still running 3 s after SIGUSR1 with hard-stop-after 500ms"
    );
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(400),
        "exited after {took:?}, before hard-stop-after"
    );
    assert!(
        p.stderr().contains("hard-stop-after expired"),
        "{}",
        p.stderr()
    );
}

#[test]
fn global_maxconn_is_enforced_across_frontends() {
    let be = Backend::start(Behaviour::Hold);
    let (p1, p2) = (free_port(), free_port());
    let cfg = format!(
        "global\n    maxconn 1\n{}frontend f1\n    bind 127.0.0.1:{p1}\n    default_backend be\n\
         frontend f2\n    bind 127.0.0.1:{p2}\n    default_backend be\nbackend be\n    server s 127.0.0.1:{}\n",
        tcp_defaults(),
        be.port
    );
    let _p = Proxy::start(&cfg, p1, &[]);
    let base = be.count();
    let first = connect(p1);
    assert!(eventually(Duration::from_secs(2), || be.count() == base + 1));
    let second = connect(p2);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        be.count(),
        base + 1,
        "global maxconn 1 let a second session in"
    );
    drop(first);
    assert!(eventually(Duration::from_secs(2), || be.count() == base + 2));
    drop(second);
}

/// Sends `len` patterned bytes through an echo backend and checks they all come back in order.
fn echo_through(port: u16, len: usize) {
    let data: Vec<u8> = (0..len as u32).map(|i| (i % 251) as u8).collect();
    let mut c = connect(port);
    let mut w = c.try_clone().unwrap();
    let sent = data.clone();
    let writer = std::thread::spawn(move || {
        w.write_all(&sent).unwrap();
        w.shutdown(Shutdown::Write).unwrap();
    });
    let back = read_all(&mut c);
    writer.join().unwrap();
    assert!(
        back == data,
        "{} of {len} bytes came back, or not in order",
        back.len()
    );
}

/// One worker thread, so that its pipe pool is the only one.
fn splice_cfg(port: u16, backend: u16, options: &str) -> String {
    format!(
        "global\n    nbthread 1\n{}{options}frontend fe\n    bind 127.0.0.1:{port}\n    default_backend be\nbackend be\n    server s 127.0.0.1:{backend}\n",
        tcp_defaults(),
    )
}

#[test]
fn splice_auto_forwards_bulk_both_ways_through_pipes() {
    let be = Backend::echo();
    let port = free_port();
    let p = Proxy::start(
        &splice_cfg(port, be.port, "    option splice-auto\n"),
        port,
        &[],
    );
    let fds_before = fd_count(p.pid());
    echo_through(port, 4 << 20);
    assert!(
        eventually(Duration::from_secs(3), || pipe_count(p.pid()) > 0),
        "no pipe was opened: the bulk transfer was not spliced"
    );
    // Small exchanges still work, and reuse the pooled pipes: once the sessions are over, the
    // proxy holds at most the two pipes (four descriptors) one session uses at a time.
    for _ in 0..20 {
        echo_through(port, 100);
        echo_through(port, 200_000);
    }
    assert!(
        eventually(Duration::from_secs(3), || fd_count(p.pid())
            <= fds_before + 4),
        "descriptors grew from {fds_before} to {}",
        fd_count(p.pid())
    );
}

#[test]
fn splice_request_and_response_are_per_direction() {
    let be = Backend::echo();
    let port = free_port();
    let options = "    option splice-request\n    option splice-response\n";
    let p = Proxy::start(&splice_cfg(port, be.port, options), port, &[]);
    echo_through(port, 10);
    echo_through(port, 3 << 20);
    // Sessions one after the other reuse the same two pipes (four descriptors).
    assert!(
        eventually(Duration::from_secs(3), || pipe_count(p.pid()) == 4),
        "one pipe per direction, reused: {} pipe descriptors",
        pipe_count(p.pid())
    );
}

#[test]
fn without_splice_options_no_pipe_is_opened() {
    let be = Backend::echo();
    let port = free_port();
    let p = Proxy::start(&splice_cfg(port, be.port, ""), port, &[]);
    echo_through(port, 4 << 20);
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(pipe_count(p.pid()), 0);
}
