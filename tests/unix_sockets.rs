//! UNIX stream sockets as listeners and servers (`unix@PATH`, plain `/paths`, `abns@NAME`,
//! inherited `fd@N`), in HTTP and TCP mode, client over UNIX, server over UNIX, and both.
//!
//! The side-by-side test runs one configuration and the same traffic through Debian's haproxy
//! 2.6 (the reference) and through Bascule, and compares what HAProxy reports for such
//! connections: the log fields (`%ci %cp %fi %fp %si %sp %bi %bp`, `src`, `dst`), the
//! `X-Forwarded-For` and `%[src]` headers the server receives, and `show servers state`
//! (address `-`, port 0, check status). A second one does the same for `log abns@NAME`,
//! `log fd@N` and `log unix@PATH`. The other tests pin what only Bascule's side can show:
//! socket files (mode, a stale file replaced, the file left at exit as HAProxy leaves it),
//! inherited UNIX listeners, and no descriptor leak.
#![allow(clippy::disallowed_methods)]

mod support;

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::Duration;

use support::{eventually, free_port, TempDir, BIN, HAPROXY, IO_TIMEOUT};

/// Serves HTTP/1.1 on `c` until it closes (or after a request that says `Connection: close`):
/// each answer's body is the request head it got (so the test sees the headers the proxy
/// added); `/hc` (the health check) gets a bare 200.
fn serve_http<S: Read + Write>(mut c: S) {
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
        let head: Vec<u8> = buf.drain(..end).collect();
        let body: &[u8] = if head.starts_with(b"GET /hc ") {
            b""
        } else {
            &head
        };
        let mut out =
            format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n", body.len()).into_bytes();
        out.extend_from_slice(body);
        let closing = String::from_utf8_lossy(&head)
            .to_ascii_lowercase()
            .contains("\r\nconnection: close");
        if c.write_all(&out).is_err() || closing {
            return;
        }
    }
}

/// Echoes what `c` sends until it half-closes, then closes.
fn serve_echo<S: Read + Write>(mut c: S) {
    let mut chunk = [0u8; 4096];
    loop {
        match c.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                if c.write_all(&chunk[..n]).is_err() {
                    return;
                }
            }
        }
    }
}

/// An HTTP backend on a UNIX socket at `path`.
fn http_on_path(path: &Path) {
    let l = UnixListener::bind(path).unwrap();
    thread::spawn(move || {
        for c in l.incoming().flatten() {
            thread::spawn(move || serve_http(c));
        }
    });
}

/// An HTTP backend on a TCP port of 127.0.0.1.
fn http_on_tcp() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    thread::spawn(move || {
        for c in l.incoming().flatten() {
            thread::spawn(move || serve_http(c));
        }
    });
    port
}

/// The socket address HAProxy gives `abns@NAME`: the name padded with zeros to the whole
/// `sun_path`.
fn abns(name: &str) -> socket2::SockAddr {
    let mut path = vec![0u8; 108];
    path[1..=name.len()].copy_from_slice(name.as_bytes());
    use std::os::unix::ffi::OsStrExt;
    socket2::SockAddr::unix(std::ffi::OsStr::from_bytes(&path)).unwrap()
}

/// An echo backend on the abstract socket `abns@NAME`, until the test process exits.
fn echo_on_abns(name: &str) {
    let s = socket2::Socket::new(socket2::Domain::UNIX, socket2::Type::STREAM, None).unwrap();
    s.bind(&abns(name)).unwrap();
    s.listen(64).unwrap();
    let l = UnixListener::from(std::os::fd::OwnedFd::from(s));
    thread::spawn(move || {
        for c in l.incoming().flatten() {
            thread::spawn(move || serve_echo(c));
        }
    });
}

fn connect_abns(name: &str) -> UnixStream {
    let s = socket2::Socket::new(socket2::Domain::UNIX, socket2::Type::STREAM, None).unwrap();
    s.connect(&abns(name)).unwrap();
    UnixStream::from(std::os::fd::OwnedFd::from(s))
}

