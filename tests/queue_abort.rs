//! Clients that leave while their request waits in a queue, and the `show stat` columns of
//! transfers that end badly (`cli_abrt`, `srv_abrt`, `eresp`), side by side with Debian's
//! haproxy 2.6:
//!
//! - TCP mode, in a backend's queue and in a server's (`balance source`): a client that closes
//!   having sent nothing is gone at once (`CQ`), one that resets at once too (`CD`, counted in
//!   `cli_abrt`), its place freed (`qcur` back to 0); one whose bytes wait for the server and
//!   that closes keeps its place until `timeout queue` (`sQ`, `Tw`, its position, `econ`),
//!   unless the backend has `option abortonclose` (`CQ` at once); either way it is closed with
//!   a FIN, its bytes read.
//! - HTTP mode: with `option abortonclose` on the frontend (from `defaults`) and the backend,
//!   a client that closes or resets is gone at once (`CQ`, `-1` status; a reset counted in
//!   `cli_abrt`), from a server's queue as from the backend's; with the option on the
//!   frontend only, a close leaves the request waiting for `timeout queue` (`sQ`, 503); with
//!   no option at all a reset is counted and the request waits too.
//! - Transfers that end badly, TCP and HTTP: a server reset (`SD`), a server or client
//!   timeout (`sD`, `cD`), a client reset (`CD`), a server that closes, times out or answers
//!   garbage before its response (`SH`, `sH`, `PH`), a response cut short (`SD`).
//!
//! The queue cases are bounded in time: the answer must come within [`PROMPT`] where waiting
//! for the queue would take 10 s.
//!
//! Without haproxy the tests print "skipped" (and fail when `CI` is set).
#![allow(clippy::disallowed_methods)]

