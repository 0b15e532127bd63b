//! The harness contract: what HAProxy's own test driver (VTest) and scripts expect of the
//! binary, checked on the real `bascule`: `-cc` exit codes, `-vv`, the accepted compatibility
//! flags, `.if` blocks and `setenv`, a `bind "fd@${X}"` and `stats socket "fd@${Y}"` that adopt
//! sockets inherited from the parent, `-d` serving in the started process, and SIGINT exiting 0.
// Test code blocks freely: it is not a worker event loop.
#![allow(clippy::disallowed_methods)]

mod support;

use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::os::fd::AsRawFd;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use support::*;

fn run(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run bascule")
}

fn run_check(cfg: &str, extra: &[&str]) -> (Option<i32>, String, String) {
    let dir = TempDir::new("harness");
    let path = dir.path("h.cfg");
    std::fs::write(&path, cfg).expect("write cfg");
    let mut args = vec!["-c"];
    args.extend_from_slice(extra);
    let path = path.to_string_lossy().into_owned();
    args.extend_from_slice(&["-f", &path]);
    let out = run(&args);
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn check_condition_exit_codes() {
    let cases = [
        ("version_atleast(2.5-dev0)", 0),
        ("version_atleast(2.6)", 0),
        ("version_before(2.6)", 1),
        ("version_atleast(3.0-dev0)", 1),
        ("feature(THREAD) && feature(OPENSSL)", 0),
        ("feature(OPENSSL) && ssllib_name_startswith(OpenSSL)", 1),
        ("feature(ZLIB) || feature(SLZ)", 1),
        ("feature(LUA)", 1),
        (
            "defined(BASCULE_HARNESS_SET) && streq(a,a) && strneq(a,b)",
            0,
        ),
        ("defined(BASCULE_HARNESS_UNSET)", 1),
        ("(0 || 1) && !0", 0),
        ("", 1),
        ("foo(", 2),
        ("1 2", 2),
        ("enabled(SPLICE)", 2),
        // Read as a configuration line's words: quotes, `${VAR}` and `$VAR` in double quotes.
        ("streq(foo,'foo')", 0),
        ("streq(\"foo bar\",'foo bar')", 0),
        ("streq(\"$BASCULE_HARNESS_SET\",\"1\")", 0),
        ("streq(a,\"a)", 2),
    ];
    for (expr, want) in cases {
        let out = Command::new(BIN)
            .args(["-cc", expr])
            .env("BASCULE_HARNESS_SET", "1")
            .env_remove("BASCULE_HARNESS_UNSET")
            .output()
            .expect("run bascule -cc");
        assert_eq!(out.status.code(), Some(want), "-cc '{expr}': {out:?}");
        if want == 2 {
            assert!(!out.stderr.is_empty(), "-cc '{expr}' should say why");
        }
    }
}

#[test]
fn version_lines_for_scripts() {
    let out = run(&["-vv"]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    let first = text.lines().next().unwrap_or_default();
    // Scripts take the third word of the first line as the version.
    let words: Vec<&str> = first.split_whitespace().collect();
    assert_eq!(&words[..2], ["HAProxy", "version"], "{first}");
    assert!(words[2].starts_with("2.6.0-bascule-"), "{first}");
    assert!(text.contains(&format!("Bascule version {}", env!("CARGO_PKG_VERSION"))));
    assert!(text.contains("TARGET  = linux-"), "{text}");
    let features = text
        .lines()
        .find_map(|l| l.strip_prefix("Feature list : "))
        .expect("a Feature list line");
    for f in [
        "+THREAD", "+EPOLL", "+OPENSSL", "-ZLIB", "-LUA", "-QUIC", "-PROMEX", "+PCRE2", "-PCRE",
    ] {
        assert!(features.split(' ').any(|w| w == f), "{f} in {features}");
    }
    let short = String::from_utf8_lossy(&run(&["-v"]).stdout).into_owned();
    assert!(
        short.starts_with("HAProxy version 2.6.0-bascule-"),
        "{short}"
    );
}

#[test]
fn compatibility_flags_are_accepted_and_documented() {
    let cfg = format!(
        "{}listen px\n    bind 127.0.0.1:8080\n    server s 127.0.0.1:1\n",
        tcp_defaults()
    );
    let (code, stdout, stderr) =
        run_check(&cfg, &["-L", "peer1", "-m", "256", "-dM", "-dM0x55", "-dI"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(stdout, "Configuration file is valid\n");
    let help = String::from_utf8_lossy(&run(&["-h"]).stdout).into_owned();
    for flag in ["-cc ", "-L ", "-m ", "-dM", "-dI", "-vv"] {
        assert!(help.contains(flag), "usage lacks {flag}:\n{help}");
    }
}

#[test]
fn conditional_blocks_setenv_and_several_globals() {
    let cfg = "\
global
    setenv NAME \"front end\"
    presetenv PORT_BASE 1
    presetenv BASCULE_HARNESS_SET ignored
.if feature(THREAD)
    thread-groups 1
.endif
.if defined(HAPROXY_LOCALPEER) && streq(\"${HAPROXY_LOCALPEER}\",peerA)
.notice \"peer is ${HAPROXY_LOCALPEER}, set is ${BASCULE_HARNESS_SET}\"
.elif 1
.alert \"-L did not reach the configuration\"
.endif
.if version_atleast(9.0)
    no-such-keyword
.else
.warning \"name is '${NAME}'\"
.endif
global
    unsetenv NAME
.if defined(NAME)
.alert \"unsetenv did not apply\"
.endif
    resetenv PORT_BASE
.if defined(BASCULE_HARNESS_SET) || !defined(PORT_BASE)
.alert \"resetenv did not apply\"
.endif
    maxconn 100
";
    let full = format!(
        "{cfg}{}listen px\n    bind \"127.0.0.1:${{NOPE-8080}}\"\n    server s 127.0.0.1:1\n",
        tcp_defaults()
    );
    let dir = TempDir::new("harness");
    let path = dir.path("h.cfg");
    std::fs::write(&path, &full).expect("write cfg");
    let out = Command::new(BIN)
        .args(["-c", "-L", "peerA", "-f"])
        .arg(&path)
        .env("BASCULE_HARNESS_SET", "yes")
        .output()
        .expect("run bascule");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let p = path.display();
    assert_eq!(
        stderr,
        format!(
            "[NOTICE] {p}:9: peer is peerA, set is yes\n[WARNING] {p}:16: name is 'front end'\n"
        )
    );
    // -dW fails on the warning but not on the notice.
    let out = Command::new(BIN)
        .args(["-c", "-dW", "-L", "peerA", "-f"])
        .arg(&path)
        .env("BASCULE_HARNESS_SET", "yes")
        .output()
        .expect("run bascule");
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn unbalanced_blocks_are_errors_with_their_line() {
    let (code, _, stderr) = run_check(
        "global\n.if 1\n.else\n.elif 0\n.endif\n.endif\n.if 0\n",
        &[],
    );
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains(":4: '.elif' after '.else'"), "{stderr}");
    assert!(
        stderr.contains(":6: '.endif' without a matching '.if'"),
        "{stderr}"
    );
    assert!(
        stderr.contains(":7: '.if' without a matching '.endif'"),
        "{stderr}"
    );
}

/// A listening socket that a child process inherits (close-on-exec cleared), as VTest passes
/// `fd@${NAME}` sockets.
fn inheritable_listener() -> socket2::Socket {
    let s =
        socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).expect("socket");
    s.bind(
        &"127.0.0.1:0"
            .parse::<std::net::SocketAddr>()
            .unwrap()
            .into(),
    )
    .expect("bind");
    s.listen(16).expect("listen");
    s.set_cloexec(false).expect("clear close-on-exec");
    s
}

fn local_port(s: &socket2::Socket) -> u16 {
    s.local_addr()
        .ok()
        .and_then(|a| a.as_socket())
        .map(|a| a.port())
        .expect("local port")
}

#[test]
fn inherited_sockets_serve_in_the_started_process_and_sigint_exits_0() {
    let echo = Backend::echo();
    let front = inheritable_listener();
    let cli = inheritable_listener();
    let (front_port, cli_port) = (local_port(&front), local_port(&cli));
    let cfg = format!(
        "global\n    stats socket \"fd@${{cli}}\" level admin\n{}listen px\n    bind \"fd@${{px}}\"\n    server s 127.0.0.1:{}\n",
        tcp_defaults(),
        echo.port
    );
    let dir = TempDir::new("harness");
    let path = dir.path("h.cfg");
    std::fs::write(&path, cfg).expect("write cfg");
    let mut child = Command::new(BIN)
        .args(["-d", "-L", "A", "-f"])
        .arg(&path)
        .env("px", front.as_raw_fd().to_string())
        .env("cli", cli.as_raw_fd().to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.path("stderr")).expect("stderr file"))
        .spawn()
        .expect("spawn bascule");
    let guard = PidGuard(child.id());
    // Our copies are no longer needed: the child holds its own.
    drop(front);
    drop(cli);
    let stderr = || std::fs::read_to_string(dir.path("stderr")).unwrap_or_default();

    // The inherited socket already listens, so the connection is queued at once; the echo
    // through the backend proves the started process adopted and serves it.
    let mut c = TcpStream::connect(("127.0.0.1", front_port)).expect("connect");
    c.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    c.write_all(b"ping").unwrap();
    c.shutdown(Shutdown::Write).unwrap();
    let mut got = Vec::new();
    let _ = c.read_to_end(&mut got);
    assert_eq!(got, b"ping", "stderr:\n{}", stderr());

    // The stats socket answers on the other inherited socket.
    let mut s = TcpStream::connect(("127.0.0.1", cli_port)).expect("connect cli");
    s.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    s.write_all(b"show info\n").unwrap();
    s.shutdown(Shutdown::Write).unwrap();
    let mut info = String::new();
    let _ = s.read_to_string(&mut info);
    assert!(info.contains("Pid: "), "show info: {info:?}\n{}", stderr());
    let pid_line = info
        .lines()
        .find_map(|l| l.strip_prefix("Pid: "))
        .unwrap_or_default();
    // `-d` never forks: the process we started is the one that serves.
    assert_eq!(pid_line.trim(), child.id().to_string());

    signal(child.id(), "-INT");
    let deadline = Instant::now() + Duration::from_secs(5);
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        assert!(Instant::now() < deadline, "SIGINT did not stop bascule");
        std::thread::sleep(Duration::from_millis(20));
    };
    std::mem::forget(guard);
    assert_eq!(status.code(), Some(0), "stderr:\n{}", stderr());
}

#[test]
fn a_missing_inherited_socket_is_a_start_error() {
    let cfg = format!(
        "{}listen px\n    bind \"fd@${{px}}\"\n    server s 127.0.0.1:1\n",
        tcp_defaults()
    );
    let dir = TempDir::new("harness");
    let path = dir.path("h.cfg");
    std::fs::write(&path, cfg).expect("write cfg");
    let out = Command::new(BIN)
        .args(["-d", "-f"])
        .arg(&path)
        .env("px", "900")
        .stdin(Stdio::null())
        .output()
        .expect("run bascule");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("fd@900") && stderr.contains("not open"),
        "{stderr}"
    );
}