/// Sends one `Connection: close` request and reads the whole answer.
fn exchange<S: Read + Write>(mut s: S, path: &str) -> String {
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

/// The headers the test looks at in an echoed request head, names lower-cased (HAProxy
/// lower-cases the names it forwards, Bascule keeps them as sent).
fn added_headers(answer: &str) -> Vec<String> {
    let body = answer.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    body.lines()
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.to_ascii_lowercase(), v.trim().to_string()))
        .filter(|(n, _)| n == "x-forwarded-for" || n == "x-src" || n == "x-dst")
        .map(|(n, v)| format!("{n}: {v}"))
        .collect()
}

struct Setup {
    dir: TempDir,
    http: u16,
    tcp: u16,
    be_http: u16,
    fe_abns: String,
    be_abns: String,
}

fn config(s: &Setup, sink: u16) -> String {
    let d = s.dir.0.display();
    format!(
        "global
    stats socket {d}/cli.sock level admin
    log 127.0.0.1:{sink} local0
defaults
    log global
    timeout connect 1s
    timeout client 5s
    timeout server 5s
frontend web
    mode http
    bind 127.0.0.1:{http}
    bind unix@{d}/web.sock mode 600
    option forwardfor
    log-format \"web ci=%ci cp=%cp fi=%fi fp=%fp si=%si sp=%sp bi=%bi bp=%bp src=%[src] sport=%[src_port] dst=%[dst] b=%b s=%s ST=%ST\"
    http-request set-header X-src \"%[src]\"
    http-request set-header X-dst \"%[dst]\"
    use_backend tcp_http if {{ path_beg /tcp }}
    default_backend unix_http
frontend stream
    mode tcp
    bind 127.0.0.1:{tcp}
    bind abns@{fe_abns}
    log-format \"stream ci=%ci cp=%cp fi=%fi fp=%fp si=%si sp=%sp bi=%bi bp=%bp b=%b s=%s B=%B U=%U ts=%ts\"
    default_backend unix_echo
frontend legacy
    mode tcp
    bind unix@{d}/legacy.sock
    default_backend unix_echo
backend unix_http
    mode http
    option httpchk GET /hc
    server s1 {d}/be.sock check inter 100
backend tcp_http
    mode http
    server s2 127.0.0.1:{be_http}
backend unix_echo
    mode tcp
    option tcp-check
    server e1 abns@{be_abns} check inter 100
    server e2 unix@{d}/missing.sock check inter 100
",
        http = s.http,
        tcp = s.tcp,
        be_http = s.be_http,
        fe_abns = s.fe_abns,
        be_abns = s.be_abns,
    )
}

/// Asks the stats socket `cmd` and returns its answer.
fn cli(path: &Path, cmd: &str) -> String {
    let Ok(mut s) = UnixStream::connect(path) else {
        return String::new();
    };
    let _ = s.set_read_timeout(Some(IO_TIMEOUT));
    let _ = s.write_all(format!("{cmd}\n").as_bytes());
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out
}

/// `show servers state` with the seconds since the last change masked.
fn servers_state(cli_path: &Path) -> Vec<String> {
    cli(cli_path, "show servers state")
        .lines()
        .filter(|l| !l.starts_with('#') && l.contains(' '))
        .map(|l| {
            let mut w: Vec<&str> = l.split(' ').collect();
            if w.len() > 9 {
                w[9] = "T";
            }
            w.join(" ")
        })
        .collect()
}