mod support;

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::{mpsc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use support::side::{both, mask_timers, Run};
use support::{connect, eventually, Backend};

/// Within this, a client that left a queue must have been logged (the queue waits 10 s).
const PROMPT: Duration = Duration::from_secs(3);

/// The `show stat` columns `cols` of each server and backend line of the proxies `proxies`.
fn stat(run: &Run, proxies: &[&str], cols: &[&str]) -> Vec<String> {
    run.show_stat()
        .lines(cols, |px, sv| sv != "FRONTEND" && proxies.contains(&px))
}

/// One column of one line (`proxy`, `name`: `BACKEND` or a server).
fn stat_of(run: &Run, proxy: &str, name: &str, col: &str) -> String {
    let want = format!("{proxy}/{name} {col}=");
    stat(run, &[proxy], &[col])
        .iter()
        .find_map(|l| l.strip_prefix(&want).map(str::to_string))
        .unwrap_or_default()
}

/// Waits until the queue of `proxy`'s line `name` holds `n` requests.
fn queued(run: &Run, proxy: &str, name: &str, n: u32) -> bool {
    eventually(Duration::from_secs(5), || {
        stat_of(run, proxy, name, "qcur") == n.to_string()
    })
}

fn reset(c: TcpStream) {
    socket2::SockRef::from(&c)
        .set_linger(Some(Duration::ZERO))
        .unwrap();
    drop(c);
}

/// A client leaving as `how` says, and the line logged for it (timers masked), with whether it
/// came within [`PROMPT`].
fn leave(run: &mut Run, c: TcpStream, how: &str) -> Vec<String> {
    let left = Instant::now();
    match how {
        "reset" => reset(c),
        "shut" => c.shutdown(Shutdown::Write).unwrap(),
        _ => drop(c),
    }
    let lines = run.lines_n(1);
    let mut seen = vec![format!(
        "{how}: logged within {PROMPT:?}: {}",
        left.elapsed() < PROMPT
    )];
    seen.extend(lines.iter().map(|l| mask_timers(l)));
    seen
}

/// `@P2@` takes the harness's probe. `@Pbe@` queues in `beq`'s backend queue, `@Psrv@` in
/// `srvq`'s server queue (a hash balancer waits for its server), both for 10 s; `@Pto@` in
/// `qto`'s for 1 s; `@Pab@` in `qab`'s, whose backend has `option abortonclose`. Each queue's
/// server holds its one connection until released.
const TCP_CFG: &str = "global
    stats socket @SOCK@ level admin
defaults
    mode tcp
    timeout client 20s
    timeout server 20s
    timeout connect 5s
    timeout queue 10s
frontend ready
    bind 127.0.0.1:@P2@
    default_backend live
frontend fe_be
    bind 127.0.0.1:@Pbe@
    log 127.0.0.1:@LOG@ format raw local0
    option tcplog
    default_backend beq
frontend fe_srv
    bind 127.0.0.1:@Psrv@
    log 127.0.0.1:@LOG@ format raw local0
    option tcplog
    default_backend srvq
frontend fe_to
    bind 127.0.0.1:@Pto@
    log 127.0.0.1:@LOG@ format raw local0
    option tcplog
    default_backend qto
frontend fe_ab
    bind 127.0.0.1:@Pab@
    log 127.0.0.1:@LOG@ format raw local0
    option tcplog
    default_backend qab
backend live
    server s 127.0.0.1:@LIVE@
backend beq
    server s1 127.0.0.1:@H1@ maxconn 1
backend srvq
    balance source
    server s1 127.0.0.1:@H2@ maxconn 1
backend qto
    timeout queue 1s
    server s1 127.0.0.1:@H3@ maxconn 1
backend qab
    option abortonclose
    server s1 127.0.0.1:@H4@ maxconn 1
";

#[test]
fn tcp_client_leaving_a_queue_is_noticed_at_once_as_haproxy_does() {
    let live = Backend::banner("up");
    let (p_be, p_srv, p_to, p_ab) = (
        support::free_port(),
        support::free_port(),
        support::free_port(),
        support::free_port(),
    );
    let hold: Vec<Backend> = (0..4).map(|_| Backend::hold()).collect();
    let cfg = TCP_CFG
        .replace("@LIVE@", &live.port.to_string())
        .replace("@Pbe@", &p_be.to_string())
        .replace("@Psrv@", &p_srv.to_string())
        .replace("@Pto@", &p_to.to_string())
        .replace("@Pab@", &p_ab.to_string())
        .replace("@H4@", &hold[3].port.to_string())
        .replace("@H1@", &hold[0].port.to_string())
        .replace("@H2@", &hold[1].port.to_string())
        .replace("@H3@", &hold[2].port.to_string());
    both("tcp queue abort", &cfg, |_, _, _, run| {
        let mut seen = Vec::new();
        for (i, (port, proxy, line)) in [(p_be, "beq", "BACKEND"), (p_srv, "srvq", "s1")]
            .into_iter()
            .enumerate()
        {
            // The one connection the server takes, held.
            let before = hold[i].count();
            let mut first = connect(port);
            first.write_all(b"first").unwrap();
            assert!(eventually(Duration::from_secs(5), || hold[i].count() > before));
            // Closes having sent nothing: `CQ`, at once.
            let c = connect(port);
            assert!(queued(run, proxy, line, 1), "{proxy}: not queued");
            seen.extend(leave(run, c, "close"));
            seen.push(format!("freed: {}", queued(run, proxy, line, 0)));
            // Resets, with bytes sent: `CD`, at once, counted in `cli_abrt`.
            let mut c = connect(port);
            c.write_all(b"bytes").unwrap();
            assert!(queued(run, proxy, line, 1), "{proxy}: not queued");
            seen.extend(leave(run, c, "reset"));
            seen.push(format!("freed: {}", queued(run, proxy, line, 0)));
            // Resets having sent nothing: `CD` too.
            let c = connect(port);
            assert!(queued(run, proxy, line, 1), "{proxy}: not queued");
            seen.extend(leave(run, c, "reset"));
            seen.push(format!("freed: {}", queued(run, proxy, line, 0)));
            // The first connection ends once its server answers.
            hold[i].release_one();
            let mut got = Vec::new();
            let _ = first.read_to_end(&mut got);
            drop(first);
            seen.extend(run.lines_n(1).iter().map(|l| mask_timers(l)));
        }
        // Bytes wait for the server: the client's close does not end the wait (`sQ` after
        // `timeout queue`, with the time queued and the position).
        let before = hold[2].count();
        let mut first = connect(p_to);
        first.write_all(b"first").unwrap();
        assert!(eventually(Duration::from_secs(5), || hold[2].count() > before));
        let mut c = connect(p_to);
        c.write_all(b"bytes").unwrap();
        assert!(queued(run, "qto", "BACKEND", 1));
        c.shutdown(Shutdown::Write).unwrap();
        let mut rest = Vec::new();
        // The bytes the client sent were read: the close that ends it is a FIN, not a reset.
        seen.push(format!(
            "ended by a FIN: {}",
            c.read_to_end(&mut rest).is_ok()
        ));
        seen.extend(run.lines_n(1).iter().map(|l| mask_timers(l)));
        hold[2].release_one();
        let _ = first.read_to_end(&mut rest);
        seen.extend(run.lines_n(1).iter().map(|l| mask_timers(l)));
        // The same under the backend's `option abortonclose`: the close ends the wait at once
        // (`CQ`).
        let before = hold[3].count();
        let mut first = connect(p_ab);
        first.write_all(b"first").unwrap();
        assert!(eventually(Duration::from_secs(5), || hold[3].count() > before));
        let mut c = connect(p_ab);
        c.write_all(b"bytes").unwrap();
        assert!(queued(run, "qab", "BACKEND", 1));
        let left = Instant::now();
        c.shutdown(Shutdown::Write).unwrap();
        seen.push(format!(
            "ended by a FIN: {}",
            c.read_to_end(&mut rest).is_ok()
        ));
        seen.push(format!("within {PROMPT:?}: {}", left.elapsed() < PROMPT));
        seen.extend(run.lines_n(1).iter().map(|l| mask_timers(l)));
        seen.push(format!("freed: {}", queued(run, "qab", "BACKEND", 0)));
        hold[3].release_one();
        let _ = first.read_to_end(&mut rest);
        seen.extend(run.lines_n(1).iter().map(|l| mask_timers(l)));
        seen.extend(stat(
            run,
            &["beq", "srvq", "qto", "qab"],
            &["qcur", "qmax", "econ", "cli_abrt", "srv_abrt", "eresp"],
        ));
        seen
    });
}

/// `@P2@` takes the probe. `abortonclose` is in the first `defaults`, so the frontends have
/// it too, as HAProxy 2.6 needs to notice a client leaving a queue in HTTP: `@Pbe@` queues in
/// `beq`'s backend queue, `@Psrv@` in `srvq`'s server queue; `@Pno@` in `noq`'s, a backend
/// without the option (a close leaves the request waiting for `timeout queue`, 1 s; a reset
/// does not). `@Pplain@`'s frontend and backend have no `abortonclose`: a reset is only
/// counted, the request waits.
const HTTP_CFG: &str = "global
    stats socket @SOCK@ level admin
defaults
    mode http
    option abortonclose
    timeout client 20s
    timeout server 20s
    timeout connect 5s
    timeout queue 10s
frontend ready
    bind 127.0.0.1:@P2@
    default_backend live
frontend fe_be
    bind 127.0.0.1:@Pbe@
    log 127.0.0.1:@LOG@ format raw local0
    option httplog
    default_backend beq
frontend fe_srv
    bind 127.0.0.1:@Psrv@
    log 127.0.0.1:@LOG@ format raw local0
    option httplog
    default_backend srvq
frontend fe_no
    bind 127.0.0.1:@Pno@
    log 127.0.0.1:@LOG@ format raw local0
    option httplog
    default_backend noq
backend live
    server s 127.0.0.1:@LIVE@
backend beq
    server s1 127.0.0.1:@H1@ maxconn 1
backend srvq
    balance source
    server s1 127.0.0.1:@H2@ maxconn 1
backend noq
    no option abortonclose
    timeout queue 1s
    server s1 127.0.0.1:@H3@ maxconn 1
defaults
    mode http
    timeout client 20s
    timeout server 20s
    timeout connect 5s
    timeout queue 1s
frontend fe_plain
    bind 127.0.0.1:@Pplain@
    log 127.0.0.1:@LOG@ format raw local0
    option httplog
    default_backend plainq
backend plainq
    balance source
    server s1 127.0.0.1:@H4@ maxconn 1
";

const GET: &[u8] = b"GET /q HTTP/1.1\r\nhost: x\r\n\r\n";

#[test]
fn http_client_leaving_a_queue_with_abortonclose_is_noticed_at_once_as_haproxy_does() {
    let live = Backend::banner("up");
    let ports: Vec<u16> = (0..4).map(|_| support::free_port()).collect();
    let hold: Vec<Backend> = (0..4).map(|_| Backend::hold()).collect();
    let mut cfg = HTTP_CFG.replace("@LIVE@", &live.port.to_string());
    for (i, name) in ["be", "srv", "no", "plain"].iter().enumerate() {
        cfg = cfg
            .replace(&format!("@P{name}@"), &ports[i].to_string())
            .replace(&format!("@H{}@", i + 1), &hold[i].port.to_string());
    }
    both("http queue abort", &cfg, |_, _, _, run| {
        let mut seen = Vec::new();
        // (port, backend, its queue's line, server, how the client leaves)
        let cases = [
            (ports[0], "beq", "BACKEND", &hold[0], "close"),
            (ports[0], "beq", "BACKEND", &hold[0], "reset"),
            (ports[1], "srvq", "s1", &hold[1], "close"),
            (ports[1], "srvq", "s1", &hold[1], "reset"),
            (ports[2], "noq", "BACKEND", &hold[2], "shut"),
            (ports[2], "noq", "BACKEND", &hold[2], "reset"),
            (ports[3], "plainq", "s1", &hold[3], "reset"),
        ];
        for (port, proxy, line, hold, how) in cases {
            let before = hold.count();
            let mut first = connect(port);
            first.write_all(GET).unwrap();
            assert!(eventually(Duration::from_secs(5), || hold.count() > before));
            let mut c = connect(port);
            c.write_all(GET).unwrap();
            assert!(queued(run, proxy, line, 1), "{proxy}: not queued");
            match (proxy, how) {
                // The request stays until `timeout queue`: a 503.
                ("noq", "shut") => {
                    c.shutdown(Shutdown::Write).unwrap();
                    let mut got = Vec::new();
                    let _ = c.read_to_end(&mut got);
                    let text = String::from_utf8_lossy(&got);
                    seen.push(text.lines().next().unwrap_or("").to_string());
                    seen.extend(run.lines_n(1).iter().map(|l| mask_timers(l)));
                }
                // The request stays until `timeout queue`, the reset counted in `cli_abrt`,
                // and the 503 nobody read logged with its size.
                ("plainq", _) => {
                    reset(c);
                    seen.extend(run.lines_n(1).iter().map(|l| mask_timers(l)));
                }
                _ => seen.extend(leave(run, c, how)),
            }
            seen.push(format!("freed: {}", queued(run, proxy, line, 0)));
            // The held request gets `released` (not HTTP: a 502).
            hold.release_one();
            let mut got = Vec::new();
            let _ = first.read_to_end(&mut got);
            let text = String::from_utf8_lossy(&got);
            seen.push(text.lines().next().unwrap_or("").into());
            seen.extend(run.lines_n(1).iter().map(|l| mask_timers(l)));
        }
        seen.extend(stat(
            run,
            &["beq", "srvq", "noq", "plainq"],
            &["qcur", "qmax", "econ", "cli_abrt", "srv_abrt", "eresp"],
        ));
        seen
    });
}

/// A channel's two ends, each behind a lock (shared by the test servers' threads).
type Channel = (Mutex<mpsc::Sender<()>>, Mutex<mpsc::Receiver<()>>);

/// The client's word to a test server that it has received the server's first bytes.
fn acks() -> &'static Channel {
    static ACKS: OnceLock<Channel> = OnceLock::new();
    ACKS.get_or_init(|| {
        let (tx, rx) = mpsc::channel();
        (Mutex::new(tx), Mutex::new(rx))
    })
}

