//! A TCP-mode client (or server) that ends its side early, side by side with Debian's haproxy 2.6:
//!
//! - while its connection waits to be retried (the server refuses): haproxy ends the session at
//!   once when the client sent nothing (`CC`, `CD` for a reset, counted in `cli_abrt`, with the retries made so far,
//!   no `econ`), and keeps retrying for a client whose bytes wait for the server;
//! - within a `tcp-request inspect-delay`, after some bytes (a half-close): the end of the
//!   input is known, so the rules decide at once (`WAIT_END` true, `req.len` final) instead of
//!   waiting out the delay, and the server gets the bytes as sent.
//! - the same for a server that ends its side within `tcp-response inspect-delay`.
//!
//! Each case is bounded in time with a wide margin: the answer must come within 2 s where the
//! old behaviour took at least 4 s (5 retries of 1 s) or 10 s (the inspect delay).
//!
//! Without haproxy the tests print "skipped" (and fail when `CI` is set).
#![allow(clippy::disallowed_methods)]

mod support;

use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::time::{Duration, Instant};

use support::side::{both, mask_timers, Run};
use support::{connect, eventually, free_port, Backend};

/// Within this, a session that haproxy ends at once must have ended (the slow paths take 4 s
/// and 10 s).
const PROMPT: Duration = Duration::from_secs(2);

/// The `show stat` columns `cols` of each server and backend line (`proxy/server a=1 b=2`).
fn stat(run: &Run, cols: &[&str]) -> Vec<String> {
    run.show_stat().lines(cols, |_, sv| sv != "FRONTEND")
}

/// One `show stat` column of a backend's `BACKEND` line.
fn backend_stat(run: &Run, backend: &str, name: &str) -> u64 {
    let want = format!("{backend}/BACKEND {name}=");
    stat(run, &[name])
        .iter()
        .find_map(|l| l.strip_prefix(&want).and_then(|v| v.parse().ok()))
        .unwrap_or(0)
}

/// The `ready` frontend (`@P2@`) takes the harness's readiness probe: it logs nothing and its
/// server (`@LIVE@`) answers at once, so the probe leaves no session behind. `@Pdead@`
/// sends to a refusing server with 5 retries; `@Pdata@` to the same one with 1 retry.
const RETRY_CFG: &str = "global
    stats socket @SOCK@ level admin
defaults
    mode tcp
    timeout client 10s
    timeout server 10s
    timeout connect 5s
frontend ready
    bind 127.0.0.1:@P2@
    default_backend live
frontend fe_dead
    bind 127.0.0.1:@Pdead@
    log 127.0.0.1:@LOG@ format raw local0
    option tcplog
    default_backend dead5
frontend fe_data
    bind 127.0.0.1:@Pdata@
    log 127.0.0.1:@LOG@ format raw local0
    option tcplog
    default_backend dead1
backend live
    server s 127.0.0.1:@LIVE@
backend dead5
    retries 5
    server s 127.0.0.1:@DEAD@
backend dead1
    retries 1
    server s 127.0.0.1:@DEAD@
";

#[test]
fn client_leaving_during_connect_retries_ends_the_session_as_haproxy_does() {
    let live = Backend::banner("up");
    let (dead, p_dead, p_data) = (free_port(), free_port(), free_port());
    let cfg = RETRY_CFG
        .replace("@DEAD@", &dead.to_string())
        .replace("@LIVE@", &live.port.to_string())
        .replace("@Pdead@", &p_dead.to_string())
        .replace("@Pdata@", &p_data.to_string());
    both("client end during retries", &cfg, |_, _, _, run| {
        let mut seen = Vec::new();
        // A client that closes (`CC`), then one that resets (`CD`), each once its connection
        // failed once more and waits out the turn-around second: the first retry is counted
        // (`wretr`) as soon as the refused attempt failed.
        for (i, reset) in [(1u64, false), (2, true)] {
            let c = connect(p_dead);
            let waiting = eventually(Duration::from_secs(5), || {
                backend_stat(run, "dead5", "wretr") >= i
            });
            if reset {
                socket2::SockRef::from(&c)
                    .set_linger(Some(Duration::ZERO))
                    .unwrap();
            }
            let closed = Instant::now();
            drop(c);
            let lines = run.lines_n(1);
            seen.push(format!(
                "reset={reset} waiting={waiting} logged within {PROMPT:?}: {}",
                closed.elapsed() < PROMPT
            ));
            seen.extend(lines.iter().map(|l| mask_timers(l)));
        }
        // A client whose bytes wait for the server: the retries go on (`SC` once the one retry
        // failed too).
        let mut c = connect(p_data);
        c.write_all(b"hello").unwrap();
        c.shutdown(Shutdown::Write).unwrap();
        let mut rest = Vec::new();
        let _ = c.read_to_end(&mut rest);
        seen.push(format!("with bytes: {:?}", String::from_utf8_lossy(&rest)));
        seen.extend(run.lines_n(1).iter().map(|l| mask_timers(l)));
        drop(c);
        seen.extend(stat(run, &["scur", "econ", "wretr", "wredis", "cli_abrt"]));
        let info = run.cli("show info");
        seen.extend(
            info.lines()
                .filter(|l| l.starts_with("CurrConns:"))
                .map(str::to_string),
        );
        seen
    });
}

/// `fe` (`@P1@`) inspects for 10 s: its rules wait for 100 bytes or the end of the input, and
/// its log line shows what they saw (`req.len` when they last ran, `WAIT_END`).
const INSPECT_CFG: &str = "global
    stats socket @SOCK@ level admin