/// The message of a syslog line, its client and server-side ports masked (they differ
/// between runs; the ids and zeros HAProxy shows for UNIX sockets do not).
fn log_message(line: &str) -> String {
    let msg = line.split_once("]: ").map_or(line, |(_, m)| m).trim_end();
    msg.split(' ')
        .map(|w| match w.split_once('=') {
            Some((k @ ("cp" | "bp" | "sport"), v)) if v.parse::<u32>().is_ok_and(|p| p > 1024) => {
                format!("{k}=PORT")
            }
            _ => w.to_string(),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The next access line (`web ...`, `stream ...`, or the `Connect ...` line of a frontend
/// without a log format) from `sink`, skipping check and state lines.
fn next_access_line(sink: &UdpSocket) -> String {
    let mut b = [0u8; 4096];
    loop {
        let n = sink.recv(&mut b).expect("an access log line within 5 s");
        let msg = log_message(&String::from_utf8_lossy(&b[..n]));
        if msg.starts_with("web ") || msg.starts_with("stream ") || msg.starts_with("Connect ") {
            return msg;
        }
    }
}

/// What one program reported for the whole traffic.
#[derive(Debug, PartialEq)]
struct Report {
    answers: Vec<Vec<String>>,
    echoes: Vec<String>,
    logs: Vec<String>,
    state: Vec<String>,
}

fn run_through(program: &str, s: &Setup) -> Report {
    let sink = UdpSocket::bind("127.0.0.1:0").unwrap();
    sink.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    let cfg = s.dir.path(&format!("{program}.cfg"));
    std::fs::write(&cfg, config(s, sink.local_addr().unwrap().port())).unwrap();
    let mut cmd = if program == "haproxy" {
        let mut c = Command::new(HAPROXY);
        c.arg("-db");
        c
    } else {
        Command::new(BIN)
    };
    let mut child: Child = cmd
        .arg("-f")
        .arg(&cfg)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let cli_path = s.dir.path("cli.sock");
    // Ready once every checked server has a check result (column 11, 1 before the first), the
    // live ones at full health (column 13: rise + fall - 1) and the missing one DOWN (so no
    // traffic goes there).
    let ready = eventually(Duration::from_secs(5), || {
        let state = servers_state(&cli_path);
        let checked = |name: &str| {
            state.iter().any(|l| {
                let w: Vec<&str> = l.split(' ').collect();
                w.get(3) == Some(&name) && w.get(10).is_some_and(|s| *s != "1")
            })
        };
        let healthy = |name: &str| {
            state.iter().any(|l| {
                let w: Vec<&str> = l.split(' ').collect();
                w.get(3) == Some(&name) && w.get(12) == Some(&"4")
            })
        };
        checked("s1")
            && checked("e1")
            && checked("e2")
            && healthy("s1")
            && healthy("e1")
            && state.iter().any(|l| l.contains(" e2 - 0 "))
    });
    assert!(
        ready,
        "{program}: the checks did not settle: {:?}",
        servers_state(&cli_path)
    );
    let web = s.dir.path("web.sock");
    let mut answers = Vec::new();
    let mut logs = Vec::new();
    // HTTP: UNIX client to UNIX server, UNIX client to TCP server, TCP client to UNIX server.
    for (unix_client, path) in [(true, "/"), (true, "/tcp"), (false, "/")] {
        let answer = if unix_client {
            exchange(UnixStream::connect(&web).unwrap(), path)
        } else {
            exchange(TcpStream::connect(("127.0.0.1", s.http)).unwrap(), path)
        };
        answers.push(added_headers(&answer));
        logs.push(next_access_line(&sink));
    }
    // TCP: abstract UNIX client and TCP client, both to the abstract UNIX echo server.
    let mut echoes = Vec::new();
    for unix_client in [true, false] {
        let text = if unix_client { "over abns" } else { "over tcp" };
        let got = if unix_client {
            let mut c = connect_abns(&s.fe_abns);
            c.write_all(text.as_bytes()).unwrap();
            c.shutdown(Shutdown::Write).unwrap();
            let mut got = String::new();
            let _ = c.read_to_string(&mut got);
            got
        } else {
            let mut c = TcpStream::connect(("127.0.0.1", s.tcp)).unwrap();
            c.write_all(text.as_bytes()).unwrap();
            c.shutdown(Shutdown::Write).unwrap();
            let mut got = String::new();
            let _ = c.read_to_string(&mut got);
            got
        };
        echoes.push(got);
        logs.push(next_access_line(&sink));
    }
    // A frontend that logs with no format: HAProxy's connect line names the listener.
    echoes.push(echo_through(&s.dir.path("legacy.sock"), "legacy"));
    logs.push(next_access_line(&sink));
    let state = servers_state(&cli_path);
    let _ = child.kill();
    let _ = child.wait();
    Report {
        answers,
        echoes,
        logs,
        state,
    }
}

#[test]
fn unix_sockets_are_reported_as_haproxy_reports_them() {
    if !support::have_haproxy("the UNIX socket side-by-side test") {
        return;
    }
    let dir = TempDir::new("unix");
    http_on_path(&dir.path("be.sock"));
    let tag = format!("{}-{}", std::process::id(), free_port());
    let be_abns = format!("bascule-test-be-{tag}");
    echo_on_abns(&be_abns);
    let s = Setup {
        http: free_port(),
        tcp: free_port(),
        be_http: http_on_tcp(),
        fe_abns: format!("bascule-test-fe-{tag}"),
        be_abns,
        dir,
    };
    let reference = run_through("haproxy", &s);
    let ours = run_through("bascule", &s);
    // What the reference shows, so a change in it is seen: a UNIX socket's client has no
    // address (no X-Forwarded-For, empty %[src]) and logs as `unix` with the listener's id.
    assert_eq!(
        reference.answers[0],
        ["x-src: ", "x-dst: "],
        "{reference:#?}"
    );
    assert!(
        reference.logs[0].starts_with(
            "web ci=unix cp=2 fi=unix fp=2 si=unix sp=0 bi=unix bp=0 src=- sport=- dst=- "
        ),
        "{reference:#?}"
    );
    assert_eq!(reference.echoes, ["over abns", "over tcp", "legacy"]);
    assert_eq!(reference.logs[5], "Connect to unix:1 (legacy/TCP)");
    assert_eq!(ours, reference, "bascule (left) and haproxy (right) differ");
}

/// A listening UNIX socket that a child process inherits (close-on-exec cleared).
fn inheritable_unix_listener(path: &Path) -> UnixListener {
    let l = UnixListener::bind(path).unwrap();
    socket2::SockRef::from(&l).set_cloexec(false).unwrap();
    l
}

/// Runs `bascule -d -f cfg` with `env` and waits until `probe` connects.
fn start(dir: &TempDir, cfg: &str, env: &[(&str, String)], probe: &Path) -> Child {
    let path = dir.path("b.cfg");
    std::fs::write(&path, cfg).unwrap();
    let mut child = Command::new(BIN)
        .args(["-d", "-f"])
        .arg(&path)
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.path("stderr")).unwrap())
        .spawn()
        .unwrap();
    let up = eventually(Duration::from_secs(5), || {
        matches!(child.try_wait(), Ok(None)) && UnixStream::connect(probe).is_ok()
    });
    assert!(
        up,
        "bascule did not serve {}:\n{}",
        probe.display(),
        std::fs::read_to_string(dir.path("stderr")).unwrap_or_default()
    );
    child
}

fn echo_through(path: &Path, text: &str) -> String {
    let mut c = UnixStream::connect(path).unwrap();
    c.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    c.write_all(text.as_bytes()).unwrap();
    c.shutdown(Shutdown::Write).unwrap();
    let mut got = String::new();
    let _ = c.read_to_string(&mut got);
    got
}

#[test]
fn inherited_unix_listeners_serve_http_and_tcp_without_leaking() {
    let dir = TempDir::new("unix-fd");
    let be = dir.path("be.sock");
    http_on_path(&be);
    let echo_name = format!("bascule-test-echo-{}-{}", std::process::id(), free_port());
    echo_on_abns(&echo_name);
    let web = dir.path("web.sock");
    let raw = dir.path("raw.sock");
    let web_l = inheritable_unix_listener(&web);
    let raw_l = inheritable_unix_listener(&raw);
    let cfg = format!(
        "{}frontend web\n    mode http\n    bind \"fd@${{WEB}}\"\n    default_backend b\n\
         backend b\n    mode http\n    http-reuse never\n    server s unix@{}\n\
         listen raw\n    mode tcp\n    bind \"fd@${{RAW}}\"\n    server e abns@{echo_name}\n",
        support::tcp_defaults(),
        be.display()
    );
    let mut child = start(
        &dir,
        &cfg,
        &[
            ("WEB", web_l.as_raw_fd().to_string()),
            ("RAW", raw_l.as_raw_fd().to_string()),
        ],
        &web,
    );
    drop((web_l, raw_l));
    let pid = child.id();
    // Warm up (pools, the first idle server connection), then count descriptors.
    for _ in 0..5 {
        let a = exchange(UnixStream::connect(&web).unwrap(), "/x");
        assert!(a.starts_with("HTTP/1.1 200"), "{a}");
        assert_eq!(echo_through(&raw, "ping"), "ping");
    }
    let settled = || support::fd_count(pid);
    thread::sleep(Duration::from_millis(200));
    let before = settled();
    for i in 0..50 {
        let a = exchange(UnixStream::connect(&web).unwrap(), &format!("/n{i}"));
        assert!(a.contains(&format!("GET /n{i} HTTP/1.1")), "{a}");
        assert_eq!(echo_through(&raw, &format!("tcp {i}")), format!("tcp {i}"));
    }
    assert!(
        eventually(Duration::from_secs(3), || settled() <= before),
        "descriptors grew from {before} to {}",
        settled()
    );
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn unix_bind_files_get_their_mode_replace_stale_ones_and_stay_at_exit() {
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};
    let dir = TempDir::new("unix-file");
    let be = dir.path("be.sock");
    http_on_path(&be);
    let web = dir.path("web.sock");
    let plain = dir.path("plain.sock");
    // A stale socket file from an earlier run: nothing listens on it any more.
    drop(UnixListener::bind(&web).unwrap());
    assert!(UnixStream::connect(&web).is_err());
    let cfg = format!(
        "defaults\n    mode http\n    timeout connect 1s\n    timeout client 5s\n    timeout server 5s\n\
         frontend web\n    bind unix@{} mode 640\n    bind {} mode 600 uid {} gid {}\n    default_backend b\n\
         backend b\n    server s {}\n",
        web.display(),
        plain.display(),
        own_ids().0,
        own_ids().1,
        be.display()
    );
    let mut child = start(&dir, &cfg, &[], &web);
    // The listeners are bound one after the other: wait for the second one's file too.
    for _ in 0..250 {
        if UnixStream::connect(&plain).is_ok() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let mode = |p: &PathBuf| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&web), 0o640);
    assert_eq!(mode(&plain), 0o600);
    let a = exchange(UnixStream::connect(&plain).unwrap(), "/p");
    assert!(a.starts_with("HTTP/1.1 200"), "{a}");
    // Only the final names are left: the temporary and backup names are gone.
    let mut names: Vec<String> = std::fs::read_dir(&dir.0)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".sock"))
        .collect();
    names.sort();
    assert_eq!(names, ["be.sock", "plain.sock", "web.sock"]);
    // As HAProxy does, the socket files stay when the process ends.
    support::signal(child.id(), "-TERM");
    let _ = child.wait();
    assert!(std::fs::metadata(&web).unwrap().file_type().is_socket());
    assert!(
        UnixStream::connect(&web).is_err(),
        "nothing listens any more"
    );
}