/// Waits (in a test server) until the client has received the bytes sent so far.
fn got_them() {
    let _ = acks()
        .1
        .lock()
        .unwrap()
        .recv_timeout(Duration::from_secs(10));
}

/// A test server on its own thread: each connection is given to `serve`.
fn server(serve: fn(TcpStream)) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            std::thread::spawn(move || serve(conn));
        }
    });
    port
}

/// Reads a request head (or whatever comes first, in TCP mode).
fn read_some(c: &mut TcpStream) {
    let mut buf = [0u8; 4096];
    let mut got = Vec::new();
    while let Ok(n @ 1..) = c.read(&mut buf) {
        got.extend_from_slice(&buf[..n]);
        if got.windows(4).any(|w| w == b"\r\n\r\n") || !got.starts_with(b"GET") {
            break;
        }
    }
}

/// Waits for the peer to close (or the proxy's timeout to end the connection).
fn until_closed(c: &mut TcpStream) {
    let mut buf = [0u8; 4096];
    while let Ok(1..) = c.read(&mut buf) {}
}

/// `@P2@` takes the probe. TCP: `tsd` (a server that resets after its first bytes), `tsto`
/// (a silent server, `timeout server` 1 s), `tcd` (a server that answers then holds: the client resets),
/// `tcto` (`timeout client` 1 s). HTTP: `hsh` (closes without answering), `hsto` (silent,
/// 1 s), `hph` (garbage), `hcut` (a body cut short by a close), `hrst` (by a reset).
const ABORT_CFG: &str = "global
    stats socket @SOCK@ level admin