defaults
    mode tcp
    timeout client 15s
    timeout server 15s
    timeout connect 5s
frontend ready
    bind 127.0.0.1:@P2@
    default_backend live
frontend fe
    bind 127.0.0.1:@P1@
    log 127.0.0.1:@LOG@ format raw local0
    log-format \"%ci:%cp [%t] %ft %b/%s %Tw/%Tc/%Tt %B %U %ts len=%[var(txn.len)] end=%[var(txn.end)]\"
    tcp-request inspect-delay 10s
    tcp-request content set-var(txn.len) req.len
    tcp-request content set-var(txn.end) bool(1) if WAIT_END
    tcp-request content reject if { req.payload(0,3) -m str bad }
    tcp-request content accept if { req.len ge 100 }
    tcp-request content accept if WAIT_END
    default_backend echo
backend live
    server s 127.0.0.1:@LIVE@
backend echo
    server s 127.0.0.1:@ECHO@
";

#[test]
fn half_closed_client_ends_the_inspect_delay_as_haproxy_does() {
    let live = Backend::banner("up");
    let echo = Backend::echo();
    let cfg = INSPECT_CFG
        .replace("@LIVE@", &live.port.to_string())
        .replace("@ECHO@", &echo.port.to_string());
    // (what the client sends, how long it waits before sending)
    let cases: [(&[u8], u64); 4] = [
        (b"abc", 0),
        (b"bad", 0),
        // Rules that ran on nothing first run again from the first one on the bytes.
        (b"abcd", 300),
        // Bytes that are not text, and a NUL: the server gets them as sent.
        (b"\x00\xff\r\nzz\x00", 0),
    ];
    both("half-close within inspect-delay", &cfg, |_, p1, _, run| {
        let mut seen = Vec::new();
        for (send, pause) in cases {
            let mut c = connect(p1);
            c.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
            std::thread::sleep(Duration::from_millis(pause));
            let start = Instant::now();
            c.write_all(send).unwrap();
            c.shutdown(Shutdown::Write).unwrap();
            let mut back = Vec::new();
            let end = match c.read_to_end(&mut back) {
                Ok(_) => "FIN".to_string(),
                Err(e) => format!("{:?}", e.kind()),
            };
            seen.push(format!(
                "sent {send:?}, got {back:?} then {end}, within {PROMPT:?}: {}",
                start.elapsed() < PROMPT
            ));
            seen.extend(run.lines_n(1).iter().map(|l| mask_timers(l)));
        }
        seen
    });
}

/// The harness's own check: a client that keeps its side open does wait out the delay (the
/// prompt answers above are the half-close's doing), on Bascule alone.
#[test]
fn open_client_still_waits_for_the_inspect_delay() {
    let echo = Backend::echo();
    let port = free_port();
    let cfg = format!(
        "defaults
    mode tcp
    timeout client 15s
    timeout server 15s
    timeout connect 5s
frontend fe
    bind 127.0.0.1:{port}
    tcp-request inspect-delay 1s
    tcp-request content accept if {{ req.len ge 100 }}
    default_backend echo
backend echo
    server s 127.0.0.1:{}
",
        echo.port
    );
    let _run = Run::start(support::BIN, &cfg, port);
    let mut c: TcpStream = connect(port);
    let start = Instant::now();
    c.write_all(b"abc").unwrap();
    let mut back = [0u8; 3];
    c.read_exact(&mut back).unwrap();
    assert_eq!(&back, b"abc");
    assert!(
        start.elapsed() >= Duration::from_millis(900),
        "answered after {:?}, before the inspect delay ended",
        start.elapsed()
    );
}

/// `fe` (`@P1@`) sends to a server that writes "hello" and ends its side; its backend inspects
/// the response for 10 s, waiting for 100 bytes.
const RES_INSPECT_CFG: &str = "defaults
    mode tcp
    timeout client 15s
    timeout server 15s
    timeout connect 5s
frontend ready
    bind 127.0.0.1:@P2@
    default_backend live
frontend fe
    bind 127.0.0.1:@P1@
    log 127.0.0.1:@LOG@ format raw local0
    log-format \"%ci:%cp [%t] %ft %b/%s %Tw/%Tc/%Tt %B %U %ts len=%[var(txn.len)]\"
    default_backend be
backend live
    server s 127.0.0.1:@LIVE@
backend be
    tcp-response inspect-delay 10s
    tcp-response content set-var(txn.len) res.len
    tcp-response content accept if { res.len ge 100 }
    server s 127.0.0.1:@SRV@
";

#[test]
fn server_half_close_ends_the_response_inspect_delay_as_haproxy_does() {
    let live = Backend::banner("up");
    let srv = Backend::start(support::Behaviour::HalfCloseThenRead);
    let cfg = RES_INSPECT_CFG
        .replace("@LIVE@", &live.port.to_string())
        .replace("@SRV@", &srv.port.to_string());
    both(
        "server half-close within inspect-delay",
        &cfg,
        |_, p1, _, run| {
            let mut c = connect(p1);
            c.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
            let start = Instant::now();
            let mut back = Vec::new();
            let end = match c.read_to_end(&mut back) {
                Ok(_) => "FIN".to_string(),
                Err(e) => format!("{:?}", e.kind()),
            };
            let mut seen = vec![format!(
                "got {:?} then {end}, within {PROMPT:?}: {}",
                String::from_utf8_lossy(&back),
                start.elapsed() < PROMPT
            )];
            drop(c);
            seen.extend(run.lines_n(1).iter().map(|l| mask_timers(l)));
            seen
        },
    );
}