/// The user and group ids the test runs as: ids the test may give its own files.
fn own_ids() -> (u32, u32) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let id = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|r| r.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap()
    };
    (id("Uid:"), id("Gid:"))
}

/// Receives the next datagram on `sock` as text (empty after 5 s without one).
fn recv_line(sock: &std::os::unix::net::UnixDatagram) -> String {
    let mut b = [0u8; 4096];
    match sock.recv(&mut b) {
        Ok(n) => String::from_utf8_lossy(&b[..n]).into_owned(),
        Err(_) => String::new(),
    }
}

/// One TCP session through `program` logging to `log abns@NAME`, `log fd@N` (a datagram
/// socket the process inherits) and `log unix@PATH`; returns the three lines' messages.
fn log_through(program: &str, dir: &TempDir, echo: u16) -> (String, String, String) {
    let name = format!("bascule-test-log-{}-{}", std::process::id(), free_port());
    let abns_sink =
        socket2::Socket::new(socket2::Domain::UNIX, socket2::Type::DGRAM, None).unwrap();
    abns_sink.bind(&abns(&name)).unwrap();
    let abns_sink = std::os::unix::net::UnixDatagram::from(std::os::fd::OwnedFd::from(abns_sink));
    abns_sink.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    let (fd_sink, fd_end) = std::os::unix::net::UnixDatagram::pair().unwrap();
    fd_sink.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    socket2::SockRef::from(&fd_end).set_cloexec(false).unwrap();
    let path = dir.path(&format!("{program}-log.sock"));
    let path_sink = std::os::unix::net::UnixDatagram::bind(&path).unwrap();
    path_sink.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    let port = free_port();
    let cfg = dir.path(&format!("{program}-log.cfg"));
    std::fs::write(
        &cfg,
        format!(
            "global\n    log abns@{name} local0\n    log fd@{} format raw local0\n    log unix@{} local0\n{}\
             listen px\n    bind 127.0.0.1:{port}\n    log global\n    option tcplog\n    server s 127.0.0.1:{echo}\n",
            fd_end.as_raw_fd(),
            path.display(),
            support::tcp_defaults()
        ),
    )
    .unwrap();
    let mut cmd = if program == "haproxy" {
        let mut c = Command::new(HAPROXY);
        c.arg("-db");
        c
    } else {
        Command::new(BIN)
    };
    let mut child = cmd
        .arg("-f")
        .arg(&cfg)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    drop(fd_end);
    assert!(eventually(Duration::from_secs(5), || {
        TcpStream::connect(("127.0.0.1", port)).is_ok()
    }));
    // The probe above is one session (logged on both targets); then one with bytes.
    let _ = (
        recv_line(&abns_sink),
        recv_line(&fd_sink),
        recv_line(&path_sink),
    );
    let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
    c.write_all(b"hello").unwrap();
    c.shutdown(Shutdown::Write).unwrap();
    let mut got = Vec::new();
    let _ = c.read_to_end(&mut got);
    assert_eq!(got, b"hello");
    let lines = (
        recv_line(&abns_sink),
        recv_line(&fd_sink),
        recv_line(&path_sink),
    );
    let _ = child.kill();
    let _ = child.wait();
    // Dates, pids, the client port and the timers differ between runs.
    let shape = |l: &str| -> String {
        let msg = l.split_once("]: ").map_or(l, |(_, m)| m);
        let words: Vec<&str> = msg.split_whitespace().collect();
        // tcplog: client [date] frontend backend/server timers bytes term counters queues
        match words.as_slice() {
            [_, _, fe, srv, _, bytes, term, ..] => format!("{fe} {srv} {bytes} {term}"),
            _ => format!("unexpected: {l:?}"),
        }
    };
    (shape(&lines.0), shape(&lines.1), shape(&lines.2))
}

#[test]
fn log_targets_on_unix_sockets_and_inherited_descriptors_match_haproxy() {
    if !support::have_haproxy("the log target side-by-side test") {
        return;
    }
    let echo = support::Backend::echo();
    let dir = TempDir::new("unix-log");
    let reference = log_through("haproxy", &dir, echo.port);
    let line = "px px/s 5 --".to_string();
    assert_eq!(reference, (line.clone(), line.clone(), line));
    assert_eq!(log_through("bascule", &dir, echo.port), reference);
}