defaults
    log 127.0.0.1:@LOG@ format raw local0
    timeout client 20s
    timeout server 20s
    timeout connect 5s
frontend ready
    bind 127.0.0.1:@P2@
    mode tcp
    default_backend live
backend live
    mode tcp
    server s 127.0.0.1:@LIVE@
listen tsd
    mode tcp
    option tcplog
    bind 127.0.0.1:@Ptsd@
    server s1 127.0.0.1:@RESET@
listen tsto
    mode tcp
    option tcplog
    bind 127.0.0.1:@Ptsto@
    timeout server 1s
    server s1 127.0.0.1:@SILENT@
listen tcd
    mode tcp
    option tcplog
    bind 127.0.0.1:@Ptcd@
    server s1 127.0.0.1:@ANSWER@
listen tcto
    mode tcp
    option tcplog
    bind 127.0.0.1:@Ptcto@
    timeout client 1s
    server s1 127.0.0.1:@SILENT@
listen hsh
    mode http
    option httplog
    bind 127.0.0.1:@Phsh@
    server s1 127.0.0.1:@CLOSE@
listen hsto
    mode http
    option httplog
    bind 127.0.0.1:@Phsto@
    timeout server 1s
    server s1 127.0.0.1:@SILENT@
listen hph
    mode http
    option httplog
    bind 127.0.0.1:@Phph@
    server s1 127.0.0.1:@GARBAGE@
listen hcut
    mode http
    option httplog
    bind 127.0.0.1:@Phcut@
    server s1 127.0.0.1:@CUT@
listen hrst
    mode http
    option httplog
    bind 127.0.0.1:@Phrst@
    server s1 127.0.0.1:@CUTRST@
";

/// A response that promises 100 bytes and sends 10.
const PARTIAL: &[u8] = b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\n0123456789";

#[test]
fn transfers_that_end_badly_are_counted_as_haproxy_does() {
    let live = Backend::banner("up");
    let ports: Vec<(&str, u16)> = [
        (
            "@RESET@",
            server(|mut c| {
                read_some(&mut c);
                c.write_all(b"hi").unwrap();
                // Once the client has the bytes, a reset.
                got_them();
                reset(c);
            }),
        ),
        ("@SILENT@", server(|mut c| until_closed(&mut c))),
        ("@CLOSE@", server(|mut c| read_some(&mut c))),
        (
            "@GARBAGE@",
            server(|mut c| {
                read_some(&mut c);
                let _ = c.write_all(b"garbage\r\n\r\n");
                until_closed(&mut c);
            }),
        ),
        (
            "@CUT@",
            server(|mut c| {
                read_some(&mut c);
                let _ = c.write_all(PARTIAL);
            }),
        ),
        (
            "@CUTRST@",
            server(|mut c| {
                read_some(&mut c);
                let _ = c.write_all(PARTIAL);
                got_them();
                reset(c);
            }),
        ),
        (
            "@ANSWER@",
            server(|mut c| {
                read_some(&mut c);
                let _ = c.write_all(b"hi");
                until_closed(&mut c);
            }),
        ),
    ]
    .into();
    let names = [
        "tsd", "tsto", "tcd", "tcto", "hsh", "hsto", "hph", "hcut", "hrst",
    ];
    let fronts: Vec<u16> = names.iter().map(|_| support::free_port()).collect();
    let mut cfg = ABORT_CFG.replace("@LIVE@", &live.port.to_string());
    for (name, port) in &ports {
        cfg = cfg.replace(name, &port.to_string());
    }
    for (name, port) in names.iter().zip(&fronts) {
        cfg = cfg.replace(&format!("@P{name}@"), &port.to_string());
    }
    both("aborts", &cfg, |_, _, _, run| {
        let mut seen = Vec::new();
        for (name, &port) in names.iter().zip(&fronts) {
            let mut c = connect(port);
            c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            if name.starts_with('t') {
                c.write_all(b"hello").unwrap();
            } else {
                c.write_all(GET).unwrap();
            }
            let mut got = Vec::new();
            match *name {
                // The client resets once the server answered.
                "tcd" => {
                    let mut buf = [0u8; 2];
                    c.read_exact(&mut buf).unwrap();
                    reset(c);
                }
                // The client tells the server it has the first bytes, then reads the rest
                // (the server resets).
                "tsd" | "hrst" => {
                    let end: &[u8] = if *name == "tsd" { b"hi" } else { b"0123456789" };
                    let mut buf = [0u8; 256];
                    while !got.ends_with(end) {
                        let n = c.read(&mut buf).unwrap();
                        assert!(n > 0, "{name}: closed early");
                        got.extend_from_slice(&buf[..n]);
                    }
                    acks().0.lock().unwrap().send(()).unwrap();
                    let _ = c.read_to_end(&mut got);
                    drop(c);
                }
                // The client closes once it has all (HAProxy logs a server timeout in TCP
                // mode only once the client closed too).
                _ => {
                    let _ = c.read_to_end(&mut got);
                    drop(c);
                }
            }
            let status = String::from_utf8_lossy(&got);
            seen.push(format!("{name}: {}", status.lines().next().unwrap_or("")));
            // Each session's line before the next session starts (`actconn` is exact).
            seen.extend(run.lines_n(1).iter().map(|l| mask_timers(l)));
        }
        seen.extend(stat(
            run,
            &names,
            &["econ", "cli_abrt", "srv_abrt", "eresp"],
        ));
        seen
    });
}
